package inject

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// BenchmarkReview is the injector's work for one pod: decode the pod,
// inject it, diff, encode the patch.
func BenchmarkReview(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "review", "proxy.json"))
	if err != nil {
		b.Fatal(err)
	}
	var rv admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &rv); err != nil {
		b.Fatal(err)
	}
	in, err := New(testConfig())
	if err != nil {
		b.Fatal(err)
	}
	h := NewWebhook(in, discard(), nil)
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Review(rv.Request, false); resp.Patch == nil {
			b.Fatal("no patch")
		}
	}
}

// BenchmarkMutateHTTP is one whole AdmissionReview through the handler, as
// the API server sends it (TLS aside).
func BenchmarkMutateHTTP(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "review", "proxy.json"))
	if err != nil {
		b.Fatal(err)
	}
	in, err := New(testConfig())
	if err != nil {
		b.Fatal(err)
	}
	h := NewWebhook(in, discard(), nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PathMutate, bytes.NewReader(body)))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}

// BenchmarkManifests is `baton inject` on a multi-document file.
func BenchmarkManifests(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("testdata", "manifests", "multi.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	in, err := New(testConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := in.Manifests(bytes.NewReader(src), io.Discard, Overrides{}); err != nil {
			b.Fatal(err)
		}
	}
}
