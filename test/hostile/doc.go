// Package hostile crawls a deliberately hostile web with a real node: endless redirect
// chains and loops, bodies over the size limit, slow-drip and silent servers, a gzip bomb,
// pages with 100,000 or a million links, deep nesting and a 10 MiB attribute, malformed HTML
// and odd charsets, hostile URLs, lying content types, odd status codes, broken robots.txt
// files, infinite URL spaces, and from a hand-written server short bodies, bad chunking,
// resets after the headers, huge headers, HTTP/0.9 and endless 100 Continue. Each case has a
// host of its own under hostile.test, dialled on loopback through --resolve rules, without
// --allow-private. The tests check that the node stays up, that its heap stays bounded, that
// every URL ends in a defined frontier state with a reason in the crawl log, that a failure
// inside one response never sets its host's other pages aside, that no link or redirect
// reaches an address the node was not given, and that a Prometheus series counts what
// happened. The crawl runs in a network namespace with only loopback (unshare -n).
package hostile
