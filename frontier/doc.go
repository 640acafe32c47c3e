// Package frontier is the node's persistent URL store: the paper's URLStates
// array (KSpider §3.4, Fig. 6) kept in one bbolt file.
//
// Every URL has a record with its state (IN_LIST, IN_PROGRESS, COMPLETED,
// STALLED). Deduplication is by Fingerprint, looked up in bbolt: nothing that
// grows with the crawl is kept in memory, so 10M URLs fit in a small Go heap
// (see TestHeap10M).
//
// # Layout
//
//	records     hk (4B BE) | fp (8B BE)          -> record (version, state, seq, depth, tries,
//	                                                status, times, reason, host, url
//	                                                [, due, page state: recurring crawls])
//	queue       phase (2B BE) | seq (8B BE)      -> fp, depth, tries, discovered, host, url [, due]
//	running     hk | fp                          -> seq (8B BE) [claim marker]
//	retry       retryAt (8B BE ns) | hk | fp     -> nil
//	due         due (8B BE ns) | hk | fp         -> nil (COMPLETED URLs waiting for a revisit)
//	digests     payload SHA-1 (20B)              -> capture time (8B BE ns) | url (the digest index:
//	                                                the first durably archived capture of a payload)
//	hosts       host                             -> HostStats (admitted, fetched, errors, bytes, last fetch,
//	                                                delay [, round counters [, round times]])
//	meta        format marker, version, seq counter, nphase, re-key mark, state counters
//
// hk is the host's HostKey (the top 32 bits of its HostHash): the records of
// one host are neighbours, so the writes of a host trip (its results, and
// the links to its own host its pages add) touch a few bbolt pages; keyed by
// fingerprint alone (format 1, migrated at Open: migrate.go), every URL
// written dirtied a page of its own, and a commit rewrote ~4 MB. Running is
// the IN_PROGRESS URLs, retry the STALLED ones in due order, due the
// COMPLETED ones to fetch again (recrawl.go), in due order too.
//
// seq is the URL's index in the URLStates array: assigned once at insertion,
// it never changes, so Requeue, the retry lane and kill -9 recovery put a URL
// back at its original position and the scheduler's sliding window (sWin)
// always starts at the oldest unfinished URL. The queue holds only IN_LIST
// URLs, keyed by phase first, so a scan of the active phase is one contiguous
// key range and never touches another phase's URLs; each entry carries a
// copy of what Scan returns, so scans need no second lookup. The URL string
// is therefore stored twice while a URL is IN_LIST (once after).
//
// # Writes
//
// All writes go through one writer goroutine doing group commit (writer.go):
// calls return once their transaction is committed and fsynced, so an
// acknowledged Add survives kill -9, and IN_PROGRESS URLs (the ones in the
// bucket or being fetched when the process died) return to IN_LIST at Open.
// Per-state counters live in the meta bucket and are updated in the same
// transactions, so Counts is an atomic load that always matches the file.
//
// A host trip records its outcome in one write, Settle (SettleRequest: the
// URLs it found, its results, what it did not get to, and optionally the
// URLs of its host it takes for the same trip), which returns a Pending
// without waiting; Wait makes it a synchronous call. The Frontier's methods
// are what one node needs. Writes another package defines (the cluster's:
// rebalance moves, replicas, lent outcomes, in cluster.RecordWriter) are given
// to Update as a Write, applied by the same writer in the same group
// commits, through Tx: record-level steps that keep the indexes and
// counters consistent (tx.go).
//
// # bbolt settings
//
// The file lock is waited for at most 1s, so a second process gets a clear
// "locked by another process" error. The hashmap freelist and
// NoFreelistSync keep commits cheap when many pages are freed (queue entries
// are deleted as URLs are scheduled); the price is a scan of the file's pages
// at Open to rebuild the freelist. Reads use short transactions (Scan reads
// at most 1024 entries per transaction and calls back outside it), so a
// growing file can always be remapped.
package frontier
