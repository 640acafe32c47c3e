package main

import (
	"testing"

	"github.com/phasecrawl/phasecrawl/internal/layout"
)

// TestLayout holds every non-test Go file of the tree (the command, its
// packages, the test harnesses and the deploy module) to the layout
// limits: at most 25 fields a struct (state goes into owned parts of its
// own), 800 lines a file (files split by job).
func TestLayout(t *testing.T) { layout.Check(t, ".", true, 200) }
