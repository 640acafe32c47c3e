package cluster

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// Lending (cluster.lend, docs/design/lending.md): a URL waits in its
// owner's frontier for the owner's turn on its host's phase, up to Nphase
// epochs. Every lendInterval the owner lends the IN_LIST URLs of the hosts
// whose phase another member works on now to that member (KindLend,
// through the ordered, durable outbox), which fetches them with its own
// URLs of those hosts (one connection per host, as ever) and reports each
// outcome back (KindOutcome, through its own outbox); the owner settles
// the record as if it had fetched the page. The record never leaves the
// owner's frontier: the owner only remembers, in memory, "lent to P until
// T" and skips the URL (Held) meanwhile. A mark that expires, or is lost in
// a restart, makes the URL lendable and fetchable again: nothing is lost,
// and a page is fetched twice only when its outcome was lost with a crash.
const (
	// lendInterval is how often the owner lends; URLs arriving from other
	// members start a round at once (lendKick).
	lendInterval = 50 * time.Millisecond
	// lendScan bounds the records read per member and round.
	lendScan = 4096
	// maxLentPerMember bounds the URLs lent to one member and not settled.
	maxLentPerMember = 8192
	// lendMinLeft: a member whose phase's guard starts sooner than this is
	// not lent anything more in that phase.
	lendMinLeft = 150 * time.Millisecond
)

// lendMark is one URL lent: to whom, until when (local time).
type lendMark struct {
	holder string
	epoch  int64
	until  time.Time // the end of the holder's phase and the grace: a rebalance waits for it
	// hold is when the mark stops holding the URL (zero: until): later
	// than until by lendSlack, so that an outcome delayed on a loaded
	// machine still arrives before the URL is lent or fetched again.
	hold time.Time
}

// holdUntil is when the mark stops holding the URL.
func (m lendMark) holdUntil() time.Time {
	if m.hold.After(m.until) {
		return m.hold
	}
	return m.until
}

// lendSlack is how long after until a mark still holds its URL (lendMark.hold).
func (c *Cluster) lendSlack() time.Duration {
	return max(c.cfg.PhaseDuration, 2*time.Second)
}

// lending is the owner's in-memory state of the URLs it lent.
type lending struct {
	mu      sync.Mutex
	marks   map[uint64]lendMark
	out     map[string]int  // marks per holder
	pending map[string]bool // holders whose expired marks still hold (lendHolds)
	// cursors is, per member, where the scan of the URLs to lend it
	// stopped in its current phase (lendLoop's goroutine only).
	cursors map[string]lendCursor
	// early keeps the outcomes that reached this node, the URL's owner,
	// before the URL's record did (a leaving or rebalancing member moves
	// it here while the holder reports to the owner it sees): they are
	// settled when the record arrives (KindMoved), not dropped, so the
	// record is not fetched again.
	early map[uint64]earlyOutcome
	// again holds the URLs given back unfetched (a holder's trip ended
	// before it reached them, or its phase did): the lend scans' cursors
	// may have passed them, in this epoch or, for a return that arrives
	// after the swap, in the next one, whose scans started from the
	// oldest URL while they were still marked. lendTo reads them again by
	// key and lends them in its next round for their host's phase,
	// whichever epoch that is; those of this node's own phase are its
	// own to fetch (its scheduler's window starts again from the oldest
	// URL at every pass) and are forgotten (dropAgain).
	again map[uint64]frontier.Ref
}

// maxAgain bounds the URLs given back and waiting to be lent again.
const maxAgain = 4 * maxLentPerMember

// earlyOutcome is an outcome kept until its record arrives.
type earlyOutcome struct {
	u  frontier.NewURL
	at time.Time
}

const (
	// earlyKeep is how long an outcome waits for its record.
	earlyKeep = 5 * time.Minute
	// maxEarly bounds the outcomes waiting for their records.
	maxEarly = 65536
)

// keepEarly keeps the outcomes us until their records arrive.
func (l *lending) keepEarly(us []frontier.NewURL, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.early == nil {
		l.early = map[uint64]earlyOutcome{}
	}
	if len(l.early)+len(us) > maxEarly {
		for fp, e := range l.early {
			if now.Sub(e.at) > earlyKeep {
				delete(l.early, fp)
			}
		}
	}
	for _, u := range us {
		if len(l.early) >= maxEarly {
			return
		}
		l.early[frontier.Fingerprint(u.URL)] = earlyOutcome{u: u, at: now}
	}
}

// takeEarly removes and returns the outcomes kept for the records us.
func (l *lending) takeEarly(us []frontier.NewURL, now time.Time) []frontier.NewURL {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.early) == 0 {
		return nil
	}
	var out []frontier.NewURL
	for _, u := range us {
		fp := frontier.Fingerprint(u.URL)
		if e, ok := l.early[fp]; ok {
			delete(l.early, fp)
			if now.Sub(e.at) <= earlyKeep {
				out = append(out, e.u)
			}
		}
	}
	return out
}

// lendCursor is the position of the lend scan for one member.
type lendCursor struct {
	epoch int64
	phase int
	at    frontier.Cursor
}

// lent reports whether fp is lent now (Held).
func (l *lending) lent(fp uint64, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.marks[fp]
	if !ok {
		return false
	}
	if now.Before(m.holdUntil()) || l.pending[m.holder] {
		return true
	}
	l.drop(fp, m)
	return false
}

// active reports whether fp is lent and the lend has not run out (its
// holder's phase and the grace are not over), whatever the holder's state:
// a rebalance waits for this, not for lent (a holder that is not settled
// waits for the rebalances of the others, which must not wait for it).
func (l *lending) active(fp uint64, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.marks[fp]
	return ok && now.Before(m.until)
}

