package frontier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// precheck rejects a truncated bbolt file before bbolt maps it. bbolt trusts
// its meta page's high-water mark; with NoFreelistSync it walks every page
// at open in a goroutine of its own, where touching a page beyond the end of
// the file is a fatal fault that no recover can catch. So: find the newest
// valid meta page and require the file to hold all of its pages. Files
// without a valid meta page are left to bbolt, which reports them as
// invalid.
func precheck(path string) error {
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() || st.Size() == 0 {
		return nil // bbolt reports a directory; an empty file is initialized
	}
	// Meta page 1 sits one page in; without a valid meta 0, assume the
	// default 4 KiB page size as bbolt does.
	var best *boltMeta
	ps := int64(4096)
	if m0, ok := readMeta(fh, 0); ok {
		best, ps = &m0, int64(m0.pageSize)
	}
	if m1, ok := readMeta(fh, ps); ok && (best == nil || m1.txid > best.txid) {
		best = &m1
	}
	if best == nil {
		return nil
	}
	if need := int64(best.pgid) * int64(best.pageSize); need > st.Size() || best.pgid == 0 {
		return fmt.Errorf("truncated or corrupt bbolt file: %d bytes, its meta page needs %d", st.Size(), need)
	}
	return nil
}

type boltMeta struct {
	pageSize uint32
	pgid     uint64
	txid     uint64
}

// readMeta parses the bbolt meta page at off (page header 16 bytes, then
// magic, version, pageSize, flags, root bucket (16), freelist, pgid, txid,
// checksum; native little-endian) and validates magic, version and the
// FNV-64a checksum.
func readMeta(r io.ReaderAt, off int64) (boltMeta, bool) {
	var b [16 + 64]byte
	if _, err := r.ReadAt(b[:], off); err != nil {
		return boltMeta{}, false
	}
	m := b[16:]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != 0xED0CDAED || le.Uint32(m[4:]) != 2 {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:56])
	if h.Sum64() != le.Uint64(m[56:]) {
		return boltMeta{}, false
	}
	ps := le.Uint32(m[8:])
	if ps < 512 || ps > 1<<20 {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: ps, pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, true
}
