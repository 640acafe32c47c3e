package exchange

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// ---- sending ----

// sender owns the queue of one peer (the local name included: URLs whose
// owner became this node are added locally) and its connection.
type sender struct {
	x     *Stream
	peer  string
	wake  chan struct{} // the queue grew
	kick  chan struct{} // the membership changed
	conn  *xconn
	raw   net.Conn // conn's TCP connection (tracked)
	addr  string
	fails int
	// lastSend is when the last batch was taken to be sent (waitReady).
	lastSend time.Time
	// urgent: what is queued goes now, without waiting for MaxDelay (Flush).
	urgent atomic.Bool
	// live is conn's connection, for Reset from other goroutines.
	live atomic.Pointer[net.Conn]
}

// Flush sends what is queued for peer at once, without waiting for a
// batch to fill or for MaxDelay.
func (x *Stream) Flush(peer string) {
	if s := x.ensureSender(peer); s != nil {
		s.urgent.Store(true)
		signal(s.wake)
	}
}

// Reset closes the connection to peer, if any: a batch waiting for its ack
// fails at once and is sent again, on a new connection, once the peer can
// be reached. The cluster calls it when gossip declares the peer dead: over
// a cut network the ack never comes, and waiting AckTimeout for it would
// hold the outbox back after the peer is back.
func (x *Stream) Reset(peer string) {
	x.mu.Lock()
	s := x.senders[peer]
	x.mu.Unlock()
	if s == nil {
		return
	}
	if c := s.live.Load(); c != nil {
		_ = (*c).Close()
	}
}

func (x *Stream) wake(peer string) {
	if s := x.ensureSender(peer); s != nil {
		signal(s.wake)
	}
}

func (x *Stream) ensureSender(peer string) *sender {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	s := x.senders[peer]
	if s == nil {
		s = &sender{x: x, peer: peer, wake: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
		x.senders[peer] = s
		x.wg.Add(1)
		go s.run()
	}
	return s
}

func (s *sender) run() {
	defer s.x.wg.Done()
	defer s.closeConn()
	x, ob := s.x, s.x.cfg.Outbox
	retry := false
	unacked := false // the last batch sent was not acked: its entries go again
	for {
		if !s.waitReady(retry) {
			return
		}
		s.lastSend = time.Now()
		t, err := ob.take(x.ctx, s.peer, x.cfg.MaxBatch, x.cfg.MaxFrame-64, func(e Entry) string { return x.routeOf(s.peer, e) })
		if err != nil {
			if x.ctx.Err() != nil {
				return
			}
			retry = true
			s.failed("take from outbox", err)
			continue
		}
		x.st.urlsRerouted.Add(uint64(t.moved))
		if len(t.entries) == 0 {
			retry, unacked = false, false
			continue
		}
		t.resend = unacked
		lent, err := s.deliver(t)
		if len(lent) > 0 {
			// The peer marked them lent to this node: take them now,
			// whatever happens to the ack's bookkeeping below.
			x.takeLent(lent)
		}
		if err != nil {
			if x.ctx.Err() != nil {
				return
			}
			retry, unacked = true, true
			s.failed("send batch", err)
			continue
		}
		unacked = false
		if _, err := ob.ack(x.ctx, s.peer, t.lastSeq); err != nil {
			if x.ctx.Err() != nil {
				return
			}
			retry, unacked = true, true
			s.failed("delete acked batch", err)
			continue
		}
		if s.fails > 0 {
			x.log.Info("exchange: peer reachable again", "peer", s.peer, "failures", s.fails)
		}
		s.fails, retry = 0, false
	}
}

// waitReady waits until the queue has a batch worth sending: MinBatch URLs
// (under load batches go out back to back, each with what gathered while
// the previous one was acknowledged, at most MaxBatch), or some URLs and
// MaxDelay passed since the last batch went (after a quiet spell the first
// URLs go at once), or a retry. False when closing. So a batch below
// MinBatch goes at most once per MaxDelay.
func (s *sender) waitReady(retry bool) bool {
	x, ob := s.x, s.x.cfg.Outbox
	for {
		n := ob.pending(s.peer)
		if BatchDue(n, x.cfg.MinBatch, time.Since(s.lastSend), x.cfg.MaxDelay, retry) || (n > 0 && s.urgent.Swap(false)) {
			return true
		}
		if n == 0 {
			select {
			case <-s.wake:
				continue
			case <-s.kick:
				continue
			case <-x.ctx.Done():
				return false
			}
		}
		timer := time.NewTimer(x.cfg.MaxDelay - time.Since(s.lastSend))
		for {
			select {
			case <-s.wake:
				if ob.pending(s.peer) < x.cfg.MinBatch && !s.urgent.Swap(false) {
					continue
				}
			case <-s.kick:
			case <-timer.C:
			case <-x.ctx.Done():
				timer.Stop()
				return false
			}
			timer.Stop()
			return true
		}
	}
}

// failed logs a failure and sleeps the backoff (cut short by a membership change).
func (s *sender) failed(what string, err error) {
	x := s.x
	s.fails++
	if s.fails == 1 {
		x.log.Warn("exchange: "+what+" failed, will retry", "peer", s.peer, "err", err)
	} else {
		x.log.Debug("exchange: "+what+" failed, will retry", "peer", s.peer, "failures", s.fails, "err", err)
	}
	d := x.cfg.BackoffMin << min(s.fails-1, 20)
	if d > x.cfg.BackoffMax || d <= 0 {
		d = x.cfg.BackoffMax
	}
	d = d/2 + rand.N(d/2+1) // jitter
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-s.kick:
	case <-x.ctx.Done():
	}
}

