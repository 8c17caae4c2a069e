//go:build !linux

package main

// trimStartupPages does nothing off Linux, where the mappings are not read
// from /proc.
func trimStartupPages() int64 { return 0 }
