package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
)

// BodyBudget bounds the body bytes that the fetches of a client hold in
// memory at once (ClientConfig.MaxInflightBytes): the transferred body and
// the decoded one, from the first byte read until Response.Release.
//
// A fetch reserves its body's room before it reads it: the Content-Length
// (plus one byte, to see the end) when announced, else a first chunk; it
// waits for that room, in arrival order, holding nothing. As a body grows
// past its room the fetch asks for more without waiting; when the budget
// refuses, the body goes on into a temp file (spooled) through the room it
// has. Once read, a spooled body comes back into memory when its whole
// size can be reserved, again waiting while holding nothing. A fetch never
// waits while it holds a share, so fetches cannot deadlock on the budget;
// a single body larger than the whole budget proceeds once nothing else is
// held. Every share is given back: on errors and cancellation by Fetch
// itself, after a successful fetch by Response.Release (or ReleaseBudget).
type BodyBudget struct {
	max    int64
	used   atomic.Int64
	peak   atomic.Int64
	waits  atomic.Int64
	spools atomic.Int64
	nwait  atomic.Int32 // len(queue), read without mu

	mu    sync.Mutex
	queue []*budgetWaiter // in arrival order
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once granted
}

// NewBodyBudget returns a budget of max bytes (max > 0).
func NewBodyBudget(max int64) *BodyBudget {
	return &BodyBudget{max: max}
}

// Max returns the budget's size in bytes.
func (b *BodyBudget) Max() int64 { return b.max }

// InFlight returns the body bytes held now.
func (b *BodyBudget) InFlight() int64 { return b.used.Load() }

// Peak returns the most body bytes held at once so far.
func (b *BodyBudget) Peak() int64 { return b.peak.Load() }

// Waits returns how many fetches have waited for room so far.
func (b *BodyBudget) Waits() int64 { return b.waits.Load() }

// Spools returns how many bodies (transferred or decoded) have gone to a
// temp file so far.
func (b *BodyBudget) Spools() int64 { return b.spools.Load() }

// take reserves n bytes if they fit (a request larger than the budget fits
// when nothing is held), without waiting.
func (b *BodyBudget) take(n int64) bool {
	for {
		cur := b.used.Load()
		if cur+n > b.max && (cur > 0 || n <= b.max) {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			for p := b.peak.Load(); cur+n > p && !b.peak.CompareAndSwap(p, cur+n); p = b.peak.Load() {
			}
			return true
		}
	}
}

// acquire reserves n bytes for a fetch that holds nothing, waiting behind
// the fetches that came first until they fit or ctx ends.
func (b *BodyBudget) acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	if b.nwait.Load() == 0 && b.take(n) {
		return nil
	}
	b.mu.Lock()
	// nwait is raised before used is read again: a release that lowered
	// used meanwhile either is seen here or sees the waiter (release).
	b.nwait.Add(1)
	if len(b.queue) == 0 && b.take(n) {
		b.nwait.Add(-1)
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.queue = append(b.queue, w)
	b.mu.Unlock()
	b.waits.Add(1)
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	select {
	case <-w.ready: // granted meanwhile: give it back
		b.mu.Unlock()
		b.release(n)
		return ctx.Err()
	default:
	}
	for i, q := range b.queue {
		if q == w {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			b.nwait.Add(-1)
			break
		}
	}
	b.grant() // the ones behind it may fit now
	b.mu.Unlock()
	return ctx.Err()
}

// release gives n bytes back and wakes the waiters that fit now.
func (b *BodyBudget) release(n int64) {
	if n <= 0 {
		return
	}
	b.used.Add(-n)
	if b.nwait.Load() > 0 {
		b.mu.Lock()
		b.grant()
		b.mu.Unlock()
	}
}

// grant hands room to the waiters at the head of the queue, in order, as
// long as they fit. b.mu is held.
func (b *BodyBudget) grant() {
	for len(b.queue) > 0 && b.take(b.queue[0].n) {
		w := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		b.nwait.Add(-1)
		close(w.ready)
	}
}

// bodyHold is one fetch's share of a BodyBudget.
type bodyHold struct {
	b *BodyBudget
	n int64
}

