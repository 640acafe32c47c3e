package archive

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"sort"
)

// A record deflated Huffman only (no match search) spends most of its
// deflate time building the Huffman tables of its block (about 7 µs a
// member, whatever its size, against ~0.7 ns a byte for the coding), so
// appendStaticMember codes a record with one table built once, from the
// byte frequencies of HTML (htmlLitLens), written into every member as a
// dynamic-block header: a standard gzip member any inflater reads. Where
// that table suits the record badly (more than staticMaxBitsPerByte bits
// a byte: binary or mostly non-ASCII text), the caller deflates it with its
// own tables instead.

// htmlLitLens are the code lengths of the literals 0..255 and the end of
// block (256): a length-limited (15 bits) Huffman code of the byte
// frequencies of Go's doc/go_spec.html, go_mem.html and asm.html (English
// prose in HTML, ~360 KB; unrelated to the synthetic web the benchmarks
// crawl; Go 1.26.8) and 60 copies of a record's WARC and HTTP headers (headerSample
// in the tests, ~49 KB), each frequency raised to at least 1/65536 of the total so every
// byte has a code. TestHTMLLitLens regenerates and checks it.
var htmlLitLens = [257]uint8{
	15, 15, 15, 15, 15, 15, 15, 15, 15, 8, 5, 15, 15, 8, 15, 15,
	15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
	3, 14, 7, 9, 14, 15, 10, 10, 8, 8, 10, 11, 7, 7, 7, 6,
	7, 8, 8, 8, 8, 9, 8, 9, 9, 9, 7, 9, 5, 8, 5, 15,
	15, 8, 10, 8, 9, 10, 10, 10, 11, 9, 11, 11, 10, 10, 10, 10,
	9, 11, 9, 9, 8, 11, 11, 9, 11, 11, 12, 9, 12, 9, 15, 8,
	13, 4, 7, 5, 5, 4, 6, 7, 6, 5, 13, 9, 5, 6, 4, 5,
	5, 11, 5, 5, 4, 6, 7, 8, 8, 6, 10, 10, 11, 10, 13, 15,
	13, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
	15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
	15, 15, 15, 15, 15, 15, 13, 15, 15, 15, 15, 15, 15, 15, 15, 15,
	15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
	15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
	15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
	15, 15, 12, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
	15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
	15,
}

// staticMaxBitsPerByte: a record the static table codes in more bits a
// byte than this is deflated with tables of its own.
const staticMaxBitsPerByte = 6.25

// hcode is a Huffman code, bits reversed for the LSB-first bit stream.
type hcode struct {
	code uint16
	len  uint8
}

var (
	htmlCodes [257]hcode
	// htmlHeader is the gzip header and the dynamic block header up to
	// its last whole byte; htmlHeaderBits/N the bits after it.
	htmlHeader     []byte
	htmlHeaderBits uint64
	htmlHeaderN    uint
)

func init() {
	copy(htmlCodes[:], canonicalCodes(htmlLitLens[:]))
	var w bitWriter
	w.out = append(w.out, 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255) // gzip header: deflate, no flags, no mtime, OS unknown
	writeDynamicHeader(&w, htmlLitLens[:], []uint8{1, 1})
	htmlHeader, htmlHeaderBits, htmlHeaderN = w.out, w.bits, w.n
}

// appendStaticMember appends to dst one gzip member holding the
// concatenation of parts, Huffman coded with htmlLitLens. ok is false (dst
// unchanged) when that coding takes more than staticMaxBitsPerByte bits a
// byte.
func appendStaticMember(dst []byte, parts ...[]byte) (out []byte, ok bool) {
	start := len(dst)
	w := bitWriter{out: append(dst, htmlHeader...), bits: htmlHeaderBits, n: htmlHeaderN}
	var crc uint32
	total := 0
	for _, p := range parts {
		crc = crc32.Update(crc, crc32.IEEETable, p)
		for len(p) > 0 {
			chunk := p[:min(len(p), 4096)]
			p = p[len(chunk):]
			total += len(chunk)
			w.writeCodes(chunk)
			// (the headers first cost more a byte than the page: judge on
			// 4 KiB or more, and at the end)
			if total >= 4096 && float64(len(w.out)-start-len(htmlHeader)) > float64(total)*staticMaxBitsPerByte/8 {
				return dst[:start], false
			}
		}
	}
	w.writeCode(htmlCodes[256]) // end of block
	w.flush()
	if float64(len(w.out)-start-len(htmlHeader)) > float64(total)*staticMaxBitsPerByte/8+8 {
		return dst[:start], false
	}
	out = binary.LittleEndian.AppendUint32(w.out, crc)
	return binary.LittleEndian.AppendUint32(out, uint32(total)), true
}

// bitWriter writes a deflate bit stream (LSB first) to out.
type bitWriter struct {
	out  []byte
	bits uint64
	n    uint
}

func (w *bitWriter) writeBits(v uint64, n uint) {
	w.bits |= v << w.n
	w.n += n
	for w.n >= 8 {
		w.out = append(w.out, byte(w.bits))
		w.bits >>= 8
		w.n -= 8
	}
}

func (w *bitWriter) writeCode(c hcode) { w.writeBits(uint64(c.code), uint(c.len)) }

// writeCodes writes the htmlCodes of the bytes of p.
func (w *bitWriter) writeCodes(p []byte) {
	b, n := w.bits, w.n
	out := w.out
	for _, c := range p {
		h := htmlCodes[c]
		b |= uint64(h.code) << n
		n += uint(h.len)
		if n >= 32 {
			out = binary.LittleEndian.AppendUint32(out, uint32(b))
			b >>= 32
			n -= 32
		}
	}
	w.out, w.bits, w.n = out, b, n
}

