package membership

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
)

// DefaultGossipPort is the gossip port used when MembersConfig.BindAddr has none.
const DefaultGossipPort = 7946

// NodeMeta is the metadata a node gossips about itself (JSON, at most
// memberlist.MetaMaxSize = 512 bytes).
type NodeMeta struct {
	API      string `json:"api,omitempty"`      // HOST:PORT of the node's HTTP API
	Exchange string `json:"exchange,omitempty"` // HOST:PORT of the node's URL exchange listener
	// Settled is the Ring.ID of the member set for which this node has
	// moved every record another member owns and had it acknowledged (see
	// Cluster): a joining node starts fetching once every member is settled
	// for the member set it sees.
	Settled string `json:"settled,omitempty"`
	// Leaving is set by a node that hands its records off before leaving,
	// so that the others report it "left" rather than "dead" once it is gone.
	Leaving bool `json:"leaving,omitempty"`
	// From is the phase epoch from which this node's joining (set at start)
	// or leaving (set just before it leaves the gossip) applies to the
	// phase schedule (Schedule.AnnounceEpoch): the members switch their
	// phase assignment at that boundary together, however far apart they
	// learn of the change.
	From int64 `json:"from,omitempty"`
	// FromAt is the cluster time (unix ns) of the switch from which a
	// joining node takes part in the phases (Schedule.AnnounceAt): the
	// members switch their phase assignment at that instant together,
	// inside an epoch if it falls there. Zero while the node is still
	// joining the gossip: the others leave it out of the phase schedule
	// until it announces the instant (it does once it knows how many
	// members its news has to reach). A leaving node clears it and
	// announces From.
	FromAt int64 `json:"from_at,omitempty"`
	// View is the RingHash of the member list this node scheduled last for
	// its phases, and ViewFrom the epoch that list is in effect from: the
	// members that learned of one change apart (a failure announces
	// nothing) adopt the latest epoch any of them chose for it.
	View     string `json:"view,omitempty"`
	ViewFrom int64  `json:"view_from,omitempty"`
	// ViewAt is the cluster time (unix ns) from which that list is in
	// effect: ViewFrom's epoch start, or a switch instant inside it.
	ViewAt int64 `json:"view_at,omitempty"`
	// ViewSize is the length of that list: a node that sees a member
	// gossip a longer view than its own needs a majority of that one
	// (quorum.go), so a node that joined the minority side of a partition
	// does not crawl with a view of its side alone.
	ViewSize int `json:"view_size,omitempty"`
	// Started is when this node's process started (unix ns): a member
	// back under the same name is a new ring member (Ring.ID).
	Started int64 `json:"started,omitempty"`
	// Scope is the digest of the node's scope settings (ScopeDigestOf):
	// every member must run with the same.
	Scope string `json:"scope,omitempty"`
}

// MembersConfig configures StartMembers.
type MembersConfig struct {
	// Name is the member name (--name); must be unique in the cluster and
	// stable across restarts. Default: the hostname.
	Name string
	// BindAddr is the gossip address HOST:PORT (--gossip); a missing port
	// means DefaultGossipPort, port 0 picks a free one (see Members.Addr).
	// Default "0.0.0.0:7946".
	BindAddr string
	// Advertise is the HOST:PORT other members use to reach this one;
	// default: derived by memberlist from BindAddr.
	Advertise string
	// Join lists HOST:PORT addresses of existing members (--join); empty
	// starts a new cluster.
	Join []string
	// JoinRetry is how long Start keeps trying to reach the Join addresses
	// when none answers (members starting at the same time, a peer being
	// rescheduled); a key mismatch is never retried. Default (0): 30s;
	// negative: one attempt.
	JoinRetry time.Duration
	// SecretKey is the cluster key (16, 24 or 32 bytes, --cluster-key-file):
	// gossip is encrypted and authenticated with it. Required.
	SecretKey []byte
	// Meta is gossiped to the other members.
	Meta NodeMeta
	// Logger receives membership events at info and memberlist's own log
	// lines at debug. Default slog.Default().
	Logger *slog.Logger
	// Tune, if set, may adjust the memberlist configuration (based on
	// memberlist.DefaultLANConfig) before start, e.g. FastTimings.
	Tune func(*memberlist.Config)
	// LeavePropagate is how long Leave waits after the leave broadcast
	// before shutting down, so the message spreads (Serf recipe), and how
	// long a leaving node lets its "leaving" metadata spread before it
	// hands its records off. Default 5 gossip intervals: 1s with
	// memberlist's LAN timings, 250ms with FastTimings.
	LeavePropagate time.Duration
	// OnMessage receives the user messages other members send to this one
	// (the quorum heartbeats, quorum.go). It must not block. Optional.
	OnMessage func(msg []byte)
}

