package cluster

import (
	"bytes"
	"context"
	"strconv"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/robots"
)

// robots.txt is per-host state that the whole cluster shares: the phases
// let one member at a time talk to a host, so the member that fetched a
// host's robots.txt hands the outcome to every other member at once
// (KindRobots, sent without waiting for a batch to fill). By the time the
// host's phase reaches another member, at least a phase guard later, that
// member has the record and does not fetch it again until it expires, TTL
// after the original fetch on every member.

// RobotsCache takes the robots.txt records other members fetched
// (*robots.Cache implements it).
type RobotsCache interface {
	Import(robots.Record)
}

// maxRobotsBody: a longer canonical robots.txt is not shared (every member
// then fetches its own copy).
const maxRobotsBody = exchange.MaxEntryURL - 32

// ShareRobots implements node.Router: it files rec, a robots.txt this node
// fetched, under every other member and sends it at once. Failures are
// logged: a member without the record fetches its own copy.
func (c *Cluster) ShareRobots(rec robots.Record) {
	if len(rec.Body) > maxRobotsBody || rec.Key == "" || len(rec.Key) > exchange.MaxEntryHost {
		return
	}
	u := frontier.NewURL{Host: rec.Key, Depth: min(max(rec.Status, 0), 999),
		URL: strconv.FormatInt(rec.Fetched.UnixMilli(), 10) + "\n" + string(rec.Body)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for peer := range *c.addrs.Load() {
		if peer == c.cfg.Name {
			continue
		}
		if err := c.outbox.PutKind(ctx, peer, exchange.KindRobots, []frontier.NewURL{u}); err != nil {
			c.log.Warn("cannot share a robots.txt with a member: it will fetch its own", "member", peer, "error", err)
			continue
		}
		c.x.Flush(peer)
	}
}

// importRobots stores the robots.txt records another member shared.
func (c *Cluster) importRobots(urls []frontier.NewURL) int {
	if c.cfg.Robots == nil {
		return 0
	}
	n := 0
	for _, u := range urls {
		ms, body, ok := bytes.Cut([]byte(u.URL), []byte("\n"))
		t, err := strconv.ParseInt(string(ms), 10, 64)
		if !ok || err != nil {
			c.log.Warn("dropping a malformed robots.txt record from a member")
			continue
		}
		c.cfg.Robots.Import(robots.Record{Key: u.Host, Status: u.Depth, Body: body, Fetched: time.UnixMilli(t)})
		n++
	}
	return n
}
