package node

import (
	"testing"

	"github.com/phasecrawl/phasecrawl/internal/layout"
)

// TestLayout holds every non-test file of the package to the layout
// limits: at most 25 fields a struct (state goes into owned parts of its
// own), 800 lines a file (files split by job).
func TestLayout(t *testing.T) { layout.Check(t, ".", false, 10) }
