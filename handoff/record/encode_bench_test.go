package record

// The encoder against encoding/json: what a record and a checkpoint cost.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

func BenchmarkRecordAppendJSON(b *testing.B) {
	r := benchRecord()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendJSON(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkRecordMarshal(b *testing.B) {
	r := benchRecord()
	var n int
	b.ReportAllocs()
	for b.Loop() {
		enc, err := json.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		n = len(enc)
	}
	b.SetBytes(int64(n))
}

func BenchmarkRequestAppendJSON(b *testing.B) {
	q := benchRequest()
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		buf = q.AppendJSON(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkRequestMarshal(b *testing.B) {
	q := benchRequest()
	var n int
	b.ReportAllocs()
	for b.Loop() {
		enc, err := json.Marshal(q)
		if err != nil {
			b.Fatal(err)
		}
		n = len(enc)
	}
	b.SetBytes(int64(n))
}

// benchRecord is a record as the book writes it to the chain: delivered,
// without its checkpoint.
func benchRecord() *Record {
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	created := time.Date(2025, 5, 14, 9, 31, 2, 123456789, time.UTC)
	return &Record{
		ID:            trace + ".00f067aa0ba902b7",
		TraceID:       trace,
		SpanID:        "00f067aa0ba902b7",
		ParentID:      trace + ".b7ad6b7169203331",
		Side:          Egress,
		From:          "planner",
		To:            "researcher",
		Hop:           2,
		Key:           "9f1c2e6a-7b3d-4c8e-a2f1-5d6e7f8a9b0c",
		Method:        http.MethodPost,
		Target:        "http://researcher.agents.svc.cluster.local:8080/v1/handoff",
		RequestDigest: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		State:         Delivered,
		Status:        200,
		Attempts:      1,
		Latency:       48.213,
		Outcome:       "delivered: 200 OK",
		Replayable:    true,
		Created:       created,
		Updated:       created.Add(48213 * time.Microsecond),
	}
}

func benchRequest() *Request {
	body := bytes.Repeat([]byte(`{"task":"summarise the findings","n":1}`), 14)[:512]
	return &Request{
		Method: http.MethodPost,
		URL:    "http://researcher.agents.svc.cluster.local:8080/v1/handoff",
		Header: http.Header{
			"Content-Type":    {"application/json"},
			"Accept":          {"application/json"},
			"User-Agent":      {"planner/1.4.2"},
			"Traceparent":     {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			"Idempotency-Key": {"9f1c2e6a-7b3d-4c8e-a2f1-5d6e7f8a9b0c"},
			"Content-Digest":  {"sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"},
			"Authorization":   {"Bearer eyJhbGciOiJFUzI1NiJ9.e30.sig"},
			"X-Baton-Hop":     {"2"},
		},
		Body:      body,
		BodyBytes: int64(len(body)),
	}
}
