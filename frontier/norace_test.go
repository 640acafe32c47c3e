//go:build !race

package frontier

const raceEnabled = false
