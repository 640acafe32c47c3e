package node

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

func TestPlanAPIAndSpare(t *testing.T) {
	srv, _ := site(t)
	c := testConfig(t, srv)
	c.Recrawl.Interval = time.Hour
	c.Sites = []config.Site{{Match: "127.0.0.1", Priority: 7, Deadline: 10 * time.Minute}}
	n, stop := start(t, c)
	defer stop()
	host := strings.TrimPrefix(srv.URL, "http://")
	wait.For(t, 30*time.Second, "crawl", func() bool {
		k := n.Frontier().Counts()
		return k.InList == 0 && k.InProgress == 0 && k.Completed == 5
	})
	// One host of 6 URLs at a 1 ms delay, revisited hourly. Before its
	// round is measured the round is estimated: 6 × 1 ms.
	hs, ok, err := n.Frontier().Host(host)
	if err != nil || !ok {
		t.Fatalf("host stats: %v %v", ok, err)
	}
	hs.RoundTime, hs.LastRoundTime = 0, 0
	if d, measured := n.roundEstimate(hs); d != 6*time.Millisecond || measured {
		t.Fatalf("roundEstimate without a measured round = %v, %v; want 6ms, estimated", d, measured)
	}
	// Once every trip is reported (no element fetching, the trip time
	// writes applied: a later write waits for them), the round is the
	// trips' time, and the spare time 3600 s minus it.
	wait.For(t, 30*time.Second, "trips reported", func() bool {
		sn := n.snap.Load()
		return sn != nil && sn.bucket.Fetching == 0 && sn.pending == 0
	})
	if _, err := n.Frontier().ReleaseDue(context.Background(), time.Now(), 1); err != nil {
		t.Fatal(err)
	}
	hs, _, _ = n.Frontier().Host(host)
	_, _, took, measured := hs.LatestRound()
	if !measured || took <= 0 || took > 10*time.Second {
		t.Fatalf("latest round %v, %v (stats %+v); want measured", took, measured, hs)
	}
	spare, ok, err := n.computeSpare()
	if err != nil || !ok || math.Abs(spare-(3600-took.Seconds())) > 1e-9 {
		t.Fatalf("computeSpare = %v, %v, %v; want %v", spare, ok, err, 3600-took.Seconds())
	}
	n.spare.Store(&spare)
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.spareGauge())
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "phasecrawl_plan_spare_seconds" || mfs[0].GetMetric()[0].GetGauge().GetValue() != spare {
		t.Fatalf("phasecrawl_plan_spare_seconds: %v %v; want %v", mfs, err, spare)
	}
	resp, err := http.Get("http://" + n.Addr().String() + "/v1/plan?limit=10")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page PlanPage
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/plan: %d %v", resp.StatusCode, err)
	}
	if len(page.Sites) != 1 || page.Next != "" || page.SpareS == nil || *page.SpareS != spare {
		t.Fatalf("plan page: %+v", page)
	}
	s := page.Sites[0]
	if s.Host != host || s.Priority != 7 || s.RevisitS != 3600 || s.DeadlineS != 600 || s.Pages != 6 || s.Bytes == 0 ||
		s.LastRoundS != took.Seconds() || !s.LastRoundMeasured || s.NextDue == nil || time.Until(*s.NextDue) < 59*time.Minute {
		t.Fatalf("plan site: %+v", s)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x"} {
		r, err := http.Get("http://" + n.Addr().String() + "/v1/plan?" + q)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusBadRequest {
			t.Errorf("/v1/plan?%s: %d, want 400", q, r.StatusCode)
		}
	}
}
