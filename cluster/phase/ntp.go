package phase

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/beevik/ntp"

	"github.com/phasecrawl/phasecrawl/internal/clock"
)

// driftRate is the frequency tolerance assumed for the local clock between
// measurements (RFC 5905's PHI, 15 ppm): uncertainty grows by this much per
// second since the last good sample.
const driftRate = 15e-6

// ClockConfig configures a Clock.
type ClockConfig struct {
	// Servers are NTP servers as host or host:port (default port 123). Every
	// server is queried in each round. Empty: the local clock is used and
	// the state reports Synced=false.
	Servers []string
	// Interval between measurement rounds. Default 1m, valid 1s..24h.
	Interval time.Duration
	// Timeout of one query. Default 3s, valid 10ms..1m.
	Timeout time.Duration
	// UnsyncedUncertainty is reported by Uncertainty while no valid sample
	// was ever measured. Default 1s, valid 0..1h.
	UnsyncedUncertainty time.Duration
	// Logger receives warnings (no server reachable) and sync changes.
	// Default slog.Default().
	Logger *slog.Logger
	// Local is the local clock the measured offset corrects, and the one
	// the drift since the last sample and the rounds of Run are timed on.
	// Default clock.Real (the NTP exchange itself reads the system clock).
	Local clock.Clock
}

// DefaultClockConfig returns the defaults for servers.
func DefaultClockConfig(servers ...string) ClockConfig {
	return ClockConfig{Servers: servers, Interval: time.Minute, Timeout: 3 * time.Second, UnsyncedUncertainty: time.Second}
}

// Validate checks the configuration; errors name the key and allowed range.
func (c ClockConfig) Validate() error {
	for i, s := range c.Servers {
		if s == "" {
			return fmt.Errorf("cluster: ntp servers[%d]: must be host or host:port, not empty", i)
		}
	}
	switch {
	case c.Interval < time.Second || c.Interval > 24*time.Hour:
		return fmt.Errorf("cluster: ntp_interval=%s: must be in 1s..24h", c.Interval)
	case c.Timeout < 10*time.Millisecond || c.Timeout > time.Minute:
		return fmt.Errorf("cluster: ntp_timeout=%s: must be in 10ms..1m", c.Timeout)
	case c.UnsyncedUncertainty < 0 || c.UnsyncedUncertainty > time.Hour:
		return fmt.Errorf("cluster: ntp_unsynced_uncertainty=%s: must be in 0..1h", c.UnsyncedUncertainty)
	}
	return nil
}

// ClockState is what the Clock knows about cluster time, for /v1/status and
// metrics.
type ClockState struct {
	// Synced is true when the last round produced a valid sample.
	Synced bool `json:"synced"`
	// Offset is added to the local clock to get cluster time (kept from the
	// last good sample when a later round fails; 0 if there never was one).
	Offset time.Duration `json:"offset"`
	// RootDistance of the chosen sample (0 if none).
	RootDistance time.Duration `json:"root_distance"`
	// RTT of the chosen sample (0 if none).
	RTT time.Duration `json:"rtt"`
	// Stratum of the chosen server (0 if none).
	Stratum uint8 `json:"stratum"`
	// Server is the chosen server ("" if none).
	Server string `json:"server"`
	// LastSync is the local time of the last good sample (zero if none).
	LastSync time.Time `json:"last_sync"`
	// Err is the last round's error: every server's failure, joined (nil
	// when the round succeeded).
	Err error `json:"-"`
}

// Clock is the cluster clock: the local clock corrected by the offset
// measured against NTP servers with beevik/ntp. Responses are validated,
// the sample with the smallest root distance wins. The caller owns the
// measurement loop (Run); Now and Uncertainty are cheap and safe for
// concurrent use.
type Clock struct {
	cfg   ClockConfig
	log   *slog.Logger
	local clock.Clock

	offset atomic.Int64 // time.Duration

	mu    sync.Mutex
	state ClockState
	good  bool // a good sample was ever measured
}

// NewClock returns a Clock with zero offset; call Sync or Run to measure.
func NewClock(cfg ClockConfig) (*Clock, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	return &Clock{cfg: cfg, log: lg.With("component", "ntp"), local: clock.Or(cfg.Local)}, nil
}

