// Package console is the operator console (docs/console.md):
// server-rendered HTML pages on the admin listener under /console/, for reading handoff health, traces,
// records and dead letters, and for replaying or dropping dead letters with
// plain HTML forms. Templates and the stylesheet are embedded; no script is
// needed to read or act.
//
// Adding a page is one handler and one template:
//
//  1. console/web/templates/NAME.html defines "title" and "content";
//     layout.html wraps them (head, nav bar, flash message). The page's
//     data is .Page; .CSRF is the token every form posts as the hidden
//     field "csrf"; .Who names who is signed in.
//  2. A handler calls con.consoleRender(w, r, http.StatusOK, "NAME.html",
//     "nav item", data), or con.consoleError for a failure, and redirects
//     (303) after a POST with con.consoleFlash.
//  3. One line in Handler, inside the signed-in group: every route
//     there is signed in, and every POST there has passed the cross-origin
//     check and the CSRF token. consoleIdentity names who acts. Pages that
//     show or act on what the admin API's bearer group serves (records,
//     dead letters, figures) go in its inner group, for the admin token
//     only; a page an approver may use goes beside it.
//
// The nav bar (layout.html) lists the pages; Approvals (/console/approvals)
// is the confirmation gates' page.
//
// It shows what package records, deadletter, approval and compensation
// keep, and acts through them (docs/architecture.md says why it may); the
// chains that cost most come through Spending, which sidecar feeds from
// package modelcall. Sidecar mounts it.
package console

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/approval"
	"github.com/batonproxy/baton/compensation"
	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/deadletter"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
)

//go:embed web/templates/*.html web/static/*
var consoleFS embed.FS

// consoleSessionTTL is how long a console sign-in lasts.
const consoleSessionTTL = 12 * time.Hour

// Options are what the console is built from: what it shows, and the
// capabilities it acts through.
type Options struct {
	Config *config.Config
	Book   *record.Book
	Log    *slog.Logger
	// Metrics serves this Baton's metrics (its GET /metrics), read in
	// process for the overview's figures; nil: none.
	Metrics http.Handler
	// Peers lists the peers of this agent's outbound edges.
	Peers []string
	// Identity names who presents a token: "admin" for the admin token,
	// an approver's name for an approver's token.
	Identity func(token string) (who string, ok bool)
	// Mesh is the store the Batons announce themselves in (package mesh);
	// nil: no mesh page figures.
	Mesh        state.Store
	DeadLetters *deadletter.DeadLetters
	Approvals   *approval.Approvals
	Compensator *compensation.Compensator
	// Spending lists the chains that cost most (nil: the overview lists
	// none).
	Spending Spending
}

// Console is the console's state: its templates, the process's random key
// (sessions, CSRF tokens and flash messages are bound to it, so none
// outlives the process) and the signed-in sessions.
type Console struct {
	o Options
	// pages are the templates by file name, parsed on the first page
	// served (templates): a Baton need not parse them before it is ready,
	// and most never serve a page.
	pagesOnce sync.Once
	pages     map[string]*template.Template
	static    http.Handler
	key       []byte
	started   time.Time // the figures' window when the process start time is not exported
	sessions  *consoleSessions
	cop       *http.CrossOriginProtection
}

// New returns the console.
func New(o Options) *Console {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	c := &Console{o: o, key: key, started: time.Now(),
		sessions: newConsoleSessions(), cop: http.NewCrossOriginProtection()}
	static, err := fs.Sub(consoleFS, "web/static")
	if err != nil {
		panic(err)
	}
	c.static = http.StripPrefix("/console/static/", http.FileServerFS(static))
	return c
}

// templates returns the pages' templates, parsing them on first use.
func (con *Console) templates() map[string]*template.Template {
	con.pagesOnce.Do(func() { con.pages = parsePages() })
	return con.pages
}

// parsePages parses every page's template with the layout. The templates
// are embedded and TestPagesParse parses them all: it cannot fail in a
// build whose tests pass.
func parsePages() map[string]*template.Template {
	files, err := fs.Glob(consoleFS, "web/templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, f := range files {
		name := path.Base(f)
		if name == "layout.html" {
			continue
		}
		pages[name] = template.Must(template.New(name).Funcs(consoleFuncs).
			ParseFS(consoleFS, "web/templates/layout.html", f))
	}
	return pages
}

// identity names who presents token (Options.Identity, or the admin token
// alone).
func (con *Console) identity(token string) (string, bool) {
	if con.o.Identity != nil {
		return con.o.Identity(token)
	}
	if t := con.o.Config.AdminToken; t != "" && subtle.ConstantTimeCompare([]byte(token), []byte(t)) == 1 {
		return "admin", true
	}
	return "", false
}

