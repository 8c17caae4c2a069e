package middleware

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
	"github.com/batonproxy/baton/trust/taint"
)

// Untrusted content (docs/untrusted-content.md). At egress Baton
// fingerprints every external response the agent reads and labels the
// fields of an outbound handoff that copy untrusted text; at ingress it
// honours the labels a handoff arrives with (the signed Baton-Trust header,
// artifacts the sender marked, an untrusted edge), remembers their text as
// untrusted for the local agent, and delivers it as the edge says.

// HeaderInjection reports, to the local agent, the injection signal on the
// untrusted spans of a handoff: `score=0.8, reasons=("…" "…")`.
const HeaderInjection = "Baton-Injection"

// A2ATrustKey is the A2A part and message metadata member that carries
// labels; QuarantineKey the member untrusted content is moved to.
const (
	A2ATrustKey   = "baton.trust"
	QuarantineKey = "baton.untrusted"
)

// TaintOptions configure Taint.
type TaintOptions struct {
	Store  state.Store
	Agent  string
	Config config.Taint
	// Modes returns the inbound edge's delivery mode and injection action.
	Modes func(in *Info) (mode, onInjection string)
	// UntrustedResults reports whether the results of MCP tool calls on the
	// request's outbound edge are untrusted content (untrusted_mcp.go).
	UntrustedResults func(in *Info) bool
	Log              *slog.Logger
}

// Taint is the untrusted-content middleware pair.
type Taint struct {
	o         TaintOptions
	key       string
	threshold taint.Threshold
	score     float64
	ttl       time.Duration
	hashers   sync.Pool
	decisions *labelCache
	// inProcess: the store never leaves the process (state.Memory), so
	// there is no round trip for keeping fingerprints to overlap.
	inProcess bool
}

// NewTaint builds the middlewares from o.
func NewTaint(o TaintOptions) *Taint {
	t := &Taint{
		o:         o,
		key:       "taint:{" + o.Agent + "}",
		threshold: taint.DefaultThreshold,
		score:     taint.DefaultInjectionScore,
		ttl:       o.Config.TTL.D(),
		decisions: newLabelCache(1 << 14),
	}
	if o.Config.MinMatches > 0 {
		t.threshold.MinMatches = o.Config.MinMatches
	}
	if o.Config.MinFraction > 0 {
		t.threshold.MinFraction = o.Config.MinFraction
	}
	if o.Config.InjectionScore > 0 {
		t.score = o.Config.InjectionScore
	}
	t.hashers.New = func() any { return taint.NewHasher(taint.Default) }
	if ip, ok := o.Store.(interface{ InProcess() bool }); ok {
		t.inProcess = ip.InProcess()
	}
	return t
}

// textKind classifies a content type: JSON, text, or neither.
type textKind uint8

const (
	notText textKind = iota
	jsonText
	plainText
	htmlText
)

// mediaType returns the type/subtype of a Content-Type value in lower case,
// without its parameters (which do not change the kind), or "" when it has
// no type/subtype of tokens (RFC 9110 §8.3.1). It allocates only for a type
// written with capitals.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	slash := strings.IndexByte(ct, '/')
	if slash <= 0 || slash == len(ct)-1 {
		return ""
	}
	upper := false
	for i := 0; i < len(ct); i++ {
		c := ct[i]
		if i != slash && !isTchar(c) {
			return ""
		}
		upper = upper || ('A' <= c && c <= 'Z')
	}
	if upper {
		return strings.ToLower(ct)
	}
	return ct
}

// isTchar reports an RFC 9110 token character.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func kindOf(ct string) textKind {
	mt := mediaType(ct)
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return jsonText
	case mt == "text/html" || mt == "application/xhtml+xml":
		return htmlText
	case strings.HasPrefix(mt, "text/") || mt == "application/xml" || strings.HasSuffix(mt, "+xml"):
		return plainText
	}
	return notText
}

