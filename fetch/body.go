package fetch

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
)

// rateGuard counts the body bytes read and calls fail when a window passes in which fewer than
// need bytes arrived. Its timer is its only goroutine; stop ends it.
type rateGuard struct {
	r      io.Reader
	n      atomic.Int64 // bytes read so far
	need   int64        // bytes per window
	window time.Duration
	fail   func()

	mu      sync.Mutex
	last    int64 // n at the start of the current window
	stopped bool
	t       *time.Timer
}

func newRateGuard(r io.Reader, minRate int64, window time.Duration, fail func()) *rateGuard {
	need := int64(float64(minRate) * window.Seconds())
	g := &rateGuard{r: r, need: max(need, 1), window: window, fail: fail}
	g.mu.Lock()
	g.t = time.AfterFunc(window, g.check)
	g.mu.Unlock()
	return g
}

func (g *rateGuard) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	g.n.Add(int64(n))
	return n, err
}

func (g *rateGuard) check() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	cur := g.n.Load()
	if cur-g.last < g.need {
		g.stopped = true
		g.fail()
		return
	}
	g.last = cur
	g.t.Reset(g.window)
}

func (g *rateGuard) stop() {
	g.mu.Lock()
	g.stopped = true
	g.t.Stop()
	g.mu.Unlock()
}

// readBounded reads r until EOF, but at most limit bytes, pre-sizing with the
// announced length; like bytes.Buffer.ReadFrom of an io.LimitReader, io.EOF
// is not an error and what was read before an error is returned with it.
// The buffer comes from the body buffer pool.
func readBounded(r io.Reader, limit, announced int64) ([]byte, error) {
	size := int64(512)
	if announced > 0 {
		size = min(announced+1, limit)
	}
	buf := getBuf(int(size))
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			next := getBuf(int(min(int64(2*cap(buf)+512), limit)))
			next = append(next, buf...)
			putBuf(buf)
			buf = next
		}
		room := buf[len(buf):cap(buf)]
		if rest := limit - int64(len(buf)); int64(len(room)) > rest {
			room = room[:rest]
		}
		n, err := r.Read(room)
		if n < 0 || n > len(room) {
			return buf, errors.New("fetch: body reader returned an invalid count")
		}
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

var gzipReaderPool sync.Pool // *gzip.Reader

// decodeBody decodes a gzip or deflate body (zlib-wrapped or raw) up to max bytes. Partial or
// corrupt streams keep what decoded; an undecodable header or an unknown encoding yields raw.
func decodeBody(encoding string, raw []byte, max int64) ([]byte, bool) {
	rd, done, ok := bodyDecoder(encoding, raw)
	if !ok {
		return raw, false
	}
	defer done()
	out, _ := readBounded(rd, max+1, int64(len(raw))*4) // partial output is kept on error
	if int64(len(out)) > max {
		return out[:max:max], true
	}
	return out, false
}

// bodyDecoder returns a reader of raw decoded (gzip or deflate) and the
// function that ends it, or false when raw is to be kept as it is (no,
// stacked or unknown encoding, an undecodable header).
func bodyDecoder(encoding string, raw []byte) (io.Reader, func(), bool) {
	enc := ""
	for _, tok := range strings.Split(encoding, ",") {
		tok = strings.ToLower(strings.TrimSpace(tok))
		if tok == "" || tok == "identity" {
			continue
		}
		if enc != "" {
			return nil, nil, false // stacked encodings: keep the bytes as they are
		}
		enc = tok
	}
	switch enc {
	case "gzip", "x-gzip":
		zr, _ := gzipReaderPool.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(bytes.NewReader(raw))
		} else {
			err = zr.Reset(bytes.NewReader(raw))
		}
		if err != nil {
			return nil, nil, false
		}
		return zr, func() { gzipReaderPool.Put(zr) }, true
	case "deflate":
		if looksZlib(raw) {
			zr, err := zlib.NewReader(bytes.NewReader(raw))
			if err != nil {
				return nil, nil, false
			}
			return zr, func() { zr.Close() }, true
		}
		fr := flate.NewReader(bytes.NewReader(raw))
		return fr, func() { fr.Close() }, true
	}
	return nil, nil, false
}

// looksZlib reports whether b starts with a zlib (RFC 1950) header using deflate.
func looksZlib(b []byte) bool {
	return len(b) >= 2 && b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}
