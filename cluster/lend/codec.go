package lend

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/ring"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// EntryHost is a lend entry's Host: the URL's host, a newline, the slot it
// is lent for, the URL's tries so far and the lender's name.
func EntryHost(host string, slot int64, tries int, lender string) string {
	return host + "\n" + strconv.FormatInt(slot, 10) + " " + strconv.Itoa(tries) + " " + lender
}

// ParseEntry reads a lend entry back into the guest it is (EntryHost),
// with the URL's plain host.
func ParseEntry(u frontier.NewURL) (frontier.Guest, bool) {
	host, rest, ok := strings.Cut(u.Host, "\n")
	if !ok {
		return frontier.Guest{}, false
	}
	f := strings.SplitN(rest, " ", 3)
	if len(f) != 3 || f[2] == "" {
		return frontier.Guest{}, false
	}
	slot, err1 := strconv.ParseInt(f[0], 10, 64)
	tries, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return frontier.Guest{}, false
	}
	g := frontier.Guest{NewURL: u, Tries: tries, Lender: f[2], Slot: slot}
	g.Host = host
	return g, true
}

// ReplicaTarget returns the member that keeps the replica of a lent URL
// fp whose outcome goes to owner: of the two members r ranks first for it,
// the one that is not owner. The holder files the replica with the
// outcome, and the owner files none for a record it settles, so this is
// the member the owner would choose itself: the one ranked second, or,
// when owner is ranked second (it crawls the share of the member ranked
// first, which is away), the one ranked first, so that the page is known
// there when that member comes back. When owner is not in r (a member
// away: declared dead less than takeover_after ago, its outcomes wait for
// it in the outbox), the member r ranks first, the one that crawls
// owner's share once it is taken over: ranked second in r, the replica
// would go to a member that does not own the URL without owner, and the
// one that does would fetch the page again at the takeover, before the
// outcome reached it. "" for none.
func ReplicaTarget(r *ring.Ring, owner string, fp uint64) string {
	first, second := r.Top2(fp)
	if owner != "" && (!r.Has(owner) || second == owner) {
		return first
	}
	return second
}

// ReturnReason is the Reason of an outcome that gives a guest back
// unfetched (state IN_LIST): the holder and the slot of the lend.
func ReturnReason(holder string, slot int64) string {
	return holder + " " + strconv.FormatInt(slot, 10)
}

// ParseReturn reads a ReturnReason back.
func ParseReturn(reason string) (holder string, slot int64, ok bool) {
	holder, es, _ := strings.Cut(reason, " ")
	slot, err := strconv.ParseInt(es, 10, 64)
	return holder, slot, err == nil
}

// OutcomeHost is an outcome entry's Host: the URL's host, a newline, then
// the state, HTTP status, retry time (Unix ms), body bytes and delay (ms)
// separated by spaces, and the reason. A fetched page's state for
// recurring crawls follows on lines of its own (outcomePage), so that the
// owner records it as it records its own fetches: its validators and
// digest, and whether it changed.
func OutcomeHost(r frontier.Result) string {
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
	if v := "\n" + oneLine(p.ETag) + "\n" + oneLine(p.LastModified); len(h)+len(v) <= exchange.MaxEntryHost {
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

// ParseOutcome reads an outcome entry back.
func ParseOutcome(u frontier.NewURL) (frontier.Result, bool) {
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

// parsePage reads an outcome's page lines (OutcomeHost) into r.
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
