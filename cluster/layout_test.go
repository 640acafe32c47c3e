package cluster

import (
	"testing"

	"github.com/phasecrawl/phasecrawl/internal/layout"
)

// TestLayout holds every non-test file of the package and of its
// subpackages (membership, lend, exchange, ring) to the layout limits: at
// most 25 fields a struct, 800 lines a file.
func TestLayout(t *testing.T) { layout.Check(t, ".", true, 20) }