// Egress labels outbound handoffs and fingerprints external responses.
func (t *Taint) Egress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := info(r)
		r.Header.Del(trust.HeaderTrust) // only this Baton's labels count
		if !in.Handoff() {
			if !t.o.Config.Tracking() {
				next.ServeHTTP(w, r)
				return
			}
			cw := &tapWriter{ResponseWriter: w, max: int(t.o.Config.MaxScanBytes)}
			next.ServeHTTP(cw, r)
			t.rememberResponse(r, in, cw)
			return
		}
		kind := kindOf(r.Header.Get("Content-Type"))
		if kind == notText {
			t.handoff(next, w, r, in)
			return
		}
		var labels trust.Labels
		detected := false
		if !in.Buffered && (r.ContentLength < 0 || r.ContentLength > t.o.Config.MaxScanBytes) {
			labels.Unscanned = true
		} else if !Buffer(w, r, in) {
			return
		}
		if in.Buffered {
			if int64(len(in.Body)) > t.o.Config.MaxScanBytes {
				labels.Unscanned = true
			} else if found, err := t.labelOutbound(r.Context(), in, kind, &labels); err != nil {
				// The store is down or the body is not what its type says:
				// the handoff goes on, labelled as not scanned.
				t.o.Log.LogAttrs(r.Context(), slog.LevelWarn, "untrusted content: outbound scan failed",
					slog.String("edge", in.Edge()), slog.String("trace_id", in.TraceID), slog.String("error", err.Error()))
				labels.Unscanned = true
			} else {
				detected = found
			}
		}
		if in.Key != "" {
			labels = t.decisions.settle(in, labels)
		}
		if labels.Empty() {
			t.handoff(next, w, r, in)
			return
		}
		// The body is rewritten only when Baton found copies the agent did
		// not mark itself; marks the agent made travel as they are, with
		// the header.
		if kind == jsonText && detected {
			if b, err := markOutbound(in.Body, labels); err == nil {
				replaceBody(r, in, b)
			}
		}
		r.Header.Set(trust.HeaderTrust, labels.String())
		// A copy: labels itself stays off the heap for the handoffs that
		// have none.
		kept := labels
		in.Labels = &kept
		t.handoff(next, w, r, in)
	})
}

// handoff passes the handoff on, taking a tool call's result as untrusted
// content when its edge says so (untrusted_mcp.go).
func (t *Taint) handoff(next http.Handler, w http.ResponseWriter, r *http.Request, in *Info) {
	if tool, ok := t.untrustedResult(in); ok {
		t.untrustedToolCall(next, w, r, in, tool)
		return
	}
	next.ServeHTTP(w, r)
}

// labelOutbound finds the spans of an outbound body that copy untrusted text
// (one store lookup for all of them) and the artifacts or parts the agent
// marked untrusted itself. found reports copies the agent had not marked.
func (t *Taint) labelOutbound(ctx context.Context, in *Info, kind textKind, labels *trust.Labels) (found bool, err error) {
	body := in.Body
	if kind == jsonText && bytes.Contains(body, []byte(`"untrusted"`)) {
		if doc, err := decodeJSON(body); err == nil {
			markedSpans(doc, labels)
		}
	}
	if !t.o.Config.Tracking() || !t.o.Store.MarksMayHold(t.key) {
		return false, nil // nothing to compare with: no fingerprints to take
	}
	h := t.hashers.Get().(*taint.Hasher)
	defer t.hashers.Put(h)
	spans, hashes, err := t.fingerprint(h, kind, body)
	if err != nil || len(hashes) == 0 {
		return false, err
	}
	uniq := slices.Clone(hashes)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	vals, err := t.o.Store.MarkLookup(ctx, t.key, uniq)
	if err != nil {
		return false, err
	}
	for _, s := range spans {
		matched := 0
		var sources []string
		for _, hv := range hashes[s.lo:s.hi] {
			i, _ := slices.BinarySearch(uniq, hv)
			if v := vals[i]; v != "" {
				matched++
				for _, src := range strings.Split(v, " ") {
					if len(sources) < maxSources && !slices.Contains(sources, src) {
						sources = append(sources, src)
					}
				}
			}
		}
		if matched > 0 && t.threshold.Tainted(matched, s.hi-s.lo) {
			if _, marked := labels.Find(s.ptr); !marked {
				found = true
			}
			labels.Add(s.ptr, sources...)
		}
	}
	return found, nil
}

// maxSources bounds the sources named per label.
const maxSources = 4

// span is one fingerprinted string of a body: its pointer and its hashes,
// hashes[lo:hi] of the slice fingerprint returns.
type span struct {
	ptr    string
	lo, hi int
}

// fingerprint hashes every string of a JSON body (or the whole of a text
// body) that is at least MinSpanBytes long.
func (t *Taint) fingerprint(h *taint.Hasher, kind textKind, body []byte) ([]span, []uint64, error) {
	var spans []span
	var hashes []uint64
	add := func(ptr string, text []byte) {
		lo := len(hashes)
		hashes = h.Sum(hashes, text)
		if len(hashes) > lo {
			spans = append(spans, span{ptr: ptr, lo: lo, hi: len(hashes)})
		}
	}
	switch kind {
	case jsonText:
		err := taint.Spans(body, t.o.Config.MinSpanBytes, add)
		return spans, hashes, err
	case htmlText:
		add("", stripMarkup(nil, body))
	default:
		if len(body) >= t.o.Config.MinSpanBytes {
			add("", body)
		}
	}
	return spans, hashes, nil
}

