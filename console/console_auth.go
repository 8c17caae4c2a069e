package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Console sign-in. The console answers to the admin API's tokens: with no
// admin token configured it is open, like the API; with one, a browser
// signs in once with the token (POST /console/login) and gets a session
// cookie that holds a random session id, never the token; a script sends
// Authorization: Bearer <token> on each request. Every POST must pass the
// cross-origin check (Sec-Fetch-Site, else Origin against Host) and carry
// the page's CSRF token, bound to the session (or to the bearer's identity,
// or to the process when the console is open).

const (
	consoleCookie      = "baton_console"
	consoleFlashCookie = "baton_console_flash"
	// consoleAnonymous is who acts on an open console (no admin token).
	consoleAnonymous = "anonymous"
	// maxConsoleSessions bounds the sessions kept: the oldest goes first.
	maxConsoleSessions = 4096
	maxConsoleForm     = 64 << 10
)

// consoleUser is who makes a console request, with the CSRF token their
// forms carry and their session id (when signed in by cookie).
type consoleUser struct {
	who, csrf, sid string
}

type consoleUserKey struct{}

// consoleIdentity names who makes a console request: the identity of the
// admin token it carries (adminIdentity) as a bearer token or through the
// session it signed in, or "anonymous" when no admin token is configured
// and the request carries neither. ok is false when the request is not
// signed in.
func (con *Console) consoleIdentity(r *http.Request) (who string, ok bool) {
	u, ok := con.consoleUserOf(r)
	if !ok {
		return "", false
	}
	return u.who, true
}

func (con *Console) consoleUserOf(r *http.Request) (*consoleUser, bool) {
	if con == nil {
		return nil, false
	}
	if u, ok := r.Context().Value(consoleUserKey{}).(*consoleUser); ok {
		return u, true
	}
	open := con.o.Config.AdminToken == ""
	if h := r.Header.Get("Authorization"); h != "" {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
			if who, ok := con.identity(tok); ok {
				return &consoleUser{who: who, csrf: con.mac("csrf", "bearer", who)}, true
			}
		}
		if !open {
			return nil, false
		}
	}
	if c, err := r.Cookie(consoleCookie); err == nil {
		if who, ok := con.sessions.get(c.Value, time.Now()); ok {
			return &consoleUser{who: who, csrf: con.mac("csrf", "session", c.Value), sid: c.Value}, true
		}
	}
	if open {
		return &consoleUser{who: consoleAnonymous, csrf: con.mac("csrf", "open")}, true
	}
	return nil, false
}

// consoleAuth lets signed-in requests through, with their consoleUser in
// the context, and checks every POST (consoleCheckPost). A GET that is not
// signed in gets the sign-in form, with status 401.
func (con *Console) consoleAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := con.consoleUserOf(r)
		switch {
		case !ok && r.Header.Get("Authorization") != "":
			w.Header().Set("WWW-Authenticate", `Bearer realm="baton-admin"`)
			con.consoleError(w, r, http.StatusUnauthorized, "Not signed in", "The bearer token is not valid.")
			return
		case !ok && r.Method == http.MethodGet:
			con.renderLogin(w, r, http.StatusUnauthorized, r.URL.RequestURI(), "")
			return
		case !ok:
			con.consoleError(w, r, http.StatusUnauthorized, "Not signed in", "Sign in at /console/login first.")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), consoleUserKey{}, u))
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !con.consoleCheckPost(w, r, u.csrf) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// consoleAdminIdentity is the identity adminIdentity gives the admin
// token; no approver may bear the name (config refuses it).
const consoleAdminIdentity = "admin"

// consoleMayAdmin reports whether who may use what the admin API's bearer
// group serves: the admin token's holder, or anyone when no admin token is
// configured (the API is open then). An approver signed in with an
// approver token may not: on the API its token decides approvals only.
func (con *Console) consoleMayAdmin(who string) bool {
	return con.o.Config.AdminToken == "" || who == consoleAdminIdentity
}