// grow adds n bytes to the share if the budget has them now.
func (h *bodyHold) grow(n int64) bool {
	if n <= 0 {
		return true
	}
	if !h.b.take(n) {
		return false
	}
	h.n += n
	return true
}

// give hands n bytes of the share back.
func (h *bodyHold) give(n int64) {
	n = min(n, h.n)
	h.n -= n
	h.b.release(n)
}

// spoolCopy is the size of the copy buffer of a body that spools without
// any room of its own in the budget.
const spoolCopy = 32 << 10

// spoolBody collects a body within a fetch's share of the budget: in buf
// while the share grows with it, then (once the budget refuses more) in a
// temp file in dir, through the buffer it has.
type spoolBody struct {
	h    *bodyHold
	dir  string
	buf  []byte
	room int      // bytes buf may take: held, or spoolCopy outside the share
	held int64    // bytes of the share that cover buf
	f    *os.File // the spooled bytes, before those in buf; nil: all in buf
	nf   int64    // bytes in f
	err  error    // the temp file's failure, if any
}

func (s *spoolBody) size() int64 { return s.nf + int64(len(s.buf)) }

// readFrom reads r until EOF, but at most limit bytes, sizing its first
// buffer by announced (>0: the announced length) and what the share
// already holds; like readBounded, io.EOF is not an error and what was
// read before an error is kept (an error of the temp file is also kept in
// s.err).
func (s *spoolBody) readFrom(r io.Reader, limit, announced int64) error {
	if s.buf == nil {
		first := int64(512)
		if announced > 0 {
			first = min(announced+1, limit)
		}
		if s.held < first && s.h.grow(first-s.held) {
			s.held = first
		}
		first = s.held
		if first > 0 {
			s.buf, s.room = getBuf(int(first)), int(first)
		} else {
			s.buf, s.room = make([]byte, 0, spoolCopy), spoolCopy // outside the share: it spools
		}
	}
	for s.size() < limit {
		if len(s.buf) == s.room {
			if err := s.more(limit); err != nil {
				s.err = err
				return err
			}
		}
		room := s.buf[len(s.buf):s.room]
		if rest := limit - s.size(); int64(len(room)) > rest {
			room = room[:rest]
		}
		n, err := r.Read(room)
		if n < 0 || n > len(room) {
			return errors.New("fetch: body reader returned an invalid count")
		}
		s.buf = s.buf[:len(s.buf)+n]
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// more makes room in a full buf: a bigger buffer if the share can grow to
// it, else the bytes go to the temp file.
func (s *spoolBody) more(limit int64) error {
	if s.f == nil {
		next := min(int64(2*s.room+512), limit)
		if next <= int64(cap(s.buf)) && s.h.grow(next-s.held) {
			s.held, s.room = next, int(next)
			return nil
		}
		// The new buffer and the old one are both held while copying.
		if next > int64(cap(s.buf)) && s.h.grow(next) {
			nb := append(getBuf(int(next)), s.buf...)
			putBuf(s.buf)
			s.h.give(s.held)
			s.buf, s.held, s.room = nb, next, int(next)
			return nil
		}
	}
	if err := s.writeSpool(); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	return nil
}

// writeSpool appends the bytes in buf to the temp file, creating it on
// first use.
func (s *spoolBody) writeSpool() error {
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, "body-*.spool")
		if err != nil {
			return fmt.Errorf("fetch: spool body: %w", err)
		}
		s.f = f
		s.h.b.spools.Add(1)
	}
	if _, err := s.f.Write(s.buf); err != nil {
		return fmt.Errorf("fetch: spool body: %w", err)
	}
	s.nf += int64(len(s.buf))
	return nil
}

// inMemory reports whether the whole body is in buf and covered by the
// share, growing the share to cover it if it can.
func (s *spoolBody) inMemory() bool {
	if s.f != nil {
		return false
	}
	if n := int64(len(s.buf)); s.held < n {
		if !s.h.grow(n - s.held) {
			return false
		}
		s.held = n
	}
	return true
}

// spill moves the bytes in buf to the temp file and gives their share
// back: the body then holds no memory of the budget.
func (s *spoolBody) spill() error {
	if s.buf == nil {
		return nil
	}
	if err := s.writeSpool(); err != nil {
		return err
	}
	putBuf(s.buf)
	s.buf = nil
	s.h.give(s.held)
	s.held, s.room = 0, 0
	return nil
}

