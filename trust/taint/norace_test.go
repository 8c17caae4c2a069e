//go:build !race

package taint

const raceEnabled = false
