// Package bucket implements KSpider's scheduler Bucket (§3.4, Figures 7–8):
// a Columns × Rows array of Elements. An Element holds one host and a list of
// that host's URLs and cycles through FREE -> QUEUING -> FETCHING -> TIMEWAIT
// -> FREE. A host's column is hostHash % Columns and a host owns at most one
// non-FREE Element, which is what keeps one connection per host.
//
// The Bucket is a pure, clock-driven data structure: every operation takes
// the current time, nothing runs in the background, and it is not safe for
// concurrent use (one scheduler goroutine owns it). Add costs O(Rows);
// Dispatch, Release and Finish cost O(log n) per element they move, and
// Want, Refill, NextEvent and Counts are O(1), so the scheduler may call
// them every few milliseconds.
//
// Outside the paper, a FETCHING element may take more URLs of its host
// while its trip runs (Want, then Refill): the trip goes on over the same
// connection instead of ending, waiting out TIMEWAIT and being dispatched
// again, which is what a host with a large backlog needs at a small delay.
package bucket

import (
	"errors"
	"fmt"
	"time"
)

// State is an Element's state (paper Fig. 8).
type State uint8

// The Element states. The only transitions are FREE -> QUEUING (Add places a
// host), QUEUING -> FETCHING (Dispatch), FETCHING -> TIMEWAIT (Finish),
// TIMEWAIT -> FREE (Release) and, outside the paper's cycle, QUEUING -> FREE
// (Drain, at a phase swap or shutdown).
const (
	Free State = iota
	Queuing
	Fetching
	TimeWait
)

