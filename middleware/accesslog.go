package middleware

// AccessLog is the outermost middleware of both chains. It creates the
// request's Info, records status and bytes through a thin ResponseWriter
// wrapper (which keeps Flush, Hijack and the http.ResponseController path
// working for streams and upgrades), recovers panics, and writes one JSON
// access line per request. A client that goes away mid-stream makes the
// reverse proxy abort with http.ErrAbortHandler: that is logged as
// "client gone" and re-raised so the server closes the connection quietly, as
// the standard library intends; no other panic escapes.

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/batonproxy/baton/problem"
)

// AccessLog returns the access-log middleware for side, logging to log.
func AccessLog(log *slog.Logger, side Side, agent string) func(http.Handler) http.Handler {
	return AccessLogTo(nil, log, side, agent)
}

// AccessLogTo is AccessLog writing its access lines with lines (the same
// JSON shape, cheaper), or through log when lines is nil. Panics are logged
// through log either way.
func AccessLogTo(lines *LineWriter, log *slog.Logger, side Side, agent string) func(http.Handler) http.Handler {
	logLine := func(r *http.Request, in *Info, rec *recorder, abort string) {
		if lines != nil {
			lines.write(r, in, rec, abort)
			return
		}
		slogLine(log, r, in, rec, abort)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := &infoContext{Context: r.Context()}
			rec, in := &ctx.rec, &ctx.in
			*rec = recorder{ResponseWriter: w, connect: r.Method == http.MethodConnect}
			*in = Info{Side: side, Agent: agent, Start: time.Now(), rec: rec}
			r = r.WithContext(ctx)
			aborted := false
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						aborted = true
						logLine(r, in, rec, "client gone or stream aborted")
						panic(v)
					}
					log.LogAttrs(r.Context(), slog.LevelError, "panic",
						slog.String("side", side.String()), slog.Any("panic", v),
						slog.String("stack", string(debug.Stack())))
					if rec.status == 0 {
						d := problem.New(r, problem.Internal, "Baton hit an internal error; see its log")
						if d.TraceID == "" {
							// r is outside Trace's span; Info has its id.
							d.TraceID = in.TraceID
						}
						d.Write(rec)
					} else {
						logLine(r, in, rec, "panic after the response started")
						panic(http.ErrAbortHandler)
					}
				}
				if !aborted {
					logLine(r, in, rec, "")
				}
			}()
			next.ServeHTTP(rec, r)
		})
	}
}

func slogLine(log *slog.Logger, r *http.Request, in *Info, rec *recorder, abort string) {
	level := slog.LevelInfo
	if abort != "" || rec.status >= 500 {
		level = slog.LevelWarn
	}
	if !log.Enabled(r.Context(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, 16)
	attrs = append(attrs,
		slog.String("side", in.Side.String()),
		slog.String("trace_id", in.TraceID),
		slog.String("edge", in.Edge()),
		slog.String("method", r.Method),
		slog.String("target", requestTarget(r)),
		slog.Int("status", rec.status),
		slog.Int64("bytes_in", r.ContentLength),
		slog.Int64("bytes_out", rec.bytes),
		slog.Float64("latency_ms", float64(time.Since(in.Start).Microseconds())/1000),
	)
	if in.Handoff() && in.Side != 0 {
		attrs = append(attrs, slog.Int("hop", in.Hop))
	}
	if in.Key != "" {
		attrs = append(attrs, slog.String("idempotency_key", in.Key), slog.Bool("key_derived", in.KeyDerived))
	}
	if in.Dedupe != "" {
		attrs = append(attrs, slog.String("dedupe", string(in.Dedupe)))
	}
	if in.Err != nil {
		attrs = append(attrs, slog.String("error", in.Err.Error()))
	}
	if abort != "" {
		attrs = append(attrs, slog.String("abort", abort))
	}
	log.LogAttrs(r.Context(), level, "handoff", attrs...)
}

// recorder notes the status and the bytes written.
type recorder struct {
	http.ResponseWriter
	status  int
	bytes   int64
	connect bool // a CONNECT: hijacked once its tunnel is established (200)
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush sends buffered data to the client at once (SSE, chunked streams).
func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// requestTarget is what an access line names as the request's target: its
// path and query, or a CONNECT's host:port.
func requestTarget(r *http.Request) string {
	if r.Method == http.MethodConnect {
		return r.Host
	}
	return r.URL.RequestURI()
}

// Hijack hands the connection over for a protocol upgrade, or for the
// tunnel a CONNECT asked for.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil && r.status == 0 {
		r.status = http.StatusSwitchingProtocols
		if r.connect {
			r.status = http.StatusOK
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("access log: hijack: %w", err)
	}
	return c, rw, nil
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