// drop forgets the mark m of fp; l.mu held.
func (l *lending) drop(fp uint64, m lendMark) {
	delete(l.marks, fp)
	if l.out[m.holder]--; l.out[m.holder] <= 0 {
		delete(l.out, m.holder)
	}
}

// markOf returns the mark of fp, if it is lent.
func (l *lending) markOf(fp uint64) (lendMark, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.marks[fp]
	return m, ok
}

// carry sets the mark m of fp, lent by the member that moved the record
// here (unless fp is marked already).
func (l *lending) carry(fp uint64, m lendMark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.marks[fp]; ok {
		return
	}
	l.marks[fp] = m
	l.out[m.holder]++
}

// movedHost is a moved record's entry Host when the record is lent: the
// URL's host, a newline, "lent", the holder, the epoch of the lend and
// the end of the mark (Unix ms). The new owner keeps the mark (takeMoved):
// it neither fetches nor lends the URL while the holder may still fetch
// it or its outcome may still be on its way.
func movedHost(host string, m lendMark) string {
	return host + "\nlent " + m.holder + " " + strconv.FormatInt(m.epoch, 10) + " " + strconv.FormatInt(m.holdUntil().UnixMilli(), 10)
}

// takeMoved strips the lend marks from moved records' Host (movedHost)
// and, when this node lends, keeps them; the marks end with a slack of
// twice the clock uncertainty u. It returns the records as they are stored.
func (c *Cluster) takeMoved(urls []frontier.NewURL, u time.Duration) []frontier.NewURL {
	var out []frontier.NewURL
	for i, x := range urls {
		host, rest, ok := strings.Cut(x.Host, "\n")
		if !ok {
			if out != nil {
				out = append(out, x)
			}
			continue
		}
		if out == nil {
			out = append(make([]frontier.NewURL, 0, len(urls)), urls[:i]...)
		}
		x.Host = host
		out = append(out, x)
		f := strings.Fields(rest)
		if len(f) != 4 || f[0] != "lent" || c.lends.marks == nil {
			continue
		}
		epoch, err1 := strconv.ParseInt(f[2], 10, 64)
		ms, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		c.lends.carry(frontier.Fingerprint(x.URL), lendMark{holder: f[1], epoch: epoch, until: time.UnixMilli(ms).Add(2 * max(u, 0))})
	}
	if out == nil {
		return urls
	}
	return out
}

// settle forgets the marks of fps (their outcomes arrived).
func (l *lending) settle(fps []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fp := range fps {
		if m, ok := l.marks[fp]; ok {
			l.drop(fp, m)
		}
	}
}

// returned forgets the mark of the URL r if it is the lend to holder for
// epoch (a return from an earlier lend does not end a later one), and
// keeps r to be lent again (lending.again).
func (l *lending) returned(r frontier.Ref, holder string, epoch int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.marks[r.FP]
	if !ok || m.holder != holder || m.epoch != epoch {
		return
	}
	l.drop(r.FP, m)
	if l.again != nil && len(l.again) < maxAgain {
		l.again[r.FP] = r
	}
}

// takeAgain removes and returns the URLs of again of phase (of nphase),
// at most most of them.
func (l *lending) takeAgain(phase, nphase int, unit frontier.Unit, most int) []frontier.Ref {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []frontier.Ref
	for fp, r := range l.again {
		if len(out) >= most {
			break
		}
		if frontier.PhaseOf(unit.Hash(r.Host), nphase) == phase {
			out = append(out, r)
			delete(l.again, fp)
		}
	}
	return out
}

// dropAgain forgets the URLs of again of phase (of nphase): this node's
// own phase, whose URLs its scheduler finds (lending.again).
func (l *lending) dropAgain(phase, nphase int, unit frontier.Unit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for fp, r := range l.again {
		if frontier.PhaseOf(unit.Hash(r.Host), nphase) == phase {
			delete(l.again, fp)
		}
	}
}

// expire forgets the expired marks of holders not pending, and the expired
// marks of a holder that is gone (gone reports it) even while it would be
// pending, and returns how many it forgot.
func (l *lending) expire(now time.Time, gone func(holder string) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	dead := map[string]bool{}
	for h := range l.out {
		if gone != nil && gone(h) {
			dead[h] = true
		}
	}
	for fp, m := range l.marks {
		// A gone holder's marks are no longer extended while its reports
		// may wait (pending), but each still holds until its own time: a
		// holder can vanish from the ring for a moment (declared dead
		// under load before it is away) while its outcome is on the way.
		if !now.Before(m.holdUntil()) && (dead[m.holder] || !l.pending[m.holder]) {
			l.drop(fp, m)
			n++
		}
	}
	return n
}

// lendGrace is how long after the end of the holder's phase a mark holds:
// the holder's outcome report may still be on its way (batch delay, the
// clocks' uncertainty).
func (c *Cluster) lendGrace(u time.Duration) time.Duration {
	bd := c.cfg.BatchDelay
	if bd <= 0 {
		bd = DefaultExchangeConfig().MaxDelay
	}
	return time.Second + 2*bd + 4*max(u, 0)
}

// lendHolds is the set of holders whose expired marks still hold: members
// away (declared dead less than takeover_after ago; their reports wait in
// their outbox) and members not settled for the current member set (a
// member back from a restart has not delivered what its previous process
// left in its outbox yet).
func (c *Cluster) lendHolds() map[string]bool {
	hold := map[string]bool{}
	if a := c.away.Load(); a != nil {
		now := time.Now()
		for name, until := range a.until {
			if now.Before(until) {
				hold[name] = true
			}
		}
	}
	ring := c.ring.Load()
	h := ring.ID()
	for _, m := range c.members.Alive() {
		if m.Name != c.cfg.Name && ring.Has(m.Name) && m.Settled != h {
			hold[m.Name] = true
		}
	}
	return hold
}

