package exchange

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// Receiver files the URLs that reach this node's exchange: the entries of
// the batches peers send (every Kind) and the URLs Route and RouteDone
// keep here. It returns how many were new once they are durable: the
// exchange acks a batch only then, and a resend after a lost ack is
// harmless since the Receiver dedups. The cluster's Receiver files every
// kind itself (it forwards discovered URLs another member owns, and keeps
// moved records); StoreReceiver is that of a plain URL store.
type Receiver interface {
	Receive(ctx context.Context, kind Kind, urls []frontier.NewURL) (int, error)
}

// Directory tells the stream where its entries go now. It is asked for
// every entry routed, sent and received, so its methods must be fast and
// must not block.
type Directory interface {
	// OwnerOf is the current owner of u ("" = unknown: keep waiting).
	OwnerOf(u frontier.NewURL) string
	// AddrOf is the exchange address of an alive peer (its member
	// metadata); false once the peer is not a member.
	AddrOf(peer string) (string, bool)
}

// ReplicaDirectory is a Directory that moves replicas: ReplicaOf is the member
// that should now hold the replica of u (KindReplica entries, and
// KindCopied ones not for the owner; "" keeps them with the peer they were
// filed for). A Directory that is not one leaves replicas where they were
// filed.
type ReplicaDirectory interface {
	ReplicaOf(u frontier.NewURL) string
}

// OutcomeDirectory is a Directory that redirects the outcomes of lent URLs:
// OutcomeOf is the member an outcome (KindOutcome) filed for peer should
// now go to ("" keeps it there). A Directory that is not one sends outcomes
// to OwnerOf.
type OutcomeDirectory interface {
	OutcomeOf(peer string, u frontier.NewURL) string
}

// Lender stores the new URLs a peer sent and lends some of them back to
// it (cluster.lend: the peer works on their hosts' phase now).
type Lender interface {
	// ReceiveNew stores urls (KindNew) sent by peer as Receiver.Receive
	// does, and returns how many were new and the KindLend entries lent
	// back to peer, at most maxBytes of them encoded. A URL is marked lent
	// before it is stored, so this node never fetches it meanwhile.
	ReceiveNew(ctx context.Context, peer string, urls []frontier.NewURL, maxBytes int) (added int, lent []frontier.NewURL, err error)
}

// URLStore stores URLs with dedup (cluster.RecordWriter is one): Add the
// URLs to crawl, AddDone the COMPLETED records, which are not crawled
// again. Both return how many were new once they are durable.
type URLStore interface {
	Add(ctx context.Context, urls []frontier.NewURL) (int, error)
	AddDone(ctx context.Context, urls []frontier.NewURL) (int, error)
}

// StoreReceiver is the Receiver of a plain URL store: COMPLETED records
// (KindDone, KindReplica, KindCopied) go to AddDone, every other kind to Add.
func StoreReceiver(s URLStore) Receiver { return storeReceiver{s} }

type storeReceiver struct{ s URLStore }

func (r storeReceiver) Receive(ctx context.Context, kind Kind, urls []frontier.NewURL) (int, error) {
	if kind == KindDone || kind == KindReplica || kind == KindCopied {
		return r.s.AddDone(ctx, urls)
	}
	return r.s.Add(ctx, urls)
}

// ErrLeaving is what a Receiver returns for the batches that arrive while
// its node hands its records off before leaving the cluster: the batch is
// refused (the sender re-files it after the leave) and logged at debug
// level only, since it is expected.
var ErrLeaving = errors.New("cluster: this node is leaving the cluster")