// flush writes the last bits, padded to a byte.
func (w *bitWriter) flush() {
	for w.n > 0 {
		w.out = append(w.out, byte(w.bits))
		w.bits >>= 8
		w.n -= min(w.n, 8)
	}
	w.bits = 0
}

// canonicalCodes assigns deflate's canonical codes (RFC 1951 3.2.2) to
// code lengths, bit-reversed for writing.
func canonicalCodes(lens []uint8) []hcode {
	var count [16]int
	for _, l := range lens {
		if l > 0 {
			count[l]++
		}
	}
	var next [16]int
	code := 0
	for l := 1; l < 16; l++ {
		code = (code + count[l-1]) << 1
		next[l] = code
	}
	codes := make([]hcode, len(lens))
	for sym, l := range lens {
		if l == 0 {
			continue
		}
		c := next[l]
		next[l]++
		codes[sym] = hcode{code: uint16(bits.Reverse16(uint16(c)) >> (16 - l)), len: l}
	}
	return codes
}

// clenOrder is the order of the code length code lengths in a dynamic block header.
var clenOrder = [19]int{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

// writeDynamicHeader writes the header of a final dynamic-Huffman block
// with these literal/length and distance code lengths.
func writeDynamicHeader(w *bitWriter, lit, dist []uint8) {
	type rle struct {
		sym       int
		extra     uint64
		extraBits uint
	}
	all := append(append([]uint8(nil), lit...), dist...)
	var syms []rle
	for i := 0; i < len(all); {
		v := all[i]
		run := 1
		for i+run < len(all) && all[i+run] == v {
			run++
		}
		i += run
		if v == 0 {
			for run >= 11 {
				k := min(run, 138)
				syms = append(syms, rle{18, uint64(k - 11), 7})
				run -= k
			}
			if run >= 3 {
				syms = append(syms, rle{17, uint64(run - 3), 3})
				run = 0
			}
		} else {
			syms = append(syms, rle{int(v), 0, 0})
			run--
			for run >= 3 {
				k := min(run, 6)
				syms = append(syms, rle{16, uint64(k - 3), 2})
				run -= k
			}
		}
		for ; run > 0; run-- {
			syms = append(syms, rle{int(v), 0, 0})
		}
	}
	freq := make([]uint64, 19)
	for _, s := range syms {
		freq[s.sym]++
	}
	clens := limitedLengths(freq, 7)
	ccodes := canonicalCodes(clens)
	nclen := 4
	for i, s := range clenOrder {
		if clens[s] > 0 {
			nclen = max(nclen, i+1)
		}
	}
	w.writeBits(1, 1) // BFINAL
	w.writeBits(2, 2) // BTYPE: dynamic Huffman codes
	w.writeBits(uint64(len(lit)-257), 5)
	w.writeBits(uint64(len(dist)-1), 5)
	w.writeBits(uint64(nclen-4), 4)
	for _, s := range clenOrder[:nclen] {
		w.writeBits(uint64(clens[s]), 3)
	}
	for _, s := range syms {
		w.writeCode(ccodes[s.sym])
		if s.extraBits > 0 {
			w.writeBits(s.extra, s.extraBits)
		}
	}
}

// limitedLengths returns Huffman code lengths of at most maxLen bits for
// the symbols with a non-zero frequency (halving the frequencies until the
// code fits). Meant for tables built once, not per record.
func limitedLengths(freq []uint64, maxLen uint8) []uint8 {
	f := append([]uint64(nil), freq...)
	for {
		lens := huffmanLengths(f)
		longest := uint8(0)
		for _, l := range lens {
			longest = max(longest, l)
		}
		if longest <= maxLen {
			return lens
		}
		for i, v := range f {
			if v > 0 {
				f[i] = max(1, v/2)
			}
		}
	}
}

// huffmanLengths returns the code lengths of a Huffman code for the
// symbols with a non-zero frequency (a single symbol gets length 1).
func huffmanLengths(freq []uint64) []uint8 {
	type node struct {
		w      uint64
		parent int
	}
	var nodes []node
	var leaves []int
	for sym, w := range freq {
		if w > 0 {
			leaves = append(leaves, sym)
		}
	}
	lens := make([]uint8, len(freq))
	if len(leaves) == 1 {
		lens[leaves[0]] = 1
	}
	if len(leaves) <= 1 {
		return lens
	}
	sort.SliceStable(leaves, func(i, j int) bool { return freq[leaves[i]] < freq[leaves[j]] })
	for _, sym := range leaves {
		nodes = append(nodes, node{freq[sym], -1})
	}
	// two queues: leaves (sorted) and internal nodes (created in order of weight)
	li, ii := 0, len(nodes)
	pop := func() int {
		if li < len(leaves) && (ii >= len(nodes) || nodes[li].w <= nodes[ii].w) {
			li++
			return li - 1
		}
		ii++
		return ii - 1
	}
	for k := 0; k < len(leaves)-1; k++ {
		a, b := pop(), pop()
		nodes = append(nodes, node{nodes[a].w + nodes[b].w, -1})
		nodes[a].parent, nodes[b].parent = len(nodes)-1, len(nodes)-1
	}
	for i, sym := range leaves {
		d := uint8(0)
		for j := i; nodes[j].parent >= 0; j = nodes[j].parent {
			d++
		}
		lens[sym] = d
	}
	return lens
}
