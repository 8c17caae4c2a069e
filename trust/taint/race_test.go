//go:build race

package taint

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts of code that uses a pool are not meaningful.
const raceEnabled = true