// holdForAway is called when the join gate opens: the members away now
// may hold URLs of this node's share lent to them by its previous process
// (the marks were in memory), with their outcomes waiting in their
// outboxes. This node fetches and lends none of its URLs until each of
// them came back settled for the member set (its outbox delivered) or its
// takeover_after ran out.
func (c *Cluster) holdForAway() {
	a := c.away.Load()
	if a == nil {
		return
	}
	hold := map[string]bool{}
	now := time.Now()
	for name, until := range a.until {
		if now.Before(until) {
			hold[name] = true
		}
	}
	if len(hold) == 0 {
		return
	}
	c.awayAtGate.Store(&hold)
	c.lendHeld.Store(true)
	c.log.Info("holding this node's URLs until the members away come back settled (they may hold URLs lent before a restart)",
		"away", len(hold), "takeover_after", c.cfg.TakeoverAfter)
}

// lendHoldUpdate ends lendHeld once every member away at the gate came
// back settled or is no longer away (takeover_after passed); hold is
// lendHolds' answer (members away or not settled).
func (c *Cluster) lendHoldUpdate(hold map[string]bool) {
	p := c.awayAtGate.Load()
	if p == nil || len(*p) == 0 {
		return
	}
	left := map[string]bool{}
	for name := range *p {
		// Still away, or back but not settled (its outbox not delivered).
		if hold[name] {
			left[name] = true
		}
	}
	if len(left) == len(*p) {
		return
	}
	c.awayAtGate.Store(&left)
	if len(left) == 0 {
		c.lendHeld.Store(false)
		c.log.Info("the members away at the join came back settled or were taken over: fetching and lending")
		if c.cfg.Wake != nil {
			c.cfg.Wake()
		}
	}
}

// holderGone reports whether holder is no longer a member: not in the
// ring and not away (declared dead more than takeover_after ago, or gone).
// Its outcomes, if it is ever back, go to the URLs' owners like a
// discovered URL; what it held is this node's to lend or fetch again now.
func (c *Cluster) holderGone(holder string) bool {
	if c.ring.Load().Has(holder) {
		return false
	}
	if a := c.away.Load(); a != nil {
		if until, ok := a.until[holder]; ok && time.Now().Before(until) {
			return false
		}
	}
	return true
}

// lendLoop lends every lendInterval until ctx is done.
func (c *Cluster) lendLoop(ctx context.Context) {
	t := time.NewTicker(lendInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.lendKick:
		}
		hold := c.lendHolds()
		c.lendHoldUpdate(hold)
		c.lends.mu.Lock()
		c.lends.pending = hold
		c.lends.mu.Unlock()
		if c.lends.expire(time.Now(), c.holderGone) > 0 && c.cfg.Wake != nil {
			c.cfg.Wake() // URLs the scheduler skipped while lent may be fetched here now
		}
		if err := c.lendRound(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("lend URLs", "error", err)
		}
	}
}

// lendRound lends, to each other member of the member view in effect that
// works on a phase now, this node's IN_LIST URLs of that phase's hosts.
// Nothing is lent while this node is held off its phase (joining, fenced,
// frozen, leaving): it then does not know that the view is agreed.
func (c *Cluster) lendRound(ctx context.Context) error {
	st, until, ok := c.lendWindow(time.Now())
	if !ok {
		return nil
	}
	c.lends.dropAgain(st.Phase, st.NPhase, c.cfg.Unit)
	for _, p := range st.Members {
		q, ok := c.lendPhase(st, p)
		if !ok {
			continue
		}
		if err := c.lendTo(ctx, p, q, st.Epoch, until); err != nil {
			return err
		}
	}
	return nil
}

// lendWindow reports whether this node may lend now, and if so the phase
// state and until, the end of a lend made now. Nothing is lent while this
// node is held off its phase (joining, fenced, frozen, leaving): it then
// does not know that the view is agreed; nor shortly before the guard.
func (c *Cluster) lendWindow(now time.Time) (st PhaseState, until time.Time, ok bool) {
	if c.lends.marks == nil || c.joining.Load() || c.leaving.Load() || c.lendHeld.Load() {
		return st, until, false
	}
	st = c.sched.At(now)
	if st.Phase < 0 || st.Held || !st.Open || st.NPhase <= 1 || c.front.Phases() != st.NPhase {
		return st, until, false
	}
	// Local time of the guard's start (early by up to 2× the uncertainty).
	guardAt := st.RequestDeadline.Add(-st.NextSwap.Sub(st.GuardStart))
	if guardAt.Sub(now) < lendMinLeft {
		return st, until, false
	}
	u := time.Duration(0)
	if c.clock != nil {
		u = c.clock.Uncertainty()
	}
	return st, st.RequestDeadline.Add(2*u + c.lendGrace(u)), true
}

// lendPhase returns the phase member p works on in st, when this node may
// lend to it: another member of the ring, not leaving, not away, with no
// expired lends held for it, working on another phase than this node.
func (c *Cluster) lendPhase(st PhaseState, p string) (int, bool) {
	if p == c.cfg.Name || !c.ring.Load().Has(p) || (*c.peersLeaving.Load())[p] || c.lends.pendingHolder(p) {
		return -1, false
	}
	if away := c.away.Load(); away != nil {
		if _, ok := away.until[p]; ok {
			return -1, false
		}
	}
	q := PhaseOf(p, st.Members, st.Epoch, st.NPhase)
	if q < 0 || q == st.Phase {
		return -1, false
	}
	return q, true
}

