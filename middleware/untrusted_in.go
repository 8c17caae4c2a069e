package middleware

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/trust"
	"github.com/batonproxy/baton/trust/taint"
)

// Ingress honours the labels a handoff arrives with and delivers its
// untrusted content as the edge says.
func (t *Taint) Ingress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := info(r)
		r.Header.Del(HeaderInjection) // only this Baton's scan counts
		labels, err := trust.ParseLabels(r.Header.Get(trust.HeaderTrust))
		if err != nil {
			in.Err = err
			refuse(w, r, problem.New(r, problem.BadTrustLabels, err.Error()))
			return
		}
		if in.Posture == string(trust.Untrusted) {
			labels.Add("", "peer:"+in.From)
		}
		kind := kindOf(r.Header.Get("Content-Type"))
		if kind != notText && !in.Buffered && r.ContentLength >= 0 && r.ContentLength <= t.o.Config.MaxScanBytes {
			if !Buffer(w, r, in) {
				return
			}
		}
		d := &inboundDoc{body: in.Body, json: kind == jsonText && in.Buffered && len(in.Body) > 0}
		if d.json && mayCarryMarks(in.Body) {
			if doc := d.doc(); doc != nil {
				markedSpans(doc, &labels)
			}
		}
		if labels.Empty() {
			r.Header.Del(trust.HeaderTrust)
			next.ServeHTTP(w, r)
			return
		}
		in.Labels = &labels
		r.Header.Set(trust.HeaderTrust, labels.String())

		texts := spanTexts(d, in, labels)
		t.keepInbound(r.Context(), in, texts)
		sig, unscored := t.scan(texts)
		in.InjectionUnscored = unscored
		if sig != nil {
			in.Injection = sig
			r.Header.Set(HeaderInjection, sig.header())
		}
		mode, onInjection := t.o.Modes(in)
		sources, pointers := labels.Sources(), labelPointers(labels)
		if sig != nil && onInjection == config.UntrustedReject {
			refuse(w, r, problem.New(r, problem.InjectionSuspected,
				"an untrusted span of this handoff looks like a prompt injection ("+strings.Join(sig.Reasons, "; ")+")").
				With("score", sig.Score).With("reasons", sig.Reasons).With("pointers", sig.Pointers).With("sources", sources).
				With("unscored", sig.Unscored))
			return
		}
		if mode == config.UntrustedReject {
			refuse(w, r, problem.New(r, problem.UntrustedContent,
				"this edge refuses untrusted content; the handoff carries content from "+strings.Join(sources, ", ")).
				With("sources", sources).With("pointers", pointers))
			return
		}
		if !in.Buffered {
			// Too large or streamed to rewrite: the labels go with it.
			next.ServeHTTP(w, r)
			return
		}
		body, changed := in.Body, false
		var doc any
		if mode == config.UntrustedSpotlight || mode == config.UntrustedQuarantine || (sig != nil && onInjection == config.UntrustedQuarantine) {
			doc = d.doc()
		}
		switch {
		case mode == config.UntrustedSpotlight:
			body, changed = spotlight(doc, body, labels.Spans)
		case mode == config.UntrustedQuarantine:
			body, changed = quarantine(doc, body, labels.Spans)
		case sig != nil && onInjection == config.UntrustedQuarantine:
			var flagged []trust.SpanLabel
			for _, l := range labels.Spans {
				if slices.ContainsFunc(sig.Pointers, func(p string) bool { return p == l.Pointer || strings.HasPrefix(p, l.Pointer+"/") || l.Pointer == "" }) {
					flagged = append(flagged, l)
				}
			}
			body, changed = quarantine(doc, body, flagged)
		}
		if changed {
			replaceBody(r, in, body)
		}
		next.ServeHTTP(w, r)
	})
}

// spanText is the text of one untrusted string, at its pointer.
type spanText struct {
	ptr, text string
	sources   []string
}

// spanTexts returns the text under every label: each string value under
// its pointer in a JSON body, or the whole of a text body.
func spanTexts(d *inboundDoc, in *Info, labels trust.Labels) []spanText {
	if len(labels.Spans) == 0 {
		return nil // only unscanned: no text is labelled
	}
	if d.json && !d.decoded && wholeBody(labels) {
		if strs, ok := jsonStrings(d.body); ok {
			if len(labels.Spans) == 1 {
				for i := range strs {
					strs[i].sources = labels.Spans[0].Sources
				}
				return strs
			}
			var out []spanText
			for _, l := range labels.Spans {
				for _, s := range strs {
					s.sources = l.Sources
					out = append(out, s)
				}
			}
			return out
		}
	}
	doc := d.doc()
	var out []spanText
	for _, l := range labels.Spans {
		if doc != nil {
			forStrings(doc, l.Pointer, func(ptr, s string) {
				out = append(out, spanText{ptr: ptr, text: s, sources: l.Sources})
			})
		} else if l.Pointer == "" && in.Buffered {
			out = append(out, spanText{ptr: "", text: string(in.Body), sources: l.Sources})
		}
	}
	return out
}

