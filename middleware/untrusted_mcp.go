package middleware

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/batonproxy/baton/trust"
	"github.com/batonproxy/baton/trust/taint"
)

// Untrusted MCP tool results. A server whose tools fetch the web returns
// web text: on an outbound edge with mcp.untrusted_results, the result of a
// tool call is untrusted content. Its answer reaches the agent labelled
// (Baton-Trust: untrusted=("/result";src="mcp://<peer>/<tool>")), and the
// text of its content is fingerprinted as any external fetch is, so that a
// later handoff that copies it is labelled untrusted, and the receiving
// Baton delivers it as its edge's mode says (docs/untrusted-content.md).

// untrustedResult reports whether in holds a tool call whose result is
// untrusted, and names its source's tool ("batch" for a batch).
func (t *Taint) untrustedResult(in *Info) (string, bool) {
	if in.RPC == nil || in.RPC.MCP == nil || t.o.UntrustedResults == nil || !in.RPC.MCP.Handoff() || !t.o.UntrustedResults(in) {
		return "", false
	}
	if in.RPC.MCP.Batch {
		return "batch", true
	}
	return in.RPC.MCP.Calls[0].Tool, true
}

// untrustedToolCall passes the call on, labels its answer and remembers the
// text of its result as untrusted, before the result reaches the agent.
func (t *Taint) untrustedToolCall(next http.Handler, w http.ResponseWriter, r *http.Request, in *Info, tool string) {
	source := escapeSource("mcp://" + in.To + "/" + tool)
	var labels trust.Labels
	labels.Add("/result", source)
	next.ServeHTTP(&resultWriter{tapWriter: tapWriter{ResponseWriter: w, max: int(t.o.Config.MaxScanBytes)},
		label: labels.String(), remember: func(texts []string) { t.rememberTexts(r, source, texts) }}, r)
}

// rememberTexts fingerprints texts as untrusted content from source.
func (t *Taint) rememberTexts(r *http.Request, source string, texts []string) {
	if texts == nil {
		t.o.Log.LogAttrs(r.Context(), slog.LevelWarn, "untrusted content: a tool result outgrew taint.max_scan_bytes; the rest is not fingerprinted",
			slog.String("source", source))
		return
	}
	if !t.o.Config.Tracking() {
		return
	}
	h := t.hashers.Get().(*taint.Hasher)
	defer t.hashers.Put(h)
	var hashes []uint64
	for _, text := range texts {
		_, hs, _ := t.fingerprint(h, plainText, []byte(text))
		hashes = append(hashes, hs...)
	}
	if len(hashes) == 0 {
		return
	}
	if err := t.o.Store.MarkAdd(r.Context(), t.key, t.capped(hashes), source, t.ttl, t.o.Config.MaxFingerprints); err != nil {
		t.o.Log.LogAttrs(r.Context(), slog.LevelWarn, "untrusted content: fingerprints not kept",
			slog.String("source", source), slog.String("error", err.Error()))
	}
}

// resultWriter labels a tool call's answer as it starts, and hands the text
// of each result to remember once the result is complete (a JSON answer
// whole, or the stream's event that carries it), before passing that part
// on: the agent cannot copy the text before it is remembered. Past max
// bytes it remembers what it has and passes the rest unread (logged).
type resultWriter struct {
	tapWriter
	label    string
	remember func([]string)
	wrote    bool
	parsed   int  // bytes of buf whose events were read
	done     bool // the result was remembered, or the answer outgrew max
}

func (w *resultWriter) WriteHeader(code int) {
	if code >= 200 && !w.wrote {
		w.wrote = true
		if code < 300 {
			w.Header().Set(trust.HeaderTrust, w.label)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *resultWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if !w.done {
		w.read(p)
	}
	return w.ResponseWriter.Write(p)
}

// read takes p into the buffer and remembers the text of the results that
// are now whole, reading each event once.
func (w *resultWriter) read(p []byte) {
	room := w.max - len(w.buf)
	over := len(p) > room
	w.buf = append(w.buf, p[:min(len(p), max(room, 0))]...)
	trimmed := bytes.TrimSpace(w.buf)
	switch {
	case len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '['):
		if json.Valid(trimmed) {
			w.remember(toolResultTexts(trimmed))
			w.done = true
		}
	default:
		end := max(bytes.LastIndex(w.buf, []byte("\n\n")), bytes.LastIndex(w.buf, []byte("\r\n\r\n")))
		if end > w.parsed {
			if texts := toolResultTexts(w.buf[w.parsed:end]); len(texts) > 0 {
				w.remember(texts)
			}
			w.parsed = end
		}
	}
	if over && !w.done {
		w.done = true
		w.remember(nil) // past what Baton reads: say so
	}
}

// toolResultTexts returns the text of the JSON-RPC results in an answer:
// a JSON object or batch, or the data of a server-sent event stream's
// events (notifications are skipped). Text is a content item's text, an
// embedded resource's text, and the structured content, as JSON.
func toolResultTexts(body []byte) []string {
	var texts []string
	add := func(msg []byte) {
		var m struct {
			Result struct {
				Content []struct {
					Text     string `json:"text"`
					Resource struct {
						Text string `json:"text"`
					} `json:"resource"`
				} `json:"content"`
				Structured json.RawMessage `json:"structuredContent"`
			} `json:"result"`
		}
		if json.Unmarshal(msg, &m) != nil {
			return
		}
		for _, c := range m.Result.Content {
			for _, t := range [...]string{c.Text, c.Resource.Text} {
				if t != "" {
					texts = append(texts, t)
				}
			}
		}
		if len(m.Result.Structured) > 0 && string(m.Result.Structured) != "null" {
			texts = append(texts, string(m.Result.Structured))
		}
	}
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '{':
		add(trimmed)
		return texts
	case len(trimmed) > 0 && trimmed[0] == '[':
		var msgs []json.RawMessage
		if json.Unmarshal(trimmed, &msgs) == nil {
			for _, m := range msgs {
				add(m)
			}
		}
		return texts
	}
	for _, line := range bytes.Split(body, []byte("\n")) {
		if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
			add(bytes.TrimSpace(data))
		}
	}
	return texts
}