// ReceiveNew implements Lender (the exchange's): the URLs peer found and
// this node owns are stored, and those new here whose host is in the phase
// peer works on now are lent back to it in the batch's ack. Without this a
// link found on a host goes to its owner and comes back with the owner's
// next lend round, a second batch: a round trip during which the host
// waits, on small crawls most of the time.
func (l localStore) ReceiveNew(ctx context.Context, peer string, urls []frontier.NewURL, maxBytes int) (int, []frontier.NewURL, error) {
	return l.c.receiveNew(ctx, peer, urls, maxBytes)
}

func (c *Cluster) receiveNew(ctx context.Context, peer string, urls []frontier.NewURL, maxBytes int) (int, []frontier.NewURL, error) {
	offer := c.offerBack(peer, urls)
	if len(offer.fps) == 0 {
		n, err := c.store(ctx, KindNew, urls)
		return n, nil, err
	}
	// What is marked and not lent in the end (stored meanwhile by another
	// batch, no room in the ack, or the store failed) is unmarked and kept
	// to be lent again in this epoch, as a URL given back is: a lend
	// round's scan may have passed it while it was marked.
	unlend := func(is []int) {
		for _, i := range is {
			c.lends.returned(frontier.Ref{FP: offer.fps[i], Host: offer.hosts[i]}, peer, offer.epoch)
		}
		if len(is) > 0 {
			signal(c.lendKick)
		}
	}
	var added []frontier.NewURL
	n, err := c.storeURLs(ctx, KindNew, urls, &added)
	if err != nil {
		unlend(offer.all())
		return n, nil, err
	}
	isNew := make(map[uint64]bool, len(added))
	for _, u := range added {
		isNew[frontier.Fingerprint(u.URL)] = true
	}
	var lent []frontier.NewURL
	var back []int
	size := 0
	for i, fp := range offer.fps {
		u := urls[offer.idx[i]]
		e := frontier.NewURL{URL: u.URL, Host: lendHost(offer.hosts[i], offer.epoch, 0, c.cfg.Name), Depth: u.Depth, Run: u.Run, Redirects: u.Redirects}
		es := EntrySize(Entry{Kind: KindLend, NewURL: e}) // as the ack encodes it
		if !isNew[fp] || size+es > maxBytes {
			back = append(back, i)
			continue
		}
		size += es
		lent = append(lent, e)
	}
	unlend(back)
	return n, lent, nil
}

// lendOffer is the URLs of a batch this node marked lent to its sender
// before storing them: their fingerprints, indexes in the batch and hosts.
type lendOffer struct {
	epoch int64
	fps   []uint64
	idx   []int
	hosts []string
}

// all returns the indexes of every URL of o.
func (o lendOffer) all() []int {
	is := make([]int, len(o.fps))
	for i := range is {
		is[i] = i
	}
	return is
}

// offerBack marks lent to peer, before they are stored, the URLs of urls
// this node owns and may lend it now (lendWindow, lendPhase): those of
// the hosts of the phase peer works on, not lent or held already, up to
// what peer may still hold (maxLentPerMember).
func (c *Cluster) offerBack(peer string, urls []frontier.NewURL) lendOffer {
	var o lendOffer
	if !c.cfg.Lend {
		return o
	}
	st, until, ok := c.lendWindow(time.Now())
	if !ok {
		return o
	}
	q, ok := c.lendPhase(st, peer)
	if !ok {
		return o
	}
	ring := c.ring.Load()
	hold := until.Add(c.lendSlack())
	o.epoch = st.Epoch
	for i, u := range urls {
		host := u.Host
		if host == "" {
			host = frontier.RefOf(u.URL).Host
		}
		host = strings.ToLower(host)
		if host == "" || frontier.PhaseOf(c.cfg.Unit.Hash(host), st.NPhase) != q {
			continue
		}
		fp := frontier.Fingerprint(u.URL)
		if ring.Owner(fp) != c.cfg.Name || c.Held(fp) {
			continue
		}
		o.fps, o.idx, o.hosts = append(o.fps, fp), append(o.idx, i), append(o.hosts, host)
	}
	if len(o.fps) == 0 {
		return o
	}
	// Only URLs new here: a known one is lent, if at all, by the lend
	// rounds, whose scan must not find it marked for a moment (it would
	// pass it by until the next epoch).
	refs := make([]frontier.Ref, len(o.fps))
	for i, fp := range o.fps {
		refs[i] = frontier.Ref{FP: fp, Host: o.hosts[i]}
	}
	known, err := c.front.Known(refs)
	if err != nil {
		c.log.Warn("lend back: read the frontier", "error", err)
		return lendOffer{}
	}
	// Marked before they are stored: the scheduler must not pick them
	// between the two.
	c.lends.mu.Lock()
	room := maxLentPerMember - c.lends.out[peer]
	k := 0
	for i, fp := range o.fps {
		if k >= room {
			break
		}
		if _, ok := c.lends.marks[fp]; ok || known[i] {
			continue // known here, lent meanwhile, or twice in this batch
		}
		c.lends.out[peer]++
		c.lends.marks[fp] = lendMark{holder: peer, epoch: st.Epoch, until: until, hold: hold}
		o.fps[k], o.idx[k], o.hosts[k] = fp, o.idx[i], o.hosts[i]
		k++
	}
	c.lends.mu.Unlock()
	o.fps, o.idx, o.hosts = o.fps[:k], o.idx[:k], o.hosts[:k]
	return o
}

