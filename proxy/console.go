package proxy

import (
	"bytes"
	"crypto/rand"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/handoff/record"
)

// The operator console (docs/console.md): server-rendered HTML pages on the
// admin listener under /console/, for reading handoff health, traces,
// records and dead letters, and for replaying or dropping dead letters with
// plain HTML forms. Templates and the stylesheet are embedded; no script is
// needed to read or act.
//
// Adding a page is one handler and one template:
//
//  1. proxy/console/templates/NAME.html defines "title" and "content";
//     layout.html wraps them (head, nav bar, flash message). The page's
//     data is .Page; .CSRF is the token every form posts as the hidden
//     field "csrf"; .Who names who is signed in.
//  2. A handler calls s.consoleRender(w, r, http.StatusOK, "NAME.html",
//     "nav item", data), or s.consoleError for a failure, and redirects
//     (303) after a POST with s.consoleFlash.
//  3. One line in consoleRoutes, inside the signed-in group: every route
//     there is signed in, and every POST there has passed the cross-origin
//     check and the CSRF token. consoleIdentity names who acts. Pages that
//     show or act on what the admin API's bearer group serves (records,
//     dead letters, figures) go in its inner group, for the admin token
//     only; a page an approver may use goes beside it.
//
// The nav bar (layout.html) lists the pages; Approvals (/console/approvals)
// is the confirmation gates' page.

//go:embed console/templates/*.html console/static/*
var consoleFS embed.FS

// consoleSessionTTL is how long a console sign-in lasts.
const consoleSessionTTL = 12 * time.Hour

// console is the console's state: its templates, the process's random key
// (sessions, CSRF tokens and flash messages are bound to it, so none
// outlives the process) and the signed-in sessions.
type console struct {
	pages    map[string]*template.Template // by template file name
	static   http.Handler
	key      []byte
	started  time.Time // the figures' window when the process start time is not exported
	sessions *consoleSessions
	cop      *http.CrossOriginProtection
}

func newConsole() *console {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	c := &console{pages: map[string]*template.Template{}, key: key, started: time.Now(),
		sessions: newConsoleSessions(), cop: http.NewCrossOriginProtection()}
	files, err := fs.Glob(consoleFS, "console/templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, f := range files {
		name := path.Base(f)
		if name == "layout.html" {
			continue
		}
		c.pages[name] = template.Must(template.New(name).Funcs(consoleFuncs).
			ParseFS(consoleFS, "console/templates/layout.html", f))
	}
	static, err := fs.Sub(consoleFS, "console/static")
	if err != nil {
		panic(err)
	}
	c.static = http.StripPrefix("/console/static/", http.FileServerFS(static))
	return c
}

// consoleRoutes mounts the console on the admin router. It does its own
// authentication (the admin token, then a session cookie), so it sits
// outside the admin API's bearer group.
func (s *Server) consoleRoutes(r chi.Router) {
	s.con = newConsole()
	c := chi.NewRouter()
	c.Use(s.consoleHeaders)
	c.Get("/static/*", s.con.static.ServeHTTP)
	c.Get("/login", s.consoleLoginPage)
	c.Post("/login", s.consoleLogin)
	c.Group(func(c chi.Router) {
		c.Use(s.consoleAuth) // signed in; every POST checked
		c.Post("/logout", s.consoleLogout)
		// Pages an approver may use too go here.
		c.Get("/approvals", s.consoleApprovals)
		c.Post("/approvals/{id}/approve", s.consoleDecide(true))
		c.Post("/approvals/{id}/deny", s.consoleDecide(false))
		c.Group(func(c chi.Router) {
			c.Use(s.consoleAdmin) // what the admin API's bearer group serves
			c.Get("/", s.consoleOverview)
			c.Get("/traces", s.consoleTraceLookup)
			c.Get("/traces/{trace_id}", s.consoleTrace)
			c.Post("/traces/{trace_id}/abandon", s.consoleAbandon)
			c.Get("/records/{id}", s.consoleRecord)
			c.Get("/deadletters", s.consoleDeadLetters)
			c.Post("/deadletters/{id}/replay", s.consoleReplay)
			c.Post("/deadletters/{id}/drop", s.consoleDrop)
		})
	})
	c.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.consoleError(w, r, http.StatusNotFound, "Not found", "There is no console page "+r.URL.Path+".")
	})
	c.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, POST")
		s.consoleError(w, r, http.StatusMethodNotAllowed, "Method not allowed", r.Method+" is not used on "+r.URL.Path+".")
	})
	r.Mount("/console", c)
}

// consoleHeaders sets the headers of every console answer, and sends
// /console to /console/.
func (s *Server) consoleHeaders(next http.Handler) http.Handler {
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
func (s *Server) consoleRender(w http.ResponseWriter, r *http.Request, status int, name, nav string, page any) {
	v := s.consoleViewFor(w, r, nav, page)
	t, ok := s.con.pages[name]
	var buf bytes.Buffer
	if ok {
		if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
			s.log.Error("console: rendering", "template", name, "error", err.Error())
			ok = false
		}
	}
	if !ok {
		buf.Reset()
		status = http.StatusInternalServerError
		v.Page = consoleProblem{Title: "Internal error", Detail: "The page " + name + " could not be rendered; the log says why."}
		if err := s.con.pages["error.html"].ExecuteTemplate(&buf, "layout", v); err != nil {
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
func (s *Server) consoleViewFor(w http.ResponseWriter, r *http.Request, nav string, page any) *consoleView {
	v := &consoleView{Nav: nav, Agent: s.cfg.Agent, Open: s.cfg.AdminToken == "", Page: page}
	if u, ok := r.Context().Value(consoleUserKey{}).(*consoleUser); ok {
		v.Who, v.CSRF, v.Session, v.Admin = u.who, u.csrf, u.sid != "", s.consoleMayAdmin(u.who)
		v.Flash = s.takeFlash(w, r)
	}
	return v
}

// consoleProblem is the error page's data.
type consoleProblem struct {
	Title  string
	Detail string
}

// consoleError answers an error page with status.
func (s *Server) consoleError(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	s.consoleRender(w, r, status, "error.html", "", consoleProblem{Title: title, Detail: detail})
}

// consoleStoreError answers a failed store read: 404 for an unknown record
// or trace, 503 when the store does not answer.
func (s *Server) consoleStoreError(w http.ResponseWriter, r *http.Request, err error, what string) {
	if errors.Is(err, record.ErrNotFound) {
		s.consoleError(w, r, http.StatusNotFound, "Not found", "No "+what+" (unknown, or past retention).")
		return
	}
	s.log.Warn("console: store error", "path", r.URL.Path, "error", err.Error())
	s.consoleError(w, r, http.StatusServiceUnavailable, "Store unavailable",
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
}
