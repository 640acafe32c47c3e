//go:build !race

package bench

// raceOn: see race_test.go.
const raceOn = false