// deliver sends one batch and waits for its ack (or stores it locally); it
// returns the URLs the ack lends this node.
func (s *sender) deliver(t taken) ([]Entry, error) {
	x := s.x
	if s.peer == x.cfg.Name {
		if _, _, err := x.storeEntries(x.ctx, "", t.entries); err != nil {
			return nil, err
		}
		x.st.urlsLocal.Add(uint64(len(t.entries)))
		return nil, nil
	}
	addr, ok := x.cfg.Directory.AddrOf(s.peer)
	if !ok || addr == "" {
		x.st.dialErrors.Add(1)
		return nil, fmt.Errorf("cluster: peer %s: no exchange address (not alive?)", s.peer)
	}
	if s.conn != nil && s.addr != addr {
		s.closeConn()
	}
	if s.conn == nil {
		if err := s.dial(addr); err != nil {
			x.st.dialErrors.Add(1)
			return nil, err
		}
	}
	lent, err := s.roundTrip(t)
	if err != nil && !errors.Is(err, errNack) {
		x.st.dialErrors.Add(1)
		s.closeConn()
	}
	return lent, err
}

// takeLent passes the URLs a peer lent this node in an ack to Local, as
// a batch of KindLend entries would be.
func (x *Stream) takeLent(lent []Entry) {
	urls := make([]frontier.NewURL, len(lent))
	for i, e := range lent {
		urls[i] = e.NewURL
	}
	x.st.urlsLentInAcks.Add(uint64(len(urls)))
	if _, err := x.storeLocal(x.ctx, KindLend, urls); err != nil && x.ctx.Err() == nil {
		x.log.Warn("exchange: take URLs lent in an ack", "urls", len(urls), "err", err)
	}
}

var errNack = errors.New("peer could not store the batch")

func (s *sender) roundTrip(t taken) ([]Entry, error) {
	x := s.x
	if err := s.conn.writeFrame(EncodeBatch(Batch{ID: t.id, Entries: t.entries})); err != nil {
		return nil, err
	}
	x.st.batchesSent.Add(1)
	if t.resend {
		x.st.batchesResent.Add(1)
	}
	_ = s.conn.c.SetReadDeadline(time.Now().Add(x.cfg.AckTimeout))
	p, err := s.conn.readFrame()
	if err != nil {
		return nil, err
	}
	a, err := decodeAck(p)
	if err != nil {
		return nil, err
	}
	if a.ID != t.id {
		return nil, fmt.Errorf("cluster: peer %s acked batch %d, want %d", s.peer, a.ID, t.id)
	}
	x.st.acksRecvd.Add(1)
	if a.Status != 0 {
		x.st.nacks.Add(1)
		return nil, fmt.Errorf("cluster: peer %s: batch %d: %w: %s", s.peer, t.id, errNack, a.Msg)
	}
	repl := 0
	for _, e := range t.entries {
		if e.Kind == KindReplica {
			repl++
		}
	}
	x.st.urlsForwarded.Add(uint64(len(t.entries) - repl))
	x.st.replicasSent.Add(uint64(repl))
	return a.Lent, nil
}

func (s *sender) dial(addr string) error {
	x := s.x
	d := net.Dialer{Timeout: x.cfg.DialTimeout, KeepAlive: 15 * time.Second}
	c, err := d.DialContext(x.ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("cluster: dial peer %s at %s: %w", s.peer, addr, err)
	}
	if !x.track(c) {
		c.Close()
		return net.ErrClosed
	}
	xc, err := x.connect(c, s.peer)
	if err == nil && xc.peer != s.peer {
		err = fmt.Errorf("cluster: %s answers as %q, want %q (stale address?)", addr, xc.peer, s.peer)
	}
	if err != nil {
		x.untrack(c)
		return fmt.Errorf("cluster: connect to peer %s at %s: %w", s.peer, addr, err)
	}
	x.st.dials.Add(1)
	s.conn, s.raw, s.addr = xc, c, addr
	s.live.Store(&c)
	return nil
}

func (s *sender) closeConn() {
	s.live.Store(nil)
	if s.conn != nil {
		s.x.untrack(s.raw)
		s.conn, s.raw = nil, nil
	}
}
