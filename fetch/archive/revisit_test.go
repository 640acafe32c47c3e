package archive

import (
	"crypto/sha1"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"
)

// TestWARCRevisitRecords writes a response, then a revisit record of each
// profile, and reads them back with our reader and with nlnwa/gowarc in
// strict mode (digests checked).
func TestWARCRevisitRecords(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, 0)
	first := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	body := []byte("<html>same</html>")
	h := http.Header{"Content-Type": {"text/html"}, "Etag": {`"v1"`}}
	req := []byte("GET /p HTTP/1.1\r\nHost: a.test\r\n\r\n")
	const target = "http://a.test/p"
	if err := w.Write(Capture{Target: target, Date: first, Request: req, Response: HTTPResponseHead("HTTP/1.1", 200, h, len(body)), Body: body}); err != nil {
		t.Fatal(err)
	}
	digest := FormatDigest(sha1.Sum(body))
	if digest != Digest(body) {
		t.Fatalf("FormatDigest %s != Digest %s", digest, Digest(body))
	}
	same := Revisit{Profile: ProfileIdenticalPayload, RefersToTargetURI: target, RefersToDate: first, PayloadDigest: digest}
	if err := w.Write(Capture{Target: target, Date: first.Add(time.Minute), Request: req,
		Response: HTTPResponseHead("HTTP/1.1", 200, h, len(body)), Body: body, Revisit: &same}); err != nil {
		t.Fatal(err)
	}
	notMod := Revisit{Profile: ProfileNotModified, RefersToTargetURI: target, RefersToDate: first, PayloadDigest: digest}
	if err := w.Write(Capture{Target: target, Date: first.Add(2 * time.Minute), Request: req,
		Response: HTTPResponseBlock("HTTP/1.1", 304, http.Header{"Etag": {`"v1"`}}, nil), Revisit: &notMod}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file := w.Files()[0]
	recs, err := readAll(t, file)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 7 {
		t.Fatalf("%d records, want 7 (warcinfo + 3 × (request, response or revisit))", len(recs))
	}
	for i, want := range []struct {
		typ, profile string
	}{{"response", ""}, {"revisit", ProfileIdenticalPayload}, {"revisit", ProfileNotModified}} {
		r := recs[2+2*i]
		if r.h["WARC-Type"] != want.typ || r.h["WARC-Profile"] != want.profile {
			t.Errorf("record %d: type %q profile %q, want %q %q", i, r.h["WARC-Type"], r.h["WARC-Profile"], want.typ, want.profile)
		}
		if want.typ == "revisit" {
			if r.h["WARC-Refers-To-Target-URI"] != target || r.h["WARC-Refers-To-Date"] != "2026-11-25T09:00:00Z" || r.h["WARC-Payload-Digest"] != digest {
				t.Errorf("revisit %d: refers to %q at %q, payload %q", i, r.h["WARC-Refers-To-Target-URI"], r.h["WARC-Refers-To-Date"], r.h["WARC-Payload-Digest"])
			}
			if len(r.block) >= len(recs[2].block) {
				t.Errorf("revisit %d: block of %d bytes, the response's is %d (the body must not be stored again)", i, len(r.block), len(recs[2].block))
			}
		}
	}

	// Another reader: nlnwa/gowarc, strict.
	rd, err := gowarc.NewWarcFileReader(file, 0, gowarc.WithStrictValidation())
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var types []gowarc.RecordType
	var refs []*gowarc.RevisitRef
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("gowarc: record %d: %v", len(types), err)
		}
		wr := rec.WarcRecord
		if v, err := wr.ValidateDigest(); err != nil || len(v) > 0 {
			t.Errorf("gowarc: record %d (%s): digest validation %v %v", len(types), wr.Type(), v, err)
		}
		types = append(types, wr.Type())
		if wr.Type() == gowarc.Revisit {
			ref, err := wr.RevisitRef()
			if err != nil {
				t.Fatalf("gowarc: revisit ref: %v", err)
			}
			refs = append(refs, ref)
		}
		rec.Close()
	}
	want := []gowarc.RecordType{gowarc.Warcinfo, gowarc.Request, gowarc.Response, gowarc.Request, gowarc.Revisit, gowarc.Request, gowarc.Revisit}
	if len(types) != len(want) {
		t.Fatalf("gowarc read %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("gowarc read %v, want %v", types, want)
		}
	}
	if len(refs) != 2 || refs[0].Profile != ProfileIdenticalPayload || refs[1].Profile != ProfileNotModified ||
		refs[0].TargetUri != target || refs[1].TargetDate != "2026-11-25T09:00:00Z" {
		t.Fatalf("gowarc revisit refs: %+v %+v", refs[0], refs[1])
	}

	// EachCapture gives the response and both revisits, these with what
	// they refer to; EachResponse the response alone.
	var caps []RecordHeader
	if err := EachCapture(file, func(h RecordHeader, _ []byte) error { caps = append(caps, h); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(caps) != 3 || caps[0].Revisit != nil || caps[1].Revisit == nil || caps[2].Revisit == nil ||
		*caps[1].Revisit != same || *caps[2].Revisit != notMod {
		t.Fatalf("EachCapture: %+v", caps)
	}
	k := 0
	if err := EachResponse(file, func(RecordHeader, []byte) error { k++; return nil }); err != nil || k != 1 {
		t.Fatalf("EachResponse: %d records, %v", k, err)
	}
	if sum, ok := ParseDigest(digest); !ok || sum != sha1.Sum(body) {
		t.Fatalf("ParseDigest(%s) = %x, %v", digest, sum, ok)
	}
	for _, bad := range []string{"", "md5:" + digest[5:], "sha1:!!", "sha1:" + digest[5:20]} {
		if _, ok := ParseDigest(bad); ok {
			t.Errorf("ParseDigest(%q) accepted", bad)
		}
	}
}
