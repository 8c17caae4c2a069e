package middleware

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/state"
)

// Context by reference (docs/context.md). At egress, on an edge with
// by_reference, an envelope artifact whose content is at least the edge's
// min_bytes is stored once under the trace, content-addressed (sha-256 of
// its bytes), and leaves as a ref with its digest and size; a ref the agent
// passes along must name content stored for the trace. At ingress every
// referenced artifact is put back inline before the agent sees it (the
// default) or left for the agent to read from its Baton (deliver:
// reference), or when the sender passed it by reference to meet a token
// budget (the envelope's omitted list names it); content whose digest does
// not match is refused either way.
//
// It sits before Contract on both sides, after Verify at ingress (the
// signature covers the bytes that travelled), and before the untrusted
// content middleware, which sees the content inline.

// ContextOptions configure ContextRefs.
type ContextOptions struct {
	Store state.Store
	// TTL is how long stored content is kept: the trace's retention.
	TTL time.Duration
	// MinBytes is the outbound edge's by_reference threshold; 0 is off.
	MinBytes func(in *Info) int
	// ByReference reports whether the inbound edge leaves references for
	// the agent to read (deliver: reference) instead of inlining them.
	ByReference func(in *Info) bool
	// Observe counts content stored, reused, inlined, left as references
	// and refused, with its bytes.
	Observe func(ctx context.Context, op string, bytes int64)
	Log     *slog.Logger
}

// ContextRefs is the reference passing middleware pair.
type ContextRefs struct{ o ContextOptions }

// NewContextRefs builds the middlewares from o.
func NewContextRefs(o ContextOptions) *ContextRefs {
	if o.Observe == nil {
		o.Observe = func(context.Context, string, int64) {}
	}
	return &ContextRefs{o: o}
}

// ContextKey is the store key of content with digest d in trace traceID: one
// hash tag per trace, as its records have.
func ContextKey(traceID, d string) string { return "{" + traceID + "}:ctx:" + d }

// ContextMeta is stored with referenced content: what the lazy read answers
// with besides the bytes.
type ContextMeta struct {
	Text      bool   `json:"text"` // the content was a JSON string: the bytes are its text
	MediaType string `json:"media_type,omitempty"`
	Trust     string `json:"trust,omitempty"`
	Source    string `json:"source,omitempty"`
}

// EncodeContext lays out a stored content value: its meta as one JSON line,
// then the bytes.
func EncodeContext(m ContextMeta, data []byte) []byte {
	head, _ := json.Marshal(m)
	out := make([]byte, 0, len(head)+1+len(data))
	return append(append(append(out, head...), '\n'), data...)
}

// DecodeContext splits a stored content value.
func DecodeContext(v []byte) (ContextMeta, []byte, error) {
	var m ContextMeta
	i := bytes.IndexByte(v, '\n')
	if i < 0 {
		return m, nil, errors.New("stored context has no header")
	}
	if err := json.Unmarshal(v[:i], &m); err != nil {
		return m, nil, fmt.Errorf("stored context header: %w", err)
	}
	return m, v[i+1:], nil
}

