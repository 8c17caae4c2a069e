package handoff

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
)

// Context by reference (docs/context.md): an artifact whose content is large
// leaves the sender's Baton with a reference instead, the content stored
// once, content-addressed, under the trace. The artifact keeps its name,
// media type and trust label and gains
//
//	"ref": "/v1/context/sha-256:<hex>?trace=<trace id>",
//	"digest": "sha-256:<hex>", "size": <bytes>
//
// where the digest is of the content's bytes: a string's text (UTF-8), or
// the JSON text of any other value as it was sent. The ref is a path on the
// agent's own Baton: GET it there to read the content.

// ContextPath is the path under which an agent reads referenced content
// from its Baton: ContextPath + digest.
const ContextPath = "/v1/context/"

// DigestPrefix starts every content digest Baton writes.
const DigestPrefix = "sha-256:"

// Digest returns the content digest of b: "sha-256:" and 64 lower-case hex
// digits.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// ValidDigest reports whether d is a digest as Digest writes it.
func ValidDigest(d string) bool {
	h, ok := strings.CutPrefix(d, DigestPrefix)
	if !ok || len(h) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ContextRef is the ref of content with digest d in trace traceID.
func ContextRef(d, traceID string) string { return ContextPath + d + "?trace=" + traceID }

// ParseContextRef returns the digest of a ref ContextRef wrote; ok is false
// for any other ref (an s3:// URL, a memory id), which Baton leaves alone.
func ParseContextRef(ref string) (digest string, ok bool) {
	rest, ok := strings.CutPrefix(ref, ContextPath)
	if !ok {
		return "", false
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest = rest[:i]
	}
	return rest, ValidDigest(rest)
}

// ArtifactAt is one artifact of an envelope, as Artifacts found it.
type ArtifactAt struct {
	Index     int
	Name      string
	MediaType string
	Trust     string
	Source    string
	// Content is the content's JSON text as sent (nil when absent); Ref,
	// Digest and Size the members of those names ("" or -1 when absent).
	Content []byte
	Ref     string
	Digest  string
	Size    int64
	// Omitted is true when the envelope's omitted list names the content:
	// the sender passed it by reference to meet a token budget, and it
	// stays a reference for the receiving agent.
	Omitted bool

	node, content, ref, digest, size int // tape nodes: the object, members' names (-1: absent)
}

// Data returns the bytes the content stands for, which its digest is of: a
// string's text, or the JSON text of any other value. text reports a string.
func (a *ArtifactAt) Data() (data []byte, text bool, err error) {
	if len(a.Content) == 0 || a.Content[0] != '"' {
		return a.Content, false, nil
	}
	s, ok := unquote(a.Content[1 : len(a.Content)-1])
	if !ok {
		return nil, false, errors.New("handoff: artifact content is not a valid JSON string")
	}
	return []byte(s), true, nil
}

// Artifacts is the artifacts of a body's envelope, found by one parse, for
// Baton to replace content by references or references by content.
type Artifacts struct {
	Where Where
	Items []ArtifactAt
	t     tape
	w     *rewrite
}

// ReadArtifacts finds the artifacts of the envelope body carries. It returns
// ErrNoEnvelope for a body without one; an envelope that is not a JSON
// object, or without artifacts, has no items.
func ReadArtifacts(contentType string, body []byte) (*Artifacts, error) {
	a := &Artifacts{}
	loc := locate(contentType, body, &a.t)
	env := -1
	switch loc.where {
	case None:
		return nil, ErrNoEnvelope
	case Body:
		if a.t.parse(body) {
			env = 0
		}
	case A2A:
		env = loc.env
	}
	a.Where = loc.where
	if !a.t.isObject(env) {
		return a, nil
	}
	a.w = newRewrite(&a.t)
	list := a.t.member(env, "artifacts")
	if !a.t.isArray(list) {
		return a, nil
	}
	omitted := map[string]bool{}
	if o := a.t.member(env, OmittedKey); a.t.isArray(o) {
		for k, end := a.t.first(o); k < end; k = a.t.after(k) {
			if p, ok := a.t.str(k); ok {
				omitted[p] = true
			}
		}
	}
	prefix := ""
	if a.Where == A2A {
		prefix = A2APointer
	}
	i := 0
	for k, end := a.t.first(list); k < end; k, i = a.t.after(k), i+1 {
		if a.t.isObject(k) {
			it := a.item(i, k)
			it.Omitted = omitted[prefix+"/artifacts/"+strconv.Itoa(i)+"/content"]
			a.Items = append(a.Items, it)
		}
	}
	return a, nil
}

func (a *Artifacts) item(i, obj int) ArtifactAt {
	t := &a.t
	it := ArtifactAt{Index: i, Size: -1, node: obj, content: -1, ref: -1, digest: -1, size: -1}
	for k, end := t.first(obj); k < end; k = t.after(k + 1) {
		v := k + 1
		switch {
		case t.is(k, "name"):
			it.Name, _ = t.str(v)
		case t.is(k, "media_type"):
			it.MediaType, _ = t.str(v)
		case t.is(k, "trust"):
			it.Trust, _ = t.str(v)
		case t.is(k, "source"):
			it.Source, _ = t.str(v)
		case t.is(k, "content"):
			s := t.span(v)
			it.Content, it.content = t.b[s.s:s.e], k
		case t.is(k, "ref"):
			it.Ref, _ = t.str(v)
			it.ref = k
		case t.is(k, "digest"):
			it.Digest, _ = t.str(v)
			it.digest = k
		case t.is(k, "size"):
			if n, err := strconv.ParseInt(string(t.b[t.span(v).s:t.span(v).e]), 10, 64); err == nil {
				it.Size = n
			}
			it.size = k
		}
	}
	return it
}

// ByReference replaces item's content with a reference to data of digest d
// stored under trace traceID.
func (a *Artifacts) ByReference(item *ArtifactAt, d string, size int64, traceID string) {
	members := appendString(nil, "ref")
	members = appendString(append(members, ':'), ContextRef(d, traceID))
	members = appendString(append(members, ','), "digest")
	members = appendString(append(members, ':'), d)
	members = appendString(append(members, ','), "size")
	members = strconv.AppendInt(append(members, ':'), size, 10)
	a.w.replace(item.content, members)
	a.dropMeta(item)
}

// Inline replaces item's reference with its content, data (a string's text
// when text, else JSON text) of digest d, which it keeps, with the size.
func (a *Artifacts) Inline(item *ArtifactAt, data []byte, text bool, d string) {
	var b bytes.Buffer
	b.Grow(len(data) + len(data)/16 + 64)
	b.Write(appendString(nil, "content"))
	b.WriteByte(':')
	if text {
		b.Write(appendString(nil, string(data)))
	} else {
		b.Write(data)
	}
	b.WriteByte(',')
	b.Write(appendString(nil, "digest"))
	b.WriteByte(':')
	b.Write(appendString(nil, d))
	b.WriteByte(',')
	b.Write(appendString(nil, "size"))
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(len(data)))
	a.w.replace(item.ref, b.Bytes())
	a.dropMeta(item)
}

func (a *Artifacts) dropMeta(item *ArtifactAt) {
	if item.digest >= 0 {
		a.w.drop(item.digest)
	}
	if item.size >= 0 {
		a.w.drop(item.size)
	}
}

// Changed reports whether ByReference or Inline was called.
func (a *Artifacts) Changed() bool { return a.w != nil && !a.w.empty() }

// Bytes returns the body with every replacement made.
func (a *Artifacts) Bytes() []byte { return a.w.bytes() }
