package cluster

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"time"
)

// Wire protocol of the exchange (one TCP connection per sender->receiver pair):
//
//	handshake  C->S  "PCX1" | nonceC[32] | uvarint len | client name
//	           S->C  "PCX1" | nonceS[32] | uvarint len | server name | macS[32]
//	           C->S  macC[32]
//	           S->C  1 (accepted) or 0 (refused, then close)
//	macS = HMAC-SHA256(key, "pcx server" | T), macC = HMAC-SHA256(key, "pcx client" | T),
//	T = nonceC | nonceS | len+client name | len+server name. Each side proves the key
//	before the other sends or accepts a batch; fresh crypto/rand nonces stop replays.
//	frames     uint32 BE length | payload | HMAC-SHA256(session key, seq | payload)[:16]
//	with one session key per direction (HMAC(key, "pcx c2s"|T), HMAC(key, "pcx s2c"|T))
//	and seq counting frames per direction: frames cannot be forged, replayed or
//	reordered. The payload is not encrypted.

const (
	hsMagic     = "PCX1"
	nonceLen    = 32
	macLen      = sha256.Size
	frameMACLen = 16
	maxNameLen  = 255
	// DefaultMaxFrame is the default largest frame payload accepted (8 MiB).
	DefaultMaxFrame = 8 << 20
)

// ErrHandshake is wrapped by errors of an exchange handshake that failed
// because the other side did not prove the cluster key, or spoke garbage.
var ErrHandshake = errors.New("exchange handshake failed")

// xconn is an authenticated exchange connection.
type xconn struct {
	c        net.Conn
	r        *bufio.Reader
	w        *bufio.Writer
	peer     string
	maxFrame int
	sendMAC  hash.Hash
	recvMAC  hash.Hash
	sendSeq  uint64
	recvSeq  uint64
	hdr      [8]byte
}

func hsErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrHandshake, fmt.Sprintf(format, args...))
}

func transcript(nc, ns []byte, cname, sname string) []byte {
	t := append(append([]byte{}, nc...), ns...)
	t = binary.AppendUvarint(t, uint64(len(cname)))
	t = append(t, cname...)
	t = binary.AppendUvarint(t, uint64(len(sname)))
	return append(t, sname...)
}

func mac(key []byte, label string, t []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(label))
	h.Write(t)
	return h.Sum(nil)
}

func writeHello(w *bufio.Writer, nonce []byte, name string) {
	w.WriteString(hsMagic)
	w.Write(nonce)
	w.Write(binary.AppendUvarint(nil, uint64(len(name))))
	w.WriteString(name)
}

func readHello(r *bufio.Reader) (nonce []byte, name string, err error) {
	buf := make([]byte, len(hsMagic)+nonceLen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, "", hsErr("read hello: %v", err)
	}
	if string(buf[:len(hsMagic)]) != hsMagic {
		return nil, "", hsErr("bad magic %q (not a phasecrawl exchange)", buf[:len(hsMagic)])
	}
	n, err := binary.ReadUvarint(r)
	if err != nil || n > maxNameLen {
		return nil, "", hsErr("bad name length")
	}
	nb := make([]byte, n)
	if _, err := io.ReadFull(r, nb); err != nil {
		return nil, "", hsErr("read name: %v", err)
	}
	return buf[len(hsMagic):], string(nb), nil
}

func newNonce() ([]byte, error) {
	b := make([]byte, nonceLen)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("cluster: nonce: %w", err)
	}
	return b, nil
}

// clientHandshake authenticates c as the dialing side. The connection
// deadline is set to now+timeout during the handshake and cleared after.
func clientHandshake(c net.Conn, key []byte, name string, maxFrame int, timeout time.Duration) (*xconn, error) {
	if len(name) > maxNameLen {
		return nil, fmt.Errorf("cluster: exchange name of %d bytes: at most %d", len(name), maxNameLen)
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	x := &xconn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10), maxFrame: maxFrame}
	nc, err := newNonce()
	if err != nil {
		return nil, err
	}
	writeHello(x.w, nc, name)
	if err := x.w.Flush(); err != nil {
		return nil, hsErr("send hello: %v", err)
	}
	ns, sname, err := readHello(x.r)
	if err != nil {
		return nil, err
	}
	t := transcript(nc, ns, name, sname)
	got := make([]byte, macLen)
	if _, err := io.ReadFull(x.r, got); err != nil {
		return nil, hsErr("read server proof: %v", err)
	}
	if !hmac.Equal(got, mac(key, "pcx server", t)) {
		return nil, hsErr("peer %q did not prove the cluster key (keys differ? --cluster-key-file)", sname)
	}
	x.w.Write(mac(key, "pcx client", t))
	if err := x.w.Flush(); err != nil {
		return nil, hsErr("send proof: %v", err)
	}
	ok, err := x.r.ReadByte()
	if err != nil || ok != 1 {
		return nil, hsErr("peer %q refused our cluster key (keys differ? --cluster-key-file)", sname)
	}
	_ = c.SetDeadline(time.Time{})
	x.peer = sname
	x.sendMAC = hmac.New(sha256.New, mac(key, "pcx c2s", t))
	x.recvMAC = hmac.New(sha256.New, mac(key, "pcx s2c", t))
	return x, nil
}

