//go:build race

package bench

// raceOn: the race detector slows a crawl of a Zipf-heavy web several
// times over; TestCorrectZipf checks one of the webs then.
const raceOn = true
