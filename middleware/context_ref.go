package middleware

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
// At egress it sits after the untrusted-content middleware, which scans the
// content while it is inline (its labels go with the stored content), and
// before Contract; at ingress after Verify (the signature covers the bytes
// that travelled) and before the untrusted-content middleware, which sees
// the content inline.

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
	// OnTrace reports whether this Baton's agent is on a trace (it received
	// a handoff of it): only such an agent passes the trace's references on.
	OnTrace func(ctx context.Context, traceID string) (bool, error)
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

// ContextMeta is what the lazy read answers with besides the bytes: stored
// with the content (Text, MediaType), and beside it (Trust, Source).
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
		checked := false
		for i := range arts.Items {
			it := &arts.Items[i]
			if d, ok := handoff.ParseContextRef(it.Ref); ok && it.Content == nil {
				if !checked && !c.mayPassOn(w, r, in) {
					return
				}
				checked = true
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
			if !c.put(w, r, in, d, metaOf(in, arts, it, text), data) {
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

// metaOf is what is stored with an artifact's content: its media type and
// its label, untrusted when the agent marked it so or this Baton's scan
// found copied untrusted text in it (in.Labels, which the untrusted-content
// middleware set before).
func metaOf(in *Info, arts *handoff.Artifacts, it *handoff.ArtifactAt, text bool) ContextMeta {
	m := ContextMeta{Text: text, MediaType: it.MediaType, Trust: it.Trust, Source: it.Source}
	if in.Labels == nil {
		return m
	}
	ptr := "/artifacts/" + strconv.Itoa(it.Index) + "/content"
	if arts.Where == handoff.A2A {
		ptr = handoff.A2APointer + ptr
	}
	for _, s := range in.Labels.Spans {
		if s.Pointer == ptr || s.Pointer == "" || strings.HasPrefix(ptr, s.Pointer+"/") || strings.HasPrefix(s.Pointer, ptr+"/") {
			m.Trust = "untrusted"
			if m.Source == "" && len(s.Sources) > 0 {
				m.Source = s.Sources[0]
			}
		}
	}
	return m
}

// put stores data under the trace unless it is there already (one write
// per trace, however many hops pass it on). Labels are kept beside it, not
// in it: content marked untrusted by any hop is read as untrusted (taint
// is sticky) without the content being written again.
func (c *ContextRefs) put(w http.ResponseWriter, r *http.Request, in *Info, d string, meta ContextMeta, data []byte) bool {
	ctx, key := r.Context(), ContextKey(in.TraceID, d)
	there, err := c.o.Store.Touch(ctx, key, c.o.TTL)
	if err == nil && !there {
		blob := EncodeContext(ContextMeta{Text: meta.Text, MediaType: meta.MediaType}, data)
		if err = c.o.Store.Set(ctx, key, blob, c.o.TTL); err == nil {
			c.o.Observe(ctx, "stored", int64(len(data)))
		}
	} else if err == nil {
		c.o.Observe(ctx, "reused", int64(len(data)))
	}
	if err == nil && meta.Trust == "untrusted" {
		err = c.o.Store.Set(ctx, contextLabelKey(in.TraceID, d), []byte(meta.Source), c.o.TTL)
	}
	if err != nil {
		c.storeDown(w, r, in, err)
		return false
	}
	return true
}

// contextLabelKey holds the source of content of digest d that some hop
// passed as untrusted.
func contextLabelKey(traceID, d string) string { return "{" + traceID + "}:ctxlabel:" + d }

// mayPassOn refuses an outbound handoff that passes a trace's references on
// when the agent is not on the trace: choosing a handoff's trace must not
// let an agent have another trace's content delivered.
func (c *ContextRefs) mayPassOn(w http.ResponseWriter, r *http.Request, in *Info) bool {
	if c.o.OnTrace == nil {
		return true
	}
	on, err := c.o.OnTrace(r.Context(), in.TraceID)
	if err != nil {
		c.storeDown(w, r, in, err)
		return false
	}
	if !on {
		c.o.Observe(r.Context(), "refused", 0)
		sniffRPC(in, r, in.Body)
		refuse(w, r, problem.New(r, problem.NotOnTrace, "the handoff passes on references to content of trace "+in.TraceID+
			", and agent "+in.Agent+" has received no handoff in it").With("trace_id", in.TraceID))
		return false
	}
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
		if !bytes.Contains(in.Body, []byte(`"digest"`)) && !bytes.Contains(in.Body, []byte(handoff.ContextPath)) {
			next.ServeHTTP(w, r)
			return
		}
		arts, err := handoff.ReadArtifacts(ct, in.Body)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		lazy := c.o.ByReference(in)
		// The sending Baton names what it trimmed by reference in
		// Baton-Omitted (an agent cannot set it); an omitted note in the
		// envelope alone keeps nothing a reference.
		trimmed := map[string]bool{}
		for _, p := range omittedHeader(r.Header.Get(HeaderOmitted)) {
			trimmed[p] = true
		}
		prefix := ""
		if arts.Where == handoff.A2A {
			prefix = handoff.A2APointer
		}
		for i := range arts.Items {
			it := &arts.Items[i]
			d, isRef := handoff.ParseContextRef(it.Ref)
			switch {
			case isRef && it.Content == nil:
				if it.Digest != "" && it.Digest != d {
					c.mismatch(w, r, in, it, it.Digest, d, "its ref")
					return
				}
				if lazy || it.Omitted && trimmed[prefix+"/artifacts/"+strconv.Itoa(it.Index)+"/content"] {
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

// omittedHeader reads Baton-Omitted's list of strings (sfStrings writes
// it), undoing its %XX escapes.
func omittedHeader(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if len(item) < 2 || item[0] != '"' || item[len(item)-1] != '"' {
			continue
		}
		item = strings.ReplaceAll(strings.ReplaceAll(item[1:len(item)-1], `\\`, `\`), `\"`, `"`)
		if u, err := url.PathUnescape(item); err == nil {
			item = u
		}
		out = append(out, item)
	}
	return out
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
	meta.Trust, meta.Source = "", ""
	switch src, err := c.o.Store.Get(ctx, contextLabelKey(traceID, d)); {
	case err == nil:
		meta.Trust, meta.Source = "untrusted", string(src)
	case !errors.Is(err, state.ErrNotFound):
		return meta, nil, err
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
