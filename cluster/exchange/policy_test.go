package exchange

import (
	"testing"
	"time"
)

func TestBatchDue(t *testing.T) {
	const minB, delay = 250, 300 * time.Millisecond
	tests := []struct {
		name      string
		pending   int
		sinceLast time.Duration
		retry     bool
		want      bool
	}{
		{"empty never", 0, time.Hour, true, false},
		{"few, fresh", 10, 10 * time.Millisecond, false, false},
		{"few, delay passed", 10, delay, false, true},
		{"min batch reached", minB, 0, false, true},
		{"retry goes at once", 1, 0, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := BatchDue(tc.pending, minB, tc.sinceLast, delay, tc.retry); got != tc.want {
				t.Fatalf("BatchDue(%d, %d, %s, %s, %v) = %v, want %v", tc.pending, minB, tc.sinceLast, delay, tc.retry, got, tc.want)
			}
		})
	}
}
