package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// pollClient is for readiness checks: no keep-alive (each poll is a fresh
// connection, as a kubelet probe is), no proxy from the environment, and a
// short timeout so that one stuck poll cannot stall the loop.
var pollClient = &http.Client{
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	Timeout:   500 * time.Millisecond,
}

// getStatus returns the status of a GET to url.
func getStatus(url string) (int, error) {
	resp, err := pollClient.Get(url)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// probe sends one request exactly like wrk's (POST, JSON body, Host) and
// checks that it reached the bench agent and came back unchanged. A row
// whose probe fails is reported with what came back instead of being
// measured: wrk would only count it as non-2xx.
func probe(url, host string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if host != "" {
		req.Host = host
	}
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("probe POST %s (Host %q): %w", url, host, err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK || string(got) != agentBody || resp.Header.Get(agentMarker) == "" {
		return fmt.Errorf("probe POST %s (Host %q): want 200 from the agent, got %s, Content-Type %q, body %s",
			url, host, resp.Status, resp.Header.Get("Content-Type"), snippet(got))
	}
	return nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return fmt.Sprintf("%q", s)
}
