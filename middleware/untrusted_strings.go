package middleware

import (
	"bytes"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/batonproxy/baton/trust"
)

// An inbound JSON body is decoded into a tree (encoding/json, as the rest of
// the untrusted-content path reads it) only when something needs the tree:
// marks to find, labels on parts of it, a body to rewrite. A body labelled
// whole (a sender whose content is untrusted, the usual case) needs only its
// strings, which jsonStrings reads in one pass without building the tree;
// a body with no labels and no marks needs nothing.

// inboundDoc is an inbound body and, once decoded, its JSON tree.
type inboundDoc struct {
	body    []byte
	json    bool // the body says it is JSON
	decoded bool
	tree    any // nil when not JSON after all
}

// doc returns the body's JSON tree, decoding it on first use; nil when the
// body is not JSON.
func (d *inboundDoc) doc() any {
	if d.json && !d.decoded {
		d.tree, _ = decodeJSON(d.body) // not JSON after all: opaque text
		d.decoded = true
	}
	return d.tree
}

// mayCarryMarks reports whether body may hold a mark of untrusted content
// (a "trust": "untrusted" member, see markedSpans): the word itself, or an
// escape that could spell one of its letters (all of them between 0x60 and
// 0x7f: \u006X or \u007X), so that text escaped for other characters
// (non-ASCII letters, Go's \u003c) is not parsed for marks it cannot hold.
func mayCarryMarks(body []byte) bool {
	return bytes.Contains(body, []byte(untrustedWord)) ||
		bytes.Contains(body, []byte(`\u006`)) || bytes.Contains(body, []byte(`\u007`))
}

const untrustedWord = "untrusted"

// wholeBody reports whether every label is on the whole body.
func wholeBody(labels trust.Labels) bool {
	for _, l := range labels.Spans {
		if l.Pointer != "" {
			return false
		}
	}
	return true
}

// jsonStrings returns the RFC 6901 pointer and text of every string value
// of the JSON value at the start of body, in document order (object names
// are not values; what follows the value is not read, as encoding/json's
// Decoder leaves it). It reports false when jsontext does not read body as
// JSON with its defaults, which are stricter than encoding/json's (no
// duplicate names, valid UTF-8 and surrogates): the caller then decodes the
// body as before. FuzzJSONStrings holds the two to the same strings.
//
// The decoder reads body in place (jsontext parses a bytes.Buffer without
// copying it) and is pooled: a receiving Baton reads every labelled body.
func jsonStrings(body []byte) ([]spanText, bool) {
	r := stringReaders.Get().(*stringReader)
	defer r.release()
	r.src = *bytes.NewBuffer(body)
	r.dec.Reset(&r.src)
	d := &r.dec
	var out []spanText
	for {
		tok, err := d.ReadToken()
		if err != nil {
			return nil, false
		}
		depth := d.StackDepth()
		if tok.Kind() == '"' {
			kind, n := d.StackIndex(depth)
			if depth == 0 || kind == '[' || n%2 == 0 { // a value, not an object's name
				out = append(out, spanText{ptr: string(d.StackPointer()), text: tok.String()})
			}
		}
		if depth == 0 {
			return out, true
		}
	}
}

// stringReader is jsonStrings' decoder and the buffer it reads.
type stringReader struct {
	src bytes.Buffer
	dec jsontext.Decoder
}

var stringReaders = sync.Pool{New: func() any { return new(stringReader) }}

// release lets go of the body read and pools the reader.
func (r *stringReader) release() {
	r.src = bytes.Buffer{}
	r.dec.Reset(&r.src)
	stringReaders.Put(r)
}
