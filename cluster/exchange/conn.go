package exchange

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"time"
)

// Wire protocol of the exchange, version PCX3 (one TCP connection per
// sender->receiver pair; docs/design/exchange-security.md has the rationale):
//
//	hello      C->S  "PCX3" | nonceC[32]
//	           S->C  "PCX3" | nonceS[32] | Seal(hsS2C, 0, name(S))      AD = C->S hello | "PCX3" | nonceS
//	           C->S  Seal(hsC2S, 0, name(C))                            AD = every byte so far
//	           S->C  Seal(hsS2C, 1, 0x01 accepted)                      AD = every byte so far
//	frames     uint32 BE len(ct) | ct = Seal(k, seq, payload)           AD = the 4 length bytes
//
// Seal(k, n, p) is AES-256-GCM under key k with the 12-byte nonce
// 0x00000000 | uint64 BE n; name(X) is the member name padded to 256 bytes
// (1 length byte, the name, zeros), so neither names nor their lengths
// show. Keys, from the cluster key K (--cluster-key-file) and both fresh
// crypto/rand nonces, by HKDF-SHA256:
//
//	prk   = HKDF-Extract(salt = "PCX3" | nonceC | nonceS, secret = K)
//	hsC2S = HKDF-Expand(prk, "pcx2 handshake c2s"), hsS2C likewise "... s2c"
//	kC2S  = HKDF-Expand(prk, "pcx2 frames c2s" | SHA-256(handshake bytes)), kS2C likewise
//
// Opening the server's sealed name proves to the client that the server
// holds K (the key depends on the client's fresh nonce); opening the
// client's proves the same to the server; each side proves the key before
// the other sends or accepts a batch. A side that cannot open a handshake
// message closes the connection. Frames are sealed under a key per
// direction and per connection with seq counting that direction's frames
// from 0: a frame cannot be read, forged, altered, replayed (on this or
// another connection) or reordered; the receiver closes the connection at
// the first frame that does not open. Lengths and timing stay visible.
//
// With config cluster.tls_* (Config.TLS) all of this runs inside
// mutual TLS 1.3, whose certificates must name the members
// (exchange_tls.go): the cluster key and the certificates are both needed.

const (
	// hsMagic names the protocol. PCX3 is PCX2 with URLs lent back in a
	// batch's ack (ack.Lent); a PCX2 peer is refused with a clear error.
	hsMagic = "PCX3"
	// hsOldMagic is the first protocol, whose frames were authenticated
	// but not encrypted: a peer speaking it is refused with a clear error.
	hsOldMagic  = "PCX1"
	nonceLen    = 32
	helloLen    = len(hsMagic) + nonceLen
	hsNameLen   = 256 // padded name: length byte, name, zeros
	tagLen      = 16  // AES-GCM tag
	sealedName  = hsNameLen + tagLen
	sealedOK    = 1 + tagLen
	maxNameLen  = hsNameLen - 1
	sessKeyLen  = 32 // AES-256
	frameHdrLen = 4
	// DefaultMaxFrame is the default largest frame payload accepted (8 MiB).
	DefaultMaxFrame = 8 << 20
)

// ValidKeyLen reports whether n is the length of a cluster key: 16, 24
// or 32 bytes (AES-128, -192 or -256), for the gossip and the exchange.
func ValidKeyLen(n int) bool { return n == 16 || n == 24 || n == 32 }

// CheckKey checks the length of a cluster key (ValidKeyLen).
func CheckKey(k []byte) error {
	if !ValidKeyLen(len(k)) {
		return fmt.Errorf("cluster: --cluster-key-file: key is %d bytes, must be 16, 24 or 32", len(k))
	}
	return nil
}

// ErrHandshake is wrapped by errors of an exchange handshake that failed
// because the other side did not prove the cluster key, or spoke garbage
// or another protocol version.
var ErrHandshake = errors.New("exchange handshake failed")

// xconn is an authenticated, encrypted exchange connection.
type xconn struct {
	c        net.Conn
	r        *bufio.Reader
	w        *bufio.Writer
	peer     string
	maxFrame int
	send     cipher.AEAD
	recv     cipher.AEAD
	sendSeq  uint64
	recvSeq  uint64
	nonce    [12]byte // handshake and sending
	rnonce   [12]byte // receiving
	wbuf     []byte
}

func hsErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrHandshake, fmt.Sprintf(format, args...))
}

// keys derives the handshake AEADs and, once the transcript is complete,
// the frame AEADs of one connection.
type keys struct{ prk []byte }

func newKeys(key, nc, ns []byte) (keys, error) {
	salt := append(append([]byte(hsMagic), nc...), ns...)
	prk, err := hkdf.Extract(sha256.New, key, salt)
	if err != nil {
		return keys{}, fmt.Errorf("cluster: exchange key derivation: %w", err)
	}
	return keys{prk: prk}, nil
}