// String returns "free", "queuing", "fetching" or "timewait" (metric labels).
func (s State) String() string {
	switch s {
	case Free:
		return "free"
	case Queuing:
		return "queuing"
	case Fetching:
		return "fetching"
	case TimeWait:
		return "timewait"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Item is one URL held in an Element's list.
type Item struct {
	FP    uint64 // frontier fingerprint of URL
	URL   string // normalized URL
	Depth int
	Run   int // frontier.Record.Run: the steps on the way it was found
	Tries int
	// Due is, for a revisit (recurring crawls), when the URL was due
	// again; zero for a first visit.
	Due time.Time
	// Guest: the URL is another member's, lent to this node for the
	// host's phase (frontier.Guest); its outcome goes back to the owner.
	Guest bool
}

// Outcome is the result of Add.
type Outcome int

// The outcomes of Add.
const (
	// Rejected: the URL was not taken (its column has no FREE row, or its
	// host's element is FETCHING, TIMEWAIT or a full QUEUING list). It stays
	// IN_LIST in the frontier for a later scan.
	Rejected Outcome = iota
	// Joined: the URL joined its host's QUEUING element.
	Joined
	// Placed: the host had no element; the URL took a FREE row, now QUEUING.
	Placed
)

// String returns "rejected", "joined" or "placed".
func (o Outcome) String() string {
	switch o {
	case Rejected:
		return "rejected"
	case Joined:
		return "joined"
	case Placed:
		return "placed"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// ElementID names a dispatched Element. Gen is unique per dispatch, so a
// Finish carrying the ID of an earlier dispatch of the same slot is caught.
type ElementID struct {
	Col, Row int
	Gen      uint64
}

// String formats the ID as "col/row#gen".
func (id ElementID) String() string { return fmt.Sprintf("%d/%d#%d", id.Col, id.Row, id.Gen) }

// Batch is a dispatched Element: one host and its URLs, to be fetched
// sequentially over one connection, then handed back with Finish(ID, ...).
// The Items slice belongs to the receiver; the Bucket never touches it again.
type Batch struct {
	ID    ElementID
	Host  string
	Items []Item
}

// Counts is the number of Elements in each state; they sum to Columns×Rows.
type Counts struct {
	Free, Queuing, Fetching, TimeWait int
}

// Errors returned (wrapped) by Finish.
var (
	// ErrBadID: the ID's Col/Row lie outside the Bucket.
	ErrBadID = errors.New("element id out of range")
	// ErrNotFetching: the Element is not FETCHING (Finish on FREE, QUEUING or
	// TIMEWAIT, e.g. a double Finish).
	ErrNotFetching = errors.New("element is not fetching")
	// ErrStale: the Element is FETCHING for a later dispatch than the ID's.
	ErrStale = errors.New("stale element id")
	// ErrRefillHeld: the Element holds a refill not taken yet (Refill).
	ErrRefillHeld = errors.New("element holds a refill")
)

// ElementView is a read-only copy of a non-FREE Element, for tests and status.
type ElementView struct {
	ID       ElementID // Gen is the last dispatch's (0 if never dispatched)
	Host     string
	HostHash uint64
	State    State
	Len      int // URLs in the list (FETCHING: in the refill not taken yet, see Want)
	// At is the Element's next event: for QUEUING, the queue deadline, or the
	// time the list became full (it is then due at once); for TIMEWAIT, when
	// it may be released. Zero for FETCHING.
	At time.Time
}

const noPos = -1

type element struct {
	host  string
	hash  uint64
	items []Item    // QUEUING: the list; FETCHING: the refill joined so far (Want)
	at    time.Time // see ElementView.At
	gen   uint64
	want  int   // FETCHING: how many URLs its running trip asked for (Want); 0: none
	pos   int32 // index in b.queue or b.wait, noPos when in neither
	state State
	ready bool // QUEUING and full: in b.ready, not in b.queue
}

// Bucket is the scheduler's buffer of per-host URL lists. Create it with New.
type Bucket struct {
	cfg    Config
	cols   uint64
	el     []element // index col*Rows + row
	queue  heap      // QUEUING, not full, by deadline
	wait   heap      // TIMEWAIT, by expiry
	ready  []int32   // QUEUING and full, in the order they filled up
	counts Counts
	gen    uint64 // last Gen handed out
}

// New returns an empty Bucket (every Element FREE), or cfg's validation error.
func New(cfg Config) (*Bucket, error) {
	if cfg.Phases == 0 {
		cfg.Phases = 1
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := cfg.Columns * cfg.Rows
	b := &Bucket{cfg: cfg, cols: uint64(cfg.Columns), el: make([]element, n)}
	for i := range b.el {
		b.el[i].pos = noPos
	}
	b.queue.el, b.wait.el = b.el, b.el
	b.counts.Free = n
	return b, nil
}

// Config returns the Bucket's configuration.
func (b *Bucket) Config() Config { return b.cfg }

// Column returns the column of a host hash: hostHash % Columns.
func (b *Bucket) Column(hostHash uint64) int { return int(hostHash % b.cols) }

func (b *Bucket) id(i int32) ElementID {
	return ElementID{Col: int(i) / b.cfg.Rows, Row: int(i) % b.cfg.Rows, Gen: b.el[i].gen}
}

func (b *Bucket) setState(e *element, s State) {
	b.count(e.state, -1)
	b.count(s, +1)
	e.state = s
}

func (b *Bucket) count(s State, d int) {
	switch s {
	case Free:
		b.counts.Free += d
	case Queuing:
		b.counts.Queuing += d
	case Fetching:
		b.counts.Fetching += d
	case TimeWait:
		b.counts.TimeWait += d
	}
}

// Add offers one URL of host (hostHash must be the host's hash; the caller
// uses the same function for every call). The URL joins the host's QUEUING
// element if it has room, or the refill its FETCHING element asked for
// (Want) while that has room; if the host has no element it takes a FREE row of
// its column (QUEUING, due at now+MaxQueueWait); otherwise it is Rejected. An
// element whose list becomes full is due at once. O(Rows).
func (b *Bucket) Add(now time.Time, host string, hostHash uint64, it Item) Outcome {
	rows := b.cfg.Rows
	base := b.Column(hostHash) * rows
	free := -1
	for r := range rows {
		i := base + r
		e := &b.el[i]
		if e.state == Free {
			if free < 0 {
				free = i
			}
			continue
		}
		if e.hash != hostHash || e.host != host {
			continue
		}
		// The host's element: only a QUEUING list with room, or the
		// refill its running trip asked for (Want), takes more.
		if e.state == Fetching && len(e.items) < e.want {
			e.items = append(e.items, it)
			return Joined
		}
		if e.state != Queuing || e.ready {
			return Rejected
		}
		e.items = append(e.items, it)
		if len(e.items) >= b.cfg.ListCap {
			b.queue.remove(int32(i))
			b.markReady(int32(i), now)
		}
		return Joined
	}
	if free < 0 {
		return Rejected
	}
	e := &b.el[free]
	e.host, e.hash = host, hostHash
	e.items = make([]Item, 1, min(b.cfg.ListCap, 32))
	e.items[0] = it
	b.setState(e, Queuing)
	if b.cfg.ListCap == 1 {
		b.markReady(int32(free), now)
	} else {
		e.at = now.Add(b.cfg.MaxQueueWait)
		b.queue.push(int32(free))
	}
	return Placed
}

// Accepts reports whether Add would take a URL of host now (it joins the
// host's QUEUING element with room, or the host has no element and its
// column a FREE row). It changes nothing; the scheduler uses it to skip
// frontier records without decoding them. O(Rows).
func (b *Bucket) Accepts(host string, hostHash uint64) bool {
	rows := b.cfg.Rows
	base := b.Column(hostHash) * rows
	free := false
	for r := range rows {
		e := &b.el[base+r]
		if e.state == Free {
			free = true
			continue
		}
		if e.hash == hostHash && e.host == host {
			return e.state == Queuing && !e.ready || e.state == Fetching && len(e.items) < e.want
		}
	}
	return free
}

// Room is how many URLs of host Add would take now, one after another:
// the room left in its QUEUING element (up to ListCap) or in the refill
// its running trip asked for (Want), or ListCap for a host without an
// element whose column has a FREE row; 0 otherwise. It changes nothing.
// O(Rows).
func (b *Bucket) Room(host string, hostHash uint64) int {
	rows := b.cfg.Rows
	base := b.Column(hostHash) * rows
	free := false
	for r := range rows {
		e := &b.el[base+r]
		if e.state == Free {
			free = true
			continue
		}
		if e.hash == hostHash && e.host == host {
			switch {
			case e.state == Queuing && !e.ready:
				return max(b.cfg.ListCap-len(e.items), 0)
			case e.state == Fetching:
				return max(e.want-len(e.items), 0)
			}
			return 0
		}
	}
	if free {
		return b.cfg.ListCap
	}
	return 0
}

func (b *Bucket) markReady(i int32, now time.Time) {
	e := &b.el[i]
	e.ready, e.at = true, now
	b.ready = append(b.ready, i)
}

// Dispatch moves every due QUEUING element to FETCHING and returns them: full
// elements first (in the order they filled), then those whose queue deadline
// is <= now (oldest first). Each Batch carries a fresh ElementID.Gen.
func (b *Bucket) Dispatch(now time.Time) []Batch {
	var out []Batch
	for _, i := range b.ready {
		out = append(out, b.fetch(i))
	}
	b.ready = b.ready[:0]
	for b.queue.len() > 0 && !now.Before(b.el[b.queue.top()].at) {
		out = append(out, b.fetch(b.queue.pop()))
	}
	return out
}

// Flush is Dispatch with every QUEUING element due, whatever its queue
// deadline: full elements first, then the others, oldest deadline first.
// The scheduler calls it when a pass over the frontier's window found no
// more URLs, so a partial list would only wait for nothing (max-queue-wait
// stays the bound while scans still fill elements).
func (b *Bucket) Flush(now time.Time) []Batch {
	out := b.Dispatch(now)
	for b.queue.len() > 0 {
		out = append(out, b.fetch(b.queue.pop()))
	}
	return out
}

// DispatchHost moves host's QUEUING element to FETCHING now, whatever its
// queue deadline or fill, and returns it (ok false, nothing changed, when the
// host has no QUEUING element). The scheduler uses it for hosts whose trips
// are long (see node/scheduler.go), so their next trip does not wait behind
// shorter ones. O(Rows) plus the element's removal from the queue.
func (b *Bucket) DispatchHost(host string, hostHash uint64) (Batch, bool) {
	base := b.Column(hostHash) * b.cfg.Rows
	for r := range b.cfg.Rows {
		i := int32(base + r)
		e := &b.el[i]
		if e.state != Queuing || e.hash != hostHash || e.host != host {
			continue
		}
		if e.ready {
			for k, j := range b.ready {
				if j == i {
					b.ready = append(b.ready[:k], b.ready[k+1:]...)
					break
				}
			}
		} else {
			b.queue.remove(i)
		}
		return b.fetch(i), true
	}
	return Batch{}, false
}

func (b *Bucket) fetch(i int32) Batch {
	e := &b.el[i]
	b.gen++
	e.gen = b.gen
	batch := Batch{ID: b.id(i), Host: e.host, Items: e.items}
	e.items, e.ready, e.at, e.want = nil, false, time.Time{}, 0
	b.setState(e, Fetching)
	return batch
}

// Finish reports that the Batch with this id has been fetched: its element
// goes FETCHING -> TIMEWAIT until now+wait (a wait <= 0 still passes through
// TIMEWAIT and is freed by the next Release). It returns an error wrapping
// ErrBadID, ErrNotFetching or ErrStale, and changes nothing, when the
// transition is illegal.
func (b *Bucket) Finish(id ElementID, now time.Time, wait time.Duration) error {
	if id.Col < 0 || id.Col >= b.cfg.Columns || id.Row < 0 || id.Row >= b.cfg.Rows {
		return fmt.Errorf("bucket: finish %v: %w (%d columns × %d rows)", id, ErrBadID, b.cfg.Columns, b.cfg.Rows)
	}
	i := int32(id.Col*b.cfg.Rows + id.Row)
	e := &b.el[i]
	if e.state != Fetching {
		return fmt.Errorf("bucket: finish %v: %w (state %v)", id, ErrNotFetching, e.state)
	}
	if e.gen != id.Gen {
		return fmt.Errorf("bucket: finish %v: %w (element is at gen %d)", id, ErrStale, e.gen)
	}
	if len(e.items) > 0 {
		return fmt.Errorf("bucket: finish %v: %w (%d URLs)", id, ErrRefillHeld, len(e.items))
	}
	e.want = 0
	e.at = now.Add(max(wait, 0))
	b.setState(e, TimeWait)
	b.wait.push(i)
	return nil
}

// Release frees every TIMEWAIT element whose wait has expired (until <= now):
// its list is cleared and its host forgotten. It returns how many it freed.
func (b *Bucket) Release(now time.Time) int {
	n := 0
	for b.wait.len() > 0 && !now.Before(b.el[b.wait.top()].at) {
		b.free(b.wait.pop())
		n++
	}
	return n
}

func (b *Bucket) free(i int32) {
	e := &b.el[i]
	b.setState(e, Free)
	e.host, e.hash, e.items, e.at, e.ready, e.pos, e.want = "", 0, nil, time.Time{}, false, noPos, 0
}

// fetching returns the index of the FETCHING element of id, or an error
// wrapping ErrBadID, ErrNotFetching or ErrStale (call names the caller).
func (b *Bucket) fetching(call string, id ElementID) (int32, error) {
	if id.Col < 0 || id.Col >= b.cfg.Columns || id.Row < 0 || id.Row >= b.cfg.Rows {
		return 0, fmt.Errorf("bucket: %s %v: %w (%d columns × %d rows)", call, id, ErrBadID, b.cfg.Columns, b.cfg.Rows)
	}
	i := int32(id.Col*b.cfg.Rows + id.Row)
	e := &b.el[i]
	if e.state != Fetching {
		return 0, fmt.Errorf("bucket: %s %v: %w (state %v)", call, id, ErrNotFetching, e.state)
	}
	if e.gen != id.Gen {
		return 0, fmt.Errorf("bucket: %s %v: %w (element is at gen %d)", call, id, ErrStale, e.gen)
	}
	return i, nil
}

// Want lets the FETCHING element of id take up to room more URLs of its
// host while its trip runs (a refill): Add joins them to it as to a
// QUEUING list, and Refill hands them over. It replaces the room of an
// earlier Want; the URLs joined since stay. The host keeps its one
// element (one connection): its trip goes on with them instead of ending,
// waiting out TIMEWAIT and being dispatched again. O(1).
func (b *Bucket) Want(id ElementID, room int) error {
	i, err := b.fetching("want", id)
	if err != nil {
		return err
	}
	e := &b.el[i]
	e.want = len(e.items) + max(room, 0)
	return nil
}

// Refill returns the URLs joined to the FETCHING element of id since its
// Want, which they leave, and ends the Want (the element takes no more
// until the next one). O(1).
func (b *Bucket) Refill(id ElementID) ([]Item, error) {
	i, err := b.fetching("refill", id)
	if err != nil {
		return nil, err
	}
	e := &b.el[i]
	items := e.items
	e.items, e.want = nil, 0
	return items, nil
}

// Drain frees every QUEUING element and returns their hosts and URLs (a
// Batch each, with a zero ID: the element is FREE now), which the caller
// puts back IN_LIST (phase swap, shutdown, failed bookkeeping). FETCHING
// elements stay FETCHING: the refills they hold are returned too (with
// the element's ID) and their Wants end. TIMEWAIT elements are untouched.
// Returns nil when nothing was queued.
func (b *Bucket) Drain() []Batch {
	var out []Batch
	for i := range b.el {
		if e := &b.el[i]; e.state == Fetching && (len(e.items) > 0 || e.want > 0) {
			if len(e.items) > 0 {
				out = append(out, Batch{ID: b.id(int32(i)), Host: e.host, Items: e.items})
			}
			e.items, e.want = nil, 0
		}
	}
	for _, i := range b.ready {
		out = append(out, Batch{Host: b.el[i].host, Items: b.el[i].items})
		b.free(i)
	}
	b.ready = b.ready[:0]
	for _, i := range b.queue.ids {
		out = append(out, Batch{Host: b.el[i].host, Items: b.el[i].items})
		b.free(i)
	}
	b.queue.ids = b.queue.ids[:0]
	return out
}

// NextEvent returns the earliest time at which Dispatch or Release has work:
// when a full element became due (a time <= the last Add's now), the earliest
// queue deadline, or the earliest TIMEWAIT expiry. ok is false when nothing
// is QUEUING or TIMEWAIT. O(1).
func (b *Bucket) NextEvent() (t time.Time, ok bool) {
	consider := func(c time.Time) {
		if !ok || c.Before(t) {
			t, ok = c, true
		}
	}
	if len(b.ready) > 0 {
		consider(b.el[b.ready[0]].at)
	}
	if b.queue.len() > 0 {
		consider(b.el[b.queue.top()].at)
	}
	if b.wait.len() > 0 {
		consider(b.el[b.wait.top()].at)
	}
	return t, ok
}

// Counts returns how many elements are in each state. O(1).
func (b *Bucket) Counts() Counts { return b.counts }

// Lookup returns the host's non-FREE element, if any. O(Rows).
func (b *Bucket) Lookup(host string, hostHash uint64) (ElementView, bool) {
	base := b.Column(hostHash) * b.cfg.Rows
	for r := range b.cfg.Rows {
		e := &b.el[base+r]
		if e.state != Free && e.hash == hostHash && e.host == host {
			return b.view(int32(base + r)), true
		}
	}
	return ElementView{}, false
}

// Elements returns a snapshot of every non-FREE element in (column, row)
// order. It scans the whole Bucket: for tests and status pages, not for the
// scheduler's hot path.
func (b *Bucket) Elements() []ElementView {
	var out []ElementView
	for i := range b.el {
		if b.el[i].state != Free {
			out = append(out, b.view(int32(i)))
		}
	}
	return out
}

func (b *Bucket) view(i int32) ElementView {
	e := &b.el[i]
	return ElementView{ID: b.id(i), Host: e.host, HostHash: e.hash, State: e.state, Len: len(e.items), At: e.at}
}

// heap is a binary min-heap of element indices ordered by element.at (ties
// by index, so the order is deterministic); element.pos tracks positions.
type heap struct {
	el  []element
	ids []int32
}

func (h *heap) len() int   { return len(h.ids) }
func (h *heap) top() int32 { return h.ids[0] }
func (h *heap) less(a, b int) bool {
	ea, eb := &h.el[h.ids[a]], &h.el[h.ids[b]]
	if ea.at.Equal(eb.at) {
		return h.ids[a] < h.ids[b]
	}
	return ea.at.Before(eb.at)
}

func (h *heap) swap(a, b int) {
	h.ids[a], h.ids[b] = h.ids[b], h.ids[a]
	h.el[h.ids[a]].pos = int32(a)
	h.el[h.ids[b]].pos = int32(b)
}

func (h *heap) push(i int32) {
	h.ids = append(h.ids, i)
	h.el[i].pos = int32(len(h.ids) - 1)
	h.up(len(h.ids) - 1)
}

func (h *heap) pop() int32 {
	i := h.ids[0]
	h.remove(i)
	return i
}

func (h *heap) remove(i int32) {
	p := int(h.el[i].pos)
	last := len(h.ids) - 1
	if p != last {
		h.swap(p, last)
	}
	h.ids = h.ids[:last]
	h.el[i].pos = noPos
	if p != last {
		if !h.down(p) {
			h.up(p)
		}
	}
}

func (h *heap) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !h.less(j, p) {
			return
		}
		h.swap(j, p)
		j = p
	}
}

// down sifts j down and reports whether it moved.
func (h *heap) down(j int) bool {
	start, n := j, len(h.ids)
	for {
		c := 2*j + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h.less(r, c) {
			c = r
		}
		if !h.less(c, j) {
			break
		}
		h.swap(j, c)
		j = c
	}
	return j > start
}
