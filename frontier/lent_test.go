package frontier

import (
	"testing"
)

// TestScanSince: the cursor returned reads only what was queued after it.
func TestScanSince(t *testing.T) {
	f := open(t, nil)
	add := func(urls ...string) {
		var us []NewURL
		for _, u := range urls {
			us = append(us, NewURL{URL: u, Host: "a.test"})
		}
		if _, err := f.Add(ctx, us); err != nil {
			t.Fatal(err)
		}
	}
	add("http://a.test/1", "http://a.test/2", "http://a.test/3")
	recs, cur, err := f.ScanSince(0, nil, 2)
	if err != nil || len(recs) != 2 || recs[0].URL != "http://a.test/1" {
		t.Fatalf("first read: %v, %v", recs, err)
	}
	recs, cur, err = f.ScanSince(0, cur, 10)
	if err != nil || len(recs) != 1 || recs[0].URL != "http://a.test/3" {
		t.Fatalf("second read: %v, %v", recs, err)
	}
	recs, cur2, err := f.ScanSince(0, cur, 10)
	if err != nil || len(recs) != 0 || string(cur2) != string(cur) {
		t.Fatalf("read at the end: %v, %v (cursor moved: %v)", recs, err, string(cur2) != string(cur))
	}
	add("http://a.test/4")
	if recs, _, err = f.ScanSince(0, cur, 10); err != nil || len(recs) != 1 || recs[0].URL != "http://a.test/4" {
		t.Fatalf("read after an add: %v, %v", recs, err)
	}
	if _, _, err := f.ScanSince(5, nil, 1); err == nil {
		t.Error("ScanSince accepted a phase out of range")
	}
}
