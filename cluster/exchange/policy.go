package exchange

import "time"

// BatchDue is the exchange sender's batching rule: with pending URLs queued
// for a peer, a batch goes when the last send failed (retry), when at
// least minBatch URLs wait, or when maxDelay passed since the last batch
// went (sinceLast). A batch below minBatch thus goes at most once per
// maxDelay. It is a pure function so that tools (the cluster simulator)
// can drive the same rule on a virtual clock.
func BatchDue(pending, minBatch int, sinceLast, maxDelay time.Duration, retry bool) bool {
	return pending > 0 && (retry || pending >= minBatch || sinceLast >= maxDelay)
}