// pendingHolder reports whether holder's expired marks hold (lendHolds).
func (l *lending) pendingHolder(holder string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending[holder]
}

// lendTo lends peer, working on phase q in epoch, the IN_LIST URLs of
// that phase not lent already, up to maxLentPerMember outstanding.
func (c *Cluster) lendTo(ctx context.Context, peer string, q int, epoch int64, until time.Time) error {
	hold := until.Add(c.lendSlack())
	c.lends.mu.Lock()
	room := maxLentPerMember - c.lends.out[peer]
	c.lends.mu.Unlock()
	if room <= 0 {
		return nil
	}
	cur := c.lends.cursors[peer]
	if cur.epoch != epoch || cur.phase != q {
		cur = lendCursor{epoch: epoch, phase: q}
	}
	var recs []frontier.Record
	seen := map[uint64]bool{}
	for _, r := range c.lends.takeAgain(q, c.front.Phases(), c.cfg.Unit, min(room, lendScan)) {
		// Given back: the cursor may have passed it.
		rec, ok, err := c.front.Get(r)
		if err != nil {
			return err
		}
		if ok && rec.State == frontier.InList {
			recs = append(recs, rec)
			seen[rec.FP] = true
		}
	}
	more, next, err := c.front.ScanSince(q, cur.at, max(min(room, lendScan)-len(recs), 0))
	if err != nil {
		return err
	}
	for _, r := range more {
		if !seen[r.FP] {
			recs = append(recs, r)
		}
	}
	cur.at = next
	c.lends.cursors[peer] = cur
	var redirects interface{ RedirectsOf(fp uint64) int }
	if c.cfg.Redirects != nil {
		redirects, _ = c.cfg.Redirects.(interface{ RedirectsOf(fp uint64) int })
	}
	var lend []frontier.NewURL
	var fps []uint64
	for _, r := range recs {
		if c.Held(r.FP) {
			continue // lent already, another member's, or its owner is away
		}
		u := frontier.NewURL{URL: r.URL, Host: lendHost(r.Host, epoch, r.Tries, c.cfg.Name), Depth: r.Depth, Run: r.Run}
		if redirects != nil {
			u.Redirects = redirects.RedirectsOf(r.FP)
		}
		lend = append(lend, u)
		fps = append(fps, r.FP)
	}
	if len(lend) == 0 {
		return nil
	}
	// Marked before they are filed: the scheduler must not pick them
	// between the two.
	c.lends.mu.Lock()
	for _, fp := range fps {
		if _, ok := c.lends.marks[fp]; !ok {
			c.lends.out[peer]++
		}
		c.lends.marks[fp] = lendMark{holder: peer, epoch: epoch, until: until, hold: hold}
	}
	c.lends.mu.Unlock()
	if err := c.outbox.put(ctx, peer, KindLend, lend); err != nil {
		c.lends.settle(fps) // not lent after all
		return fmt.Errorf("lend %d URLs to %s: %w", len(lend), peer, err)
	}
	c.x.Flush(peer)
	return nil
}

// lendHost is a lend entry's Host: the URL's host, a newline, the epoch it
// is lent for, the URL's tries so far and the lender's name.
func lendHost(host string, epoch int64, tries int, lender string) string {
	return host + "\n" + strconv.FormatInt(epoch, 10) + " " + strconv.Itoa(tries) + " " + lender
}

// takeLends passes the URLs another member lent this node to the node,
// those lent for the epoch and phase this node works on now; the others,
// and those the node refuses, go back to their owners at once.
func (c *Cluster) takeLends(ctx context.Context, urls []frontier.NewURL) int {
	now := time.Now()
	st := c.sched.At(now)
	open := c.cfg.Guests != nil && !c.joining.Load() && !c.leaving.Load() && st.Phase >= 0 && !st.Held && st.Open
	var gs, back []frontier.Guest
	for _, u := range urls {
		host, rest, ok := strings.Cut(u.Host, "\n")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, " ", 3)
		if len(f) != 3 || f[2] == "" {
			continue
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 64)
		tries, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			continue
		}
		g := frontier.Guest{NewURL: u, Tries: tries, Lender: f[2], Epoch: epoch, Until: st.RequestDeadline}
		g.Host = host
		if !open || epoch != st.Epoch || frontier.PhaseOf(c.cfg.Unit.Hash(host), st.NPhase) != st.Phase {
			back = append(back, g)
			continue
		}
		gs = append(gs, g)
	}
	if len(gs) > 0 {
		back = append(back, c.cfg.Guests.AddGuests(gs)...)
	}
	if len(back) > 0 {
		if err := c.ReturnLent(ctx, back); err != nil {
			c.log.Warn("return lent URLs", "error", err, "urls", len(back))
		}
	}
	return len(gs)
}

// SplitLinks implements node.Lender: the links this node owns, and the others.
func (c *Cluster) SplitLinks(found []frontier.NewURL) (local, foreign []frontier.NewURL) {
	ring := c.ring.Load()
	for _, u := range found {
		if o := ring.Owner(frontier.Fingerprint(u.URL)); o == "" || o == c.cfg.Name {
			local = append(local, u)
		} else {
			foreign = append(foreign, u)
		}
	}
	return local, foreign
}

