package edgehealth

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"
)

// Scrape reads a Baton's metrics as its GET /metrics handler h serves them,
// in process (no request on the network), taken at at.
func Scrape(ctx context.Context, h http.Handler, at time.Time) (*Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	var rw buffered
	h.ServeHTTP(&rw, req)
	if rw.status != 0 && rw.status != http.StatusOK {
		return nil, fmt.Errorf("the metrics handler answered %d", rw.status)
	}
	return Read(&rw.body, at)
}

// buffered keeps what a handler writes.
type buffered struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *buffered) Header() http.Header {
	if b.header == nil {
		b.header = http.Header{}
	}
	return b.header
}

func (b *buffered) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *buffered) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}