// keepInbound keeps the fingerprints of the untrusted text the agent
// receives, so that the agent handing it on is caught. With a store across
// the network the round trip goes on while the request passes the checks
// after this one (the dedupe window's claim, a round trip of its own, among
// them), and the request waits for it just before it goes to the agent
// (Info.AwaitKept): the two round trips take the time of one on the request
// path. An in-process store keeps them at once.
func (t *Taint) keepInbound(ctx context.Context, in *Info, texts []spanText) {
	if !t.o.Config.Tracking() || len(texts) == 0 {
		return
	}
	edge, traceID := in.Edge(), in.TraceID
	if t.inProcess {
		t.rememberInbound(ctx, edge, traceID, texts)
		return
	}
	done := make(chan struct{})
	in.keeping = done
	go func() {
		defer close(done)
		// The request may end first (a kept answer replayed, a refusal):
		// the fingerprints are kept all the same, within the store's own
		// time limit.
		t.rememberInbound(context.WithoutCancel(ctx), edge, traceID, texts)
	}()
}

// rememberInbound keeps the fingerprints of texts: one pipelined write per
// set of sources. A store that fails is logged; the handoff goes on.
func (t *Taint) rememberInbound(ctx context.Context, edge, traceID string, texts []spanText) {
	if !t.o.Config.Tracking() || len(texts) == 0 {
		return
	}
	h := t.hashers.Get().(*taint.Hasher)
	defer t.hashers.Put(h)
	bySource := map[string][]uint64{}
	for _, s := range texts {
		if len(s.text) < t.o.Config.MinSpanBytes {
			continue
		}
		key := joinSources(s.sources)
		bySource[key] = h.Sum(bySource[key], []byte(s.text))
	}
	for src, hashes := range bySource {
		if err := t.o.Store.MarkAdd(ctx, t.key, t.capped(hashes), src, t.ttl, t.o.Config.MaxFingerprints); err != nil {
			t.o.Log.LogAttrs(ctx, slog.LevelWarn, "untrusted content: fingerprints not kept",
				slog.String("edge", edge), slog.String("trace_id", traceID), slog.String("error", err.Error()))
			return
		}
	}
}

func joinSources(ss []string) string {
	out := make([]string, 0, min(len(ss), maxSources))
	for _, s := range ss {
		if len(out) == maxSources {
			break
		}
		out = append(out, escapeSource(s))
	}
	if len(out) == 0 {
		return "unknown"
	}
	return strings.Join(out, " ")
}

// scan scores the untrusted spans for prompt injection (taint.Detect: the
// trained model and the structural signs); the signal is nil when none
// reaches the threshold. unscored counts the bytes of every span that the
// scan left out (a span beyond taint.DetectHead+taint.DetectTail).
func (t *Taint) scan(texts []spanText) (sig *InjectionSignal, unscored int) {
	for _, s := range texts {
		got := taint.Detect([]byte(s.text))
		unscored += got.Unscored
		if got.Score < t.score {
			continue
		}
		if sig == nil {
			sig = &InjectionSignal{}
		}
		sig.Score = max(sig.Score, got.Score)
		sig.Pointers = append(sig.Pointers, s.ptr)
		sig.Unscored += got.Unscored
		for _, r := range got.Reasons {
			if !slices.Contains(sig.Reasons, r) {
				sig.Reasons = append(sig.Reasons, r)
			}
		}
	}
	return sig, unscored
}

// header renders the signal for the Baton-Injection header.
func (s *InjectionSignal) header() string {
	b := []byte("score=")
	b = strconv.AppendFloat(b, s.Score, 'f', 2, 64)
	b = append(b, ", reasons=("...)
	for i, r := range s.Reasons {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendQuoteToASCII(b, r)
	}
	b = append(b, ')')
	if s.Unscored > 0 {
		b = append(b, ", unscored="...)
		b = strconv.AppendInt(b, int64(s.Unscored), 10)
	}
	return string(b)
}

func labelPointers(l trust.Labels) []string {
	out := make([]string, len(l.Spans))
	for i, s := range l.Spans {
		out[i] = s.Pointer
	}
	return out
}

// spotlight datamarks every untrusted string (or the whole of a text body).
func spotlight(doc any, body []byte, labels []trust.SpanLabel) ([]byte, bool) {
	if doc == nil {
		for _, l := range labels {
			if l.Pointer == "" {
				return taint.Datamark(nil, body), true
			}
		}
		return body, false
	}
	changed := false
	done := map[string]bool{} // labels may overlap ("" covers every pointer)
	for _, l := range labels {
		var ptrs []string
		forStrings(doc, l.Pointer, func(ptr, _ string) {
			if !done[ptr] {
				done[ptr] = true
				ptrs = append(ptrs, ptr)
			}
		})
		for _, p := range ptrs {
			v, _ := lookup(doc, p)
			doc, _ = replace(doc, p, string(taint.Datamark(nil, []byte(v.(string)))))
			changed = true
		}
	}
	if !changed {
		return body, false
	}
	out, err := encodeJSON(doc)
	if err != nil {
		return body, false
	}
	return out, true
}