// Egress passes the large artifacts of an outbound handoff by reference.
func (c *ContextRefs) Egress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := info(r)
		if !in.Handoff() {
			next.ServeHTTP(w, r)
			return
		}
		minBytes, ct := c.o.MinBytes(in), r.Header.Get("Content-Type")
		if !in.Buffered {
			if minBytes == 0 || !mayCarryEnvelope(ct) {
				next.ServeHTTP(w, r)
				return
			}
			if !Buffer(w, r, in) {
				return
			}
		}
		if minBytes == 0 && !bytes.Contains(in.Body, []byte(handoff.ContextPath)) {
			next.ServeHTTP(w, r)
			return
		}
		arts, err := handoff.ReadArtifacts(ct, in.Body)
		if err != nil {
			next.ServeHTTP(w, r) // no envelope: nothing to pass by reference
			return
		}
		for i := range arts.Items {
			it := &arts.Items[i]
			if d, ok := handoff.ParseContextRef(it.Ref); ok && it.Content == nil {
				if !c.present(w, r, in, it, d) {
					return
				}
				continue
			}
			if minBytes == 0 || it.Content == nil || it.Ref != "" || len(it.Content) < minBytes {
				continue
			}
			data, text, err := it.Data()
			if err != nil {
				continue // the contract check answers a malformed envelope
			}
			d := handoff.Digest(data)
			if it.Digest != "" && it.Digest != d {
				c.mismatch(w, r, in, it, it.Digest, d, "its content")
				return
			}
			meta := ContextMeta{Text: text, MediaType: it.MediaType, Trust: it.Trust, Source: it.Source}
			if !c.put(w, r, in, d, meta, data) {
				return
			}
			arts.ByReference(it, d, int64(len(data)), in.TraceID)
		}
		if arts.Changed() {
			replaceBody(r, in, arts.Bytes())
		}
		next.ServeHTTP(w, r)
	})
}

// put stores data under the trace unless it is there already (one write per
// trace, however many hops pass it on). Taint is sticky: untrusted content
// stored first as trusted is stored again with its label.
func (c *ContextRefs) put(w http.ResponseWriter, r *http.Request, in *Info, d string, meta ContextMeta, data []byte) bool {
	ctx, key := r.Context(), ContextKey(in.TraceID, d)
	there, err := c.o.Store.Touch(ctx, key, c.o.TTL)
	if err == nil && there && meta.Trust == "untrusted" {
		var v []byte
		if v, err = c.o.Store.Get(ctx, key); err == nil {
			if old, _, derr := DecodeContext(v); derr == nil && old.Trust != "untrusted" {
				there = false
			}
		}
	}
	switch {
	case err != nil && !errors.Is(err, state.ErrNotFound):
		c.storeDown(w, r, in, err)
		return false
	case there:
		c.o.Observe(ctx, "reused", int64(len(data)))
		return true
	}
	if err := c.o.Store.Set(ctx, key, EncodeContext(meta, data), c.o.TTL); err != nil {
		c.storeDown(w, r, in, err)
		return false
	}
	c.o.Observe(ctx, "stored", int64(len(data)))
	return true
}

// present checks that content an outbound ref names is stored for the
// trace, and keeps it for the trace's retention from now.
func (c *ContextRefs) present(w http.ResponseWriter, r *http.Request, in *Info, it *handoff.ArtifactAt, d string) bool {
	if it.Digest != "" && it.Digest != d {
		c.mismatch(w, r, in, it, it.Digest, d, "its ref")
		return false
	}
	ok, err := c.o.Store.Touch(r.Context(), ContextKey(in.TraceID, d), c.o.TTL)
	if err != nil {
		c.storeDown(w, r, in, err)
		return false
	}
	if !ok {
		c.unavailable(w, r, in, it, d)
		return false
	}
	return true
}

// Ingress delivers referenced content as the inbound edge says.
func (c *ContextRefs) Ingress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := info(r)
		ct := r.Header.Get("Content-Type")
		if !in.Handoff() || !mayCarryEnvelope(ct) {
			next.ServeHTTP(w, r)
			return
		}
		if !Buffer(w, r, in) {
			return
		}
		if !bytes.Contains(in.Body, []byte(`"digest"`)) {
			next.ServeHTTP(w, r)
			return
		}
		arts, err := handoff.ReadArtifacts(ct, in.Body)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		lazy := c.o.ByReference(in)
		for i := range arts.Items {
			it := &arts.Items[i]
			d, isRef := handoff.ParseContextRef(it.Ref)
			switch {
			case isRef && it.Content == nil:
				if it.Digest != "" && it.Digest != d {
					c.mismatch(w, r, in, it, it.Digest, d, "its ref")
					return
				}
				if lazy || it.Omitted {
					if !c.present(w, r, in, it, d) {
						return
					}
					c.o.Observe(r.Context(), "referenced", it.Size)
					continue
				}
				if !c.inline(w, r, in, arts, it, d) {
					return
				}
			case it.Content != nil && handoff.ValidDigest(it.Digest):
				data, _, err := it.Data()
				if err != nil {
					continue // the contract check answers it
				}
				if got := handoff.Digest(data); got != it.Digest {
					c.mismatch(w, r, in, it, it.Digest, got, "its content")
					return
				}
			}
		}
		if arts.Changed() {
			replaceBody(r, in, arts.Bytes())
		}
		next.ServeHTTP(w, r)
	})
}

