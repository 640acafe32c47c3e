package exchange

import (
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestExchangeResetFailsPendingAck: a batch whose ack does not come (the
// peer's store hangs, as over a cut network) is sent again on a new
// connection as soon as Reset closes the old one, long before AckTimeout
// (10s here), and every URL arrives.
func TestExchangeResetFailsPendingAck(t *testing.T) {
	book := &addrBook{}
	insB := newFakeInserter()
	gate := make(chan struct{})
	insB.gate = gate
	newTestNodeIns(t, "b", testKey, allTo("b"), book, insB)
	a := newTestNode(t, "a", testKey, allTo("b"), book)
	urls := testURLs("reset", 50)
	route(t, a.x, urls, 50)
	wait.For(t, 5*time.Second, "a batch sent to b", func() bool { return a.x.Stats().BatchesSent >= 1 })
	a.x.Reset("nobody") // no sender: nothing happens
	start := time.Now()
	a.x.Reset("b")
	wait.For(t, 5*time.Second, "the batch sent again on a new connection", func() bool {
		st := a.x.Stats()
		return st.Dials >= 2 && st.BatchesResent >= 1 && st.AcksReceived >= 1
	})
	if d := time.Since(start); d >= 5*time.Second {
		t.Errorf("resent after %s", d)
	}
	close(gate)
	wait.For(t, 10*time.Second, "every URL delivered", func() bool {
		insB.mu.Lock()
		defer insB.mu.Unlock()
		return len(insB.seen) == len(urls)
	})
}
