package main

import (
	"context"
	"io"
)

func demo(ctx context.Context, args []string, stdout io.Writer) error { return nil }
