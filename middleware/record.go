package middleware

// Receipt writes the receiving Baton's record of each inbound handoff: it
// names the receipt (the handling Handle begins takes its id, so that the
// agent's own handoffs point back to it), and after the response records the
// outcome: delivered with the agent's status, replayed from the dedupe
// window, or failed (refused here, not answered, or answered with a
// failure: a 5xx, or an A2A failed task inside a 2xx), and where the chain
// below stopped when the agent's failure answer says so. The write is queued for the record book's
// background flusher, off the response path. It sits after HopGuard (it
// needs the sender and hop) and before Dedupe (so that a duplicate answered
// from the window is recorded too). A store that refuses the write does not
// fail the request: the book logs the record and counts it.

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/trust"
)

// HeaderRecord carries the sender's record id, so that the receipt links to
// the delegation record.
const HeaderRecord = "Baton-Record"

// RecordWriter queues a record for writing.
type RecordWriter interface {
	WriteLater(rec *record.Record)
}

// Receipt returns the ingress receipt middleware. prefetch, when not nil,
// is told the trace of each handoff from a peer's Baton as it arrives, so
// that the record of a handoff the agent makes in turn finds the trace's
// tail read (record.Book.Prefetch): a Baton whose agent has peers to hand
// on to passes it.
func Receipt(book RecordWriter, prefetch func(traceID string)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := info(r)
			in.RecordID = record.NewID(in.TraceID)
			if p := r.Header.Get(HeaderRecord); record.TraceOf(p) == in.TraceID {
				in.ParentRecord = p
				if prefetch != nil {
					prefetch(in.TraceID)
				}
			}
			next.ServeHTTP(w, r)

			now := time.Now()
			rec := &record.Record{
				ID: in.RecordID, TraceID: in.TraceID, ParentID: in.ParentRecord, Side: record.Ingress,
				From: in.From, To: in.To, Hop: in.Hop, Key: in.Key, Method: r.Method, Target: r.URL.RequestURI(), Call: in.RPC.Describe(),
				Status: in.Status(), Attempts: 1, Created: in.Start, Updated: now,
				Latency:   float64(now.Sub(in.Start).Microseconds()) / 1000,
				StoppedAt: in.StoppedAt,
			}
			if in.Key != "" {
				rec.KeySource = inboundKeySource(r.Header, in.KeyDerived)
			}
			if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
				rec.SpanID = sc.SpanID().String()
			}
			if in.Buffered {
				rec.RequestDigest = ContentDigest(in.Body)
			}
			rec.Envelope = EnvelopeSummary(in)
			rec.SenderKeyID = in.SenderKeyID
			rec.Caller = in.Caller.String()
			if in.GrantIn != nil {
				rec.Grant = r.Header.Get(HeaderGrant)
			}
			if in.Posture != "" {
				// Room for the usual one label more.
				rec.Trust = append(make([]string, 0, 2), postureLabel(in.Posture))
			}
			rec.Trust = AppendTrustLabels(rec.Trust, in)
			if in.TLSIdentity != "" {
				rec.Trust = append(rec.Trust, "tls="+in.TLSIdentity)
			}
			rec.Compensates = r.Header.Get(HeaderCompensates)
			if in.Delivered && rec.Status < 300 {
				rec.Effects = SideEffectsOf(w.Header())
			}
			if in.ParentRecord != "" {
				rec.FollowsPeer(in.From)
			}
			if in.Handling != nil {
				rec.Journal = in.Handling.JournalSummary()
				rec.Models = in.Handling.ModelSummary()
				rec.UncorrelatedCalls = in.Handling.Untied()
			}
			switch {
			case in.Dedupe == DedupeReplayed && in.KeyMismatch:
				rec.State, rec.Outcome = record.Delivered, "replayed from the dedupe window (the position's first request had another body)"
			case in.Dedupe == DedupeReplayed:
				rec.State, rec.Outcome = record.Delivered, "replayed from the dedupe window"
			case in.Err != nil || rec.Status == 0:
				rec.State, rec.Outcome = record.Failed, "not delivered"
				if in.Err != nil {
					rec.Error = in.Err.Error()
				}
			case in.Dedupe != "" && in.Dedupe != DedupeClaimed && in.Dedupe != DedupeTakenOver:
				rec.State, rec.Outcome = record.Failed, "refused by the dedupe window: "+string(in.Dedupe)
			case !in.Delivered:
				rec.State, rec.Outcome = record.Failed, "refused by this Baton with "+strconv.Itoa(rec.Status)
			case rec.Status >= 500:
				rec.State, rec.Outcome = record.Failed, "the agent answered "+strconv.Itoa(rec.Status)
			case in.AgentFailed:
				rec.State, rec.Outcome = record.Failed, "the agent answered "+strconv.Itoa(rec.Status)+" with a failed A2A task"
			default:
				rec.State, rec.Outcome = record.Delivered, "delivered to the agent"
			}
			book.WriteLater(rec)
		})
	}
}