// load reads the spilled body back into a buffer of its size, which the
// share already covers (the caller reserved it), and removes the file.
func (s *spoolBody) load() error {
	if s.f == nil {
		return nil
	}
	buf := getBuf(int(s.nf))[:s.nf]
	if _, err := s.f.ReadAt(buf, 0); err != nil {
		putBuf(buf)
		return fmt.Errorf("fetch: read spooled body: %w", err)
	}
	s.held += s.nf
	s.buf, s.room, s.nf = buf, int(s.nf), 0
	s.closeFile()
	return nil
}

// discard drops the body: its buffer, its file and its share.
func (s *spoolBody) discard() {
	putBuf(s.buf)
	s.buf, s.room = nil, 0
	s.closeFile()
	s.h.give(s.held)
	s.held = 0
}

func (s *spoolBody) closeFile() {
	if s.f != nil {
		s.f.Close()
		os.Remove(s.f.Name())
		s.f, s.nf = nil, 0
	}
}

// reserveBody reserves the first room of a body about to be read, waiting
// for it (the fetch holds nothing of the budget yet): its length plus one
// byte when announced (at most the body cap plus one), else minPooledBuf.
// The first room is the only one a fetch waits for while it reads.
func (c *Client) reserveBody(ctx context.Context, announced int64) (*spoolBody, error) {
	first := int64(minPooledBuf)
	if announced == 0 {
		first = 0 // nothing to wait for: an empty body asks for room if it has any
	} else if announced > 0 {
		first = min(announced+1, c.cfg.MaxBodySize+1)
	}
	if err := c.budget.acquire(ctx, first); err != nil {
		return nil, err
	}
	bb := &budgetBody{hold: bodyHold{b: c.budget, n: first}}
	bb.raw = spoolBody{h: &bb.hold, dir: c.cfg.SpoolDir, held: first}
	return &bb.raw, nil
}

// budgetBody is a fetch's share and its transferred body, allocated at once.
type budgetBody struct {
	hold bodyHold
	raw  spoolBody
}

// settleBody finishes a body read within the budget: the transferred body
// into memory (from its temp file if it spooled), decoded (gzip, deflate)
// within the share too, and both set on r, which keeps the share
// (Release). When a body is spooled, every byte of the fetch goes to disk
// and the fetch waits for the whole size holding nothing, so no two
// fetches wait on each other. On an error everything is given back.
func (c *Client) settleBody(ctx context.Context, r *Response, raw *spoolBody, base *url.URL, max int64) error {
	dec := &spoolBody{h: raw.h, dir: raw.dir}
	fail := func(err error) error {
		raw.discard()
		dec.discard()
		return err
	}
	// back reserves the total of what spilled, holding nothing, and loads it.
	back := func() error {
		if err := raw.spill(); err != nil {
			return err
		}
		if err := dec.spill(); err != nil {
			return err
		}
		total := raw.nf + dec.nf
		if err := c.budget.acquire(ctx, total); err != nil {
			return fmt.Errorf("wait for body memory: %w", err)
		}
		raw.h.n += total
		if err := raw.load(); err != nil {
			return err
		}
		return dec.load()
	}
	if !raw.inMemory() {
		if err := back(); err != nil {
			return fail(err)
		}
	}
	rb := raw.buf
	if int64(len(rb)) > max {
		rb = rb[:max:max]
		r.Truncated = true
	}
	body := rb
	if rd, done, ok := bodyDecoder(r.Header.Get("Content-Encoding"), rb); ok {
		dec.readFrom(rd, max+1, int64(len(rb))*4) // partial output is kept on error
		done()
		if dec.err != nil {
			return fail(dec.err)
		}
		if !dec.inMemory() {
			if err := back(); err != nil {
				return fail(err)
			}
			rb = raw.buf[:len(rb):len(rb)]
		}
		body = dec.buf
		if int64(len(body)) > max {
			body = body[:max:max]
			r.Truncated = true
		}
	}
	r.RawBody, r.Body = rb, body
	r.bufs[0], r.bufs[1] = raw.buf, dec.buf
	r.hold = raw.h
	r.deriveHead(base)
	return nil
}
