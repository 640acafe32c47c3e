// Package tcptap is the tests' man in the middle on loopback: a TCP relay
// that records every byte each way and may alter what one connection
// carries, for the tests that check what the wire shows (the exchange's
// frames, the gossip's push/pull) and what a tampered byte does.
package tcptap

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Tap is a loopback man in the middle: it relays TCP between a sender and a
// receiver, records every byte each way, and may alter the bytes of the
// first connection's receiver-to-sender direction (mutate gets the offset
// of b in that stream).
type Tap struct {
	ln     net.Listener
	target string
	mutate func(off int, b []byte)
	mu     sync.Mutex
	c2s    bytes.Buffer
	s2c    bytes.Buffer
	conns  []net.Conn
	n      int
	wg     sync.WaitGroup
}

// Start relays the connections made to the returned Tap's address to
// target until the test ends; mutate, if not nil, alters the first
// connection's target-to-client bytes.
func Start(t *testing.T, target string, mutate func(off int, b []byte)) *Tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Tap{ln: ln, target: target, mutate: mutate}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			first := p.n == 0
			p.n++
			p.mu.Unlock()
			var mut func(int, []byte)
			if first {
				mut = p.mutate
			}
			p.wg.Add(2)
			go p.copy(d, c, &p.c2s, nil)
			go p.copy(c, d, &p.s2c, mut)
		}
	}()
	t.Cleanup(p.Close)
	return p
}

// Addr is the address to dial instead of the target.
func (p *Tap) Addr() string { return p.ln.Addr().String() }

func (p *Tap) copy(dst, src net.Conn, rec *bytes.Buffer, mut func(int, []byte)) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	off := 0
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if mut != nil {
				mut(off, buf[:k])
			}
			off += k
			p.mu.Lock()
			rec.Write(buf[:k])
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Close closes the listener and every connection and waits for the relays.
func (p *Tap) Close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Recorded returns a copy of what went each way.
func (p *Tap) Recorded() (c2s, s2c []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.c2s.Bytes()), bytes.Clone(p.s2c.Bytes())
}
