package main

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// logWriter buffers log output and flushes it every interval, when the buffer
// fills, and on Close, so that the access line written per handoff costs no
// write(2) of its own on the request path (Envoy flushes its access logs the
// same way). Lines are never split: slog writes each record with one Write.
type logWriter struct {
	mu   sync.Mutex
	w    *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

func newLogWriter(w io.Writer, interval time.Duration) *logWriter {
	l := &logWriter{w: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go l.flusher(interval)
	return l
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *logWriter) flusher(interval time.Duration) {
	defer close(l.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.Flush()
		case <-l.stop:
			return
		}
	}
}

// Flush writes out what is buffered.
func (l *logWriter) Flush() {
	l.mu.Lock()
	_ = l.w.Flush()
	l.mu.Unlock()
}

// Close stops the flusher and flushes what is left.
func (l *logWriter) Close() {
	close(l.stop)
	<-l.done
	l.Flush()
}