// Config configures New. Zero values take the defaults.
type Config struct {
	Name   string // local member name (as in MembersConfig). Required.
	Listen string // HOST:PORT to accept peers' batches on. Default "0.0.0.0:7947".
	Key    []byte // cluster key, 16, 24 or 32 bytes (--cluster-key-file). Required.
	// TLS, when set, runs every exchange connection over mutual TLS as
	// well (config cluster.tls_*): its Certificates, RootCAs and ClientCAs
	// serve both sides; a peer's certificate must be valid for its member
	// name. The cluster key's handshake and sealed frames run inside.
	// Default nil: no TLS.
	TLS *tls.Config

	Outbox *Outbox  // durable queue of URLs to send. Required.
	Local  Receiver // files what this node keeps (the local frontier). Required.
	// Directory tells where each entry goes now: the owner of a URL and a
	// peer's address; when it is a ReplicaDirectory or an OutcomeDirectory too,
	// also where replicas and lent URLs' outcomes go. Required.
	Directory Directory
	// Lender, when set, stores the new URLs (KindNew) of each batch
	// received, in place of Local, and chooses which of them to lend back
	// to the batch's sender at once: the ack carries them. A sender passes
	// the URLs an ack lends it to its Local as KindLend. Default nil: new
	// URLs go to Local and acks lend nothing.
	Lender Lender

	MaxBatch         int           // URLs per batch, default 1000, valid 1..100000
	MinBatch         int           // URLs that are sent at once, without waiting MaxDelay; default 250, valid 1..MaxBatch
	MaxDelay         time.Duration // max age before a partial batch is sent, default 10ms (config cluster.batch_delay), valid 1ms..1m
	MaxFrame         int           // max frame payload, default 8 MiB, valid 1 MiB..64 MiB
	DialTimeout      time.Duration // default 5s
	HandshakeTimeout time.Duration // default 10s
	AckTimeout       time.Duration // wait for an ack (the receiver's commit), default 60s
	BackoffMin       time.Duration // reconnect/retry backoff, default 100ms, doubled up to BackoffMax
	BackoffMax       time.Duration // default 10s
	Logger           *slog.Logger  // default slog.Default()

	onBatch func(from string, b Batch) // test hook, called before storing a received batch
}

// DefaultConfig returns the defaults (without the required fields).
func DefaultConfig() Config {
	return Config{
		Listen: "0.0.0.0:7947", MaxBatch: 1000, MinBatch: 250, MaxDelay: 10 * time.Millisecond, MaxFrame: DefaultMaxFrame,
		DialTimeout: 5 * time.Second, HandshakeTimeout: 10 * time.Second, AckTimeout: 60 * time.Second,
		BackoffMin: 100 * time.Millisecond, BackoffMax: 10 * time.Second,
	}
}

func (c *Config) fill() error {
	d := DefaultConfig()
	setDef := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = d.MaxBatch
	}
	if c.MinBatch == 0 {
		c.MinBatch = min(d.MinBatch, c.MaxBatch)
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = d.MaxFrame
	}
	setDef(&c.MaxDelay, d.MaxDelay)
	setDef(&c.DialTimeout, d.DialTimeout)
	setDef(&c.HandshakeTimeout, d.HandshakeTimeout)
	setDef(&c.AckTimeout, d.AckTimeout)
	setDef(&c.BackoffMin, d.BackoffMin)
	setDef(&c.BackoffMax, d.BackoffMax)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Name == "" || len(c.Name) > maxNameLen:
		return fmt.Errorf("cluster: exchange name=%q: must be 1..%d bytes", c.Name, maxNameLen)
	case c.Outbox == nil || c.Local == nil || c.Directory == nil:
		return errors.New("cluster: exchange: Outbox, Local and Directory are required")
	case c.MaxBatch < 1 || c.MaxBatch > 100_000:
		return fmt.Errorf("cluster: exchange max_batch=%d: must be 1..100000", c.MaxBatch)
	case c.MinBatch < 1 || c.MinBatch > c.MaxBatch:
		return fmt.Errorf("cluster: exchange min_batch=%d: must be 1..max_batch (%d)", c.MinBatch, c.MaxBatch)
	case c.MaxDelay < time.Millisecond || c.MaxDelay > time.Minute:
		return fmt.Errorf("cluster: exchange max_delay=%s: must be 1ms..1m", c.MaxDelay)
	case c.MaxFrame < 1<<20 || c.MaxFrame > 64<<20:
		return fmt.Errorf("cluster: exchange max_frame=%d: must be 1 MiB..64 MiB", c.MaxFrame)
	case c.TLS != nil && (len(c.TLS.Certificates) == 0 || c.TLS.RootCAs == nil || c.TLS.ClientCAs == nil):
		return errors.New("cluster: exchange TLS: needs a certificate, RootCAs and ClientCAs (cluster.tls_cert, cluster.tls_key, cluster.tls_ca)")
	case c.BackoffMax < c.BackoffMin:
		return fmt.Errorf("cluster: exchange backoff_max=%s: must be >= backoff_min=%s", c.BackoffMax, c.BackoffMin)
	}
	return CheckKey(c.Key)
}