// inline puts the content of a ref back in the artifact, checking that the
// stored bytes are the ones the digest names.
func (c *ContextRefs) inline(w http.ResponseWriter, r *http.Request, in *Info, arts *handoff.Artifacts, it *handoff.ArtifactAt, d string) bool {
	meta, data, err := c.Read(r.Context(), in.TraceID, d)
	switch {
	case errors.Is(err, state.ErrNotFound):
		c.unavailable(w, r, in, it, d)
		return false
	case errors.Is(err, errDigest):
		c.mismatch(w, r, in, it, d, handoff.Digest(data), "the stored content")
		return false
	case err != nil:
		c.storeDown(w, r, in, err)
		return false
	}
	arts.Inline(it, data, meta.Text, d)
	c.o.Observe(r.Context(), "inlined", int64(len(data)))
	return true
}

var errDigest = errors.New("stored content does not match its digest")

// Read returns the content with digest d stored for trace traceID, checked
// against d: state.ErrNotFound when there is none, an error wrapping
// errDigest (with the bytes) when it does not match.
func (c *ContextRefs) Read(ctx context.Context, traceID, d string) (ContextMeta, []byte, error) {
	v, err := c.o.Store.Get(ctx, ContextKey(traceID, d))
	if err != nil {
		return ContextMeta{}, nil, err
	}
	meta, data, err := DecodeContext(v)
	if err != nil || handoff.Digest(data) != d {
		return meta, data, fmt.Errorf("context %s: %w", d, errDigest)
	}
	return meta, data, nil
}

// DigestMismatch reports an error of Read for content that does not match
// its digest.
func DigestMismatch(err error) bool { return errors.Is(err, errDigest) }

func (c *ContextRefs) mismatch(w http.ResponseWriter, r *http.Request, in *Info, it *handoff.ArtifactAt, want, got, what string) {
	c.o.Observe(r.Context(), "refused", 0)
	sniffRPC(in, r, in.Body)
	refuse(w, r, problem.New(r, problem.DigestMismatch,
		fmt.Sprintf("artifacts[%d] (%s) says digest %s, but %s has %s", it.Index, it.Name, want, what, got)).
		With("artifact", it.Index).With("digest", want).With("actual", got))
}

func (c *ContextRefs) unavailable(w http.ResponseWriter, r *http.Request, in *Info, it *handoff.ArtifactAt, d string) {
	c.o.Observe(r.Context(), "refused", 0)
	sniffRPC(in, r, in.Body)
	refuse(w, r, problem.New(r, problem.ContextUnavailable,
		fmt.Sprintf("artifacts[%d] (%s) refers to content %s, which is not stored for trace %s: it expired with the trace, or belongs to another trace", it.Index, it.Name, d, in.TraceID)).
		With("artifact", it.Index).With("digest", d))
}

func (c *ContextRefs) storeDown(w http.ResponseWriter, r *http.Request, in *Info, err error) {
	in.Err = err
	c.o.Log.LogAttrs(r.Context(), slog.LevelWarn, "context by reference: store unavailable",
		slog.String("edge", in.Edge()), slog.String("trace_id", in.TraceID), slog.String("error", err.Error()))
	w.Header().Set("Retry-After", "1")
	problem.Write(w, r, problem.StoreUnavailable, "the artifacts passed by reference cannot be reached in the store; retry later")
}
