package middleware

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonproxy/baton/problem"
)

func TestAccessLogLine(t *testing.T) {
	t.Parallel()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	tests := []struct {
		name   string
		side   Side
		level  slog.Level // of the logger; info unless set
		fill   func(*Info)
		status int
		reply  string
		want   map[string]any // members of the line; nil: no line
		absent []string       // members the line must not have
	}{
		{
			name: "egress handoff", side: Egress, status: http.StatusCreated, reply: "hello",
			fill: func(in *Info) {
				in.From, in.To, in.TraceID, in.Hop = "analyst", "summarizer", trace, 2
				in.Key, in.KeyDerived = "bk-0123", true
			},
			want: map[string]any{"level": "INFO", "msg": "handoff", "side": "egress", "trace_id": trace,
				"edge": "analyst→summarizer", "method": "POST", "target": "/tasks?x=1", "status": 201.0,
				"bytes_in": 2.0, "bytes_out": 5.0, "hop": 2.0, "idempotency_key": "bk-0123", "key_derived": true},
			absent: []string{"error", "abort"},
		},
		{
			name: "ingress upstream failure", side: Ingress, status: http.StatusBadGateway, reply: "down",
			fill: func(in *Info) {
				in.From, in.To, in.TraceID, in.Hop = "analyst", "summarizer", trace, 3
				in.Err = errors.New("dial tcp: connection refused")
			},
			want: map[string]any{"level": "WARN", "side": "ingress", "edge": "analyst→summarizer", "status": 502.0,
				"hop": 3.0, "error": "dial tcp: connection refused"},
			absent: []string{"idempotency_key", "abort"},
		},
		{
			name: "external fetch has no hop", side: Egress, status: http.StatusOK, reply: "{}",
			fill: func(in *Info) { in.From, in.External, in.TraceID = "analyst", "api.example.com:443", trace },
			want: map[string]any{"level": "INFO", "edge": "analyst→api.example.com:443", "status": 200.0,
				"bytes_out": 2.0},
			absent: []string{"hop"},
		},
		{
			name: "refusal before resolution", side: Egress, status: http.StatusForbidden, reply: "no",
			fill: func(in *Info) { in.TraceID = trace },
			want: map[string]any{"level": "INFO", "edge": "→", "status": 403.0, "trace_id": trace},
		},
		{
			name: "info lines off at warn level", side: Egress, level: slog.LevelWarn, status: http.StatusOK,
			fill: func(*Info) {},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf strings.Builder
			log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tc.level}))
			var seen *Info
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = InfoFromContext(r.Context())
				if seen == nil {
					t.Fatal("no Info in the context")
				}
				if seen.Side != tc.side || seen.Agent != "analyst" || seen.Start.IsZero() {
					t.Errorf("Info = %+v, want side %v, agent analyst and a start time", seen, tc.side)
				}
				tc.fill(seen)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.reply)
			})
			rec := httptest.NewRecorder()
			AccessLog(log, tc.side, "analyst")(next).ServeHTTP(rec, httptest.NewRequest(http.MethodPost,
				"http://summarizer/tasks?x=1", strings.NewReader("{}")))

			if rec.Code != tc.status || rec.Body.String() != tc.reply {
				t.Errorf("client got %d %q, want %d %q", rec.Code, rec.Body, tc.status, tc.reply)
			}
			if seen.Status() != tc.status || !seen.Written() {
				t.Errorf("Info.Status() = %d, Written() = %v; want %d, true", seen.Status(), seen.Written(), tc.status)
			}
			lines := logLines(t, []byte(buf.String()))
			if tc.want == nil {
				if len(lines) != 0 {
					t.Errorf("logged %v, want nothing", lines)
				}
				return
			}
			if len(lines) != 1 {
				t.Fatalf("logged %d lines, want 1: %v", len(lines), lines)
			}
			line := lines[0]
			for k, v := range tc.want {
				if line[k] != v {
					t.Errorf("%s = %#v, want %#v", k, line[k], v)
				}
			}
			for _, k := range tc.absent {
				if v, ok := line[k]; ok {
					t.Errorf("%s = %#v, want absent", k, v)
				}
			}
			if ms, ok := line["latency_ms"].(float64); !ok || ms < 0 {
				t.Errorf("latency_ms = %#v, want a non-negative number", line["latency_ms"])
			}
		})
	}
}

