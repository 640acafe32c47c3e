// Package hostile crawls a deliberately hostile web with a real node: endless redirect
// chains and loops, bodies over the size limit, slow-drip and silent servers, a gzip bomb, a
// page with 100,000 links, malformed HTML and odd charsets, hostile URLs, broken robots.txt
// files and infinite URL spaces. Each case has a host of its own under hostile.test, dialled
// on loopback through --resolve rules. The tests check that the node stays up, that its heap
// stays bounded, that every URL ends in a defined frontier state with a reason in the crawl
// log, and that a Prometheus series counts what happened.
package hostile
