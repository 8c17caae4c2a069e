package middleware

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// LineWriter writes access lines straight to w, in the same JSON shape as
// slog's JSONHandler, without slog's per-attribute machinery: the access
// line is the one log line written per request, so it is on the hot path.
// Lines below min are not written.
type LineWriter struct {
	w   io.Writer
	min slog.Level
}

// NewLineWriter returns a LineWriter; w should buffer (one Write per line).
func NewLineWriter(w io.Writer, min slog.Level) *LineWriter { return &LineWriter{w: w, min: min} }

var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// write renders and writes the access line of one request.
func (lw *LineWriter) write(r *http.Request, in *Info, rec *recorder, abort string) {
	level := slog.LevelInfo
	if abort != "" || rec.status >= 500 {
		level = slog.LevelWarn
	}
	if level < lw.min {
		return
	}
	bp := linePool.Get().(*[]byte)
	b := (*bp)[:0]
	b = append(b, `{"time":"`...)
	b = time.Now().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"`...)
	b = append(b, level.String()...)
	b = append(b, `","msg":"handoff","side":"`...)
	b = append(b, in.Side.String()...)
	b = append(b, `","trace_id":`...)
	b = appendJSONString(b, in.TraceID)
	b = append(b, `,"edge":`...)
	b = appendJSONString(b, in.Edge())
	b = append(b, `,"method":`...)
	b = appendJSONString(b, r.Method)
	b = append(b, `,"target":`...)
	b = appendJSONString(b, requestTarget(r))
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(rec.status), 10)
	b = append(b, `,"bytes_in":`...)
	b = strconv.AppendInt(b, r.ContentLength, 10)
	b = append(b, `,"bytes_out":`...)
	b = strconv.AppendInt(b, rec.bytes, 10)
	b = append(b, `,"latency_ms":`...)
	b = strconv.AppendFloat(b, float64(time.Since(in.Start).Microseconds())/1000, 'f', -1, 64)
	if in.Handoff() && in.Side != 0 {
		b = append(b, `,"hop":`...)
		b = strconv.AppendInt(b, int64(in.Hop), 10)
	}
	if in.Key != "" {
		b = append(b, `,"idempotency_key":`...)
		b = appendJSONString(b, in.Key)
		b = append(b, `,"key_derived":`...)
		b = strconv.AppendBool(b, in.KeyDerived)
	}
	if in.Dedupe != "" {
		b = append(b, `,"dedupe":`...)
		b = appendJSONString(b, string(in.Dedupe))
	}
	if in.Err != nil {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, in.Err.Error())
	}
	if abort != "" {
		b = append(b, `,"abort":`...)
		b = appendJSONString(b, abort)
	}
	b = append(b, "}\n"...)
	_, _ = lw.w.Write(b)
	*bp = b
	linePool.Put(bp)
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	// Most values (ids, names, targets) need no escaping: copy the run of
	// plain ASCII up front in one append.
	plain := 0
	for plain < len(s) {
		if c := s[plain]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			break
		}
		plain++
	}
	b = append(b, s[:plain]...)
	for i := plain; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				switch c {
				case '\n':
					b = append(b, '\\', 'n')
				case '\r':
					b = append(b, '\\', 'r')
				case '\t':
					b = append(b, '\\', 't')
				default:
					b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
				}
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
