package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// streamResult is what one client stream saw.
type streamResult struct {
	id       int
	start    time.Time
	ttfe     time.Duration // request start to the first whole event; 0 if none came
	end      time.Time
	received int // events with this stream's id and a sequence number in range
	lost     int // sequence numbers never received
	dup      int // sequence numbers received more than once
	reorder  int // events that came after one with a higher sequence number
	foreign  int // events of another stream, or malformed
	err      error
}

// ok reports whether the stream got every event once, in order, and ended
// cleanly.
func (s *streamResult) ok() bool {
	return s.err == nil && s.lost == 0 && s.dup == 0 && s.reorder == 0 && s.foreign == 0
}

// sseLoad is one run of concurrent streams.
type sseLoad struct {
	url     string
	host    string // Host header ("" for the URL's)
	streams int
	events  int           // events each stream must receive
	ramp    time.Duration // stream i starts at ramp*i/streams
	timeout time.Duration // per stream, from its start
	client  *http.Client

	open, peakOpen atomic.Int64 // streams whose headers came and whose body has not ended
}

// newSSEClient returns the client the streams share: one connection per
// stream (HTTP/1.1 holds a connection for the whole response), or with h2c
// HTTP/2 without TLS, a connection per 250 streams; a few kept idle
// afterwards, no proxy from the environment, no compression.
func newSSEClient(streams int, h2c bool) *http.Client {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		MaxIdleConns:          streams,
		MaxIdleConnsPerHost:   64,
		DisableCompression:    true,
		ResponseHeaderTimeout: 60 * time.Second,
	}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		t.Protocols = &p
	}
	return &http.Client{Transport: t}
}