// markedSpans adds the artifacts (trust: untrusted) and A2A parts
// (metadata baton.trust) a sender marked untrusted itself.
func markedSpans(doc any, labels *trust.Labels) {
	for _, base := range []string{"", handoff.A2APointer} {
		arts, _ := lookup(doc, base+"/artifacts")
		list, _ := arts.([]any)
		for i, a := range list {
			if m, ok := a.(map[string]any); ok && m["trust"] == string(handoff.Untrusted) {
				src, _ := m["source"].(string)
				ptr := base + "/artifacts/" + strconv.Itoa(i)
				if _, ok := m["content"].(string); ok {
					ptr += "/content" // the text; name, source and the rest are metadata
				}
				labels.Add(ptr, src)
			}
		}
	}
	parts, _ := lookup(doc, "/params/message/parts")
	list, _ := parts.([]any)
	for i, p := range list {
		m, _ := p.(map[string]any)
		md, _ := m["metadata"].(map[string]any)
		tr, _ := md[A2ATrustKey].(map[string]any)
		if tr["trust"] == string(handoff.Untrusted) {
			var sources []string
			if ss, ok := tr["sources"].([]any); ok {
				for _, s := range ss {
					if s, ok := s.(string); ok {
						sources = append(sources, s)
					}
				}
			}
			ptr := "/params/message/parts/" + strconv.Itoa(i)
			if _, ok := m["text"].(string); ok {
				ptr += "/text"
			}
			labels.Add(ptr, sources...)
		}
	}
}

// markOutbound writes the labels into the body: each labelled artifact says
// trust: untrusted with its source, each labelled A2A part carries
// metadata baton.trust, and an envelope or A2A message lists every label.
func markOutbound(body []byte, labels trust.Labels) ([]byte, error) {
	doc, err := decodeJSON(body)
	if err != nil {
		return nil, err
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return body, nil
	}
	for _, l := range labels.Spans {
		first := ""
		if len(l.Sources) > 0 {
			first = l.Sources[0]
		}
		if p, ok := enclosing(l.Pointer, "artifacts"); ok {
			if a, _ := lookup(doc, p); a != nil {
				if m, ok := a.(map[string]any); ok {
					// What the agent said about a copy it marked trusted
					// gives way to where the text came from.
					if m["trust"] != string(handoff.Untrusted) || m["source"] == nil {
						if first != "" {
							m["source"] = first
						}
					}
					m["trust"] = string(handoff.Untrusted)
				}
			}
		}
		if p, ok := enclosing(l.Pointer, "parts"); ok {
			if a, _ := lookup(doc, p); a != nil {
				if m, ok := a.(map[string]any); ok {
					md, _ := m["metadata"].(map[string]any)
					if md == nil {
						md = map[string]any{}
						m["metadata"] = md
					}
					md[A2ATrustKey] = map[string]any{"trust": string(handoff.Untrusted), "sources": anyStrings(l.Sources)}
				}
			}
		}
	}
	block := map[string]any{"untrusted": labelList(labels)}
	if msg, ok := lookup(doc, "/params/message"); ok {
		if m, ok := msg.(map[string]any); ok {
			md, _ := m["metadata"].(map[string]any)
			if md == nil {
				md = map[string]any{}
				m["metadata"] = md
			}
			md[A2ATrustKey] = block
		}
	} else if _, isEnvelope := root["schema_version"]; isEnvelope {
		root["trust"] = block
	}
	return encodeJSON(doc)
}

func labelList(labels trust.Labels) []any {
	out := make([]any, len(labels.Spans))
	for i, l := range labels.Spans {
		out[i] = map[string]any{"pointer": l.Pointer, "sources": anyStrings(l.Sources)}
	}
	return out
}

