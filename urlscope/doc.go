// Package urlscope says what a URL is and whether the crawl wants it, from
// the URL alone and without I/O: one normalized form per resource
// (Normalize, Resolve; host syntax and IDNA; the canonicalization that
// strips session and tracking parameters, canonical.go), a host's
// registered domain under the public suffix list and the politeness unit
// it belongs to (domain.go), the crawl's scope (Scope: hosts, depth,
// include and exclude patterns) and the limits that keep it out of crawler
// traps (traps.go).
package urlscope