// TestAccessLogPanic checks that a panic never escapes as a crash: before
// the headers it is a 500 problem, after them an aborted connection, and
// either way it is logged with its stack and the request gets its access line.
func TestAccessLogPanic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		wantStatus int  // what the client got
		wantAbort  bool // the server must abort the connection
		wantPanic  bool // a "panic" error line with a stack
		wantLine   map[string]any
		noAbort    bool // the access line has no abort member
	}{
		{
			name:       "before headers: 500 problem",
			handler:    func(http.ResponseWriter, *http.Request) { panic("boom") },
			wantStatus: http.StatusInternalServerError, wantPanic: true,
			wantLine: map[string]any{"level": "WARN", "status": 500.0},
			noAbort:  true,
		},
		{
			name: "after headers: aborted",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "partial")
				panic("boom")
			},
			wantStatus: http.StatusOK, wantAbort: true, wantPanic: true,
			wantLine: map[string]any{"level": "WARN", "status": 200.0, "bytes_out": 7.0,
				"abort": "panic after the response started"},
		},
		{
			name: "client gone: re-raised quietly",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "partial")
				panic(http.ErrAbortHandler)
			},
			wantStatus: http.StatusOK, wantAbort: true,
			wantLine: map[string]any{"level": "WARN", "status": 200.0, "abort": "client gone or stream aborted"},
		},
		{
			name:       "client gone before headers",
			handler:    func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) },
			wantStatus: 0, wantAbort: true,
			wantLine: map[string]any{"level": "WARN", "status": 0.0, "abort": "client gone or stream aborted"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log, logs := logBuffer()
			tp := sdktrace.NewTracerProvider()
			h := AccessLog(log, Egress, "analyst")(Trace(tp, propagation.TraceContext{})(tc.handler))
			rec := httptest.NewRecorder()
			recovered := func() (v any) {
				defer func() { v = recover() }()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://summarizer/", nil))
				return nil
			}()
			if tc.wantAbort {
				if recovered != http.ErrAbortHandler {
					t.Fatalf("recovered %v, want http.ErrAbortHandler so that the server aborts", recovered)
				}
			} else if recovered != nil {
				t.Fatalf("panic escaped: %v", recovered)
			}
			if tc.wantStatus != 0 && rec.Code != tc.wantStatus {
				t.Errorf("status = %d, want %d", rec.Code, tc.wantStatus)
			}

			lines := logLines(t, logs.Bytes())
			var access, panicked []map[string]any
			for _, l := range lines {
				switch l["msg"] {
				case "handoff":
					access = append(access, l)
				case "panic":
					panicked = append(panicked, l)
				}
			}
			if len(access) != 1 {
				t.Fatalf("%d access lines, want 1: %v", len(access), lines)
			}
			for k, v := range tc.wantLine {
				if access[0][k] != v {
					t.Errorf("access line %s = %#v, want %#v", k, access[0][k], v)
				}
			}
			if _, ok := access[0]["abort"]; ok && tc.noAbort {
				t.Errorf("abort = %v on a request that was answered", access[0]["abort"])
			}
			if tc.wantPanic {
				if len(panicked) != 1 || panicked[0]["level"] != "ERROR" || panicked[0]["panic"] != "boom" ||
					!strings.Contains(panicked[0]["stack"].(string), "accesslog_test.go") {
					t.Errorf("panic lines = %v, want one ERROR line with the value and the stack", panicked)
				}
			} else if len(panicked) != 0 {
				t.Errorf("panic logged for %s: %v", tc.name, panicked)
			}
			if tc.wantStatus == http.StatusInternalServerError {
				doc := readProblem(t, rec, problem.Internal)
				if doc["trace_id"] == nil || doc["trace_id"] != access[0]["trace_id"] {
					t.Errorf("problem trace_id = %v, access line trace_id %v; want the same, set",
						doc["trace_id"], access[0]["trace_id"])
				}
			}
		})
	}
}

// TestAccessLogPanicOverTheWire serves the panicking handlers with a real
// server: the client gets a 500 or a cut-off body, and the server goes on.
func TestAccessLogPanicOverTheWire(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.DiscardHandler)
	srv := httptest.NewUnstartedServer(AccessLog(quiet, Egress, "analyst")(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/before":
				panic("boom")
			case "/after":
				io.WriteString(w, "partial")
				w.(http.Flusher).Flush()
				panic("boom")
			}
			io.WriteString(w, "ok")
		})))
	srv.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
	srv.Start()
	t.Cleanup(srv.Close)

	resp, err := srv.Client().Get(srv.URL + "/before")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || resp.Header.Get("Content-Type") != problem.ContentType {
		t.Errorf("panic before headers: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	resp, err = srv.Client().Get(srv.URL + "/after")
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Errorf("panic after headers: read %q completely, want the connection aborted", body)
	}

	resp, err = srv.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatalf("server gone after the panics: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("after the panics: status %d", resp.StatusCode)
	}
}

