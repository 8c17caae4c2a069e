//go:build !linux

package main

import "os"

// terminalSentToGroup is false: every signal is passed on to the command.
func terminalSentToGroup(os.Signal) bool { return false }