// ReportLent implements node.Lender: one durable outbox write files the
// links found on a lent page that other members own for them (KindNew),
// the outcome for the URL's owner (KindOutcome), who acknowledges the
// batch once both the links and the outcome are stored, and
// a fetched page's replica for the member ranked second for it; the node
// has made its own links durable before. A link or an outcome this
// node owns now (the members changed) is recorded here.
func (c *Cluster) ReportLent(ctx context.Context, out frontier.LentOutcome, foreign []frontier.NewURL) error {
	ring := c.ring.Load()
	files := map[string][]Entry{}
	var local []frontier.NewURL
	var filed []uint64
	for _, u := range c.unsent(ring, foreign) {
		fp := frontier.Fingerprint(u.URL)
		o := ring.Owner(fp)
		if o == "" || o == c.cfg.Name {
			local = append(local, u)
			continue
		}
		files[o] = append(files[o], Entry{Kind: KindNew, NewURL: u})
		filed = append(filed, fp)
	}
	if len(local) > 0 {
		if _, err := c.front.Add(ctx, local); err != nil {
			return err
		}
	}
	oc := frontier.NewURL{URL: out.URL, Host: outcomeHost(out.Result), Depth: out.Depth}
	owner := c.outcomeTo(out.Lender, out.FP)
	if owner != "" && owner != c.cfg.Name {
		files[owner] = append(files[owner], Entry{Kind: KindOutcome, NewURL: oc})
	}
	// The replica goes from here too, in the same write, to the member
	// ranked second for the URL: should the owner be cut off or fail
	// before its own replica leaves, that member (the URL's owner
	// without it) still knows the page was fetched.
	var keep []frontier.NewURL
	if out.State == frontier.Completed {
		rep := frontier.NewURL{URL: out.URL, Host: out.Host, Depth: out.Depth}
		if c.cfg.Revisit != nil {
			if iv := c.cfg.Revisit(out.Host).Interval; iv > 0 {
				rep.Due = time.Now().Add(iv)
			}
		}
		switch _, second := ring.Top2(out.FP); second {
		case "", owner:
		case c.cfg.Name:
			keep = append(keep, rep)
		default:
			files[second] = append(files[second], Entry{Kind: KindReplica, NewURL: rep})
		}
	}
	if err := c.outbox.putEntries(ctx, files); err != nil {
		return err
	}
	c.markSent(ring, filed)
	if len(keep) > 0 {
		if _, err := c.front.AddReplicas(ctx, keep); err != nil {
			return err
		}
	}
	if owner == "" || owner == c.cfg.Name {
		_, err := c.settleLent(ctx, []frontier.NewURL{oc})
		return err
	}
	return nil
}

// ReturnLent implements node.Lender: the guests this node will not fetch
// go back to their owners (KindOutcome entries in state IN_LIST, naming
// this node and the epoch of the lend), which forget the lend's mark and
// may lend or fetch the URLs at once. They travel behind this node's
// earlier outcomes for the same owners (the outbox is ordered).
func (c *Cluster) ReturnLent(ctx context.Context, gs []frontier.Guest) error {
	urls := make([]frontier.NewURL, len(gs))
	for i, g := range gs {
		r := frontier.Result{Host: g.Host, State: frontier.InList, Reason: c.cfg.Name + " " + strconv.FormatInt(g.Epoch, 10)}
		urls[i] = frontier.NewURL{URL: g.URL, Host: outcomeHost(r), Depth: g.Depth}
	}
	to := make(map[uint64]string, len(gs))
	for _, g := range gs {
		fp := frontier.Fingerprint(g.URL)
		to[fp] = c.outcomeTo(g.Lender, fp)
	}
	local, err := c.fileFor(ctx, KindOutcome, urls, func(fp uint64) string { return to[fp] })
	if err != nil {
		return err
	}
	owners := map[string]bool{}
	for _, o := range to {
		if o != "" && o != c.cfg.Name && !owners[o] {
			owners[o] = true
			c.x.Flush(o) // the next holder may have them at once
		}
	}
	_, err = c.settleLent(ctx, local)
	return err
}

// keepFor reports whether peer, a lender, is alive or away: the outcomes
// of what it lent wait for it, since it keeps their records.
func (c *Cluster) keepFor(peer string) bool {
	if _, ok := (*c.addrs.Load())[peer]; ok {
		return true
	}
	if a := c.away.Load(); a != nil {
		if until, ok := a.until[peer]; ok && time.Now().Before(until) {
			return true
		}
	}
	// A member this process has not heard of yet, in its first
	// takeover_after: after a restart the outbox may hold outcomes for a
	// lender that is on its way back (it restarted too); it keeps their
	// records and would otherwise fetch them again.
	if k := c.known.Load(); (k == nil || !(*k)[peer]) && time.Since(c.started) < c.cfg.TakeoverAfter {
		return true
	}
	return false
}

// outcomeTo is the member an outcome for the URL fp lent by lender goes
// to: the lender, which keeps the record, while it is alive or away; its
// owner otherwise (outcomeOwner).
func (c *Cluster) outcomeTo(lender string, fp uint64) string {
	if lender != "" && lender != c.cfg.Name && (*c.peersLeaving.Load())[lender] {
		// A lender handing off refuses batches; the record goes to the
		// URL's owner among the members that stay, and so does the outcome
		// (kept there if it comes first, with the lend's mark if later).
		return c.stayOwner(fp)
	}
	if lender != "" && (lender == c.cfg.Name || c.keepFor(lender)) {
		return lender
	}
	return c.outcomeOwner(fp)
}

