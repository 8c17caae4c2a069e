package middleware

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/batonproxy/baton/problem"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestLimit(t *testing.T) {
	t.Parallel()
	const limit = 64
	tests := []struct {
		name    string
		method  string
		body    string
		length  int64 // ContentLength; -1 for a chunked body
		noBody  bool  // r.Body is http.NoBody
		want    int
		wantErr bool // the downstream read fails with *http.MaxBytesError
	}{
		{name: "under the limit", method: "POST", body: "{}", length: 2, want: 200},
		{name: "at the limit", method: "POST", body: strings.Repeat("x", limit), length: limit, want: 200},
		{name: "past the limit by Content-Length", method: "POST", body: strings.Repeat("x", limit+1),
			length: limit + 1, want: 413},
		{name: "Content-Length far past the limit", method: "POST", body: "x", length: 1 << 40, want: 413},
		{name: "chunked under the limit", method: "POST", body: "{}", length: -1, want: 200},
		{name: "chunked at the limit", method: "POST", body: strings.Repeat("x", limit), length: -1, want: 200},
		{name: "chunked past the limit", method: "POST", body: strings.Repeat("x", 4*limit), length: -1,
			want: 200, wantErr: true},
		{name: "no body", method: "GET", noBody: true, want: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tc.method, "http://summarizer/", nil)
			src := &countingReader{r: strings.NewReader(tc.body)}
			if !tc.noBody {
				r.Body, r.ContentLength = io.NopCloser(src), tc.length
			}
			served := false
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served = true
				if tc.noBody {
					if r.Body != http.NoBody {
						t.Errorf("Body = %T, want http.NoBody left alone", r.Body)
					}
					return
				}
				got, err := io.ReadAll(r.Body)
				var tooBig *http.MaxBytesError
				switch {
				case tc.wantErr:
					if !errors.As(err, &tooBig) || tooBig.Limit != limit {
						t.Errorf("reading past the limit: %v, want *http.MaxBytesError with Limit %d", err, limit)
					}
					if len(got) > limit {
						t.Errorf("read %d bytes, more than the limit", len(got))
					}
				case err != nil || string(got) != tc.body:
					t.Errorf("read %q, %v; want %q", got, err, tc.body)
				}
			})
			rec := httptest.NewRecorder()
			Limit(limit)(next).ServeHTTP(rec, r)

			if rec.Code != tc.want {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tc.want, rec.Body)
			}
			if tc.want == 413 {
				if served || src.n != 0 {
					t.Errorf("refused by length, yet served %v and read %d bytes", served, src.n)
				}
				checkLimitProblem(t, rec, limit)
			}
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	BodyTooLarge(rec, httptest.NewRequest(http.MethodPost, "/tasks", nil), 1024)
	checkLimitProblem(t, rec, 1024)
}

func checkLimitProblem(t *testing.T, rec *httptest.ResponseRecorder, limit int64) {
	t.Helper()
	doc := readProblem(t, rec, problem.BodyTooLarge)
	if doc["limit_bytes"] != float64(limit) {
		t.Errorf("limit_bytes = %v, want %d", doc["limit_bytes"], limit)
	}
	if d, _ := doc["detail"].(string); !strings.Contains(d, "limit of "+strconv.FormatInt(limit, 10)+" bytes") {
		t.Errorf("detail = %q, want the limit named", d)
	}
}
