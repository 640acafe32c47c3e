package fetch

import (
	"context"
	"io"
	"time"
)

// BodyLimiter paces the reading of response bodies (a site's share of the
// download budget, package bandwidth). Fetch reads at most Chunk bytes at
// a time and calls Take after each read; Take returns ctx's error when ctx
// ends while it waits. The time Take waits does not count against the
// body timeout (ClientConfig.BodyTimeout): the deadline moves on by it. A
// BodyLimiter with a method Expect(n int64) is told each body's
// Content-Length (when announced) before it is read.
type BodyLimiter interface {
	Chunk() int
	Take(ctx context.Context, n int) error
}

// lengthHinter is a BodyLimiter that wants to know a body's announced
// length (Content-Length) before it is read.
type lengthHinter interface {
	Expect(n int64)
}

type bodyLimiterKey struct{}

// WithBodyLimiter returns a context whose fetches read their bodies through
// l (nil: unpaced).
func WithBodyLimiter(ctx context.Context, l BodyLimiter) context.Context {
	if l == nil {
		return ctx
	}
	return context.WithValue(ctx, bodyLimiterKey{}, l)
}

func bodyLimiterFrom(ctx context.Context) BodyLimiter {
	l, _ := ctx.Value(bodyLimiterKey{}).(BodyLimiter)
	return l
}

// pacedReader reads r through a BodyLimiter; extend (if set) is told how
// long each Take waited.
type pacedReader struct {
	r      io.Reader
	l      BodyLimiter
	ctx    context.Context
	extend func(waited time.Duration)
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if c := p.l.Chunk(); c > 0 && len(b) > c {
		b = b[:c]
	}
	n, err := p.r.Read(b)
	if n > 0 {
		start := time.Now()
		werr := p.l.Take(p.ctx, n)
		if werr != nil && err == nil {
			err = werr
		}
		if waited := time.Since(start); p.extend != nil && waited > time.Millisecond {
			p.extend(waited)
		}
	}
	return n, err
}
