package archive

import "time"

// flushTimer runs a buffer's flush a fixed delay after the buffer stopped
// being empty (WARCWriter, CrawlLog). Its methods are called with the
// owner's mutex held; the flush it runs takes that mutex and calls fired.
type flushTimer struct {
	t     *time.Timer
	armed bool // a flush is due
}

// arm makes flush run after d unless a flush is due already.
func (ft *flushTimer) arm(d time.Duration, flush func()) {
	if ft.armed {
		return
	}
	ft.armed = true
	if ft.t == nil {
		ft.t = time.AfterFunc(d, flush)
	} else {
		ft.t.Reset(d)
	}
}

// fired records that the due flush is running.
func (ft *flushTimer) fired() { ft.armed = false }

// stop cancels a due flush (Close); a flush already started finds nothing to do.
func (ft *flushTimer) stop() {
	if ft.t != nil {
		ft.t.Stop()
	}
}
