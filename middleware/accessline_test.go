package middleware

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLineWriterMatchesSlog: the direct access line has the fields, names and
// values the slog line has.
func TestLineWriterMatchesSlog(t *testing.T) {
	t.Parallel()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := InfoFromContext(r.Context())
		in.From, in.To, in.TraceID, in.Hop, in.Key, in.KeyDerived = "analyst", "summarizer", "0af7651916cd43dd8448eb211c80319c", 2, `k"1`, true
		in.Dedupe, in.Err = DedupeReplayed, errors.New("bad\nthing \xff")
		w.WriteHeader(503)
		io.WriteString(w, "busy")
	})
	run := func(mw func(http.Handler) http.Handler) map[string]any {
		r := httptest.NewRequest("POST", "/a?b=c", strings.NewReader("{}"))
		mw(handler).ServeHTTP(httptest.NewRecorder(), r)
		return nil
	}
	var viaSlog, direct bytes.Buffer
	run(AccessLogTo(nil, slog.New(slog.NewJSONHandler(&viaSlog, nil)), Ingress, "summarizer"))
	run(AccessLogTo(NewLineWriter(&direct, slog.LevelInfo), slog.New(slog.DiscardHandler), Ingress, "summarizer"))
	var a, b map[string]any
	if err := json.Unmarshal(viaSlog.Bytes(), &a); err != nil {
		t.Fatalf("slog line %q: %v", viaSlog.String(), err)
	}
	if err := json.Unmarshal(direct.Bytes(), &b); err != nil {
		t.Fatalf("direct line %q: %v", direct.String(), err)
	}
	for k, v := range a {
		if k == "time" || k == "latency_ms" {
			if _, ok := b[k]; !ok {
				t.Errorf("direct line lacks %s", k)
			}
			continue
		}
		if b[k] != v {
			t.Errorf("%s: direct %v, slog %v", k, b[k], v)
		}
	}
	if len(a) != len(b) {
		t.Errorf("fields differ:\nslog   %v\ndirect %v", a, b)
	}
	var quiet bytes.Buffer
	run(AccessLogTo(NewLineWriter(&quiet, slog.LevelError), slog.New(slog.DiscardHandler), Ingress, "summarizer"))
	if quiet.Len() != 0 {
		t.Errorf("a warn line written at level error: %q", quiet.String())
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\"back\\slash", "\x00\x1f\n", "é→\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q rendered as invalid JSON %q: %v", s, b, err)
		}
		if utf8.ValidString(s) && got != s {
			t.Errorf("%q came back as %q", s, got)
		}
	})
}
