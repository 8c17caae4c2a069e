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

// untrustedResult reports whether in is a tool call whose result is
// untrusted, and names the tool.
func (t *Taint) untrustedResult(in *Info) (string, bool) {
	if in.RPC == nil || in.RPC.MCP == nil || in.RPC.MCP.Batch || t.o.UntrustedResults == nil {
		return "", false
	}
	c := in.RPC.MCP.Calls[0]
	if c.Method != MCPToolsCall || !t.o.UntrustedResults(in) {
		return "", false
	}
	return c.Tool, true
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
// of its result to remember once the result is complete (a JSON answer
// whole, or the stream's event that carries it), before passing that last
// part on: the agent cannot copy the text before it is remembered.
type resultWriter struct {
	tapWriter
	label    string
	remember func([]string)
	wrote    bool
	kept     bool
}

func (w *resultWriter) WriteHeader(code int) {
	if !w.wrote {
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
	if !w.kept {
		if room := w.max - len(w.buf); room >= len(p) {
			w.buf = append(w.buf, p...)
			if texts := toolResultTexts(completeResult(w.buf)); len(texts) > 0 {
				w.kept = true
				w.remember(texts)
			}
		} else {
			w.kept = true // past what Baton scans: passed on unremembered
		}
	}
	return w.ResponseWriter.Write(p)
}

// completeResult returns the part of an answer known to be whole: a JSON
// object once it is valid, or a stream up to its last complete event.
func completeResult(b []byte) []byte {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		if json.Valid(trimmed) {
			return trimmed
		}
		return nil
	}
	i := max(bytes.LastIndex(b, []byte("\n\n")), bytes.LastIndex(b, []byte("\r\n\r\n")))
	if i < 0 {
		return nil
	}
	return b[:i]
}

// toolResultTexts returns the text of the content of the JSON-RPC results
// in an answer: a JSON object, or the data of a server-sent event stream's
// events (notifications are skipped).
func toolResultTexts(body []byte) []string {
	var texts []string
	add := func(msg []byte) {
		var m struct {
			Result struct {
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if json.Unmarshal(msg, &m) != nil {
			return
		}
		for _, c := range m.Result.Content {
			if c.Text != "" {
				texts = append(texts, c.Text)
			}
		}
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		add(trimmed)
		return texts
	}
	for _, line := range bytes.Split(body, []byte("\n")) {
		if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
			add(bytes.TrimSpace(data))
		}
	}
	return texts
}