func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// rememberResponse fingerprints what an external host answered and keeps
// the fingerprints as untrusted for the agent, before the response ends.
func (t *Taint) rememberResponse(r *http.Request, in *Info, cw *tapWriter) {
	if len(cw.buf) == 0 {
		return
	}
	kind := kindOf(cw.Header().Get("Content-Type"))
	if kind == notText {
		return
	}
	source := "http://" + in.External + r.URL.Path
	if r.URL.IsAbs() {
		source = r.URL.Scheme + "://" + r.URL.Host + r.URL.Path
	}
	body := cw.buf
	if cw.truncated && kind == jsonText {
		kind = plainText // a cut JSON document is still text
	}
	h := t.hashers.Get().(*taint.Hasher)
	defer t.hashers.Put(h)
	_, hashes, err := t.fingerprint(h, kind, body)
	if err != nil { // not the JSON it claimed: take it as text
		_, hashes, _ = t.fingerprint(h, plainText, body)
	}
	if len(hashes) == 0 {
		return
	}
	if err := t.o.Store.MarkAdd(r.Context(), t.key, t.capped(hashes), escapeSource(source), t.ttl, t.o.Config.MaxFingerprints); err != nil {
		t.o.Log.LogAttrs(r.Context(), slog.LevelWarn, "untrusted content: fingerprints not kept",
			slog.String("source", source), slog.String("error", err.Error()))
	}
}

// escapeSource keeps a source one space-free word (sources are stored and
// sent space-separated).
func escapeSource(s string) string { return strings.ReplaceAll(s, " ", "%20") }

// tapWriter keeps the first max bytes of a response as it streams to
// the agent.
type tapWriter struct {
	http.ResponseWriter
	max       int
	buf       []byte
	truncated bool
}

func (c *tapWriter) Write(p []byte) (int, error) {
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
		if len(p) > room {
			c.truncated = true
		}
	} else if len(p) > 0 {
		c.truncated = true
	}
	return c.ResponseWriter.Write(p)
}

func (c *tapWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *tapWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// stripMarkup appends the text of an HTML document: tags, comments, and
// script and style elements removed, each replaced by a space.
func stripMarkup(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		if c != '<' {
			dst = append(dst, c)
			i++
			continue
		}
		rest := src[i:]
		switch {
		case bytes.HasPrefix(rest, []byte("<!--")):
			end := bytes.Index(rest, []byte("-->"))
			if end < 0 {
				return dst
			}
			i += end + 3
		case hasPrefixFold(rest, "<script"), hasPrefixFold(rest, "<style"):
			closer := "</script"
			if hasPrefixFold(rest, "<style") {
				closer = "</style"
			}
			end := indexFold(rest, closer)
			if end < 0 {
				return dst
			}
			i += end + len(closer)
			if gt := bytes.IndexByte(src[i:], '>'); gt >= 0 {
				i += gt + 1
			}
		default:
			gt := bytes.IndexByte(rest, '>')
			if gt < 0 {
				return dst
			}
			i += gt + 1
		}
		dst = append(dst, ' ')
	}
	return dst
}

func hasPrefixFold(b []byte, p string) bool {
	return len(b) >= len(p) && strings.EqualFold(string(b[:len(p)]), p)
}

func indexFold(b []byte, p string) int {
	for i := 0; i+len(p) <= len(b); i++ {
		if hasPrefixFold(b[i:], p) {
			return i
		}
	}
	return -1
}

// labelCache remembers the labels each handoff (edge and idempotency key)
// was first sent with, so that an agent's retry carries the same bytes even
// when the agent read more untrusted text in between: the receiver's dedupe
// window fingerprints the body. Labels only grow: a retry carries its first
// labels plus any found since (never fewer).
type labelCache struct{ m *state.FIFO[trust.Labels] }

func newLabelCache(size int) *labelCache { return &labelCache{m: state.NewFIFO[trust.Labels](size, 0)} }

// settle returns the labels to send for key: those sent before, with l's
// added.
func (c *labelCache) settle(in *Info, l trust.Labels) trust.Labels {
	if l.Empty() && c.m.Empty() {
		return l // nothing sent before, nothing to send now
	}
	return c.m.Update(in.Edge()+"\x00"+in.Key, func(prev trust.Labels, ok bool) (trust.Labels, bool) {
		if !ok {
			return l, !l.Empty()
		}
		merged := trust.Labels{Unscanned: prev.Unscanned || l.Unscanned}
		for _, s := range prev.Spans {
			merged.Add(s.Pointer, s.Sources...)
		}
		for _, s := range l.Spans {
			merged.Add(s.Pointer, s.Sources...)
		}
		return merged, true
	})
}

// capped bounds what one response or handoff adds to half the agent's
// fingerprints (the first ones: Sum returns them in text order), so that a
// single huge text cannot flush everything else out at once.
func (t *Taint) capped(hashes []uint64) []uint64 {
	if half := t.o.Config.MaxFingerprints / 2; half > 0 && len(hashes) > half {
		return hashes[:half]
	}
	return hashes
}
