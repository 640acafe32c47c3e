package archive

import "sync/atomic"

// Ticket follows buffered bytes to their file. A WARCWriter or CrawlLog
// gives the same ticket to every write buffered until its next write(2) of
// the buffer: that write settles it, written or lost. A write error (a full
// disk) loses what was buffered, and the pages whose records or lines were
// in it must not be recorded as fetched: the node checks their tickets
// before it commits their results, after flushing both files, when every
// ticket of those pages is settled.
type Ticket struct{ state atomic.Int32 }

const (
	ticketPending int32 = iota
	ticketWritten
	ticketLost
)

// LostTicket returns a ticket already lost: the one for a write that
// failed before its bytes were buffered.
func LostTicket() *Ticket {
	t := new(Ticket)
	t.state.Store(ticketLost)
	return t
}

// Written reports whether the ticket's bytes reached the file (write(2)
// returned without error: they survive a kill -9 of the process).
func (t *Ticket) Written() bool { return t.state.Load() == ticketWritten }

// Lost reports whether the ticket's bytes were dropped by a write error.
func (t *Ticket) Lost() bool { return t.state.Load() == ticketLost }

// settle records the outcome of the write of the ticket's bytes.
func (t *Ticket) settle(err error) {
	if err != nil {
		t.state.Store(ticketLost)
	} else {
		t.state.Store(ticketWritten)
	}
}

// Fault, when set (SetFault), is asked before each write(2) of a buffer: an
// error it returns fails the write as the file system would (fault
// injection, for tests of what depends on the archive's write errors).
type Fault func() error

// faultWrite writes b to f, unless fault fails the write first.
func faultWrite(fault Fault, f interface{ Write([]byte) (int, error) }, b []byte) (int, error) {
	if fault != nil {
		if err := fault(); err != nil {
			return 0, err
		}
	}
	return f.Write(b)
}
