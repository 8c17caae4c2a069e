package record

// Random records: the hand-written encoder agrees with encoding/json on
// any record, and a fuzz target proves it (encode_test.go).

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

func randString(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		return ""
	}
	var b strings.Builder
	for range rng.IntN(12) {
		if rng.IntN(3) == 0 {
			b.WriteByte(byte(rng.IntN(256)))
		} else {
			b.WriteString(tricky[rng.IntN(len(tricky))])
		}
	}
	return b.String()
}

func randStrings(rng *rand.Rand) []string {
	switch rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	ss := make([]string, 1+rng.IntN(4))
	for i := range ss {
		ss[i] = randString(rng)
	}
	return ss
}

func randInt(rng *rand.Rand) int {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return rng.IntN(1000)
	case 2:
		return -rng.IntN(1000)
	}
	return int(rng.Uint64())
}

func randFloat(rng *rand.Rand) float64 {
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return []float64{1e21, 1e-6, 1e-7, 1e20, 123456789.125, math.MaxFloat64,
			math.SmallestNonzeroFloat64, math.Copysign(0, -1), math.NaN(), math.Inf(1)}[rng.IntN(10)]
	case 2:
		f := []float64{1e21, 1e-6}[rng.IntN(2)]
		return math.Nextafter(f, []float64{0, math.Inf(1)}[rng.IntN(2)])
	case 3:
		return math.Pow10(rng.IntN(60)-30) * (1 + float64(rng.IntN(10)))
	case 4:
		return rng.Float64() * 1000
	case 5:
		return -rng.NormFloat64() * 1e10
	}
	return math.Float64frombits(rng.Uint64())
}

func randTime(rng *rand.Rand) time.Time {
	var sec int64
	switch rng.IntN(8) {
	case 0:
		return time.Time{}
	case 1:
		sec = rng.Int64() >> rng.IntN(30) // far outside [0,9999] mostly
	default:
		sec = rng.Int64N(315537897600) - 62167219200 // years 0 to 9999
	}
	t := time.Unix(sec, rng.Int64N(1e9))
	switch rng.IntN(5) {
	case 0:
		return t.UTC()
	case 1:
		return t.Local()
	case 2:
		return t.In(time.FixedZone("", (rng.IntN(48*60)-24*60)*60))
	case 3:
		return t.In(time.FixedZone("odd", rng.IntN(200*3600)-100*3600))
	}
	return t.Round(time.Duration(rng.IntN(4)) * time.Second)
}

func randHeader(rng *rand.Rand) http.Header {
	switch rng.IntN(5) {
	case 0:
		return nil
	case 1:
		return http.Header{}
	}
	h := http.Header{}
	for range rng.IntN(12) {
		h[randString(rng)] = randStrings(rng)
	}
	return h
}

func randBytes(rng *rand.Rand) []byte {
	switch rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, rng.IntN(100))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func randRecord(rng *rand.Rand) *Record {
	r := &Record{
		ID: randString(rng), TraceID: randString(rng), SpanID: randString(rng), ParentID: randString(rng),
		Side: Side(randString(rng)), From: randString(rng), To: randString(rng), Hop: randInt(rng),
		Key: randString(rng), Method: randString(rng), Target: randString(rng), Call: randString(rng),
		RequestDigest: randString(rng), Trust: randStrings(rng), Grant: randString(rng),
		SenderKeyID: randString(rng), Caller: randString(rng), State: State(randString(rng)), Status: randInt(rng),
		Attempts: randInt(rng), Latency: randFloat(rng), Outcome: randString(rng),
		Error: randString(rng), KeySource: randString(rng), Position: randInt(rng), Correlation: randString(rng), CorrelationEvidence: randString(rng),
		Compensates: randString(rng), Effects: randStrings(rng),
		StoppedAt: randString(rng), ResolvedBy: randString(rng), Replayable: rng.IntN(2) == 0, Created: randTime(rng),
		Updated: randTime(rng), checkpointed: rng.IntN(2) == 0, UncorrelatedCalls: randInt(rng),
	}
	if rng.IntN(2) == 0 {
		r.Envelope = &EnvelopeSummary{Digest: randString(rng), Version: randString(rng),
			TaskID: randString(rng), Intent: randString(rng), Completeness: randFloat(rng),
			OpenQuestions: randInt(rng), Unverified: randInt(rng), Violations: randInt(rng)}
	}
	if rng.IntN(2) == 0 {
		r.Shaping = &Shaping{Tokens: randInt(rng), Before: randInt(rng), MaxTokens: randInt(rng),
			Tokenizer: randString(rng), Dropped: randStrings(rng), Trimmed: randStrings(rng)}
	}
	if rng.IntN(2) == 0 {
		r.Journal = &JournalSummary{Hits: randInt(rng), Misses: randInt(rng), Journaled: randInt(rng),
			SavedBytes: int64(randInt(rng)), SavedTokens: int64(randInt(rng)), Skipped: randStrings(rng)}
	}
	if rng.IntN(2) == 0 {
		r.Models = randModels(rng)
	}
	if rng.IntN(2) == 0 {
		r.Approval = &Approval{Gate: randString(rng), Expires: randTime(rng), Decision: randString(rng),
			By: randString(rng), Reason: randString(rng)}
		if rng.IntN(2) == 0 {
			at := randTime(rng)
			r.Approval.At = &at
		}
	}
	if rng.IntN(2) == 0 {
		r.Request = &Request{Method: randString(rng), URL: randString(rng), Header: randHeader(rng),
			Body: randBytes(rng), BodyBytes: int64(randInt(rng)), Truncated: rng.IntN(2) == 0}
	}
	return r
}