// hijackWriter is an underlying ResponseWriter that can flush, hijack and
// take write deadlines, recording each.
type hijackWriter struct {
	*httptest.ResponseRecorder
	conn     net.Conn
	hijacked bool
	deadline time.Time
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return w.conn, bufio.NewReadWriter(bufio.NewReader(w.conn), bufio.NewWriter(w.conn)), nil
}

func (w *hijackWriter) SetWriteDeadline(d time.Time) error {
	w.deadline = d
	return nil
}

func TestAccessLogRecorderReachesTheWriter(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		hijackable bool
		use        func(t *testing.T, w http.ResponseWriter)
		check      func(t *testing.T, under *hijackWriter)
		wantStatus float64 // logged
	}{
		{
			name: "Flush through the interface",
			use: func(t *testing.T, w http.ResponseWriter) {
				io.WriteString(w, "data: 1\n\n")
				w.(http.Flusher).Flush()
			},
			check: func(t *testing.T, under *hijackWriter) {
				if !under.Flushed {
					t.Error("Flush did not reach the underlying writer")
				}
			},
			wantStatus: 200,
		},
		{
			name: "Flush through ResponseController, before any write",
			use: func(t *testing.T, w http.ResponseWriter) {
				if err := http.NewResponseController(w).Flush(); err != nil {
					t.Errorf("Flush: %v", err)
				}
			},
			check: func(t *testing.T, under *hijackWriter) {
				if !under.Flushed {
					t.Error("Flush did not reach the underlying writer")
				}
			},
			wantStatus: 200,
		},
		{
			name:       "Hijack through ResponseController",
			hijackable: true,
			use: func(t *testing.T, w http.ResponseWriter) {
				c, rw, err := http.NewResponseController(w).Hijack()
				if err != nil || c == nil || rw == nil {
					t.Errorf("Hijack = %v, %v, %v", c, rw, err)
				}
			},
			check: func(t *testing.T, under *hijackWriter) {
				if !under.hijacked {
					t.Error("Hijack did not reach the underlying writer")
				}
			},
			wantStatus: 101,
		},
		{
			name:       "Hijack through the interface",
			hijackable: true,
			use: func(t *testing.T, w http.ResponseWriter) {
				if _, _, err := w.(http.Hijacker).Hijack(); err != nil {
					t.Errorf("Hijack: %v", err)
				}
			},
			check: func(t *testing.T, under *hijackWriter) {
				if !under.hijacked {
					t.Error("Hijack did not reach the underlying writer")
				}
			},
			wantStatus: 101,
		},
		{
			name: "Hijack unsupported",
			use: func(t *testing.T, w http.ResponseWriter) {
				_, _, err := http.NewResponseController(w).Hijack()
				if !errors.Is(err, http.ErrNotSupported) {
					t.Errorf("Hijack on a writer that cannot = %v, want http.ErrNotSupported", err)
				}
			},
			wantStatus: 0,
		},
		{
			name:       "write deadline through Unwrap",
			hijackable: true,
			use: func(t *testing.T, w http.ResponseWriter) {
				if err := http.NewResponseController(w).SetWriteDeadline(deadline); err != nil {
					t.Errorf("SetWriteDeadline: %v", err)
				}
				w.WriteHeader(http.StatusNoContent)
			},
			check: func(t *testing.T, under *hijackWriter) {
				if !under.deadline.Equal(deadline) {
					t.Errorf("deadline = %v, want %v", under.deadline, deadline)
				}
			},
			wantStatus: 204,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log, logs := logBuffer()
			under := &hijackWriter{ResponseRecorder: httptest.NewRecorder()}
			var w http.ResponseWriter = under.ResponseRecorder
			if tc.hijackable {
				c1, c2 := net.Pipe()
				t.Cleanup(func() { c1.Close(); c2.Close() })
				under.conn, w = c1, under
			}
			AccessLog(log, Egress, "analyst")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.use(t, w)
			})).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://summarizer/", nil))
			if tc.check != nil {
				tc.check(t, under)
			}
			lines := logLines(t, logs.Bytes())
			if len(lines) != 1 || lines[0]["status"] != tc.wantStatus {
				t.Errorf("access lines %v, want one with status %v", lines, tc.wantStatus)
			}
		})
	}
}