// FastTimings tightens memberlist's LAN timings for clusters on one
// machine (tests, `phasecrawl demo`, cluster.fast_gossip): probe every
// 200ms with a 150ms timeout, gossip every 50ms, push/pull every 5s, a
// suspect declared dead after 5×log10(N) probe intervals (1s below ten
// members, shortened by confirmations from up to 6s), TCP timeout 2s. A
// killed member is declared dead within a few seconds; a member whose
// process stalls for about a second under load may be declared dead
// wrongly (and rejoins at once), which moves URL ownership back and forth.
// Do not use on a real network.
func FastTimings(c *memberlist.Config) {
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 150 * time.Millisecond
	c.GossipInterval = 50 * time.Millisecond
	c.PushPullInterval = 5 * time.Second
	c.SuspicionMult = 5
	c.TCPTimeout = 2 * time.Second
	c.GossipToTheDeadTime = 5 * time.Second
}

// MemberState is a member's state as seen by this node.
type MemberState string

// Member states.
const (
	StateAlive   MemberState = "alive"
	StateSuspect MemberState = "suspect"
	StateDead    MemberState = "dead"
	StateLeft    MemberState = "left"
)

// Member is one member of the cluster.
type Member struct {
	Name     string      `json:"name"`
	Gossip   string      `json:"gossip"` // HOST:PORT
	API      string      `json:"api,omitempty"`
	Exchange string      `json:"exchange,omitempty"`
	State    MemberState `json:"state"`
	Settled  string      `json:"-"` // NodeMeta.Settled
	Leaving  bool        `json:"-"` // NodeMeta.Leaving
	From     int64       `json:"-"` // NodeMeta.From
	FromAt   int64       `json:"-"` // NodeMeta.FromAt
	View     string      `json:"-"` // NodeMeta.View
	ViewFrom int64       `json:"-"` // NodeMeta.ViewFrom
	ViewAt   int64       `json:"-"` // NodeMeta.ViewAt
	ViewSize int         `json:"-"` // NodeMeta.ViewSize
	Started  int64       `json:"-"` // NodeMeta.Started
	Scope    string      `json:"-"` // NodeMeta.Scope
	Seen     time.Time   `json:"-"` // local time this node last received the member's state (toMember)
}

// Members is this node's view of the cluster membership.
type Members struct {
	ml *memberlist.Memberlist
	// deadAfter is the shortest time in which the others can declare a
	// silent member dead: SuspicionMult probe intervals (memberlist's
	// suspicion timeout below ten members).
	deadAfter time.Duration
	log       *slog.Logger
	cfg       MembersConfig
	changes   chan struct{}
	mu        sync.Mutex // guards meta, stopped, nodes, gone
	meta      []byte
	stopped   bool
	propWait  time.Duration
	// nodes are the members alive (or suspect), copied in memberlist's
	// event callbacks, which run under its node lock: the *memberlist.Node
	// values its Members returns change under our feet (UpdateNode).
	nodes map[string]Member
	gone  map[string]Member // members that failed or left, until they come back
	addr  string            // local gossip address, set at start
}