// serverHandshake authenticates c as the accepting side.
func serverHandshake(c net.Conn, key []byte, name string, maxFrame int, timeout time.Duration) (*xconn, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	x := &xconn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10), maxFrame: maxFrame}
	nc, cname, err := readHello(x.r)
	if err != nil {
		return nil, err
	}
	ns, err := newNonce()
	if err != nil {
		return nil, err
	}
	t := transcript(nc, ns, cname, name)
	writeHello(x.w, ns, name)
	x.w.Write(mac(key, "pcx server", t))
	if err := x.w.Flush(); err != nil {
		return nil, hsErr("send proof: %v", err)
	}
	got := make([]byte, macLen)
	if _, err := io.ReadFull(x.r, got); err != nil {
		return nil, hsErr("read client proof from %q: %v", cname, err)
	}
	if !hmac.Equal(got, mac(key, "pcx client", t)) {
		x.w.WriteByte(0)
		x.w.Flush()
		return nil, hsErr("peer %q did not prove the cluster key (keys differ? --cluster-key-file)", cname)
	}
	x.w.WriteByte(1)
	if err := x.w.Flush(); err != nil {
		return nil, hsErr("send accept: %v", err)
	}
	_ = c.SetDeadline(time.Time{})
	x.peer = cname
	x.sendMAC = hmac.New(sha256.New, mac(key, "pcx s2c", t))
	x.recvMAC = hmac.New(sha256.New, mac(key, "pcx c2s", t))
	return x, nil
}

func (x *xconn) frameMAC(h hash.Hash, seq uint64, p []byte) []byte {
	h.Reset()
	binary.BigEndian.PutUint64(x.hdr[:], seq)
	h.Write(x.hdr[:])
	h.Write(p)
	return h.Sum(nil)[:frameMACLen]
}

// writeFrame sends one authenticated frame and flushes.
func (x *xconn) writeFrame(p []byte) error {
	if len(p) > x.maxFrame {
		return fmt.Errorf("cluster: frame of %d bytes exceeds max_frame=%d", len(p), x.maxFrame)
	}
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(p)))
	x.w.Write(l[:])
	x.w.Write(p)
	x.w.Write(x.frameMAC(x.sendMAC, x.sendSeq, p))
	x.sendSeq++
	if err := x.w.Flush(); err != nil {
		return fmt.Errorf("cluster: write frame to %s: %w", x.peer, err)
	}
	return nil
}

// readFrame reads one frame, rejecting oversized, truncated or forged ones.
func (x *xconn) readFrame() ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(x.r, l[:]); err != nil {
		return nil, fmt.Errorf("cluster: read frame from %s: %w", x.peer, err)
	}
	n := binary.BigEndian.Uint32(l[:])
	if uint64(n) > uint64(x.maxFrame) {
		return nil, fmt.Errorf("cluster: frame from %s of %d bytes exceeds max_frame=%d", x.peer, n, x.maxFrame)
	}
	buf := make([]byte, int(n)+frameMACLen)
	if _, err := io.ReadFull(x.r, buf); err != nil {
		return nil, fmt.Errorf("cluster: read frame from %s: %w", x.peer, err)
	}
	p, got := buf[:n], buf[n:]
	if !hmac.Equal(got, x.frameMAC(x.recvMAC, x.recvSeq, p)) {
		return nil, fmt.Errorf("cluster: frame from %s: bad MAC (forged, corrupt or out of order)", x.peer)
	}
	x.recvSeq++
	return p, nil
}

func (x *xconn) Close() error { return x.c.Close() }
