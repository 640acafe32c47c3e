package cluster_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
)

// flow is one direction of a TCP connection, or the UDP datagrams from one
// address to another.
type flow struct {
	src, dst netip.AddrPort
	udp      bool
}

func (f flow) String() string {
	proto := "tcp"
	if f.udp {
		proto = "udp"
	}
	return fmt.Sprintf("%s %s>%s", proto, f.src, f.dst)
}

// stream is the payload of a flow in order (TCP segments reassembled by
// sequence number, retransmissions dropped; UDP datagrams concatenated).
type stream struct {
	data    []byte
	next    uint32 // next TCP sequence number expected
	started bool
	packets int
}

// capture is a pcap file read back: the raw bytes and every flow's stream.
type capture struct {
	raw     []byte
	packets int
	streams map[flow]*stream
}

// readPcap reads a classic pcap file (any byte order, micro or nanosecond
// timestamps) of Ethernet, Linux cooked (v1, v2) or BSD loopback frames
// carrying IPv4 or IPv6, and reassembles its TCP and UDP payloads.
func readPcap(path string) (*capture, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(raw) < 24 {
		return nil, fmt.Errorf("pcap %s: %d bytes, no header", path, len(raw))
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(raw) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("pcap %s: not a pcap file (magic %x)", path, raw[:4])
	}
	link := bo.Uint32(raw[20:]) & 0xffff
	c := &capture{raw: raw, streams: map[flow]*stream{}}
	for off := 24; off+16 <= len(raw); {
		incl := int(bo.Uint32(raw[off+8:]))
		orig := int(bo.Uint32(raw[off+12:]))
		off += 16
		if incl > len(raw)-off {
			return nil, fmt.Errorf("pcap %s: truncated packet at %d", path, off)
		}
		if incl < orig {
			return nil, fmt.Errorf("pcap %s: packet %d cut to %d of %d bytes (snapshot length)", path, c.packets, incl, orig)
		}
		pkt := raw[off : off+incl]
		off += incl
		c.packets++
		if err := c.add(link, pkt); err != nil {
			return nil, fmt.Errorf("pcap %s: packet %d: %w", path, c.packets, err)
		}
	}
	return c, nil
}

var errShort = errors.New("short packet")

// add decodes one link-layer frame.
func (c *capture) add(link uint32, p []byte) error {
	var etype uint16
	switch link {
	case 1: // Ethernet
		if len(p) < 14 {
			return errShort
		}
		etype, p = binary.BigEndian.Uint16(p[12:]), p[14:]
	case 113: // Linux cooked v1
		if len(p) < 16 {
			return errShort
		}
		etype, p = binary.BigEndian.Uint16(p[14:]), p[16:]
	case 276: // Linux cooked v2
		if len(p) < 20 {
			return errShort
		}
		etype, p = binary.BigEndian.Uint16(p[0:]), p[20:]
	case 0: // BSD loopback: host-order family
		if len(p) < 4 {
			return errShort
		}
		etype, p = 0x0800, p[4:]
		if len(p) > 0 && p[0]>>4 == 6 {
			etype = 0x86dd
		}
	default:
		return fmt.Errorf("link type %d not read", link)
	}
	var src, dst netip.Addr
	var proto byte
	switch etype {
	case 0x0800:
		if len(p) < 20 {
			return errShort
		}
		ihl, total := int(p[0]&0x0f)*4, int(binary.BigEndian.Uint16(p[2:]))
		if ihl < 20 || total < ihl || total > len(p) {
			return fmt.Errorf("bad IPv4 header")
		}
		src, dst = netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20]))
		proto, p = p[9], p[ihl:total]
	case 0x86dd:
		if len(p) < 40 {
			return errShort
		}
		plen := int(binary.BigEndian.Uint16(p[4:]))
		if 40+plen > len(p) {
			return fmt.Errorf("bad IPv6 header")
		}
		src, dst = netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40]))
		proto, p = p[6], p[40:40+plen] // no extension headers on loopback
	default:
		return nil // ARP and the like
	}
	switch proto {
	case 6: // TCP
		if len(p) < 20 {
			return errShort
		}
		doff := int(p[12]>>4) * 4
		if doff < 20 || doff > len(p) {
			return fmt.Errorf("bad TCP header")
		}
		f := flow{src: netip.AddrPortFrom(src, binary.BigEndian.Uint16(p[0:])), dst: netip.AddrPortFrom(dst, binary.BigEndian.Uint16(p[2:]))}
		seq, flags, payload := binary.BigEndian.Uint32(p[4:]), p[13], p[doff:]
		s := c.stream(f)
		s.packets++
		if flags&0x02 != 0 { // SYN: the data starts at seq+1
			s.next, s.started = seq+1, true
			return nil
		}
		if len(payload) == 0 {
			return nil
		}
		if !s.started {
			s.next, s.started = seq, true
		}
		d := int32(seq - s.next)
		switch {
		case d < 0 && -d >= int32(len(payload)):
			return nil // retransmitted
		case d < 0:
			payload = payload[-d:]
		case d > 0: // a gap (a packet the capture missed)
			return fmt.Errorf("%s: %d bytes missing before seq %d", f, d, seq)
		}
		s.data = append(s.data, payload...)
		s.next += uint32(len(payload))
	case 17: // UDP
		if len(p) < 8 {
			return errShort
		}
		f := flow{src: netip.AddrPortFrom(src, binary.BigEndian.Uint16(p[0:])), dst: netip.AddrPortFrom(dst, binary.BigEndian.Uint16(p[2:])), udp: true}
		s := c.stream(f)
		s.packets++
		s.data = append(s.data, p[8:]...)
	}
	return nil
}

func (c *capture) stream(f flow) *stream {
	s := c.streams[f]
	if s == nil {
		s = &stream{}
		c.streams[f] = s
	}
	return s
}

// finder finds which of many needles (at least finderPrefix bytes each)
// occur in a text, in one pass over the text.
type finder struct {
	byPrefix map[uint64][]string
}

const finderPrefix = 6

func prefixKey(b []byte) uint64 {
	var k uint64
	for _, c := range b[:finderPrefix] {
		k = k<<8 | uint64(c)
	}
	return k
}

func newFinder(needles []string) *finder {
	f := &finder{byPrefix: map[uint64][]string{}}
	for _, n := range needles {
		if len(n) < finderPrefix {
			panic("finder: needle shorter than the prefix: " + n) // test setup error
		}
		k := prefixKey([]byte(n))
		if !slices.Contains(f.byPrefix[k], n) {
			f.byPrefix[k] = append(f.byPrefix[k], n)
		}
	}
	return f
}

// find returns the needles found in text.
func (f *finder) find(text []byte) []string {
	var out []string
	seen := map[string]bool{}
	var k uint64
	const mask = 1<<(8*finderPrefix) - 1
	for i, c := range text {
		k = (k<<8 | uint64(c)) & mask
		if i < finderPrefix-1 {
			continue
		}
		start := i - finderPrefix + 1
		for _, n := range f.byPrefix[k] {
			if !seen[n] && len(text)-start >= len(n) && string(text[start:start+len(n)]) == n {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}