// StartMembers starts gossip and joins c.Join (if any). When no join address
// answers (unreachable, or the other members use another cluster key), it
// returns an error and nothing keeps running.
func StartMembers(c MembersConfig) (*Members, error) {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Name == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return nil, fmt.Errorf("cluster: name: empty and no hostname: %v", err)
		}
		c.Name = h
	}
	if err := exchange.CheckKey(c.SecretKey); err != nil {
		return nil, err
	}
	host, port, err := splitHostPortDefault(c.BindAddr, "0.0.0.0", DefaultGossipPort)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip address %q: %w", c.BindAddr, err)
	}
	m := &Members{log: c.Logger.With("component", "members"), cfg: c, changes: make(chan struct{}, 1), propWait: c.LeavePropagate,
		nodes: map[string]Member{}, gone: map[string]Member{}}
	if m.meta, err = encodeMeta(c.Meta); err != nil {
		return nil, err
	}
	kr, err := memberlist.NewKeyring(nil, c.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("cluster: --cluster-key-file: %w", err)
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.Name
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertisePort = port
	if c.Advertise != "" {
		ah, ap, err := splitHostPortDefault(c.Advertise, "", port)
		if err != nil || ah == "" {
			return nil, fmt.Errorf("cluster: advertise address %q: must be HOST[:PORT]", c.Advertise)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
	}
	mc.Keyring = kr
	mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	mc.Delegate = (*membersDelegate)(m)
	mc.Events = (*membersEvents)(m)
	mc.Logger = log.New(&slogWriter{l: m.log}, "", 0)
	if c.Tune != nil {
		c.Tune(mc)
	}
	if m.propWait <= 0 {
		m.propWait = 5 * mc.GossipInterval
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("cluster: start gossip on %s:%d: %w", host, port, err)
	}
	m.ml = ml
	m.deadAfter = time.Duration(mc.SuspicionMult) * mc.ProbeInterval
	ln := ml.LocalNode()
	m.addr = net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
	if len(c.Join) > 0 {
		retry := c.JoinRetry
		if retry == 0 {
			retry = 30 * time.Second
		}
		deadline, wait := time.Now().Add(retry), 250*time.Millisecond
		n, err := ml.Join(c.Join)
		for (n == 0 || err != nil) && !keyMismatch(err) && time.Now().Add(wait).Before(deadline) {
			m.log.Warn("join: no member answered yet, retrying", "join", strings.Join(c.Join, ","), "in", wait, "error", err)
			time.Sleep(wait)
			wait = min(2*wait, 4*time.Second)
			n, err = ml.Join(c.Join)
		}
		if n == 0 || err != nil {
			_ = ml.Shutdown()
			if err == nil {
				err = errors.New("no member answered")
			}
			if keyMismatch(err) {
				return nil, fmt.Errorf("cluster: join %s refused: the members use another cluster key; every member needs the same --cluster-key-file: %w",
					strings.Join(c.Join, ","), err)
			}
			return nil, fmt.Errorf("cluster: join %s failed: the members may be unreachable or the cluster key may differ (--cluster-key-file): %w",
				strings.Join(c.Join, ","), err)
		}
		m.log.Info("joined cluster", "name", c.Name, "via", n, "members", ml.NumMembers())
	}
	return m, nil
}

// keyMismatch reports whether a join error says the peers use another key.
func keyMismatch(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "no installed keys could decrypt") || strings.Contains(msg, "Encryption is configured but remote state is not encrypted")
}

// Name returns the local member name.
func (m *Members) Name() string { return m.cfg.Name }

// Addr returns the local gossip address HOST:PORT (with the port actually
// bound). It is read once at start: memberlist rewrites its local node on
// every metadata update.
func (m *Members) Addr() string { return m.addr }