// Now returns cluster time: the local clock plus the measured offset.
func (c *Clock) Now() time.Time { return c.local.Now().Add(c.Offset()) }

// Offset returns cluster time minus local time.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Uncertainty bounds the error of Now: the root distance of the chosen
// sample (at least RTT/2) plus 15 ppm drift since it was taken, or
// UnsyncedUncertainty when there never was a valid sample.
func (c *Clock) Uncertainty() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.good {
		return c.cfg.UnsyncedUncertainty
	}
	u := max(c.state.RootDistance, c.state.RTT/2)
	age := c.local.Since(c.state.LastSync)
	if age > 0 {
		u += time.Duration(float64(age) * driftRate)
	}
	return u
}

// State returns a copy of the clock's state.
func (c *Clock) State() ClockState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Run measures now and then every Interval until ctx is done; it returns
// ctx.Err(). Failures are logged and kept in State, never returned.
func (c *Clock) Run(ctx context.Context) error {
	t := c.local.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		_ = c.Sync(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
	}
}

// sample is one server's validated response.
type sample struct {
	server string
	resp   *ntp.Response
}

// Sync runs one measurement round: every server is queried at once (each
// bounded by Timeout), invalid responses are dropped, and the valid sample
// with the smallest root distance (then RTT) sets the offset. With no valid
// sample it logs a warning, keeps the previous offset (0 if none), reports
// Synced=false and returns the joined errors.
func (c *Clock) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var err error
	var best *sample
	if len(c.cfg.Servers) == 0 {
		err = errors.New("cluster: ntp: no servers configured")
	} else {
		best, err = c.measure()
	}
	c.mu.Lock()
	wasSynced := c.state.Synced
	if best != nil {
		r := best.resp
		c.good = true
		c.state = ClockState{
			Synced: true, Offset: r.ClockOffset, RootDistance: r.RootDistance, RTT: r.RTT,
			Stratum: r.Stratum, Server: best.server, LastSync: c.local.Now(),
		}
		c.offset.Store(int64(r.ClockOffset))
	} else {
		c.state.Synced = false
		c.state.Err = err
	}
	st := c.state
	c.mu.Unlock()

	if best == nil {
		c.log.Warn("no NTP server usable; cluster time falls back to the local clock (with the last measured offset, if any)",
			"servers", c.cfg.Servers, "offset", st.Offset, "err", err)
		return err
	}
	if !wasSynced {
		c.log.Info("cluster clock synchronized", "server", st.Server, "offset", st.Offset,
			"root_distance", st.RootDistance, "stratum", st.Stratum)
	}
	return nil
}

// measure queries every server concurrently and returns the best valid
// sample, or the joined errors when there is none.
func (c *Clock) measure() (*sample, error) {
	type result struct {
		s   sample
		err error
	}
	res := make([]result, len(c.cfg.Servers))
	var wg sync.WaitGroup
	for i, srv := range c.cfg.Servers {
		wg.Go(func() {
			r, err := ntp.QueryWithOptions(srv, ntp.QueryOptions{Timeout: c.cfg.Timeout})
			if err == nil {
				err = r.Validate()
				if err != nil && r.IsKissOfDeath() {
					err = fmt.Errorf("%w (kiss code %q)", err, r.KissCode)
				}
			}
			if err != nil {
				res[i] = result{err: fmt.Errorf("cluster: ntp %s: %w", srv, err)}
				return
			}
			res[i] = result{s: sample{server: srv, resp: r}}
		})
	}
	wg.Wait()
	var best *sample
	var errs []error
	for i := range res {
		if res[i].err != nil {
			errs = append(errs, res[i].err)
			continue
		}
		if s := &res[i].s; best == nil || better(s.resp, best.resp) {
			best = s
		}
	}
	if best == nil {
		return nil, errors.Join(errs...)
	}
	return best, nil
}

// better reports whether a is a better sample than b: smaller root distance
// (counting at least RTT/2), then smaller RTT.
func better(a, b *ntp.Response) bool {
	da, db := max(a.RootDistance, a.RTT/2), max(b.RootDistance, b.RTT/2)
	if da != db {
		return da < db
	}
	return a.RTT < b.RTT
}