// Handler serves the console, to be mounted at /console on the admin
// listener. It
// does its own authentication (the admin token, then a session cookie), so
// it sits outside the admin API's bearer group.
func (con *Console) Handler() http.Handler {
	c := chi.NewRouter()
	c.Use(con.consoleHeaders)
	c.Get("/static/*", con.static.ServeHTTP)
	c.Get("/login", con.consoleLoginPage)
	c.Post("/login", con.consoleLogin)
	c.Group(func(c chi.Router) {
		c.Use(con.consoleAuth) // signed in; every POST checked
		c.Post("/logout", con.consoleLogout)
		// Pages an approver may use too go here.
		c.Get("/approvals", con.consoleApprovals)
		c.Post("/approvals/{id}/approve", con.consoleDecide(true))
		c.Post("/approvals/{id}/deny", con.consoleDecide(false))
		c.Group(func(c chi.Router) {
			c.Use(con.consoleAdmin) // what the admin API's bearer group serves
			c.Get("/", con.consoleOverview)
			c.Get("/mesh", con.consoleMesh)
			c.Get("/traces", con.consoleTraceLookup)
			c.Get("/traces/{trace_id}", con.consoleTrace)
			c.Post("/traces/{trace_id}/abandon", con.consoleAbandon)
			c.Get("/records/{id}", con.consoleRecord)
			c.Get("/deadletters", con.consoleDeadLetters)
			c.Post("/deadletters/{id}/replay", con.consoleReplay)
			c.Post("/deadletters/{id}/drop", con.consoleDrop)
		})
	})
	c.NotFound(func(w http.ResponseWriter, r *http.Request) {
		con.consoleError(w, r, http.StatusNotFound, "Not found", "There is no console page "+r.URL.Path+".")
	})
	c.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, POST")
		con.consoleError(w, r, http.StatusMethodNotAllowed, "Method not allowed", r.Method+" is not used on "+r.URL.Path+".")
	})
	return c
}

// consoleHeaders sets the headers of every console answer, and sends
// /console to /console/.
func (con *Console) consoleHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; "+
			"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "DENY")
		if r.URL.Path == "/console" {
			http.Redirect(w, r, "/console/", http.StatusMovedPermanently)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// consoleView is what every page's template gets; Page is the page's own
// data.
type consoleView struct {
	Title string // the page's title, for the error page
	Nav   string // the nav item to mark
	Agent string
	Who   string // who is signed in; "" on the login page
	// Session: signed in with a session cookie, which Sign out ends.
	Session bool
	// Admin: who may see records and dead letters (consoleMayAdmin).
	Admin bool
	Open  bool // no admin token: the console is open to whoever reaches the listener
	CSRF  string
	Flash *consoleFlashMsg
	Page  any
}

// consoleRender renders the template file name with page as its data. A
// template that fails renders nothing of itself: the error page says so.
func (con *Console) consoleRender(w http.ResponseWriter, r *http.Request, status int, name, nav string, page any) {
	v := con.consoleViewFor(w, r, nav, page)
	pages := con.templates()
	t, ok := pages[name]
	var buf bytes.Buffer
	if ok {
		if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
			con.o.Log.Error("console: rendering", "template", name, "error", err.Error())
			ok = false
		}
	}
	if !ok {
		buf.Reset()
		status = http.StatusInternalServerError
		v.Page = consoleProblem{Title: "Internal error", Detail: "The page " + name + " could not be rendered; the log says why."}
		if err := pages["error.html"].ExecuteTemplate(&buf, "layout", v); err != nil {
			http.Error(w, "console: internal error", http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// consoleViewFor fills the parts of a page every page has. It takes the
// flash message, if any, so that it is shown once.
func (con *Console) consoleViewFor(w http.ResponseWriter, r *http.Request, nav string, page any) *consoleView {
	v := &consoleView{Nav: nav, Agent: con.o.Config.Agent, Open: con.o.Config.AdminToken == "", Page: page}
	if u, ok := r.Context().Value(consoleUserKey{}).(*consoleUser); ok {
		v.Who, v.CSRF, v.Session, v.Admin = u.who, u.csrf, u.sid != "", con.consoleMayAdmin(u.who)
		v.Flash = con.takeFlash(w, r)
	}
	return v
}

// consoleProblem is the error page's data.
type consoleProblem struct {
	Title  string
	Detail string
}

// consoleError answers an error page with status.
func (con *Console) consoleError(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	con.consoleRender(w, r, status, "error.html", "", consoleProblem{Title: title, Detail: detail})
}

// consoleStoreError answers a failed store read: 404 for an unknown record
// or trace, 503 when the store does not answer.
func (con *Console) consoleStoreError(w http.ResponseWriter, r *http.Request, err error, what string) {
	if errors.Is(err, record.ErrNotFound) {
		con.consoleError(w, r, http.StatusNotFound, "Not found", "No "+what+" (unknown, or past retention).")
		return
	}
	con.o.Log.Warn("console: store error", "path", r.URL.Path, "error", err.Error())
	con.consoleError(w, r, http.StatusServiceUnavailable, "Store unavailable",
		"The state store does not answer; try again in a moment.")
}

// consoleFuncs are the templates' helpers. None returns template.HTML:
// everything a page shows is escaped.
var consoleFuncs = template.FuncMap{
	"short": func(id string) string {
		if i := strings.IndexByte(id, '.'); i >= 0 {
			return id[i+1:]
		}
		return id
	},
	"pathEscape": url.PathEscape,
	"inc":        func(i int) int { return i + 1 },
	"ms":         func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " ms" },
	"pct":        func(v float64) string { return strconv.FormatFloat(100*v, 'f', 0, 64) + "%" },
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
	},
	"join": strings.Join,
	"usd":  usd,
}