// Alive returns the members not known to be dead or gone (state alive or
// suspect), the local one included, sorted by name.
func (m *Members) Alive() []Member {
	m.mu.Lock()
	out := make([]Member, 0, len(m.nodes))
	for _, x := range m.nodes {
		out = append(out, x)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// All returns Alive() and the members seen failing (dead) or leaving
// (left) since this node started that have not come back, sorted by name.
func (m *Members) All() []Member {
	out := m.Alive()
	m.mu.Lock()
	for _, g := range m.gone {
		if !slices.ContainsFunc(out, func(x Member) bool { return x.Name == g.Name }) {
			out = append(out, g)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// AliveNames returns the names of Alive(), sorted.
func (m *Members) AliveNames() []string {
	ms := m.Alive()
	names := make([]string, len(ms))
	for i, x := range ms {
		names[i] = x.Name
	}
	return names
}

// Changes returns a channel that receives a value after membership or
// metadata changed (join, leave, failure, update). It has a buffer of one and
// coalesces: a receiver reads Alive() for the current state. Sending never
// blocks memberlist.
func (m *Members) Changes() <-chan struct{} { return m.changes }

// SetMeta replaces the local metadata and gossips it, waiting up to timeout
// for the update to go out.
func (m *Members) SetMeta(meta NodeMeta, timeout time.Duration) error {
	b, err := encodeMeta(meta)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.meta = b
	m.mu.Unlock()
	if err := m.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("cluster: update metadata: %w", err)
	}
	return nil
}

// Leave leaves the cluster gracefully (Serf recipe): broadcast the leave,
// waiting up to timeout for it to go out, wait LeavePropagate for it to
// spread, then Shutdown. The caller stops work and hands off its records
// before. A left Members cannot rejoin: start a new one with the same Name.
func (m *Members) Leave(timeout time.Duration) error {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return nil
	}
	m.stopped = true
	m.mu.Unlock()
	err := m.ml.Leave(timeout)
	if err != nil {
		err = fmt.Errorf("cluster: leave: %w", err)
	} else {
		time.Sleep(m.propWait)
	}
	if serr := m.ml.Shutdown(); serr != nil && err == nil {
		err = fmt.Errorf("cluster: shutdown: %w", serr)
	}
	m.log.Info("left cluster", "name", m.cfg.Name)
	return err
}

// PropagateWait is how long a change this member gossips takes to reach
// the others (MembersConfig.LeavePropagate).
func (m *Members) PropagateWait() time.Duration { return m.propWait }

// Shutdown stops gossip without a leave message: the others detect the
// failure by probing (like a crash). Safe to call several times and after Leave.
func (m *Members) Shutdown() error {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	if err := m.ml.Shutdown(); err != nil {
		return fmt.Errorf("cluster: shutdown: %w", err)
	}
	return nil
}

// LoadKey reads a cluster key file: 16, 24 or 32 raw bytes, or the standard
// base64 encoding of such a key (surrounding whitespace ignored).
func LoadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster: --cluster-key-file %s: %w", path, err)
	}
	// Text made only of base64 characters is base64 (random raw keys almost
	// never are); anything else is a raw key.
	if s := strings.TrimSpace(string(b)); s != "" && strings.Trim(s, base64Alphabet) == "" {
		k, err := base64.StdEncoding.DecodeString(s)
		if err == nil && exchange.ValidKeyLen(len(k)) {
			return k, nil
		}
		return nil, fmt.Errorf("cluster: --cluster-key-file %s: base64 key must decode to 16, 24 or 32 bytes (got %d, %v)", path, len(k), err)
	}
	if exchange.ValidKeyLen(len(b)) {
		return b, nil
	}
	return nil, fmt.Errorf("cluster: --cluster-key-file %s: key must be 16, 24 or 32 raw bytes or their base64 (file has %d bytes)", path, len(b))
}

const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="

func encodeMeta(meta NodeMeta) ([]byte, error) {
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("cluster: metadata: %w", err)
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("cluster: metadata is %d bytes, at most %d allowed", len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// toMember copies the state memberlist just reported for n (in a join,
// leave or update event), stamped with the time it arrived.
func toMember(n *memberlist.Node) Member {
	x := Member{Name: n.Name, Gossip: net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))), Seen: time.Now()}
	var meta NodeMeta
	if len(n.Meta) > 0 && json.Unmarshal(n.Meta, &meta) == nil {
		x.API, x.Exchange, x.Settled, x.Leaving, x.From = meta.API, meta.Exchange, meta.Settled, meta.Leaving, meta.From
		x.View, x.ViewFrom, x.ViewSize, x.Started, x.Scope = meta.View, meta.ViewFrom, meta.ViewSize, meta.Started, meta.Scope
		x.FromAt, x.ViewAt = meta.FromAt, meta.ViewAt
	}
	switch n.State {
	case memberlist.StateAlive:
		x.State = StateAlive
	case memberlist.StateSuspect:
		x.State = StateSuspect
	case memberlist.StateDead:
		x.State = StateDead
	default:
		x.State = StateLeft
	}
	return x
}

