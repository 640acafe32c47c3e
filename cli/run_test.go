package cli

import (
	"errors"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/node"
)

// TestDoneView: the crawl is done when every live member is done with an
// empty outbox and something was crawled; the grace is the members'
// largest; anything that moves changes the fingerprint.
func TestDoneView(t *testing.T) {
	st := func(name string, done bool, completed int64) node.Status {
		s := node.Status{Node: name, Done: done, PagesFetched: completed}
		s.Frontier.Completed = completed
		return s
	}
	members := []node.MemberStatus{
		{Name: "a", API: "a:1", State: "alive"},
		{Name: "b", API: "b:1", State: "alive"},
		{Name: "c", API: "c:1", State: "left"},
	}
	for _, tc := range []struct {
		name   string
		self   func() node.Status
		others map[string]node.Status
		fail   bool
		ok     bool
		grace  time.Duration
	}{
		{name: "alone, done", self: func() node.Status { return st("a", true, 10) }, ok: true},
		{name: "alone, not done", self: func() node.Status { return st("a", false, 10) }},
		{name: "alone, nothing crawled", self: func() node.Status { return st("a", true, 0) }},
		{name: "alone, budget spent", self: func() node.Status {
			s := st("a", false, 10)
			s.Frontier.InList, s.Budget.Reached = 5, "max_pages"
			return s
		}, ok: true},
		{name: "alone, budget spent, nothing crawled", self: func() node.Status {
			s := st("a", false, 0)
			s.Frontier.InList, s.Budget.Reached = 5, "max_duration"
			return s
		}},
		{name: "cluster done, grace agreed", self: func() node.Status {
			s := st("a", true, 10)
			s.Members, s.DoneGraceS = members, 2
			return s
		}, others: map[string]node.Status{"b:1": func() node.Status { s := st("b", true, 0); s.DoneGraceS = 7; return s }()}, ok: true, grace: 7 * time.Second},
		{name: "a member not done", self: func() node.Status { s := st("a", true, 10); s.Members = members; return s },
			others: map[string]node.Status{"b:1": st("b", false, 5)}},
		{name: "an outbox not empty", self: func() node.Status {
			s := st("a", true, 10)
			s.Members, s.Outbox = members, map[string]int{"b": 3}
			return s
		}, others: map[string]node.Status{"b:1": st("b", true, 5)}},
		{name: "a member does not answer", self: func() node.Status { s := st("a", true, 10); s.Members = members; return s }, fail: true},
		{name: "a member suspect", self: func() node.Status {
			s := st("a", true, 10)
			s.Members = []node.MemberStatus{{Name: "a", State: "alive"}, {Name: "b", API: "b:1", State: "suspect"}}
			return s
		}, others: map[string]node.Status{"b:1": st("b", true, 5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ask := func(api string) (node.Status, error) {
				if s, ok := tc.others[api]; ok && !tc.fail {
					return s, nil
				}
				return node.Status{}, errors.New("no answer")
			}
			fp, grace, ok := doneView(tc.self(), ask)
			if ok != tc.ok || grace != tc.grace {
				t.Errorf("done %v grace %s, want %v %s", ok, grace, tc.ok, tc.grace)
			}
			if ok && fp == "" {
				t.Error("no fingerprint")
			}
		})
	}
	// One more page anywhere changes the fingerprint.
	s1 := st("a", true, 10)
	s2 := st("a", true, 11)
	f1, _, _ := doneView(s1, nil)
	f2, _, _ := doneView(s2, nil)
	if f1 == f2 {
		t.Errorf("fingerprint %q unchanged by a page", f1)
	}
}
