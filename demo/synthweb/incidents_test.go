package synthweb

import (
	"strings"
	"testing"
	"time"
)

func TestIncidents(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	v := func(uri string, from, to int) Visit { return Visit{URI: uri, Start: at(from), End: at(to)} }
	need := func(string) time.Duration { return 100 * time.Millisecond }
	tests := []struct {
		name   string
		visits []Visit
		want   []string // "kind@ms"
	}{
		{"polite", []Visit{v("/robots.txt", 0, 5), v("/", 100, 110), v("/a", 200, 201)}, nil},
		{"recorded out of order", []Visit{v("/a", 200, 201), v("/", 100, 110)}, nil},
		{"duplicate", []Visit{v("/", 0, 5), v("/a", 100, 105), v("/", 200, 205)}, []string{"duplicate@200"}},
		{"robots twice is no duplicate", []Visit{v("/robots.txt", 0, 5), v("/robots.txt", 100, 105)}, nil},
		{"overlap", []Visit{v("/", 0, 150), v("/a", 120, 130)}, []string{"overlap@120"}},
		{"overlap with an earlier long one", []Visit{v("/", 0, 500), v("/a", 120, 130), v("/b", 300, 310)}, []string{"overlap@120", "overlap@300"}},
		{"gap", []Visit{v("/", 0, 5), v("/a", 50, 55)}, []string{"gap@50"}},
		{"1ms tolerance", []Visit{v("/", 0, 5), v("/a", 99, 100)}, nil},
		{"overlap and gap", []Visit{v("/", 0, 10), v("/a", 5, 12)}, []string{"overlap@5", "gap@5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, in := range Incidents(map[string][]Visit{"h.test": tt.visits}, need) {
				if in.Host != "h.test" || in.Detail == "" {
					t.Errorf("incident %v", in)
				}
				got = append(got, in.Kind+"@"+strings.TrimSuffix(in.At.Sub(t0).String(), "ms"))
				if in.Kind == "duplicate" && !in.Prev.Equal(t0) {
					t.Errorf("duplicate's previous fetch at %v, want the first one (0)", in.Prev.Sub(t0))
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("incidents %v, want %v", got, tt.want)
			}
		})
	}
}
