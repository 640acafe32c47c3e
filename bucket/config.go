package bucket

import (
	"fmt"
	"strings"
	"time"
)

// Limits of the configuration keys (KSpider §3.4: nColumn 199..4999 prime,
// rows 4..16, list of 20 URLs).
const (
	MinColumns      = 199
	MaxColumns      = 4999
	MinRows         = 4
	MaxRows         = 16
	MinListCap      = 1
	MaxListCap      = 1000
	MaxMaxQueueWait = time.Minute
)

// Config sizes the Bucket. The zero value is not usable; start from DefaultConfig.
type Config struct {
	// Columns is nColumn, the number of columns; a host's column is
	// hostHash % Columns. Default 1999; must be a prime in 199..4999 and
	// differ from Phases (config key bucket.columns).
	Columns int
	// Rows is the number of elements per column, i.e. how many hosts that
	// collide in a column can be held at once. Default 8, valid 4..16
	// (bucket.rows).
	Rows int
	// ListCap is the number of URLs an element holds; a full element is
	// dispatched at once. Default 20, valid 1..1000 (bucket.list_cap).
	ListCap int
	// MaxQueueWait is how long a QUEUING element waits for more URLs before it
	// is dispatched anyway, so small hosts never starve. Default 1s, valid
	// (0, 1m] (bucket.max_queue_wait).
	MaxQueueWait time.Duration
	// Phases is Nphase, used only to check Columns != Phases (a bucket whose
	// column count equals the phase count is unbalanced). Default 1; 0 means 1.
	Phases int
}

// DefaultConfig returns the paper's sizes: 1999 columns × 8 rows, lists of 20
// URLs, a 1s maximum queue wait, one phase.
func DefaultConfig() Config {
	return Config{Columns: 1999, Rows: 8, ListCap: 20, MaxQueueWait: time.Second, Phases: 1}
}

// Validate checks every field. The error names each bad config key and its
// allowed range, e.g. "bucket.columns=2000: must be a prime in 199..4999";
// several problems are joined with "; ".
func (c Config) Validate() error {
	var errs []string
	if c.Columns < MinColumns || c.Columns > MaxColumns || !IsPrime(c.Columns) {
		errs = append(errs, fmt.Sprintf("bucket.columns=%d: must be a prime in %d..%d", c.Columns, MinColumns, MaxColumns))
	} else if c.Columns == c.Phases {
		errs = append(errs, fmt.Sprintf("bucket.columns=%d: must differ from the number of phases (%d), or the bucket is unbalanced", c.Columns, c.Phases))
	}
	if c.Rows < MinRows || c.Rows > MaxRows {
		errs = append(errs, fmt.Sprintf("bucket.rows=%d: must be in %d..%d", c.Rows, MinRows, MaxRows))
	}
	if c.ListCap < MinListCap || c.ListCap > MaxListCap {
		errs = append(errs, fmt.Sprintf("bucket.list_cap=%d: must be in %d..%d", c.ListCap, MinListCap, MaxListCap))
	}
	if c.MaxQueueWait <= 0 || c.MaxQueueWait > MaxMaxQueueWait {
		errs = append(errs, fmt.Sprintf("bucket.max_queue_wait=%s: must be > 0 and <= %s", c.MaxQueueWait, MaxMaxQueueWait))
	}
	if c.Phases < 0 {
		errs = append(errs, fmt.Sprintf("phases=%d: must be >= 1 (0 means 1)", c.Phases))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// IsPrime reports whether n is a prime number (trial division; meant for
// configuration-sized n).
func IsPrime(n int) bool {
	if n < 2 {
		return false
	}
	if n%2 == 0 {
		return n == 2
	}
	for d := 3; d*d <= n; d += 2 {
		if n%d == 0 {
			return false
		}
	}
	return true
}
