package console

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/batonproxy/baton/config"
)

// TestPagesParse parses every page's template with the layout, as the
// first page served does.
func TestPagesParse(t *testing.T) {
	t.Parallel()
	pages := parsePages()
	for _, name := range []string{"approvals.html", "deadletters.html", "error.html", "login.html", "mesh.html",
		"overview.html", "record.html", "trace.html", "traces.html"} {
		if pages[name] == nil || pages[name].Lookup("layout") == nil {
			t.Errorf("%s: no template with the layout", name)
		}
	}
	if pages["layout.html"] != nil {
		t.Error("layout.html is a page of its own: it only wraps the others")
	}
}

// TestPagesParsedOnFirstUse: New parses no template (a Baton starts
// without them); the first pages, served at once (go test -race), parse
// them once and render.
func TestPagesParsedOnFirstUse(t *testing.T) {
	t.Parallel()
	con := New(Options{Config: &config.Config{Agent: "planner"}, Log: slog.New(slog.DiscardHandler)})
	if con.pages != nil {
		t.Fatal("New parsed the console's templates: parse them on the first page served")
	}
	h := con.Handler()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/login", nil))
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "<form") {
				t.Errorf("GET /login: %d %.200s", rec.Code, rec.Body.String())
			}
		})
	}
	wg.Wait()
	if con.pages == nil {
		t.Fatal("pages served, no templates kept")
	}
}
