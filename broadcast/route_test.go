package broadcast

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
)

// peers are routes as destination resolution would give them.
type peers map[string]int // name → max hops

func (p peers) PeerRoute(peer string) (*url.URL, int, bool) {
	hops, ok := p[peer]
	if !ok {
		return nil, 0, false
	}
	return &url.URL{Scheme: "http", Host: peer + ":15006"}, hops, true
}

func newTestBroadcaster(groups map[string]config.Group) *Broadcaster {
	c := &config.Config{Agent: "a", Groups: groups}
	c.Limits.MaxBodyBytes = 1 << 20
	return New(Options{Config: c, Peers: peers{"b": 5, "c": 3, "d": 8}})
}

func TestRoute(t *testing.T) {
	t.Parallel()
	b := newTestBroadcaster(map[string]config.Group{
		"reviewers": {Members: []string{"b", "c", "d"}, Mode: config.BroadcastAll, Deadline: config.Duration(config.DefaultBroadcastDeadline)},
	})
	cases := []struct {
		name       string
		group      string
		header     http.Header
		wantStatus int    // 0: passed on
		wantType   string // the problem's type, when refused
		wantTo     string
		wantHops   int
		wantMode   string
		wantDenial string
	}{
		{name: "group", group: "reviewers", wantTo: "reviewers", wantHops: 3, wantMode: config.BroadcastAll},
		{name: "listed", header: http.Header{Header: {"b, D"}}, wantTo: adHocGroup, wantHops: 5, wantMode: config.BroadcastAll},
		{name: "listed quorum", header: http.Header{Header: {"b", "c,d"}, HeaderMode: {"quorum=2"}},
			wantTo: adHocGroup, wantHops: 3, wantMode: config.BroadcastQuorum},
		{name: "listed any", header: http.Header{Header: {"c"}, HeaderMode: {" any "}}, wantTo: adHocGroup, wantHops: 3, wantMode: config.BroadcastAny},
		{name: "unknown member", header: http.Header{Header: {"b, mallory"}}, wantStatus: 403, wantType: "unknown-destination",
			wantDenial: middleware.DenialUnknownDestination},
		{name: "empty member", header: http.Header{Header: {"b,,c"}}, wantStatus: 400, wantType: "bad-request"},
		{name: "twice", header: http.Header{Header: {"b, b"}}, wantStatus: 400, wantType: "bad-request"},
		{name: "quorum too large", header: http.Header{Header: {"b, c"}, HeaderMode: {"quorum=3"}}, wantStatus: 400, wantType: "bad-request"},
		{name: "bad mode", header: http.Header{Header: {"b"}, HeaderMode: {"most"}}, wantStatus: 400, wantType: "bad-request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "http://"+tc.group+"/review", nil)
			for k, v := range tc.header {
				r.Header[k] = v
			}
			if listed := b.Listed(r); listed != (tc.header != nil) {
				t.Fatalf("Listed = %v", listed)
			}
			in := &middleware.Info{}
			r = r.WithContext(middleware.WithInfo(r.Context(), in))
			var got *spec
			next := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got, _ = r.Context().Value(specKey{}).(*spec)
				if _, ok := r.Header[Header]; ok {
					t.Error(Header + " was passed on")
				}
				if _, ok := r.Header[HeaderMode]; ok {
					t.Error(HeaderMode + " was passed on")
				}
			})
			w := httptest.NewRecorder()
			b.Route(w, r, in, tc.group, next)
			if tc.wantStatus != 0 {
				if w.Code != tc.wantStatus || !strings.Contains(w.Body.String(), "#"+tc.wantType) || got != nil {
					t.Fatalf("refusal: %d %s (passed on: %v)", w.Code, w.Body, got != nil)
				}
				if in.PolicyDenial != tc.wantDenial {
					t.Fatalf("PolicyDenial = %q, want %q", in.PolicyDenial, tc.wantDenial)
				}
				return
			}
			if got == nil {
				t.Fatalf("not passed on: %d %s", w.Code, w.Body)
			}
			if in.From != "a" || in.To != tc.wantTo || in.Target != nil || in.MaxHops != tc.wantHops || got.Mode != tc.wantMode {
				t.Fatalf("routed from %q to %q (target %v), max hops %d, mode %s", in.From, in.To, in.Target, in.MaxHops, got.Mode)
			}
		})
	}
}

func TestIsGroup(t *testing.T) {
	t.Parallel()
	b := newTestBroadcaster(map[string]config.Group{"reviewers": {Members: []string{"b"}}})
	if !b.IsGroup("reviewers") || b.IsGroup("b") || b.IsGroup(adHocGroup) {
		t.Fatal("IsGroup: want reviewers only")
	}
	if b.Listed(httptest.NewRequest(http.MethodPost, "http://reviewers/", nil)) {
		t.Fatal("Listed without " + Header)
	}
}
