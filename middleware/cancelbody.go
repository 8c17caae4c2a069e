package middleware

import (
	"context"
	"io"
)

// CancelOnClose returns body, which ends its call's context (cancel) when
// it is closed: for a call made under a context of its own, whose answer
// outlives the function that made it.
func CancelOnClose(body io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	return &cancelBody{ReadCloser: body, cancel: cancel}
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
