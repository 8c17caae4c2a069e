package broadcast

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
)

// member answers as a peer's edge would: b with JSON, c with text, d with
// a failure dead-lettered.
func member(t *testing.T, mu *sync.Mutex, seen map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mi := middleware.InfoFromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		if _, ok := middleware.DeadlineFromContext(r.Context()); !ok {
			t.Errorf("%s: the member's handoff carries no deadline", mi.To)
		}
		if string(body) != `{"doc":"q3 plan"}` || r.Host != mi.To || mi.Target == nil {
			t.Errorf("%s: sent %q to host %q, target %v", mi.To, body, r.Host, mi.Target)
		}
		mu.Lock()
		seen[mi.To] = r.Header.Get(middleware.HeaderIdempotencyKey)
		mu.Unlock()
		mi.RecordID = "rec-" + mi.To
		switch mi.To {
		case "b":
			mi.Delivered = true
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"verdict":"ship it"}`))
		case "c":
			mi.Delivered = true
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("fine"))
		default:
			mi.DeadLetter = "dl-" + mi.To
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
}

func TestFanOut(t *testing.T) {
	t.Parallel()
	deadline := config.Duration(5 * time.Second)
	b := newTestBroadcaster(map[string]config.Group{
		"all":    {Members: []string{"b", "c", "d"}, Mode: config.BroadcastAll, Deadline: deadline},
		"quorum": {Members: []string{"b", "c", "d"}, Mode: config.BroadcastQuorum, Quorum: 2, Deadline: deadline, Concurrency: 1},
	})
	cases := []struct {
		group      string
		wantStatus int
		wantMet    bool
		wantMissed []string // when not met
	}{
		{group: "all", wantStatus: http.StatusBadGateway, wantMissed: []string{"d"}},
		{group: "quorum", wantStatus: http.StatusOK, wantMet: true},
	}
	for _, tc := range cases {
		t.Run(tc.group, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			keys := map[string]string{}
			h := b.FanOut(member(t, &mu, keys))
			r := httptest.NewRequest(http.MethodPost, "http://"+tc.group+"/review", strings.NewReader(`{"doc":"q3 plan"}`))
			r.Header.Set(middleware.HeaderIdempotencyKey, `"k1"`)
			in := &middleware.Info{Key: "k1"}
			r = r.WithContext(middleware.WithInfo(r.Context(), in))
			w := httptest.NewRecorder()
			b.Route(w, r, in, tc.group, h)

			var doc struct {
				Broadcast string   `json:"broadcast"`
				Met       bool     `json:"met"`
				Succeeded int      `json:"succeeded"`
				Missed    []string `json:"missed"`
				Members   []struct {
					Agent    string          `json:"agent"`
					State    string          `json:"state"`
					Body     json.RawMessage `json:"body"`
					BodyText string          `json:"body_text"`
					Record   string          `json:"record"`
				} `json:"members"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
				t.Fatalf("answer %d: %v: %s", w.Code, err, w.Body)
			}
			if w.Code != tc.wantStatus || doc.Met != tc.wantMet || doc.Broadcast != tc.group || doc.Succeeded != 2 {
				t.Fatalf("answer %d (met %v): %s", w.Code, doc.Met, w.Body)
			}
			// A met broadcast names as missed the members that failed before
			// it was met, which depends on who ran first.
			if !tc.wantMet && strings.Join(doc.Missed, ",") != strings.Join(tc.wantMissed, ",") {
				t.Fatalf("missed %v, want %v", doc.Missed, tc.wantMissed)
			}
			if got := w.Header().Get(middleware.HeaderIdempotencyKey); got != `"k1"` {
				t.Fatalf("the broadcast's key is not echoed: %q", got)
			}
			if !in.Delivered {
				t.Fatal("a member was delivered, the broadcast is not")
			}
			if !tc.wantMet && w.Header().Get(middleware.HeaderDeadLetter) != "dl-d" {
				t.Fatalf("%s = %q, want d's dead letter", middleware.HeaderDeadLetter, w.Header().Get(middleware.HeaderDeadLetter))
			}
			if m := doc.Members[0]; m.Agent != "b" || m.State != "answered" || string(m.Body) != `{"verdict":"ship it"}` || m.Record != "rec-b" {
				t.Fatalf("member b: %+v", m)
			}
			if tc.wantMet {
				return // d may still be pending
			}
			if m := doc.Members[1]; m.BodyText != "fine" {
				t.Fatalf("member c: %+v", m)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range []string{"b", "c", "d"} {
				if keys[m] != middleware.MemberKey("k1", m) {
					t.Fatalf("%s was sent key %q, want the one derived from the broadcast's", m, keys[m])
				}
			}
		})
	}
}
