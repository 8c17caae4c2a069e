//go:build linux

package main

import (
	"os"
	"syscall"
	"unsafe"
)

// terminalSentToGroup tells whether the terminal sent sig to the command
// itself: a SIGINT typed as ^C goes to the terminal's foreground process
// group, which is ours, and the command, which shares it, has it already.
// Passing it on would interrupt the command twice. A SIGINT sent to Baton
// alone (kill -INT) while it runs in the foreground is taken for the
// terminal's; every other signal is passed on.
func terminalSentToGroup(sig os.Signal) bool {
	if sig != syscall.SIGINT {
		return false
	}
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false // no controlling terminal
	}
	defer tty.Close()
	var fg int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, tty.Fd(), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&fg))); errno != 0 {
		return false
	}
	return int(fg) == syscall.Getpgrp()
}
