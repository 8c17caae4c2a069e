//go:build sidecar

package main

// The sidecar's build (`go build -tags sidecar`, as the image's build
// script does) leaves out the commands only developers and the injector
// need (tools.go): the demo, chaos, inject and inject-webhook, and what
// they link, so that the binary beside every agent carries and maps less.

import (
	"context"
	"fmt"
	"io"
)

// toolsUsage names what this build leaves out.
const toolsUsage = `  (demo, chaos, inject and inject-webhook are in the full build: the injector's image,
   or go run ./cmd/baton)
`

// toolCmd says the command is not in this build.
func toolCmd(_ context.Context, cmd string, _ []string, _, _ io.Writer, _ func(string) string) error {
	return usageError{msg: fmt.Sprintf("%s is not in the sidecar's build of baton: it is in the full build (the injector's image, or go run ./cmd/baton %s)", cmd, cmd)}
}
