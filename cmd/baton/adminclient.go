package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// defaultAdmin is where the trace and dlq commands find a Baton.
const defaultAdmin = "127.0.0.1:15000"

// adminClient talks to a Baton's admin listener.
type adminClient struct {
	addr  string
	token string
	http  *http.Client
}

func newAdminClient(addr string, env func(string) string) *adminClient {
	return &adminClient{addr: addr, token: env("BATON_ADMIN_TOKEN"), http: &http.Client{Timeout: 30 * time.Second}}
}

// url is path on the admin listener.
func (c *adminClient) url(path string) string {
	if strings.Contains(c.addr, "://") {
		return strings.TrimSuffix(c.addr, "/") + path
	}
	return "http://" + c.addr + path
}

// do sends a request and decodes a JSON answer into v; a problem document
// becomes an error carrying its detail.
func (c *adminClient) do(method, path string, v any) error {
	return c.doWith(method, path, func() (*http.Request, error) { return http.NewRequest(method, c.url(path), nil) }, v)
}

// doWith is do with the request built by build.
func (c *adminClient) doWith(method, path string, build func() (*http.Request, error), v any) error {
	req, err := build()
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin %s: %w", c.addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("admin %s: reading: %w", c.addr, err)
	}
	if resp.StatusCode >= 300 {
		var p struct{ Title, Detail string }
		if json.Unmarshal(body, &p) == nil && p.Title != "" {
			return &adminError{status: resp.StatusCode, msg: p.Title + ": " + p.Detail}
		}
		return &adminError{status: resp.StatusCode, msg: strings.TrimSpace(string(body))}
	}
	if v == nil || len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("admin %s: decoding %s: %w", c.addr, path, err)
	}
	return nil
}

type adminError struct {
	status int
	msg    string
}

func (e *adminError) Error() string { return fmt.Sprintf("%d %s", e.status, e.msg) }

func isNotFound(err error) bool {
	var ae *adminError
	return errors.As(err, &ae) && ae.status == http.StatusNotFound
}

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func pathEscape(s string) string { return url.PathEscape(s) }
