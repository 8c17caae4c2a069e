package journal

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestEntryRoundTrip(t *testing.T) {
	t.Parallel()
	m := &entryMeta{Digest: strings.Repeat("ab", 32), Occurrence: 3, Destination: "api.example.com:443", Method: "POST",
		Status: 200, Tokens: 74, Header: http.Header{"Content-Type": {"text/event-stream"}}, At: time.Unix(1e9, 0).UTC()}
	body := []byte("data: {\"x\":1}\n\ndata: [DONE]\n\n")
	b, err := encodeEntry(m, body)
	if err != nil {
		t.Fatal(err)
	}
	e, id, err := decodeEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if id.occ != 3 || id.digest[0] != 0xab || e.Tokens != 74 || !bytes.Equal(e.body, body) || e.Header.Get("Content-Type") != "text/event-stream" || !e.At.Equal(m.At) {
		t.Errorf("decoded %+v %+v %q", e.entryMeta, id, e.body)
	}
	resp := e.response(httptest.NewRequest("POST", "/v1/chat", nil))
	if resp.StatusCode != 200 || resp.Header.Get(HeaderReplayed) != "true" || resp.ContentLength != int64(len(body)) {
		t.Errorf("response: %d %v %d", resp.StatusCode, resp.Header, resp.ContentLength)
	}
}

// FuzzDecodeEntry: whatever the store holds, decoding never panics, and
// what decodes encodes again to the same entry.
func FuzzDecodeEntry(f *testing.F) {
	good, _ := encodeEntry(&entryMeta{Digest: strings.Repeat("0f", 32), Occurrence: 1, Status: 200}, []byte("body"))
	f.Add(good)
	f.Add([]byte("bj1"))
	f.Add([]byte("bj1\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01{}"))
	f.Add(append([]byte("bj1\x02{}"), "rest"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, id, err := decodeEntry(b)
		if err != nil {
			return
		}
		again, err := encodeEntry(&e.entryMeta, e.body)
		if err != nil {
			t.Fatalf("a decoded entry does not encode: %v", err)
		}
		e2, id2, err := decodeEntry(again)
		if err != nil || id2 != id || !bytes.Equal(e2.body, e.body) || e2.Status != e.Status {
			t.Fatalf("re-encoded entry differs: %v %+v %+v", err, id, id2)
		}
	})
}

// TestDigest: a call's digest changes with what makes it another call
// (its body, target, credentials, what it accepts, the part of the answer
// and the conditions it asks for, a vary header, the journal key) and not
// with what differs between runs of the same call (trace headers, a
// client's retry counter, its user agent).
func TestDigest(t *testing.T) {
	t.Parallel()
	d := digester{key: []byte("0123456789abcdef"), vary: []string{"Anthropic-Version"}}
	req := func(path, body string, hdr ...string) *http.Request {
		r := httptest.NewRequest("POST", "http://api.example.com"+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer one")
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	base := d.digest("b", "api.example.com:80", req("/v1", "{}"), []byte("{}"))
	same := map[string]*http.Request{
		"trace headers": req("/v1", "{}", "Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "Baggage", "baton.handling=x"),
		"retry counter": req("/v1", "{}", "X-Stainless-Retry-Count", "2", "User-Agent", "sdk/2.0"),
	}
	for name, r := range same {
		if d.digest("b", "api.example.com:80", r, []byte("{}")) != base {
			t.Errorf("%s changed the digest", name)
		}
	}
	other := map[string][32]byte{
		"body":        d.digest("b", "api.example.com:80", req("/v1", "{}"), []byte(`{"a":1}`)),
		"target":      d.digest("b", "api.example.com:80", req("/v2", "{}"), []byte("{}")),
		"credentials": d.digest("b", "api.example.com:80", req("/v1", "{}", "Authorization", "Bearer two"), []byte("{}")),
		"api key":     d.digest("b", "api.example.com:80", req("/v1", "{}", "X-Goog-Api-Key", "k"), []byte("{}")),
		"vary header": d.digest("b", "api.example.com:80", req("/v1", "{}", "Anthropic-Version", "2023-06-01"), []byte("{}")),
		"range":       d.digest("b", "api.example.com:80", req("/v1", "{}", "Range", "bytes=10-19"), []byte("{}")),
		"condition":   d.digest("b", "api.example.com:80", req("/v1", "{}", "If-None-Match", `"v1"`), []byte("{}")),
		"accept":      d.digest("b", "api.example.com:80", req("/v1", "{}", "Accept", "text/event-stream"), []byte("{}")),
		"destination": d.digest("b", "api.example.net:80", req("/v1", "{}"), []byte("{}")),
		"agent":       d.digest("c", "api.example.com:80", req("/v1", "{}"), []byte("{}")),
		"key":         (&digester{key: []byte("another key, 16+"), vary: d.vary}).digest("b", "api.example.com:80", req("/v1", "{}"), []byte("{}")),
	}
	for name, got := range other {
		if got == base {
			t.Errorf("another %s left the digest unchanged", name)
		}
	}
}
