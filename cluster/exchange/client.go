package exchange

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// ClientConfig configures Dial. Zero values take the defaults of
// DefaultConfig.
type ClientConfig struct {
	Name             string // name the client gives in the handshake. Required.
	Key              []byte // cluster key (--cluster-key-file). Required.
	MaxFrame         int    // largest batch frame, default 8 MiB (the receivers' default max)
	DialTimeout      time.Duration
	HandshakeTimeout time.Duration
	AckTimeout       time.Duration
}

// Client is one authenticated connection to a node's exchange
// listener, outside of any Stream: it sends batches of entries and waits
// for each one's ack (stop and wait), as a Stream's sender does. The
// receiver files each entry by its kind exactly as it files a member's
// (forwarding URLs it does not own, keeping moved records for its
// rebalance), and stores nothing twice: it dedups by fingerprint, so a batch
// sent again is harmless. Not safe for concurrent use.
type Client struct {
	cfg  ClientConfig
	addr string
	xc   *xconn
}

// Dial connects to the exchange listening at addr and authenticates
// with the cluster key.
func Dial(ctx context.Context, addr string, cfg ClientConfig) (*Client, error) {
	d := DefaultConfig()
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = d.MaxFrame
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = d.DialTimeout
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = d.HandshakeTimeout
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = d.AckTimeout
	}
	switch {
	case cfg.Name == "" || len(cfg.Name) > maxNameLen:
		return nil, fmt.Errorf("cluster: exchange client name=%q: must be 1..%d bytes", cfg.Name, maxNameLen)
	case cfg.MaxFrame < 1<<20 || cfg.MaxFrame > 64<<20:
		return nil, fmt.Errorf("cluster: exchange client max_frame=%d: must be 1 MiB..64 MiB", cfg.MaxFrame)
	}
	if err := CheckKey(cfg.Key); err != nil {
		return nil, err
	}
	dl := net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 15 * time.Second}
	c, err := dl.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cluster: dial exchange %s: %w", addr, err)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	xc, err := clientHandshake(c, cfg.Key, cfg.Name, cfg.MaxFrame, cfg.HandshakeTimeout)
	if err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("cluster: exchange %s: %w", addr, ctx.Err())
		}
		return nil, fmt.Errorf("cluster: exchange %s: %w", addr, err)
	}
	return &Client{cfg: cfg, addr: addr, xc: xc}, nil
}

// Peer returns the member name the receiver gave in the handshake.
func (c *Client) Peer() string { return c.xc.peer }

// MaxBatchBytes is the most encoded entry bytes one batch may carry.
func (c *Client) MaxBatchBytes() int { return c.cfg.MaxFrame - 64 }

// ErrNack is wrapped by Send's error when the receiver answered that it
// could not store the batch (it is leaving, its disk failed...): sending
// the batch again later may succeed.
var ErrNack = errNack

// Send sends one batch and waits for its ack; it returns how many of its
// entries were new to the receiver's frontier (entries it forwarded to
// their owners are not counted). id should differ from batch to batch (the
// receiver echoes it in its ack). After an error other than ErrNack the
// connection is unusable: Close it and dial again.
func (c *Client) Send(ctx context.Context, id uint64, entries []Entry) (uint64, error) {
	for _, e := range entries {
		if err := checkEntry(e); err != nil {
			return 0, fmt.Errorf("cluster: batch %d: entry %q: %w", id, e.URL, err)
		}
	}
	stop := context.AfterFunc(ctx, func() { c.xc.c.Close() })
	defer stop()
	wrap := func(err error) error {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("cluster: exchange %s (%s): batch %d: %w", c.addr, c.xc.peer, id, err)
	}
	if err := c.xc.writeFrame(EncodeBatch(Batch{ID: id, Entries: entries})); err != nil {
		return 0, wrap(err)
	}
	_ = c.xc.c.SetReadDeadline(time.Now().Add(c.cfg.AckTimeout))
	p, err := c.xc.readFrame()
	if err != nil {
		return 0, wrap(fmt.Errorf("no ack within %s: %w", c.cfg.AckTimeout, err))
	}
	a, err := decodeAck(p)
	if err != nil {
		return 0, wrap(err)
	}
	if a.ID != id {
		return 0, wrap(fmt.Errorf("acked batch %d instead", a.ID))
	}
	if a.Status != 0 {
		return 0, wrap(fmt.Errorf("%w: %s", errNack, a.Msg))
	}
	return a.Added, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	if err := c.xc.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("cluster: close exchange connection to %s: %w", c.addr, err)
	}
	return nil
}

// Valid checks e as the receiver's decoder does (kind, URL and host
// lengths, depth): a batch with one invalid entry is refused whole.
func (e Entry) Valid() error { return checkEntry(e) }

// EntrySize is the encoded size of e in a batch.
func EntrySize(e Entry) int { return len(appendEntry(nil, e)) }

// String returns the kind's name: "new", "done", "moved", "replica",
// "scope", "robots", "lend", "outcome", "facets" or "copied".
func (k Kind) String() string {
	switch k {
	case KindNew:
		return "new"
	case KindDone:
		return "done"
	case KindMoved:
		return "moved"
	case KindReplica:
		return "replica"
	case KindScope:
		return "scope"
	case KindRobots:
		return "robots"
	case KindLend:
		return "lend"
	case KindOutcome:
		return "outcome"
	case KindFacets:
		return "facets"
	case KindCopied:
		return "copied"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}
