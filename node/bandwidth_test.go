package node

import (
	"testing"

	"github.com/phasecrawl/phasecrawl/bandwidth"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// TestHostAmount: a site's data amount comes from its last round when it
// had one (the last round's mean page size times the URLs the current
// round has not fetched); on a first crawl from its bytes so far (the mean
// page size so far times its URLs not fetched yet).
func TestHostAmount(t *testing.T) {
	tests := []struct {
		name  string
		hs    frontier.HostStats
		want  bandwidth.Amount
		known bool
	}{
		{"nothing fetched", frontier.HostStats{Admitted: 10}, bandwidth.Amount{}, false},
		{"first crawl: bytes so far", frontier.HostStats{Admitted: 10, Fetched: 4, Bytes: 4000, RoundFetched: 4, RoundBytes: 4000},
			bandwidth.Amount{Left: 6 * 1000, PerPage: 1000, Recorded: 4000}, true},
		{"first crawl done", frontier.HostStats{Admitted: 10, Fetched: 10, Bytes: 10000, RoundFetched: 10, RoundBytes: 10000},
			bandwidth.Amount{Left: 0, PerPage: 1000, Recorded: 10000}, true},
		// The pages grew tenfold in the last round: the estimate follows
		// it, where the mean over all rounds would say 5500 a page.
		{"recrawl: the last round", frontier.HostStats{Admitted: 10, Fetched: 22, Bytes: 110000 + 2*10000,
			RoundFetched: 2, RoundBytes: 2 * 10000, LastRoundFetched: 10, LastRoundBytes: 100000},
			bandwidth.Amount{Left: 8 * 10000, PerPage: 10000, Recorded: 130000}, true},
		{"recrawl: more attempts than URLs (retries)", frontier.HostStats{Admitted: 10, Fetched: 32, Bytes: 300000,
			RoundFetched: 12, RoundBytes: 120000, LastRoundFetched: 10, LastRoundBytes: 100000},
			bandwidth.Amount{Left: 0, PerPage: 10000, Recorded: 300000}, true},
	}
	for _, tt := range tests {
		got, known := hostAmount(tt.hs)
		if got != tt.want || known != tt.known {
			t.Errorf("%s: %+v %v, want %+v %v", tt.name, got, known, tt.want, tt.known)
		}
	}
}
