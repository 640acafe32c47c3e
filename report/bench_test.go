package report

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
)

// BenchmarkTallyAddEntry is the cost a page adds to the fetch path: one
// crawl-log line counted, from every worker at once (b.RunParallel), over
// 10,000 hosts.
func BenchmarkTallyAddEntry(b *testing.B) {
	ta := NewTally()
	es := make([]archive.LogEntry, 10000)
	for i := range es {
		es[i] = archive.LogEntry{Time: time.Now(), URL: fmt.Sprintf("http://h%d.example.test/page/%d", i, i), Status: 200, Bytes: 5000, MIME: "text/html", Reason: "ok"}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			ta.AddEntry(es[i%len(es)])
			i++
		}
	})
}

// BenchmarkTallyAddRefused is the cost of one refused link (depth,
// exclude, trap rules) of a host the node fetched from.
func BenchmarkTallyAddRefused(b *testing.B) {
	ta := NewTally()
	hosts := make([]string, 1000)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.example.test", i)
		ta.AddEntry(archive.LogEntry{URL: "http://" + hosts[i] + "/", Status: 200})
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			ta.AddRefused(hosts[i%len(hosts)], "depth", 1)
			i++
		}
	})
}

// BenchmarkRateAdd is the pages/s ring's cost per page.
func BenchmarkRateAdd(b *testing.B) {
	var r Rate
	now := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Add(now)
		}
	})
}

// BenchmarkTallyHostMemory reports the heap a host of the hosts report
// takes (bytes/host): 100,000 hosts of one page each.
func BenchmarkTallyHostMemory(b *testing.B) {
	const hosts = 100000
	urls := make([]string, hosts)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://www.host%d.example.test/", i)
	}
	var per float64
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ta := NewTally()
		for _, u := range urls {
			ta.AddEntry(archive.LogEntry{URL: u, Status: 200, Bytes: 1, MIME: "text/html", Reason: "ok"})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per = float64(after.HeapAlloc-before.HeapAlloc) / hosts
		runtime.KeepAlive(ta)
	}
	b.ReportMetric(per, "bytes/host")
}
