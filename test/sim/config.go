package sim

import (
	"fmt"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/cluster/exchange"
)

// Config is one simulated run. Zero values take the defaults, which are
// phasecrawl's own (config.Default, bucket.DefaultConfig,
// exchange.DefaultConfig) where the product has the setting.
type Config struct {
	Nodes    int           // cluster size; default 3, valid 1..10000
	Seed     uint64        // RNG seed (response times, cross links)
	Duration time.Duration // virtual time simulated; default 5m
	// Solo runs one node without the cluster layer (no phases, no guard):
	// the reference for the ideal throughput.
	Solo bool
	// NoLend turns URL lending off (cluster.lend=false). The zero value
	// keeps the product's default, lending on: an owner lends the URLs
	// that wait for their host's phase to the member working on that
	// phase now, which fetches them in its own host trip and reports each
	// outcome back (docs/design/lending.md).
	NoLend bool

	Workers       int           // fetch workers per node; default 256 (workers)
	Delay         time.Duration // politeness delay per host; default 1s (delay); negative = 0
	Bucket        bucket.Config // default bucket.DefaultConfig()
	PhaseDuration time.Duration // default 30s (cluster.phase_duration)
	Guard         time.Duration // default min(5s, phase_duration/4); the node's auto cluster.guard is min(250ms, phase_duration/4) (--guard 250ms)
	Uncertainty   time.Duration // cluster clock uncertainty; default 20ms
	// Exchange gives the batching policy: MaxBatch, MinBatch, MaxDelay
	// (cluster.batch_delay). Default exchange.DefaultConfig().
	Exchange      exchange.Config
	NetLatency    time.Duration // one-way node-to-node latency; default 1ms
	StoreTime     time.Duration // receiver's commit before its ack; default 2ms
	DetectAfter   time.Duration // gossip's time to declare a silent member dead; default 5s
	TakeoverAfter time.Duration // cluster.takeover_after; default 2m; negative = 0

	Loss      *Loss      // a node dies for good
	Partition *Partition // a minority is cut off and fenced, then heals
}

// Loss kills node Node (index in name order) at virtual time At.
type Loss struct {
	At   time.Duration
	Node int
}

// Partition cuts the last Minority nodes (in name order) off the others at
// At for For: they are fenced (start no request) until they are members
// again, the others declare them dead after DetectAfter.
type Partition struct {
	At, For  time.Duration
	Minority int
}

func (c *Config) fill() error {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Minute
	}
	if c.Workers == 0 {
		c.Workers = 256
	}
	if c.Delay == 0 {
		c.Delay = time.Second
	} else if c.Delay < 0 {
		c.Delay = 0 // --delay 0
	}
	if c.Bucket.Columns == 0 {
		c.Bucket = bucket.DefaultConfig()
	}
	if c.PhaseDuration == 0 {
		c.PhaseDuration = 30 * time.Second
	}
	if c.Guard == 0 {
		c.Guard = min(5*time.Second, c.PhaseDuration/4)
	}
	if c.Uncertainty == 0 {
		c.Uncertainty = 20 * time.Millisecond
	}
	d := exchange.DefaultConfig()
	if c.Exchange.MaxBatch == 0 {
		c.Exchange.MaxBatch = d.MaxBatch
	}
	if c.Exchange.MinBatch == 0 {
		c.Exchange.MinBatch = min(d.MinBatch, c.Exchange.MaxBatch)
	}
	if c.Exchange.MaxDelay == 0 {
		c.Exchange.MaxDelay = d.MaxDelay
	}
	if c.NetLatency == 0 {
		c.NetLatency = time.Millisecond
	}
	if c.StoreTime == 0 {
		c.StoreTime = 2 * time.Millisecond
	}
	if c.DetectAfter == 0 {
		c.DetectAfter = 5 * time.Second
	}
	if c.TakeoverAfter == 0 {
		c.TakeoverAfter = 2 * time.Minute
	}
	c.TakeoverAfter = max(c.TakeoverAfter, 0)
	switch {
	case c.Nodes < 1 || c.Nodes > 10000:
		return fmt.Errorf("sim: nodes=%d: must be in 1..10000", c.Nodes)
	case c.Solo && c.Nodes != 1:
		return fmt.Errorf("sim: solo needs nodes=1, got %d", c.Nodes)
	case c.Duration <= 0 || c.Duration > 24*time.Hour:
		return fmt.Errorf("sim: duration=%s: must be in (0, 24h]", c.Duration)
	case c.Workers < 1 || c.Workers > 4096:
		return fmt.Errorf("sim: workers=%d: must be in 1..4096", c.Workers)
	case c.Delay < 0 || c.Delay > time.Hour:
		return fmt.Errorf("sim: delay=%s: must be in 0..1h", c.Delay)
	case c.Exchange.MinBatch < 1 || c.Exchange.MinBatch > c.Exchange.MaxBatch:
		return fmt.Errorf("sim: exchange min_batch=%d: must be in 1..max_batch (%d)", c.Exchange.MinBatch, c.Exchange.MaxBatch)
	case c.Loss != nil && (c.Loss.Node < 0 || c.Loss.Node >= c.Nodes || c.Nodes < 2):
		return fmt.Errorf("sim: loss node=%d: must be in 0..nodes-1 with nodes >= 2", c.Loss.Node)
	case c.Partition != nil && (c.Partition.Minority < 1 || 2*c.Partition.Minority >= c.Nodes):
		return fmt.Errorf("sim: partition minority=%d: must be in 1..(nodes-1)/2", c.Partition.Minority)
	}
	b := c.Bucket
	b.Phases = 0
	if err := b.Validate(); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}