func randModels(rng *rand.Rand) *ModelSummary {
	m := &ModelSummary{Calls: randInt(rng), JournalHits: randInt(rng), Refused: randInt(rng), UnknownUsage: randInt(rng),
		Unpriced: randInt(rng), InputTokens: int64(randInt(rng)), OutputTokens: int64(randInt(rng)),
		CachedTokens: int64(randInt(rng)), ReasoningTokens: int64(randInt(rng)), CostUSD: randFloat(rng),
		BudgetNote: randString(rng), More: randInt(rng)}
	if rng.IntN(2) == 0 {
		m.Budget = &BudgetView{Chain: randString(rng), Tokens: int64(randInt(rng)), CostUSD: randFloat(rng)}
	}
	switch rng.IntN(3) {
	case 0:
	case 1:
		m.List = []ModelCall{}
	default:
		for range 1 + rng.IntN(4) {
			m.List = append(m.List, ModelCall{At: randTime(rng), Ms: randFloat(rng), TTFTMs: randFloat(rng),
				API: randString(rng), Provider: randString(rng), Operation: randString(rng), Model: randString(rng),
				Status: randInt(rng), InputTokens: int64(randInt(rng)), OutputTokens: int64(randInt(rng)),
				CachedTokens: int64(randInt(rng)), ReasoningTokens: int64(randInt(rng)), UsageKnown: rng.IntN(2) == 0,
				CostUSD: randFloat(rng), Priced: rng.IntN(2) == 0, Journal: rng.IntN(2) == 0, Refused: randString(rng),
				Finish: randString(rng), Error: randString(rng)})
		}
	}
	return m
}

func TestRecordAppendJSONRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	n := 5000
	if testing.Short() {
		n = 2000
	}
	for i := range n {
		r := randRecord(rng)
		ok := t.Run("", func(t *testing.T) {
			checkRecord(t, r)
			checkRequest(t, r.Request)
		})
		if !ok {
			t.Fatalf("seed %d, record %d", seed, i)
		}
	}
}

func FuzzRecordAppendJSON(f *testing.F) {
	f.Add("id", "<b>&\u2028", "x\xff", 1, 200, 12.5, 0.5, []byte("body"), "Content-Type", "a\nb",
		int64(1700000000), int64(123456789), 7200, uint8(0))
	f.Add("", "", "", 0, 0, 1e21, 1e-7, []byte(nil), "", "", int64(0), int64(0), 0, uint8(0xff))
	f.Add("\x00", "日本", "\\\"", -1, math.MaxInt, math.Copysign(0, -1), math.NaN(), []byte{}, "\xc3", "\u2029",
		int64(253402300800), int64(-1), 24*3600, uint8(0x55))
	f.Fuzz(func(t *testing.T, id, outcome, hkey string, hop, status int, latency, completeness float64,
		body []byte, hval, trust string, sec, nsec int64, zone int, flags uint8) {
		r := &Record{ID: id, TraceID: hkey, From: outcome, To: hval, Hop: hop, Status: status,
			Attempts: hop ^ status, Latency: latency, Outcome: outcome, Error: trust, KeySource: hval,
			Position: status, Correlation: hkey, StoppedAt: id, ResolvedBy: outcome, Call: trust, Compensates: hval, Caller: outcome,
			State: State(hval), Side: Side(id), Replayable: flags&1 != 0, UncorrelatedCalls: hop,
			Created: time.Unix(sec, nsec).In(time.FixedZone("", zone%(1<<20))),
			Updated: time.Unix(nsec, sec%1e9).UTC()}
		if flags&2 != 0 {
			r.Trust = []string{trust, id}
		}
		if flags&4 != 0 {
			r.Envelope = &EnvelopeSummary{Digest: hkey, Intent: outcome, Completeness: completeness,
				Violations: status}
		}
		if flags&128 != 0 {
			r.Journal = &JournalSummary{Hits: hop, Misses: status, SavedTokens: sec, Skipped: []string{trust, hval}}
			r.Shaping = &Shaping{Tokens: hop, Before: status, Tokenizer: trust, Trimmed: []string{hval, id}}
			r.Approval = &Approval{Gate: trust, Expires: r.Created, Decision: hval, By: id, At: &r.Updated, Reason: outcome}
		}
		if flags&8 != 0 {
			r.Request = &Request{Method: id, URL: outcome, Body: body, BodyBytes: int64(len(body)),
				Truncated: flags&16 != 0}
			switch {
			case flags&32 != 0:
				r.Request.Header = http.Header{hkey: {hval, trust}, trust: nil, hval: {}}
			case flags&64 != 0:
				r.Request.Header = http.Header{}
			}
		}
		checkRecord(t, r)
		checkRequest(t, r.Request)
	})
}