// run starts every stream on its schedule and returns each one's result,
// in stream order, once all have ended.
func (l *sseLoad) run(ctx context.Context) []streamResult {
	res := make([]streamResult, l.streams)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range l.streams {
		if l.ramp > 0 {
			at := t0.Add(l.ramp * time.Duration(i) / time.Duration(l.streams))
			if d := time.Until(at); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
		if ctx.Err() != nil {
			for j := i; j < l.streams; j++ {
				res[j] = streamResult{id: j, err: ctx.Err(), lost: l.events}
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = l.stream(ctx, i)
		}()
	}
	wg.Wait()
	return res
}

// stream runs stream id: one POST, then reads and checks every event.
func (l *sseLoad) stream(ctx context.Context, id int) (r streamResult) {
	r.id = id
	r.start = time.Now()
	seen := make([]bool, l.events+1)
	defer func() {
		r.end = time.Now()
		for _, s := range seen[1:] {
			if !s {
				r.lost++
			}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := openStream(ctx, l.client, l.url, l.host, id)
	if err != nil {
		r.err = err
		return r
	}
	defer resp.Body.Close()
	if n := l.open.Add(1); n > l.peakOpen.Load() {
		for p := l.peakOpen.Load(); n > p && !l.peakOpen.CompareAndSwap(p, n); p = l.peakOpen.Load() {
		}
	}
	defer l.open.Add(-1)
	maxSeq := 0
	r.err = readSSE(resp.Body, func(data []byte) bool {
		if r.ttfe == 0 {
			r.ttfe = time.Since(r.start)
		}
		var ev sseEvent
		if json.Unmarshal(data, &ev) != nil || ev.Stream != id || ev.Seq < 1 || ev.Seq > l.events {
			r.foreign++
			return true
		}
		switch {
		case seen[ev.Seq]:
			r.dup++
			return true
		case ev.Seq < maxSeq:
			r.reorder++
		}
		seen[ev.Seq] = true
		r.received++
		maxSeq = max(maxSeq, ev.Seq)
		return true
	})
	return r
}

// openStream POSTs stream id's request and checks that the answer is a
// 200 text/event-stream; the caller closes its body.
func openStream(ctx context.Context, c *http.Client, url, host string, id int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url,
		bytes.NewReader(fmt.Appendf(nil, `{"stream":%d}`, id)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || mt != "text/event-stream" {
		got, _ := io.ReadAll(io.LimitReader(resp.Body, 2<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("%s, Content-Type %q: %s", resp.Status, resp.Header.Get("Content-Type"), snippet(got))
	}
	return resp, nil
}

// readSSE reads a text/event-stream to its end and calls event with the data
// of each event (its data lines joined by newlines), until event returns
// false. As in the HTML standard, a block without data lines (a comment, a
// retry) is no event. A stream that ends in the middle of an event or of a
// line is an error; so is a read error.
func readSSE(body io.Reader, event func(data []byte) bool) error {
	br := bufio.NewReaderSize(body, 4<<10)
	var data []byte
	pending := false // a data line of the current event has been read
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) == 0 && !pending {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return errors.New("stream ended in the middle of an event")
			}
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if pending && !event(data) {
				return nil
			}
			data, pending = data[:0], false
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if pending {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			pending = true
		}
	}
}

// sseSummary is what the streams of a run add up to.
type sseSummary struct {
	Streams        int      `json:"streams"`
	Completed      int      `json:"completed"` // every event once, in order, clean end
	Failed         int      `json:"failed"`    // an error (status, connection, timeout)
	EventsExpected int      `json:"events_expected"`
	Received       int      `json:"events_received"`
	Lost           int      `json:"events_lost"`
	Duplicated     int      `json:"events_duplicated"`
	Reordered      int      `json:"events_reordered"`
	Foreign        int      `json:"events_foreign"`
	PeakOpen       int64    `json:"peak_open_streams"`
	TTFEp50Ms      float64  `json:"ttfe_p50_ms"`
	TTFEp99Ms      float64  `json:"ttfe_p99_ms"`
	TTFEMaxMs      float64  `json:"ttfe_max_ms"`
	DurationS      float64  `json:"duration_s"` // first stream's start to last stream's end
	Errors         []string `json:"errors,omitempty"`
}

// summarize adds the streams' results up; errors holds a few distinct ones.
func summarize(res []streamResult, events int, peakOpen int64) sseSummary {
	s := sseSummary{Streams: len(res), EventsExpected: len(res) * events, PeakOpen: peakOpen}
	var ttfe []time.Duration
	var first, last time.Time
	errCount := map[string]int{}
	var errOrder []string
	for i := range res {
		r := &res[i]
		s.Received += r.received
		s.Lost += r.lost
		s.Duplicated += r.dup
		s.Reordered += r.reorder
		s.Foreign += r.foreign
		if r.ok() {
			s.Completed++
		}
		if r.err != nil {
			s.Failed++
			msg := r.err.Error()
			if errCount[msg] == 0 {
				errOrder = append(errOrder, msg)
			}
			errCount[msg]++
		}
		if r.ttfe > 0 {
			ttfe = append(ttfe, r.ttfe)
		}
		if !r.start.IsZero() && (first.IsZero() || r.start.Before(first)) {
			first = r.start
		}
		if r.end.After(last) {
			last = r.end
		}
	}
	slices.Sort(ttfe)
	s.TTFEp50Ms, s.TTFEp99Ms = ms(quantile(ttfe, 0.50)), ms(quantile(ttfe, 0.99))
	if len(ttfe) > 0 {
		s.TTFEMaxMs = ms(ttfe[len(ttfe)-1])
	}
	if !first.IsZero() {
		s.DurationS = last.Sub(first).Seconds()
	}
	for i, msg := range errOrder {
		if i == 5 {
			s.Errors = append(s.Errors, fmt.Sprintf("… and %d other errors", len(errOrder)-i))
			break
		}
		s.Errors = append(s.Errors, strconv.Itoa(errCount[msg])+"× "+msg)
	}
	return s
}

// quantile returns the q-quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)) + 0.999999999)
	i = min(max(i, 1), len(sorted))
	return sorted[i-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// lossless reports whether every stream got every event once and in order.
func (s *sseSummary) lossless() bool {
	return s.Completed == s.Streams && s.Lost == 0 && s.Duplicated == 0 && s.Reordered == 0 && s.Foreign == 0
}