// splitHostPortDefault parses HOST[:PORT] with defaults for missing parts.
func splitHostPortDefault(s, defHost string, defPort int) (string, int, error) {
	if s == "" {
		return defHost, defPort, nil
	}
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		// No port: the whole string is the host (IPv6 literals need brackets with a port).
		h := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		if strings.Contains(s, "]:") || h == "" {
			return "", 0, err
		}
		return h, defPort, nil
	}
	if host == "" {
		host = defHost
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("port %q: must be 0..65535", ps)
	}
	return host, p, nil
}

// notify signals a change without ever blocking.
func (m *Members) notify() {
	select {
	case m.changes <- struct{}{}:
	default:
	}
}

// membersDelegate implements memberlist.Delegate (metadata only).
type membersDelegate Members

func (d *membersDelegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.meta) > limit {
		return nil
	}
	return slices.Clone(d.meta)
}
func (d *membersDelegate) NotifyMsg(b []byte) {
	if d.cfg.OnMessage != nil {
		d.cfg.OnMessage(b)
	}
}
func (d *membersDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *membersDelegate) LocalState(join bool) []byte                { return nil }
func (d *membersDelegate) MergeRemoteState(buf []byte, join bool)     {}

// membersEvents implements memberlist.EventDelegate; it never blocks.
type membersEvents Members

func (e *membersEvents) NotifyJoin(n *memberlist.Node) {
	e.log.Info("member joined", "member", n.Name, "addr", n.Address())
	e.mu.Lock()
	delete(e.gone, n.Name)
	e.nodes[n.Name] = toMember(n)
	e.mu.Unlock()
	(*Members)(e).notify()
}
func (e *membersEvents) NotifyLeave(n *memberlist.Node) {
	// memberlist reports a failure and a leave alike; a member that leaves
	// gracefully says so in its metadata first.
	x := toMember(n)
	x.State = StateDead
	if x.Leaving {
		x.State = StateLeft
	}
	e.log.Info("member left", "member", n.Name, "state", x.State)
	e.mu.Lock()
	delete(e.nodes, n.Name)
	e.gone[n.Name] = x
	e.mu.Unlock()
	(*Members)(e).notify()
}
func (e *membersEvents) NotifyUpdate(n *memberlist.Node) {
	e.log.Debug("member updated", "member", n.Name)
	e.mu.Lock()
	e.nodes[n.Name] = toMember(n)
	e.mu.Unlock()
	(*Members)(e).notify()
}

// slogWriter routes memberlist's log.Logger lines ("[DEBUG] memberlist: …")
// into slog at debug level.
type slogWriter struct{ l *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	lvl := ""
	if strings.HasPrefix(line, "[") {
		if i := strings.IndexByte(line, ']'); i > 0 {
			lvl, line = line[1:i], strings.TrimSpace(line[i+1:])
		}
	}
	w.l.Log(context.Background(), slog.LevelDebug, line, "source", "memberlist", "mlevel", lvl)
	return len(p), nil
}

var _ io.Writer = (*slogWriter)(nil)

// DeadAfter is the shortest silence after which the others may declare a
// member dead (memberlist's suspicion timeout for fewer than ten members).
func (m *Members) DeadAfter() time.Duration { return m.deadAfter }

// Static returns a membership view that never changes and gossips
// nothing: alive are the members alive (or suspect) by name, gone those
// that failed or left. Only its views (Alive, All, AliveNames) answer:
// the layers above the membership test with it.
func Static(alive, gone map[string]Member) *Members {
	if gone == nil {
		gone = map[string]Member{}
	}
	return &Members{nodes: alive, gone: gone, stopped: true, changes: make(chan struct{}, 1)}
}
