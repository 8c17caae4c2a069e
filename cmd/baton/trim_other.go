//go:build !linux

package main

// trimStartupPages does nothing where MADV_PAGEOUT does not exist.
func trimStartupPages() int64 { return 0 }