// quarantine moves untrusted content out of the way: whole artifacts and A2A
// parts into a separate section (the envelope's `untrusted`, the A2A
// message's metadata `baton.untrusted`, or `baton.untrusted` of another JSON
// object), other strings replaced by a pointer to where their text went. A
// body untrusted as a whole has nothing trusted to keep apart from: it is
// spotlighted instead.
func quarantine(doc any, body []byte, labels []trust.SpanLabel) ([]byte, bool) {
	for _, l := range labels {
		if l.Pointer == "" {
			return spotlight(doc, body, labels)
		}
	}
	root, ok := doc.(map[string]any)
	if doc == nil || !ok || len(labels) == 0 {
		return body, false
	}
	// Where the quarantined content goes.
	section, where := root, "/"+QuarantineKey
	sectionKey := QuarantineKey
	if msg, ok := lookup(doc, "/params/message"); ok {
		if m, ok := msg.(map[string]any); ok {
			md, _ := m["metadata"].(map[string]any)
			if md == nil {
				md = map[string]any{}
				m["metadata"] = md
			}
			section, where = md, "/params/message/metadata/"+escapeToken(QuarantineKey)
		}
	} else if _, isEnvelope := root["schema_version"]; isEnvelope {
		sectionKey, where = "untrusted", "/untrusted"
	}
	q, _ := section[sectionKey].(map[string]any)
	if q == nil {
		q = map[string]any{}
	}
	// Whole items of a list (artifacts, parts) move; collect them first and
	// remove from the highest index down so the others keep their places.
	moved := map[string]bool{}
	var items []string
	for _, l := range labels {
		for _, list := range []string{"artifacts", "parts"} {
			if p, ok := enclosing(l.Pointer, list); ok && !moved[p] {
				moved[p] = true
				items = append(items, p)
			}
		}
	}
	slices.SortFunc(items, func(a, b string) int { return comparePointers(b, a) })
	for _, p := range items {
		toks := pointerTokens(p)
		parentPtr, list := joinPointer(toks[:len(toks)-1]), toks[len(toks)-2]
		i, _ := strconv.Atoi(toks[len(toks)-1])
		parent, _ := lookup(doc, parentPtr)
		arr, ok := parent.([]any)
		if !ok || i >= len(arr) {
			continue
		}
		q[list] = append([]any{arr[i]}, asList(q[list])...)
		arr = slices.Delete(arr, i, i+1)
		if list == "parts" && len(arr) == 0 {
			arr = []any{map[string]any{"kind": "text", "text": "[untrusted content moved to " + where + "]"}}
		}
		doc, _ = replace(doc, parentPtr, arr)
	}
	// Other strings: replaced by a note, their text kept in fields.
	for _, l := range labels {
		if _, inList := enclosing(l.Pointer, "artifacts"); inList {
			continue
		}
		if _, inList := enclosing(l.Pointer, "parts"); inList {
			continue
		}
		var ptrs []string
		forStrings(doc, l.Pointer, func(ptr, _ string) { ptrs = append(ptrs, ptr) })
		slices.Sort(ptrs)
		for _, p := range ptrs {
			v, _ := lookup(doc, p)
			fields := asList(q["fields"])
			q["fields"] = append(fields, map[string]any{"pointer": p, "text": v, "sources": anyStrings(l.Sources)})
			doc, _ = replace(doc, p, "[untrusted content moved to "+where+"/fields/"+strconv.Itoa(len(fields))+"]")
		}
	}
	if len(q) == 0 {
		return body, false
	}
	section[sectionKey] = q
	out, err := encodeJSON(doc)
	if err != nil {
		return body, false
	}
	return out, true
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// comparePointers orders pointers token by token, array indexes by number.
func comparePointers(a, b string) int {
	ta, tb := pointerTokens(a), pointerTokens(b)
	for i := 0; i < len(ta) && i < len(tb); i++ {
		if ta[i] == tb[i] {
			continue
		}
		na, ea := strconv.Atoi(ta[i])
		nb, eb := strconv.Atoi(tb[i])
		if ea == nil && eb == nil {
			return na - nb
		}
		return strings.Compare(ta[i], tb[i])
	}
	return len(ta) - len(tb)
}

// RememberRead remembers text the agent read through its Baton from source
// (referenced content of trace traceID, docs/context.md) as untrusted, so
// that an outbound handoff copying it is labelled as if it had arrived
// inline.
func (t *Taint) RememberRead(ctx context.Context, traceID, source string, text []byte) {
	in := &Info{Side: Ingress, Agent: t.o.Agent, TraceID: traceID}
	t.rememberInbound(ctx, in.Edge(), traceID, []spanText{{text: string(text), sources: []string{source}}})
}