// consoleAdmin refuses, with 403, the pages of records and dead letters to
// whoever is signed in with an approver's token.
func (con *Console) consoleAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if who, _ := con.consoleIdentity(r); !con.consoleMayAdmin(who) {
			con.consoleError(w, r, http.StatusForbidden, "Forbidden",
				"Signed in as "+who+": this page needs the admin token. An approver's token opens the approvals page only.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// consoleCheckPost refuses a cross-origin request, and a form whose csrf
// field is not want, with 403.
func (con *Console) consoleCheckPost(w http.ResponseWriter, r *http.Request, want string) bool {
	if err := con.cop.Check(r); err != nil {
		con.o.Log.Warn("console: cross-origin request refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"),
			"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		con.consoleError(w, r, http.StatusForbidden, "Forbidden", "Cross-origin requests to the console are refused.")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxConsoleForm)
	got := r.PostFormValue("csrf")
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		con.consoleError(w, r, http.StatusForbidden, "Forbidden",
			"The form's CSRF token is missing or stale: reload the page and try again.")
		return false
	}
	return true
}

// consoleLoginView is the sign-in page's data.
type consoleLoginView struct {
	Next, Error, CSRF string
}

func (con *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	con.consoleRender(w, r, status, "login.html", "",
		consoleLoginView{Next: consoleNext(next), Error: msg, CSRF: con.mac("csrf", "login")})
}

func (con *Console) consoleLoginPage(w http.ResponseWriter, r *http.Request) {
	con.renderLogin(w, r, http.StatusOK, r.URL.Query().Get("next"), "")
}

// consoleLogin signs in with a token: a new session, its id in an HttpOnly,
// SameSite=Strict cookie (Secure over TLS).
func (con *Console) consoleLogin(w http.ResponseWriter, r *http.Request) {
	if !con.consoleCheckPost(w, r, con.mac("csrf", "login")) {
		return
	}
	next := consoleNext(r.PostFormValue("next"))
	who, ok := con.identity(r.PostFormValue("token"))
	if !ok {
		con.o.Log.Warn("console: sign-in refused", "remote", r.RemoteAddr)
		con.renderLogin(w, r, http.StatusUnauthorized, next, "That token is not valid.")
		return
	}
	if c, err := r.Cookie(consoleCookie); err == nil {
		con.sessions.remove(c.Value) // a new id at each sign-in
	}
	if next == "/console/" && !con.consoleMayAdmin(who) {
		next = "/console/approvals" // the page an approver may use
	}
	sid := con.sessions.add(who, time.Now())
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: sid, Path: "/console", MaxAge: int(consoleSessionTTL.Seconds()),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	con.o.Log.Info("console: signed in", "who", who, "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// consoleLogout ends the session.
func (con *Console) consoleLogout(w http.ResponseWriter, r *http.Request) {
	u, _ := con.consoleUserOf(r)
	if u != nil && u.sid != "" {
		con.sessions.remove(u.sid)
	}
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: "", Path: "/console", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	to := "/console/login"
	if con.o.Config.AdminToken == "" {
		to = "/console/"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// consoleNext is where to go after signing in: a console path, else the
// overview.
func consoleNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/console/") ||
		strings.ContainsAny(next, "\\\r\n\t") || strings.HasPrefix(u.Path, "/console/login") {
		return "/console/"
	}
	return u.RequestURI()
}

// mac is the base64url HMAC-SHA256, under the process's console key, of
// the parts.
func (con *Console) mac(parts ...string) string {
	h := hmac.New(sha256.New, con.key)
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// consoleFlashMsg is a message shown once, on the page after an action.
type consoleFlashMsg struct {
	OK   bool
	Text string
}

// consoleFlash redirects (303) to the console path to, where the message
// is shown once. It travels in a short-lived cookie signed with the
// process's key, so that no link can make the console say something.
func (con *Console) consoleFlash(w http.ResponseWriter, r *http.Request, to string, ok bool, text string) {
	if len(text) > 1500 {
		text = text[:1500] + "…"
	}
	kind := "0"
	if ok {
		kind = "1"
	}
	payload := base64.RawURLEncoding.EncodeToString([]byte(kind + text))
	http.SetCookie(w, &http.Cookie{Name: consoleFlashCookie, Value: payload + "." + con.mac("flash", payload),
		Path: "/console", MaxAge: 60, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// takeFlash returns the flash message the request carries, if it is one
// this process signed, and clears it.
func (con *Console) takeFlash(w http.ResponseWriter, r *http.Request) *consoleFlashMsg {
	c, err := r.Cookie(consoleFlashCookie)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: consoleFlashCookie, Value: "", Path: "/console", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	payload, sig, ok := strings.Cut(c.Value, ".")
	if !ok || subtle.ConstantTimeCompare([]byte(sig), []byte(con.mac("flash", payload))) != 1 {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || len(b) == 0 {
		return nil
	}
	return &consoleFlashMsg{OK: b[0] == '1', Text: string(b[1:])}
}

// consoleSessions are the signed-in sessions, by random id, in memory: a
// restart signs everyone out.
type consoleSessions struct {
	mu sync.Mutex
	m  map[string]consoleSession
}

type consoleSession struct {
	who     string
	expires time.Time
}

func newConsoleSessions() *consoleSessions {
	return &consoleSessions{m: map[string]consoleSession{}}
}

// add starts a session for who and returns its id, dropping expired
// sessions, and the oldest when there are too many.
func (cs *consoleSessions) add(who string, now time.Time) string {
	id := rand.Text() + rand.Text()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for k, v := range cs.m {
		if !now.Before(v.expires) {
			delete(cs.m, k)
		}
	}
	for len(cs.m) >= maxConsoleSessions {
		oldest := ""
		for k, v := range cs.m {
			if oldest == "" || v.expires.Before(cs.m[oldest].expires) {
				oldest = k
			}
		}
		delete(cs.m, oldest)
	}
	cs.m[id] = consoleSession{who: who, expires: now.Add(consoleSessionTTL)}
	return id
}

// get returns who a live session is.
func (cs *consoleSessions) get(id string, now time.Time) (string, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	v, ok := cs.m[id]
	if !ok || !now.Before(v.expires) {
		return "", false
	}
	return v.who, true
}

func (cs *consoleSessions) remove(id string) {
	cs.mu.Lock()
	delete(cs.m, id)
	cs.mu.Unlock()
}