// Stats are the exchange's counters since New (for metrics:
// wrap them in prometheus CounterFuncs).
type Stats struct {
	URLsForwarded   uint64 // URLs acknowledged by their owner, replicas not included (phasecrawl_urls_forwarded_total)
	ReplicasSent    uint64 // KindReplica entries acknowledged (phasecrawl_replicas_sent_total)
	URLsReceived    uint64 // URLs received from peers (phasecrawl_urls_received_total)
	URLsAdded       uint64 // received URLs that were new here
	URLsLocal       uint64 // queued URLs whose owner became this node, added locally
	URLsRerouted    uint64 // queued URLs re-filed under a new owner at send time
	URLsLentBack    uint64 // received new URLs lent back to their sender in the ack (phasecrawl_urls_lent_back_total)
	URLsLentInAcks  uint64 // URLs peers lent this node in their acks
	BatchesSent     uint64 // batch messages written, resends included
	BatchesResent   uint64 // of those, resends of a batch not acked before
	BatchesReceived uint64
	AcksSent        uint64
	AcksReceived    uint64
	Nacks           uint64 // batches a peer could not store (retried)
	Dials           uint64 // connections opened and authenticated
	DialErrors      uint64 // dials, handshakes or sends that failed
	HandshakeErrors uint64 // incoming connections that failed the handshake
	BadFrames       uint64 // incoming frames rejected (oversized, forged, garbage)
}

type exStats struct {
	urlsForwarded, urlsReceived, urlsAdded, urlsLocal, urlsRerouted  atomic.Uint64
	urlsLentBack, urlsLentInAcks                                     atomic.Uint64
	replicasSent                                                     atomic.Uint64
	batchesSent, batchesResent, batchesReceived, acksSent, acksRecvd atomic.Uint64
	nacks, dials, dialErrors, handshakeErrors, badFrames             atomic.Uint64
}

// Stream sends the outbox's URLs to their owners and receives the URLs
// this node owns from the others: one long-lived authenticated TCP
// connection per sender->receiver pair, batches of up to MaxBatch URLs or
// MaxDelay old, stop-and-wait acknowledgement. The sender deletes a batch
// from the outbox only once acknowledged; the receiver acknowledges only once
// its Receiver stored the batch. A resend after a lost ack is harmless since
// the Receiver dedups.
type Stream struct {
	cfg    Config
	log    *slog.Logger
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	st     exStats

	mu      sync.Mutex // guards senders, conns, closed
	senders map[string]*sender
	conns   map[net.Conn]struct{}
	closed  bool
}

// New listens on cfg.Listen and starts sending what the outbox holds.
// The caller calls Kick when the membership changes and Close at the end.
func New(cfg Config) (*Stream, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster: exchange listen %s: %w", cfg.Listen, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &Stream{cfg: cfg, log: cfg.Logger.With("component", "exchange"), ln: ln, ctx: ctx, cancel: cancel,
		senders: map[string]*sender{}, conns: map[net.Conn]struct{}{}}
	x.wg.Add(1)
	go x.acceptLoop()
	cfg.Outbox.setWake(x.wake)
	x.Kick()
	return x, nil
}

// Addr returns the address the exchange listens on (HOST:PORT).
func (x *Stream) Addr() string { return x.ln.Addr().String() }

// Stats returns a snapshot of the counters.
func (x *Stream) Stats() Stats {
	s := &x.st
	return Stats{
		URLsForwarded: s.urlsForwarded.Load(), ReplicasSent: s.replicasSent.Load(), URLsReceived: s.urlsReceived.Load(), URLsAdded: s.urlsAdded.Load(),
		URLsLocal: s.urlsLocal.Load(), URLsRerouted: s.urlsRerouted.Load(), URLsLentBack: s.urlsLentBack.Load(), URLsLentInAcks: s.urlsLentInAcks.Load(),
		BatchesSent: s.batchesSent.Load(), BatchesResent: s.batchesResent.Load(), BatchesReceived: s.batchesReceived.Load(),
		AcksSent: s.acksSent.Load(), AcksReceived: s.acksRecvd.Load(), Nacks: s.nacks.Load(),
		Dials: s.dials.Load(), DialErrors: s.dialErrors.Load(), HandshakeErrors: s.handshakeErrors.Load(), BadFrames: s.badFrames.Load(),
	}
}