// outcomeOwner is the member an outcome for the URL fp goes to: its
// owner, counting the members away (declared dead less than
// takeover_after ago). The records of an away member's share are in its
// frontier, not at the member that owns them while it is away: its
// outcomes wait for it (in the outbox) like its share's URLs wait for it
// (Held); after takeover_after they go to the current owner.
func (c *Cluster) outcomeOwner(fp uint64) string {
	if a := c.away.Load(); a != nil {
		if o := a.ring.Owner(fp); o != "" {
			if until, ok := a.until[o]; ok && time.Now().Before(until) {
				return o
			}
		}
	}
	return c.ring.Load().Owner(fp)
}

// stayOwner is the owner of fp among the members that are not handing
// off (outcomeOwner while none is).
func (c *Cluster) stayOwner(fp uint64) string {
	if r := c.stayRing.Load(); r != nil {
		return r.Owner(fp)
	}
	return c.outcomeOwner(fp)
}

// outcomeHost is an outcome entry's Host: the URL's host, a newline, then
// the state, HTTP status, retry time (Unix ms), body bytes and delay (ms)
// separated by spaces, and the reason. A fetched page's state for
// recurring crawls follows on lines of its own (outcomePage), so that the
// owner records it as it records its own fetches: its validators and
// digest, and whether it changed.
func outcomeHost(r frontier.Result) string {
	var retry int64
	if !r.RetryAt.IsZero() {
		retry = r.RetryAt.UnixMilli()
	}
	h := fmt.Sprintf("%s\n%d %d %d %d %d %s", r.Host, r.State, r.Status, retry, r.Bytes, r.Delay.Milliseconds(), r.Reason)
	if r.Page == nil && r.Change == frontier.ChangeUnknown {
		return h
	}
	var p frontier.PageState
	if r.Page != nil {
		p = *r.Page
	}
	var archived int64
	if !p.Archived.IsZero() {
		archived = p.Archived.UnixMilli()
	}
	h += fmt.Sprintf("\n%d %x %d", r.Change, p.Digest, archived)
	// The validators, when they fit (a header value holds no line break).
	if v := "\n" + oneLine(p.ETag) + "\n" + oneLine(p.LastModified); len(h)+len(v) <= MaxEntryHost {
		h += v
	}
	return h
}

// oneLine is s without line breaks.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", "", "\n", "").Replace(s)
}

// parseOutcome reads an outcome entry back.
func parseOutcome(u frontier.NewURL) (frontier.Result, bool) {
	host, rest, ok := strings.Cut(u.Host, "\n")
	if !ok {
		return frontier.Result{}, false
	}
	rest, page, hasPage := strings.Cut(rest, "\n")
	f := strings.SplitN(rest, " ", 6)
	if len(f) != 6 {
		return frontier.Result{}, false
	}
	var n [5]int64
	for i := range n {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return frontier.Result{}, false
		}
		n[i] = v
	}
	r := frontier.Result{FP: frontier.Fingerprint(u.URL), Host: host, State: frontier.State(n[0]), Status: int(n[1]),
		Bytes: n[3], Delay: time.Duration(n[4]) * time.Millisecond, Reason: f[5]}
	if r.State != frontier.Completed && r.State != frontier.Stalled && r.State != frontier.InList {
		return frontier.Result{}, false
	}
	if n[2] != 0 {
		r.RetryAt = time.UnixMilli(n[2])
	}
	if hasPage && !parsePage(page, &r) {
		return frontier.Result{}, false
	}
	return r, true
}

// parsePage reads an outcome's page lines (outcomeHost) into r.
func parsePage(s string, r *frontier.Result) bool {
	lines := strings.SplitN(s, "\n", 3)
	f := strings.Fields(lines[0])
	if len(f) != 3 || len(f[1]) != 40 {
		return false
	}
	change, err1 := strconv.ParseUint(f[0], 10, 8)
	archived, err2 := strconv.ParseInt(f[2], 10, 64)
	digest, err3 := hex.DecodeString(f[1])
	if err1 != nil || err2 != nil || err3 != nil || change > uint64(frontier.Unchanged) {
		return false
	}
	p := &frontier.PageState{}
	copy(p.Digest[:], digest)
	if archived != 0 {
		p.Archived = time.UnixMilli(archived)
	}
	if len(lines) == 3 {
		p.ETag, p.LastModified = lines[1], lines[2]
	}
	r.Change, r.Page = frontier.Change(change), p
	return true
}

