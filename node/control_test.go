package node

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
)

func TestGate(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	n := &Node{cfg: config.Config{Run: config.Run{MaxPages: 10, MaxDuration: time.Hour}}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), counters: counters{started: start}}
	c := newControl(n)
	g := c.gate(Standalone{})
	open := func(at time.Time) bool { _, _, o := g.Active(at); return o }
	if !open(start) {
		t.Fatal("closed at start")
	}
	c.setPaused(true, "test")
	if open(start) {
		t.Fatal("open while paused")
	}
	c.setPaused(false, "test")
	if !open(start) {
		t.Fatal("closed after resume")
	}
	if open(start.Add(time.Hour)) {
		t.Fatal("open once max_duration passed")
	}
	if st := c.status(); st.Reached != BudgetMaxDuration || st.ReachedAt == nil || !st.ReachedAt.Equal(start.Add(time.Hour)) {
		t.Fatalf("budget status %+v", st)
	}
	// Spent for good: the first reason stays.
	n.pages.Store(10)
	if open(start) || c.status().Reached != BudgetMaxDuration {
		t.Fatalf("after max_pages too: %+v", c.status())
	}

	n2 := &Node{cfg: config.Config{Run: config.Run{MaxPages: 10}}, log: n.log, counters: counters{started: start}}
	c2 := newControl(n2)
	n2.pages.Store(9)
	if !c2.open(start.Add(1000 * time.Hour)) {
		t.Fatal("closed under max_pages without max_duration")
	}
	n2.pages.Store(10)
	if c2.open(start) || c2.status().Reached != BudgetMaxPages {
		t.Fatalf("max_pages: %+v", c2.status())
	}
}