func (k keys) aead(info string) (cipher.AEAD, error) {
	sk, err := hkdf.Expand(sha256.New, k.prk, info, sessKeyLen)
	if err != nil {
		return nil, fmt.Errorf("cluster: exchange key derivation: %w", err)
	}
	b, err := aes.NewCipher(sk)
	if err != nil {
		return nil, fmt.Errorf("cluster: exchange cipher: %w", err)
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		return nil, fmt.Errorf("cluster: exchange cipher: %w", err)
	}
	return g, nil
}

// handshake returns the handshake AEADs (client to server, server to client).
func (k keys) handshake() (c2s, s2c cipher.AEAD, err error) {
	if c2s, err = k.aead("pcx2 handshake c2s"); err != nil {
		return nil, nil, err
	}
	s2c, err = k.aead("pcx2 handshake s2c")
	return c2s, s2c, err
}

// frames returns the frame AEADs bound to the whole handshake transcript.
func (k keys) frames(transcript []byte) (c2s, s2c cipher.AEAD, err error) {
	h := sha256.Sum256(transcript)
	if c2s, err = k.aead("pcx2 frames c2s" + string(h[:])); err != nil {
		return nil, nil, err
	}
	s2c, err = k.aead("pcx2 frames s2c" + string(h[:]))
	return c2s, s2c, err
}

func seqNonce(dst *[12]byte, seq uint64) []byte {
	binary.BigEndian.PutUint64(dst[4:], seq)
	return dst[:]
}

func padName(name string) []byte {
	b := make([]byte, hsNameLen)
	b[0] = byte(len(name))
	copy(b[1:], name)
	return b
}

func unpadName(b []byte) (string, bool) {
	if len(b) != hsNameLen || int(b[0]) > maxNameLen {
		return "", false
	}
	return string(b[1 : 1+int(b[0])]), true
}

func newNonce() ([]byte, error) {
	b := make([]byte, nonceLen)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("cluster: nonce: %w", err)
	}
	return b, nil
}

// readHello reads a hello and checks its protocol version; old is set when
// the peer speaks the first protocol.
func readHello(r io.Reader, who string) (hello []byte, old bool, err error) {
	buf := make([]byte, helloLen)
	if n, err := io.ReadFull(r, buf); err != nil {
		if n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			return nil, false, hsErr("%s closed the connection without a hello: not a phasecrawl exchange of protocol %s (a phasecrawl speaking %s closes it so, run the same version on every member; so does one that requires TLS, set cluster.tls_* on every member or none)",
				who, hsMagic, hsOldMagic)
		}
		return nil, false, hsErr("read hello of %s: %v", who, err)
	}
	if m := string(buf[:len(hsMagic)]); m != hsMagic {
		if strings.HasPrefix(m, "PCX") {
			return nil, m == hsOldMagic, hsErr("%s speaks exchange protocol %q, this node %q: run the same phasecrawl version on every member", who, m, hsMagic)
		}
		return nil, false, hsErr("bad magic %q from %s (not a phasecrawl exchange)", m, who)
	}
	return buf, false, nil
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
	t := append([]byte(hsMagic), nc...)
	x.w.Write(t)
	if err := x.w.Flush(); err != nil {
		return nil, hsErr("send hello: %v", err)
	}
	hello, _, err := readHello(x.r, "peer")
	if err != nil {
		return nil, err
	}
	t = append(t, hello...)
	k, err := newKeys(key, nc, hello[len(hsMagic):])
	if err != nil {
		return nil, err
	}
	c2s, s2c, err := k.handshake()
	if err != nil {
		return nil, err
	}
	sealed := make([]byte, sealedName)
	if _, err := io.ReadFull(x.r, sealed); err != nil {
		return nil, hsErr("read the peer's sealed name: %v", err)
	}
	pn, err := s2c.Open(nil, seqNonce(&x.nonce, 0), sealed, t)
	sname, ok := unpadName(pn)
	if err != nil || !ok {
		return nil, hsErr("peer did not prove the cluster key (keys differ? --cluster-key-file)")
	}
	t = append(t, sealed...)
	mine := c2s.Seal(nil, seqNonce(&x.nonce, 0), padName(name), t)
	t = append(t, mine...)
	x.w.Write(mine)
	if err := x.w.Flush(); err != nil {
		return nil, hsErr("send sealed name to %q: %v", sname, err)
	}
	okb := make([]byte, sealedOK)
	if _, err := io.ReadFull(x.r, okb); err != nil {
		return nil, hsErr("peer %q refused us (keys differ? --cluster-key-file; with cluster.tls_*, is our certificate for our member name?): %v", sname, err)
	}
	if p, err := s2c.Open(nil, seqNonce(&x.nonce, 1), okb, t); err != nil || len(p) != 1 || p[0] != 1 {
		return nil, hsErr("peer %q sent a forged acceptance", sname)
	}
	t = append(t, okb...)
	if x.send, x.recv, err = k.frames(t); err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	x.peer = sname
	return x, nil
}

// serverHandshake authenticates c as the accepting side.
func serverHandshake(c net.Conn, key []byte, name string, maxFrame int, timeout time.Duration) (*xconn, error) {
	return serverHandshakeAdmit(c, key, name, maxFrame, timeout, nil)
}

