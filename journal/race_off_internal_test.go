//go:build !race

package journal

// raceEnabled: the race detector changes what a call allocates.
const raceEnabled = false