// inboundKeySource says where an inbound handoff's key came from: the
// sending Baton's Baton-Key-Source, the sender's own key without one, or
// content when this Baton derived it.
func inboundKeySource(h http.Header, derived bool) string {
	if derived {
		return record.KeyFromContent
	}
	switch v := h.Get(HeaderKeySource); v {
	case record.KeyFromPosition, record.KeyFromMessage, record.KeyFromContent:
		return v
	}
	return record.KeyFromAgent
}

// EnvelopeSummary is what a record keeps of the request's envelope check,
// or nil when there was none.
func EnvelopeSummary(in *Info) *record.EnvelopeSummary {
	if in.Contract == nil {
		return nil
	}
	s := in.Contract.Summary
	return &record.EnvelopeSummary{
		Digest: s.Digest, Version: s.SchemaVersion, TaskID: s.TaskID, Intent: s.Intent,
		Completeness: s.Completeness, OpenQuestions: s.OpenQuestions, Unverified: s.Unverified,
		Violations: len(in.Contract.Violations),
	}
}

// postureLabel is a receipt's trust label for posture p: the label of a
// known posture is a constant, not built for each receipt.
func postureLabel(p string) string {
	switch trust.Posture(p) {
	case trust.Trusted:
		return "posture=trusted"
	case trust.Evaluate:
		return "posture=evaluate"
	case trust.Untrusted:
		return "posture=untrusted"
	}
	return "posture=" + p
}

// ContentDigest renders body's RFC 9530 sha-256 digest, as records keep it:
// the Content-Digest value a signature carries, built with one allocation.
func ContentDigest(body []byte) string { return trust.ContentDigest(body) }

// TrustLabels renders a handoff's untrusted-content labels and injection
// signal for its record's trust list: "untrusted=POINTER<-SOURCE SOURCE",
// "unscanned", "injection=SCORE: REASON; REASON", "injection-unscored=BYTES".
func TrustLabels(in *Info) []string { return AppendTrustLabels(nil, in) }

// AppendTrustLabels appends TrustLabels(in) to out: a record's trust list
// is built in one slice.
func AppendTrustLabels(out []string, in *Info) []string {
	if in.Labels != nil {
		for _, l := range in.Labels.Spans {
			out = append(out, "untrusted="+l.Pointer+"<-"+strings.Join(l.Sources, " "))
		}
		if in.Labels.Unscanned {
			out = append(out, "unscanned")
		}
	}
	if in.Injection != nil {
		out = append(out, "injection="+strconv.FormatFloat(in.Injection.Score, 'f', 2, 64)+": "+strings.Join(in.Injection.Reasons, "; "))
	}
	if in.InjectionUnscored > 0 {
		out = append(out, "injection-unscored="+strconv.Itoa(in.InjectionUnscored))
	}
	return out
}
