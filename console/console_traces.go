package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/compensation"
	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/mesh"
	"github.com/batonproxy/baton/records"
)

// consoleTraceLookupView is the trace form's data.
type consoleTraceLookupView struct {
	Query, Error string
}

// consoleTraceLookup shows the trace form, or opens the trace it names: a
// trace id, a record id or a traceparent.
func (con *Console) consoleTraceLookup(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("id"))
	if q == "" {
		con.consoleRender(w, r, http.StatusOK, "traces.html", "traces", consoleTraceLookupView{})
		return
	}
	id := traceIDOf(q)
	if id == "" {
		con.consoleRender(w, r, http.StatusBadRequest, "traces.html", "traces", consoleTraceLookupView{Query: q,
			Error: "A trace id is 32 hex digits (a record id or a traceparent holds one)."})
		return
	}
	http.Redirect(w, r, "/console/traces/"+id, http.StatusSeeOther)
}

// traceIDOf finds the trace id in q: a trace id, a record id or a
// traceparent; "" when there is none.
func traceIDOf(q string) string {
	q = strings.ToLower(q)
	if parts := strings.Split(q, "-"); len(parts) == 4 && len(parts[1]) == 32 {
		q = parts[1] // traceparent: version-traceid-parentid-flags
	}
	if len(q) == 32 {
		q += ".0000000000000000"
	}
	return record.TraceOf(q)
}

// consoleTraceView is a trace's page: its records as a tree, and whether
// its hash chain is intact.
type consoleTraceView struct {
	TraceID string
	Roots   []*records.TraceNode
	Records int
	Entries int
	// Waterfall draws the records as bars over time (console_waterfall.go).
	Waterfall waterfall
	// Graph draws the agents on the trace and the handoffs between them.
	Graph mesh.Graph
	// Spend is what the agents' model calls spent, per agent and for the
	// chain (nil: none made any).
	Spend    *spendTable
	Intact   bool
	Problems []string
	// Abandonment is where undoing the trace stands once it is abandoned;
	// Abandonable says it may be (a dead letter of it stands).
	Abandonment *compensation.Abandonment
	Abandonable bool
}

func (con *Console) consoleTrace(w http.ResponseWriter, r *http.Request) {
	id := traceIDOf(chi.URLParam(r, "trace_id"))
	if id == "" {
		con.consoleError(w, r, http.StatusNotFound, "Not found", "A trace id is 32 hex digits.")
		return
	}
	if id != chi.URLParam(r, "trace_id") {
		http.Redirect(w, r, "/console/traces/"+id, http.StatusMovedPermanently)
		return
	}
	t, err := con.o.Book.Trace(r.Context(), id)
	if err != nil {
		con.consoleStoreError(w, r, err, "trace "+id)
		return
	}
	if len(t.Entries) == 0 && t.Tail == "" {
		con.consoleError(w, r, http.StatusNotFound, "Not found", "No records for trace "+id+" (unknown, or past retention).")
		return
	}
	v := consoleTraceView{TraceID: id, Roots: records.TraceTree(t.Records), Records: len(t.Records), Entries: len(t.Entries)}
	v.Waterfall, v.Graph, v.Spend = newWaterfall(v.Roots), traceGraph(t.Records), newSpendTable(t.Records)
	var ce *record.ChainError
	switch err := record.Verify(t.Entries, t.Tail); {
	case err == nil:
		v.Intact = true
	case errors.As(err, &ce):
		v.Problems = ce.Problems
	default:
		v.Problems = []string{err.Error()}
	}
	switch a, err := con.o.Compensator.Abandonment(r.Context(), id); {
	case err == nil:
		v.Abandonment = a
	case errors.Is(err, record.ErrNotFound):
		v.Abandonable = compensation.DeadLetterStanding(t.Records)
	}
	con.consoleRender(w, r, http.StatusOK, "trace.html", "traces", v)
}

// consoleAbandon abandons the trace (as POST /v1/traces/{id}/abandon
// does) with the reason given, and shows the trace.
func (con *Console) consoleAbandon(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "trace_id")
	back := "/console/traces/" + id
	if !handoff.ValidTraceID(id) {
		con.consoleError(w, r, http.StatusNotFound, "Not found", "A trace id is 32 lower-case hex digits.")
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" {
		con.consoleFlash(w, r, back, false, "Say why the trace is abandoned: the reason is kept with it.")
		return
	}
	a, err := con.o.Compensator.Abandon(r.Context(), id, reason, con.consoleWho(r))
	if err != nil {
		con.consoleFlash(w, r, back, false, "Abandoning "+id+" refused: "+err.Error())
		return
	}
	con.o.Log.Info("console: trace abandoned", "trace_id", id, "by", con.consoleWho(r))
	con.consoleFlash(w, r, back, true, fmt.Sprintf("Abandoned %s: %d side effect(s) to undo, latest first, each by the Baton that sent its handoff. Reload to follow them.", id, len(a.Steps)))
}

// consoleRecordView is one record's page, with its checkpoint.
type consoleRecordView struct {
	R       *record.Record
	Headers []consoleHeader
	Body    string
	Binary  bool // the body is not UTF-8: shown with replacement characters
	Mine    bool // a dead letter of this agent: it can be replayed or dropped here
}

type consoleHeader struct {
	Name   string
	Values []string
}

func (con *Console) consoleRecord(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	rec, err := con.o.Book.Get(r.Context(), id)
	if err != nil {
		con.consoleStoreError(w, r, err, "record "+id)
		return
	}
	v := consoleRecordView{R: rec, Mine: rec.State == record.Dead && records.Owned(con.o.Config.Agent, rec) == nil}
	if q := rec.Request; q != nil {
		for name, vals := range q.Header {
			v.Headers = append(v.Headers, consoleHeader{Name: name, Values: vals})
		}
		sort.Slice(v.Headers, func(i, j int) bool { return v.Headers[i].Name < v.Headers[j].Name })
		v.Body, v.Binary = string(q.Body), !utf8.Valid(q.Body)
		if v.Binary {
			v.Body = strings.ToValidUTF8(v.Body, "\uFFFD")
		}
	}
	con.consoleRender(w, r, http.StatusOK, "record.html", "", v)
}

// consoleRecordURL is the console page of a record.
func consoleRecordURL(id string) string { return "/console/records/" + url.PathEscape(id) }