// serverHandshakeAdmit is serverHandshake with admit, when set, called with
// the client's proven name before the server accepts it: an error refuses.
func serverHandshakeAdmit(c net.Conn, key []byte, name string, maxFrame int, timeout time.Duration, admit func(peer string) error) (*xconn, error) {
	if len(name) > maxNameLen {
		return nil, fmt.Errorf("cluster: exchange name of %d bytes: at most %d", len(name), maxNameLen)
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	x := &xconn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10), maxFrame: maxFrame}
	hello, old, err := readHello(x.r, "peer")
	if err != nil {
		if old {
			x.refuseOld()
		}
		return nil, err
	}
	ns, err := newNonce()
	if err != nil {
		return nil, err
	}
	k, err := newKeys(key, hello[len(hsMagic):], ns)
	if err != nil {
		return nil, err
	}
	c2s, s2c, err := k.handshake()
	if err != nil {
		return nil, err
	}
	t := append(append(hello, hsMagic...), ns...)
	mine := s2c.Seal(nil, seqNonce(&x.nonce, 0), padName(name), t)
	x.w.Write(t[helloLen:])
	x.w.Write(mine)
	t = append(t, mine...)
	if err := x.w.Flush(); err != nil {
		return nil, hsErr("send hello: %v", err)
	}
	sealed := make([]byte, sealedName)
	if _, err := io.ReadFull(x.r, sealed); err != nil {
		return nil, hsErr("peer closed the handshake without proving the cluster key (keys differ? --cluster-key-file): %v", err)
	}
	pn, err := c2s.Open(nil, seqNonce(&x.nonce, 0), sealed, t)
	cname, ok := unpadName(pn)
	if err != nil || !ok {
		return nil, hsErr("peer did not prove the cluster key (keys differ? --cluster-key-file)")
	}
	if admit != nil {
		if err := admit(cname); err != nil {
			return nil, err
		}
	}
	t = append(t, sealed...)
	okb := s2c.Seal(nil, seqNonce(&x.nonce, 1), []byte{1}, t)
	t = append(t, okb...)
	x.w.Write(okb)
	if err := x.w.Flush(); err != nil {
		return nil, hsErr("send accept to %q: %v", cname, err)
	}
	c2sF, s2cF, err := k.frames(t)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	x.peer = cname
	x.send, x.recv = s2cF, c2sF
	return x, nil
}

// refuseOld answers a hello of the first protocol with a hello of this one
// (so that the old peer reports a protocol mismatch, not a dead peer) after
// reading the rest of the old hello (closing with unread data would reset
// the connection before the answer is read).
func (x *xconn) refuseOld() {
	if n, err := binary.ReadUvarint(x.r); err == nil && n <= maxNameLen {
		_, _ = io.CopyN(io.Discard, x.r, int64(n))
	}
	x.w.WriteString(hsMagic)
	x.w.Write(make([]byte, nonceLen))
	_ = x.w.Flush()
}

// writeFrame seals one frame and flushes.
func (x *xconn) writeFrame(p []byte) error {
	if len(p) > x.maxFrame {
		return fmt.Errorf("cluster: frame of %d bytes exceeds max_frame=%d", len(p), x.maxFrame)
	}
	if x.sendSeq == math.MaxUint64 {
		return fmt.Errorf("cluster: connection to %s: sequence numbers exhausted", x.peer)
	}
	var l [frameHdrLen]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(p)+tagLen))
	x.wbuf = x.send.Seal(x.wbuf[:0], seqNonce(&x.nonce, x.sendSeq), p, l[:])
	x.sendSeq++
	x.w.Write(l[:])
	x.w.Write(x.wbuf)
	if err := x.w.Flush(); err != nil {
		return fmt.Errorf("cluster: write frame to %s: %w", x.peer, err)
	}
	return nil
}

// readFrame reads and opens one frame, rejecting oversized, truncated,
// forged, altered, replayed and reordered ones.
func (x *xconn) readFrame() ([]byte, error) {
	var l [frameHdrLen]byte
	if _, err := io.ReadFull(x.r, l[:]); err != nil {
		return nil, fmt.Errorf("cluster: read frame from %s: %w", x.peer, err)
	}
	n := binary.BigEndian.Uint32(l[:])
	if uint64(n) > uint64(x.maxFrame)+tagLen || n < tagLen {
		return nil, fmt.Errorf("cluster: frame from %s of %d bytes: must be %d..max_frame=%d+%d", x.peer, n, tagLen, x.maxFrame, tagLen)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(x.r, buf); err != nil {
		return nil, fmt.Errorf("cluster: read frame from %s: %w", x.peer, err)
	}
	p, err := x.recv.Open(buf[:0], seqNonce(&x.rnonce, x.recvSeq), buf, l[:])
	if err != nil {
		return nil, fmt.Errorf("cluster: frame %d from %s does not open (forged, altered, replayed or out of order)", x.recvSeq, x.peer)
	}
	x.recvSeq++
	return p, nil
}

func (x *xconn) Close() error { return x.c.Close() }
