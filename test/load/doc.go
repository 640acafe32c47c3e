// Package load puts the node's API under load: one POST /v1/seeds streaming a million URLs
// (memory must stay flat), and a hundred clients posting seeds and reading status while a
// crawl runs (the crawl must still complete, exactly).
package load
