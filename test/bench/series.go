package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SeriesEnv, when set to 1 in the environment, makes each crawl record a
// timeline (Result.Series): pages fetched and process CPU per SeriesStep,
// and for phasecrawl its frontier and bucket state, so idle time (wall time
// the process spends off the CPU) can be placed in the crawl: the ramp-up,
// stalls, the tail. A measurement aid only: off by default.
const SeriesEnv = "PHASECRAWL_BENCH_SERIES"

// SeriesStep is the timeline's sampling period.
const SeriesStep = 250 * time.Millisecond

// Sample is one point of a crawl's timeline (cumulative values at At).
type Sample struct {
	At    time.Duration // since the crawl's start
	Pages int64
	CPU   time.Duration
	Idle  time.Duration // the machine's idle CPU time so far (all cores, /proc/stat; 0 elsewhere)
	Extra string        // crawler state (phasecrawl: frontier and bucket counts)
}

// seriesOn reports whether timelines are wanted.
func seriesOn() bool { return os.Getenv(SeriesEnv) == "1" }

// sampler records a timeline until stop is called.
type sampler struct {
	start time.Time
	cpu0  time.Duration
	idle0 time.Duration
	pages func() int64
	extra func() string
	quit  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	out   []Sample
}

// startSampler starts sampling every SeriesStep when seriesOn, else returns nil.
func startSampler(start time.Time, cpu0 time.Duration, pages func() int64, extra func() string) *sampler {
	if !seriesOn() {
		return nil
	}
	s := &sampler{start: start, cpu0: cpu0, idle0: machineIdle(), pages: pages, extra: extra, quit: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(SeriesStep)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
				s.take()
			}
		}
	}()
	return s
}

func (s *sampler) take() {
	x := Sample{At: time.Since(s.start), Pages: s.pages(), CPU: cpuTime() - s.cpu0, Idle: machineIdle() - s.idle0}
	if s.extra != nil {
		x.Extra = s.extra()
	}
	s.out = append(s.out, x)
}

// stop ends sampling, adds a last sample now, and returns the timeline;
// later calls return the same timeline.
func (s *sampler) stop() []Sample {
	if s == nil {
		return nil
	}
	s.once.Do(func() {
		close(s.quit)
		s.wg.Wait()
		s.take()
	})
	return s.out
}

// FormatSeries renders a timeline, one line per sample: time, pages and
// busy cores in the step, and the crawler's state; then a summary of idle
// core-seconds (cores*step - CPU) at the start, in the middle and at the
// end (the tail: the steps after 95% of the pages).
func FormatSeries(series []Sample, cores int) string {
	if len(series) == 0 {
		return ""
	}
	var b strings.Builder
	var prev Sample
	total := series[len(series)-1].Pages
	var idleHead, idleMid, idleTail float64
	var headEnd, tailStart time.Duration
	for i, x := range series {
		dt := (x.At - prev.At).Seconds()
		dcpu := (x.CPU - prev.CPU).Seconds()
		idle := float64(cores)*dt - dcpu
		switch {
		case prev.Pages < total/20:
			idleHead += idle
			headEnd = x.At
		case prev.Pages >= total*95/100:
			idleTail += idle
			if tailStart == 0 {
				tailStart = prev.At
			}
		default:
			idleMid += idle
		}
		fmt.Fprintf(&b, "%3d %6.2fs pages %6d (+%5d) busy %.2f machine-idle %.2f %s\n", i, x.At.Seconds(), x.Pages, x.Pages-prev.Pages,
			dcpu/max(dt, 1e-9), (x.Idle-prev.Idle).Seconds()/max(dt, 1e-9), x.Extra)
		prev = x
	}
	last := series[len(series)-1]
	fmt.Fprintf(&b, "machine idle core-s (other processes' load shows as idle of ours that the machine did not have): %.2f\n", last.Idle.Seconds())
	fmt.Fprintf(&b, "idle core-s: first 5%% of pages (to %.2fs) %.2f, middle %.2f, last 5%% (from %.2fs) %.2f; total %.2f of %.2f (%.2f cores busy on average)\n",
		headEnd.Seconds(), idleHead, idleMid, tailStart.Seconds(), idleTail, idleHead+idleMid+idleTail,
		float64(cores)*last.At.Seconds(), last.CPU.Seconds()/last.At.Seconds())
	return b.String()
}

// machineIdle is the machine's idle plus iowait CPU time so far, summed over
// its cores (the "cpu" line of /proc/stat, in USER_HZ = 1/100 s); 0 when
// /proc/stat cannot be read.
func machineIdle() time.Duration {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, s := range fields[4:6] { // idle, iowait
		v, _ := strconv.ParseInt(s, 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