// settleLent records the outcomes of URLs this node lent (KindOutcome
// entries that reached it), forgets their marks and replicates the
// completed ones. An outcome whose record is not here in a state it can
// settle (the record moved to a new owner, or was never here: the sender's
// view was behind) goes on to the URL's owner, at most maxOutcomeHops
// times.
func (c *Cluster) settleLent(ctx context.Context, urls []frontier.NewURL) (int, error) {
	if len(urls) == 0 {
		return 0, nil
	}
	rs := make([]frontier.Result, 0, len(urls))
	us := make([]frontier.NewURL, 0, len(urls))
	for _, u := range urls {
		r, ok := parseOutcome(u)
		if !ok {
			c.log.Warn("dropped a malformed lent outcome", "host_len", len(u.Host))
			continue
		}
		if r.State == frontier.InList { // returned unfetched (ReturnLent)
			holder, es, _ := strings.Cut(r.Reason, " ")
			if epoch, err := strconv.ParseInt(es, 10, 64); err == nil {
				c.lends.returned(frontier.Ref{FP: r.FP, Host: r.Host}, holder, epoch)
			}
			continue
		}
		rs = append(rs, r)
		us = append(us, u)
	}
	if len(rs) == 0 {
		// Returned: lend them to the next holder, or fetch them here.
		if c.cfg.Lend {
			signal(c.lendKick)
		}
		if c.cfg.Wake != nil {
			c.cfg.Wake()
		}
		return 0, nil
	}
	if c.cfg.Revisit != nil {
		// Due again as after this node's own fetch: its schedule for the
		// host (a STALLED result whose tries are used up completes too).
		for i := range rs {
			rs[i].Revisit = c.cfg.Revisit(rs[i].Host)
		}
	}
	settled, err := c.front.SettleLent(ctx, rs)
	if err != nil {
		return 0, err
	}
	fps := make([]uint64, 0, len(rs))
	var done []frontier.NewURL
	fwd := map[string][]Entry{}
	var early, fetched []frontier.NewURL
	n := 0
	for i, r := range rs {
		fps = append(fps, r.FP)
		if settled[i] {
			n++
			if r.State == frontier.Completed {
				// The replica's copy of the due time the frontier set (from
				// the base interval), as for a page fetched here.
				var due time.Time
				if r.Revisit.Interval > 0 {
					due = time.Now().Add(r.Revisit.Interval)
				}
				done = append(done, frontier.NewURL{URL: us[i].URL, Host: r.Host, Depth: us[i].Depth, Due: due})
			}
			continue
		}
		switch o := c.stayOwner(r.FP); {
		case (o == "" || o == c.cfg.Name) && r.State == frontier.Completed:
			// This node owns it and has no record it could settle: the
			// record is on its way here (moved), or with a member that
			// is away or cut off (this node crawls its share now), or
			// was fetched here again meanwhile. The page was fetched:
			// its fingerprint is kept as a completed record, so that
			// neither the record when it comes nor the URL discovered
			// again is fetched, and a member that owns the URL later
			// gets it with this node's records (rebalance).
			var due time.Time
			if r.Revisit.Interval > 0 {
				due = time.Now().Add(r.Revisit.Interval)
			}
			fetched = append(fetched, frontier.NewURL{URL: us[i].URL, Host: r.Host, Depth: us[i].Depth, Due: due})
		case o == "" || o == c.cfg.Name:
			// Not fetched (a retry later): kept until the record comes.
			early = append(early, us[i])
		case us[i].Redirects < maxOutcomeHops:
			u := us[i]
			u.Redirects++
			fwd[o] = append(fwd[o], Entry{Kind: KindOutcome, NewURL: u})
		}
	}
	c.lends.settle(fps)
	if len(fetched) > 0 {
		k, err := c.front.AddDone(ctx, fetched)
		if err != nil {
			return n, err
		}
		n += k
		done = append(done, fetched...)
	}
	if len(early) > 0 && !c.leaving.Load() {
		c.lends.keepEarly(early, time.Now())
	}
	if len(fwd) > 0 {
		if err := c.outbox.putEntries(ctx, fwd); err != nil {
			return n, err
		}
	}
	c.replicateLent(ctx, done)
	if c.cfg.Wake != nil {
		c.cfg.Wake() // a stalled one may be due, and the scan's window moved
	}
	return n, nil
}

// lentReplicas queues the replicas of the lent pages this node settled
// (replicateLent) for replicateLoop.
type lentReplicas struct {
	mu      sync.Mutex
	q       chan []frontier.NewURL // nil: not started
	stopped chan struct{}          // closed by stop
	done    bool                   // stopped: put refuses
}

// maxQueuedReplicas bounds the settled batches waiting for replicateLoop.
const maxQueuedReplicas = 256

func (r *lentReplicas) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.q, r.stopped = make(chan []frontier.NewURL, maxQueuedReplicas), make(chan struct{})
}

// put queues done; false when it is not running or its queue is full.
func (r *lentReplicas) put(done []frontier.NewURL) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.q == nil || r.done {
		return false
	}
	select {
	case r.q <- done:
		return true
	default:
		return false
	}
}

// stop ends the queue: put refuses from now on, and replicateLoop files
// what is queued and returns.
func (r *lentReplicas) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped != nil && !r.done {
		r.done = true
		close(r.stopped)
	}
}

// replicateLent files the replicas of the lent pages done, settled here,
// for the member ranked second (Replicate). It does so off the path that
// settled them, when it can: an outcome's batch is acknowledged once
// stored, its sender waits for that ack, and the replica is an outbox
// write of its own after the frontier's. A replica filed a moment later
// is lost only if this node fails in that moment, as is that of a page
// fetched here (the page is then fetched again should this node never
// come back). With replicateLoop not running, or behind, it files them
// at once.
func (c *Cluster) replicateLent(ctx context.Context, done []frontier.NewURL) {
	if len(done) == 0 || c.repl.put(done) {
		return
	}
	if err := c.Replicate(ctx, done); err != nil {
		c.log.Warn("replicate lent pages", "error", err, "urls", len(done))
	}
}

// replicateLoop files the queued replicas of lent pages, those queued
// meanwhile together, until the queue is stopped and empty.
func (c *Cluster) replicateLoop() {
	c.repl.mu.Lock()
	q, stopped := c.repl.q, c.repl.stopped
	c.repl.mu.Unlock()
	file := func(done []frontier.NewURL) {
		for len(done) < 4096 {
			select {
			case more := <-q:
				done = append(slices.Clip(done), more...)
				continue
			default:
			}
			break
		}
		if err := c.Replicate(context.Background(), done); err != nil {
			c.log.Warn("replicate lent pages", "error", err, "urls", len(done))
		}
	}
	for {
		select {
		case done := <-q:
			file(done)
		case <-stopped:
			for {
				select {
				case done := <-q:
					file(done)
				default:
					return
				}
			}
		}
	}
}

// maxOutcomeHops bounds how often an outcome is passed on (its entry's
// Redirects counts the hops), should members' views disagree for a while.
const maxOutcomeHops = 3