// Route implements the node's Router: URLs owned by this node (or by nobody
// known yet) go to the local Receiver, the others to the outbox under their
// owner. It returns the number added locally; it never waits for a peer.
func (x *Stream) Route(ctx context.Context, urls []frontier.NewURL) (int, error) {
	return x.route(ctx, KindNew, urls)
}

// RouteDone hands COMPLETED records to their owners (rebalance): those owned
// here go to the local Receiver (KindDone), the others to the outbox.
func (x *Stream) RouteDone(ctx context.Context, urls []frontier.NewURL) (int, error) {
	return x.route(ctx, KindDone, urls)
}

func (x *Stream) route(ctx context.Context, kind Kind, urls []frontier.NewURL) (int, error) {
	var local []frontier.NewURL
	remote := map[string][]frontier.NewURL{}
	for _, u := range urls {
		if o := x.cfg.Directory.OwnerOf(u); o == "" || o == x.cfg.Name {
			local = append(local, u)
		} else {
			remote[o] = append(remote[o], u)
		}
	}
	var errs []error
	for peer, us := range remote {
		errs = append(errs, x.cfg.Outbox.put(ctx, peer, kind, us))
	}
	added, err := x.storeLocal(ctx, kind, local)
	return added, errors.Join(append(errs, err)...)
}

// routeOf is the peer an outbox entry filed under peer should now go to
// ("" = where it is, dropEntry = nowhere).
func (x *Stream) routeOf(peer string, e Entry) string {
	switch e.Kind {
	case KindScope, KindRobots, KindLend, KindFacets:
		// For that member alone: kept while it is a member, dropped once
		// it is gone (it gets the whole set again when it comes back).
		if _, ok := x.cfg.Directory.AddrOf(peer); ok {
			return ""
		}
		return dropEntry
	case KindReplica:
		if r, ok := x.cfg.Directory.(ReplicaDirectory); ok {
			return r.ReplicaOf(e.NewURL)
		}
		return ""
	case KindOutcome:
		if r, ok := x.cfg.Directory.(OutcomeDirectory); ok {
			return r.OutcomeOf(peer, e.NewURL)
		}
	case KindCopied:
		// For the owner, or for the member that keeps the replica.
		if r, ok := x.cfg.Directory.(ReplicaDirectory); ok && r.ReplicaOf(e.NewURL) == peer {
			return ""
		}
	}
	return x.cfg.Directory.OwnerOf(e.NewURL)
}

func (x *Stream) storeLocal(ctx context.Context, kind Kind, urls []frontier.NewURL) (int, error) {
	if len(urls) == 0 {
		return 0, nil
	}
	return x.cfg.Local.Receive(ctx, kind, urls)
}

// storeEntries stores a batch's entries locally, every kind, and returns
// once all are stored. The records a rebalance moves (KindDone, KindMoved)
// are stored first, so that the batch's other entries find them; the other
// kinds are stored at once, each kind's writes in the same group commit
// as the others' (a batch of new URLs, replicas and outcomes costs the
// sender, which waits for the ack, one commit rather than one per kind).
// Entries of one batch may be stored in any order, as those of batches
// from different members are.
//
// from is the member that sent them ("" when they are this node's own):
// with a Lender, the new URLs it sent are stored by the Lender, and lent
// are those it lends back to from.
func (x *Stream) storeEntries(ctx context.Context, from string, es []Entry) (added int, lent []frontier.NewURL, err error) {
	var byKind [maxKind + 1][]frontier.NewURL
	for _, e := range es {
		byKind[e.Kind] = append(byKind[e.Kind], e.NewURL)
	}
	total := 0
	for _, k := range []Kind{KindDone, KindMoved} {
		n, err := x.storeLocal(ctx, k, byKind[k])
		total += n
		if err != nil {
			return total, nil, err
		}
		byKind[k] = nil
	}
	store := func(k Kind) (int, error) {
		if k == KindNew && from != "" && x.cfg.Lender != nil {
			n, l, err := x.cfg.Lender.ReceiveNew(ctx, from, byKind[k], x.cfg.MaxFrame/2)
			lent = l
			return n, err
		}
		return x.storeLocal(ctx, k, byKind[k])
	}
	var rest []Kind
	for k, us := range byKind {
		if len(us) > 0 {
			rest = append(rest, Kind(k))
		}
	}
	if len(rest) == 1 {
		n, err := store(rest[0])
		return total + n, lent, err
	}
	var (
		wg   sync.WaitGroup
		ns   [maxKind + 1]int
		errs [maxKind + 1]error
	)
	for _, k := range rest {
		wg.Go(func() { ns[k], errs[k] = store(k) })
	}
	wg.Wait()
	for _, k := range rest {
		total += ns[k]
	}
	return total, lent, errors.Join(errs[:]...)
}

// Kick tells the senders that the membership changed: each re-checks the
// owners of its queue and the peer's address. Call it on Members.Changes().
func (x *Stream) Kick() {
	for peer := range x.cfg.Outbox.Pending() {
		x.ensureSender(peer)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, s := range x.senders {
		signal(s.kick)
		signal(s.wake)
	}
}

// Close stops sending and receiving, closes every connection and waits for
// the goroutines. It does not close the Outbox.
func (x *Stream) Close() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.closed = true
	for c := range x.conns {
		c.Close()
	}
	x.mu.Unlock()
	x.cfg.Outbox.setWake(nil)
	x.cancel()
	err := x.ln.Close()
	x.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("cluster: exchange close: %w", err)
	}
	return nil
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// track registers a connection so Close can close it; false when closed.
func (x *Stream) track(c net.Conn) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return false
	}
	x.conns[c] = struct{}{}
	return true
}

func (x *Stream) untrack(c net.Conn) {
	x.mu.Lock()
	delete(x.conns, c)
	x.mu.Unlock()
	c.Close()
}

// ---- receiving ----

func (x *Stream) acceptLoop() {
	defer x.wg.Done()
	delay := 5 * time.Millisecond
	for {
		c, err := x.ln.Accept()
		if err != nil {
			if x.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			x.log.Warn("exchange accept", "err", err)
			select { // e.g. out of file descriptors: back off
			case <-time.After(delay):
			case <-x.ctx.Done():
				return
			}
			delay = min(2*delay, time.Second)
			continue
		}
		delay = 5 * time.Millisecond
		if !x.track(c) {
			c.Close()
			return
		}
		x.wg.Add(1)
		go x.serve(c)
	}
}

func (x *Stream) serve(c net.Conn) {
	defer x.wg.Done()
	defer x.untrack(c)
	xc, err := x.accept(c)
	if err != nil {
		if x.ctx.Err() == nil {
			x.st.handshakeErrors.Add(1)
			x.log.Warn("exchange: refused connection", "remote", c.RemoteAddr().String(), "err", err)
		}
		return
	}
	x.log.Debug("exchange: peer connected", "peer", xc.peer, "remote", c.RemoteAddr().String())
	for {
		p, err := xc.readFrame()
		if err != nil {
			if x.ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				x.st.badFrames.Add(1)
				x.log.Warn("exchange: dropping connection", "peer", xc.peer, "err", err)
			}
			return
		}
		b, err := DecodeBatch(p)
		if err != nil {
			x.st.badFrames.Add(1)
			x.log.Warn("exchange: dropping connection", "peer", xc.peer, "err", err)
			return
		}
		x.st.batchesReceived.Add(1)
		x.st.urlsReceived.Add(uint64(len(b.Entries)))
		if x.cfg.onBatch != nil {
			x.cfg.onBatch(xc.peer, b)
		}
		a := ack{ID: b.ID}
		added, lent, err := x.storeEntries(x.ctx, xc.peer, b.Entries)
		if err != nil {
			if x.ctx.Err() != nil {
				return // shutting down: no ack, the sender resends
			}
			a.Status, a.Msg = 1, truncate(err.Error(), 4096)
			lvl := slog.LevelWarn
			if errors.Is(err, ErrLeaving) {
				lvl = slog.LevelDebug // expected while handing off: the sender re-files after the leave
			}
			x.log.Log(x.ctx, lvl, "exchange: cannot store batch", "peer", xc.peer, "batch", b.ID, "err", err)
		} else {
			a.Added = uint64(added)
			x.st.urlsAdded.Add(uint64(added))
			for _, u := range lent {
				a.Lent = append(a.Lent, Entry{Kind: KindLend, NewURL: u})
			}
			x.st.urlsLentBack.Add(uint64(len(lent)))
		}
		// A nack lends nothing: URLs the Lender lent for a batch whose other
		// kinds could not be stored stay marked until the lend runs out,
		// and are then fetched or lent again.
		if err := xc.writeFrame(encodeAck(a)); err != nil {
			return
		}
		x.st.acksSent.Add(1)
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
