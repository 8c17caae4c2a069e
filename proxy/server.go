package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
	"github.com/batonproxy/baton/trust/mtls"
)

// Options are what a Server is built from. Config must have passed
// Validate; the other fields are the process's shared dependencies.
type Options struct {
	Config         *config.Config
	Store          state.Store
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	Logger         *slog.Logger
	// Env reads environment variables (identity.key_env); nil reads none.
	Env func(string) string
	// AccessLog, when set, receives the access lines directly (the JSON
	// shape of Logger's handler, written without slog); nil logs them
	// through Logger.
	AccessLog io.Writer
	// MeterProvider receives Baton's metrics (docs/metrics.md); nil records
	// none. Metrics, when set, serves them as GET /metrics on the admin
	// listener.
	MeterProvider metric.MeterProvider
	Metrics       http.Handler
	// Plug builds the capabilities plugged into the request path from the
	// parts it shares (plugins.go); nil plugs none.
	Plug func(*Parts) (Plugins, error)
}

// Server is one Baton: its egress, ingress and admin listeners. Egress and
// ingress need no routing: every request runs the whole chain (a chi.Chain)
// and ends at the reverse proxy, whatever its method or path.
type Server struct {
	cfg        *config.Config
	store      state.Store
	log        *slog.Logger
	tracer     trace.Tracer
	prop       propagation.TextMapPropagator
	book       *record.Book
	holder     *state.Holder    // this process as the holder of dedupe claims
	dialer     *net.Dialer      // to external hosts, guarded: CONNECT tunnels (connect.go)
	terminator *terminator      // terminates listed destinations' TLS (connect.go)
	unstored   *unstored        // dead letters the store refused (unstored.go)
	edges      map[string]*edge // by peer
	sm         *serverMetrics   // metrics (edge_metrics.go)
	tp         *transparent     // nil unless intercept.mode is transparent
	plug       Plugins          // the capabilities plugged in (plugins.go)

	hs *handlings // inbound handoffs being handled (handlings.go)

	egressChain http.Handler // the egress chain, for Baton's own handoffs (Parts.Egress)
	tlsSrc      *mtls.Source // mutual TLS between Batons (tls.go); nil: none
	// callerRuns fetch the JWK Sets of callers edges (callers.go).
	callerRuns []func(context.Context)

	egress, ingress, admin *http.Server

	mu        sync.Mutex
	listeners [3]net.Listener
	ready     bool
	stopping  bool
	errc      chan error

	// bg tracks background work (auto replays), ended by Shutdown; what is
	// asked for before Start waits in deferred until it.
	started  bool
	deferred []func(context.Context)
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc
}

// hopTTL is how long a handling the agent answered, and a trace's grant,
// are remembered.
const hopTTL = 24 * time.Hour

// New builds a Server; nothing listens until Start.
func New(o Options) (*Server, error) {
	if o.Config == nil || o.Store == nil || o.TracerProvider == nil || o.Propagator == nil || o.Logger == nil {
		return nil, errors.New("proxy: Options needs Config, Store, TracerProvider, Propagator and Logger")
	}
	c := o.Config
	checker := compileChecker()
	sm, store, err := newServerMetrics(o)
	if err != nil {
		return nil, err
	}
	o.Store = store
	s := &Server{cfg: c, store: o.Store, log: o.Logger, errc: make(chan error, 3),
		tracer: o.TracerProvider.Tracer("github.com/batonproxy/baton"), prop: o.Propagator,
		edges: map[string]*edge{}, sm: sm}
	var recStore record.Store
	if c.RecordsOn() {
		recStore = o.Store
	}
	s.book = record.NewBook(recStore, c.Records.Retention.D(), o.Logger)
	s.holder = state.NewHolder(o.Store, c.Store.HolderTimeout.D(), o.Logger)
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	pool := NewBufferPool()
	errLog := slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)
	topts := TransportOptions{Dial: c.Timeouts.Dial.D(), UpstreamHeader: c.Timeouts.UpstreamHeader.D()}
	peerTransport := NewTransport(topts)
	guard := trust.NewAddressGuard(c.External.Allowed())
	topts.Control = guard.Control
	if topts.Roots, err = ExternalRoots(c.External.CAFile); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	externalTransport := NewTransport(topts)
	s.tp = newTransparent(c, guard, externalTransport, o.Logger)
	env := o.Env
	if env == nil {
		env = func(string) string { return "" }
	}
	ts, err := newTrust(c, env)
	if err != nil {
		return nil, err
	}
	callers, callerRuns, err := newCallers(c, env, o.Logger)
	if err != nil {
		return nil, err
	}
	s.callerRuns = callerRuns
	hs, grants := newHandlings(hopTTL), newGrantBook(hopTTL)
	hs.warn = &untiedWarner{log: o.Logger}
	s.hs = hs
	tainted := middleware.NewTaint(middleware.TaintOptions{
		Store: o.Store, Agent: c.Agent, Config: c.Taint, Log: o.Logger,
		Modes: func(in *middleware.Info) (string, string) {
			e, _ := c.InEdge(in.From)
			return e.UntrustedMode()
		},
		UntrustedResults: untrustedResults(c),
	})
	rs := newResolver(c)
	plug, err := o.plugged(&Parts{Config: c, Store: o.Store, Book: s.book, Log: o.Logger, Meters: o.MeterProvider,
		Env: env, Handlings: hs, Background: s.background, Signer: ts.signer, Resend: s.Resend,
		BreakerOpen: s.breakerOpen, Egress: func() http.Handler { return s.egressChain }, EgressAddr: s.EgressAddr,
		IngressAddr: s.IngressAddr, AdminAddr: s.AdminAddr, Metrics: o.Metrics, Served: sm.m.Served, Taint: tainted, Peers: rs})
	if err != nil {
		return nil, err
	}
	s.plug = plug
	s.dialer = &net.Dialer{Timeout: c.Timeouts.Dial.D(), KeepAlive: 30 * time.Second, Control: guard.Control}
	s.terminator = &terminator{ic: plug.TLSIntercept, conns: newConnQueue(), timeout: handshakeTimeout}
	if s.tp != nil {
		s.tp.terminator = s.terminator
	}
	hs.ended = plug.HandlingEnded
	rs.broadcasts = plug.Broadcasts
	if s.tlsSrc, err = newTLS(c, o); err != nil {
		return nil, err
	}
	s.unstored = &unstored{book: s.book, log: o.Logger, stored: plug.DeadLetters}
	for name := range c.Peers {
		var onClose func()
		if plug.BreakerClosed != nil {
			onClose = func() { plug.BreakerClosed(name) }
		}
		e := newEdge(c, name, s.peerTransportFor(name, peerTransport), s.book, o.Logger, onClose)
		e.signer, e.answered, e.letters, e.unstored = ts.signer, plug.Answered, plug.DeadLetters, s.unstored
		s.edges[name] = e
	}
	if err := s.observeEdges(); err != nil {
		return nil, err
	}

	egressProxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			in := middleware.InfoFromContext(pr.In.Context())
			in.Delivered = true // past every check: this goes to the peer
			in.ProxyBody(pr.Out, pr.In)
			// SetURL replaces scheme and host (absolute-form requests
			// included) and joins the target's base path.
			pr.SetURL(in.Target)
		},
		Transport: plug.egressTransport(&routedTransport{edges: s.gated(plug.Gate),
			external: memoryBody{measureClient(sm.m, externalTransport, "")}}),
		ModifyResponse: egressAnswer(hs),
		BufferPool:     pool,
		ErrorHandler:   errorHandler,
		ErrorLog:       errLog,
	}
	upstream := c.UpstreamURL
	ingressProxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			if in := middleware.InfoFromContext(pr.In.Context()); in != nil {
				in.AwaitKept()
				in.Delivered = true // past every check: this goes to the agent
				in.ProxyBody(pr.Out, pr.In)
			}
			pr.SetURL(s.tp.upstreamFor(pr.In.Context(), upstream))
		},
		Transport: memoryBody{measureClient(sm.m, peerTransport, upstream.Hostname())},
		ModifyResponse: func(resp *http.Response) error {
			if plug.IngressAnswer != nil {
				plug.IngressAnswer(resp)
			}
			return ingressAnswer(resp)
		},
		BufferPool:   pool,
		ErrorHandler: errorHandler,
		ErrorLog:     errLog,
	}

	checked := <-checker
	if checked.err != nil {
		return nil, fmt.Errorf("proxy: envelope schema: %w", checked.err)
	}
	contractOut, contractIn, err := contractPolicies(c)
	if err != nil {
		return nil, err
	}
	mcpOut, mcpIn := mcpPolicies(c)
	mm, err := newMCPMetrics(o.MeterProvider)
	if err != nil {
		return nil, err
	}
	tracing := middleware.Trace(o.TracerProvider, o.Propagator)
	var lines *middleware.LineWriter
	if o.AccessLog != nil {
		var level slog.Level
		_ = level.UnmarshalText([]byte(c.LogLevel))
		lines = middleware.NewLineWriter(o.AccessLog, level)
	}
	eg := chi.Chain(
		middleware.AccessLogTo(lines, o.Logger, middleware.Egress, c.Agent),
		middleware.Measure(sm.m),
		// Before the span: a call tied to a handling continues its trace.
		middleware.Correlate(hs),
		tracing,
		rs.middleware,
		s.connect, // connect.go
		middleware.Identity,
		middleware.Limit(c.Limits.MaxBodyBytes),
		middleware.IdempotencyKey(hs, c.Records.MaxBodyBytes, ts.signer != nil),
		orPass(plug.FanOut),
	).Handler(chi.Chain(
		middleware.Policy(middleware.PolicyOptions{
			Policy: ts.policy, Signing: ts.signer != nil, Grants: grants, Log: o.Logger,
			EdgeGrant:        func(peer string) *trust.Grant { return ts.grants[peer] },
			DenyUncorrelated: c.Trust.Uncorrelated == "deny",
		}),
		middleware.MCP(middleware.MCPOptions{Policy: mcpOut, Observe: mm.observe, Log: o.Logger}),
		// Labels first: content copied from the web is found while it is
		// still inline, before it may leave by reference.
		tainted.Egress,
		orPass(plug.ContextOut),
		middleware.Contract(checked.c, contractOut, o.Logger),
	).Handler(egressProxy))

	maxHops := func(from string) int {
		if e, ok := c.InEdge(from); ok {
			return e.MaxHops
		}
		return config.DefaultMaxHops
	}
	ig := chi.Chain(
		middleware.AccessLogTo(lines, o.Logger, middleware.Ingress, c.Agent),
		middleware.Measure(sm.m),
		tracing,
		middleware.Limit(c.Limits.MaxBodyBytes),
		middleware.Callers(callerOptions(callers, c.Agent)),
		middleware.Verify(middleware.VerifyOptions{
			Verifier: ts.verifier, Policy: ts.policy, RequireAll: ts.verifier != nil,
			Grants: grants, Log: o.Logger,
		}),
		middleware.HopGuard(maxHops),
		middleware.ChainBudgets(middleware.ChainBudgetOptions{Edge: chainBudgets(c)}),
		middleware.Receipt(s.book, prefetchFor(c, s.book)),
		s.tlsIdentity,
		middleware.MCP(middleware.MCPOptions{Policy: mcpIn, Observe: mm.observe, Sessions: plug.MCPSessions, Log: o.Logger}),
		orPass(plug.ContextIn),
		middleware.Contract(checked.c, contractIn, o.Logger),
		tainted.Ingress,
		middleware.Dedupe(o.Store, s.holder, dedupePolicies(c), o.Logger),
		middleware.Handle(hs),
	).Handler(ingressProxy)

	s.egressChain = eg
	s.egress = s.httpServer(terminated(agentFacing(eg, plug.AgentPaths)), errLog, c.Listen.H2C)
	s.ingress = s.httpServer(ig, errLog, c.Listen.H2C)
	s.admin = s.httpServer(s.adminRouter(), errLog, false)
	return s, nil
}

// h2cStreams bounds the concurrent streams on one h2c connection.
const h2cStreams = 250

// httpServer is one listener's server; with h2c it also accepts HTTP/2
// without TLS (prior knowledge) beside HTTP/1.1.
func (s *Server) httpServer(h http.Handler, errLog *log.Logger, h2c bool) *http.Server {
	t := s.cfg.Timeouts
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader.D(),
		ReadTimeout:       t.Read.D(),
		IdleTimeout:       t.Idle.D(),
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          errLog,
		ConnContext:       connContext,
	}
	if h2c {
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetHTTP2(true) // the egress's terminated TLS connections (connect.go)
		p.SetUnencryptedHTTP2(true)
		srv.Protocols = &p
		srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: h2cStreams}
	}
	return srv
}

// Start binds the three listeners and serves them in the background. It
// returns once all three accept connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	addrs := [3]string{s.cfg.Listen.Egress, s.cfg.Listen.Ingress, s.cfg.Listen.Admin}
	names := [3]string{"egress", "ingress", "admin"}
	for i, a := range addrs {
		l, err := s.listen(i, a)
		if i == 1 && err == nil {
			l = s.tlsListener(l)
		}
		if err != nil {
			for _, prev := range s.listeners[:i] {
				prev.Close()
			}
			return fmt.Errorf("proxy: listening for %s on %s: %w", names[i], a, err)
		}
		s.listeners[i] = l
	}
	// The claims this process makes name it: its mark is in the store before
	// it serves, and a process that held this ingress before it is dead.
	host, _ := os.Hostname()
	s.holder.Begin(context.Background(), host+"/"+s.cfg.Agent+"/"+s.listeners[1].Addr().String())
	go func() { _ = s.egress.Serve(s.terminator.conns) }() // terminated TLS (connect.go)
	for i, srv := range [3]*http.Server{s.egress, s.ingress, s.admin} {
		go func(srv *http.Server, l net.Listener, name string) {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.errc <- fmt.Errorf("proxy: %s listener: %w", name, err)
			}
		}(srv, s.listeners[i], names[i])
	}
	s.ready = true
	s.startBackground()
	s.log.Info("baton listening", "agent", s.cfg.Agent,
		"egress", s.listeners[0].Addr().String(), "ingress", s.listeners[1].Addr().String(),
		"admin", s.listeners[2].Addr().String())
	return nil
}

// EgressAddr, IngressAddr and AdminAddr return the bound addresses (useful
// with port 0).
func (s *Server) EgressAddr() string  { return s.addr(0) }
func (s *Server) IngressAddr() string { return s.addr(1) }
func (s *Server) AdminAddr() string   { return s.addr(2) }

func (s *Server) addr(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listeners[i] == nil {
		return ""
	}
	return s.listeners[i].Addr().String()
}

// Errors reports a listener that stopped serving on its own.
func (s *Server) Errors() <-chan error { return s.errc }

// Shutdown stops accepting, lets in-flight requests finish until ctx ends,
// then closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.ready, s.stopping = false, true
	s.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, srv := range [3]*http.Server{s.egress, s.ingress, s.admin} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(ctx); err != nil {
				srv.Close()
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	if errors.Join(errs...) != nil {
		// Requests still being delivered: their claims stay until this
		// process's mark lapses.
		s.holder.Lapse()
	}
	s.bgCancel()
	s.bg.Wait()
	s.sm.stop()
	s.book.Close() // flush queued records
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("proxy: shutdown: %w", err)
	}
	return nil
}

// prefetchFor is what the receipt middleware tells of each handoff from a
// peer's Baton: the book's Prefetch when the agent has peers to hand on to
// and records are kept; nil (nothing to read ahead) otherwise.
func prefetchFor(c *config.Config, book *record.Book) func(traceID string) {
	if len(c.Peers) == 0 || !book.Enabled() {
		return nil
	}
	return book.Prefetch
}

// dedupePolicies resolves the dedupe window of every inbound edge once; a
// sender without an edge of its own gets the top-level settings.
func dedupePolicies(c *config.Config) func(from string) *middleware.DedupePolicy {
	build := func(d config.Dedupe) *middleware.DedupePolicy {
		if !*d.Enabled {
			return nil
		}
		return &middleware.DedupePolicy{
			Methods: d.Methods, Window: d.Window.D(), Lease: d.Lease.D(),
			ReplayErrors: *d.ReplayErrors, RequireKey: *d.RequireKey,
			FailOpen: d.OnStoreError == config.FailOpen, MaxResponseBytes: d.MaxResponseBytes,
		}
	}
	byEdge := map[string]*middleware.DedupePolicy{}
	for _, e := range c.Edges {
		if e.From != "" {
			byEdge[e.From] = build(c.DedupeFor(e.From))
		}
	}
	fallback := build(c.DedupeFor(""))
	return func(from string) *middleware.DedupePolicy {
		if p, ok := byEdge[from]; ok {
			return p
		}
		return fallback
	}
}

// startBackground starts what runs beside the listeners: the TLS files'
// reload, the callers' key sets, storing the dead letters the store
// refused, and what the capabilities asked for (Parts.Background). Start
// calls it holding s.mu.
func (s *Server) startBackground() {
	s.backgroundLocked(s.holder.Run)
	if s.tlsSrc != nil {
		s.backgroundLocked(s.tlsSrc.Run)
	}
	for _, run := range s.callerRuns {
		s.backgroundLocked(run)
	}
	if s.book.Enabled() {
		s.backgroundLocked(s.unstored.keepStoring)
	}
	s.started = true
	for _, fn := range s.deferred {
		s.backgroundLocked(fn)
	}
	s.deferred = nil
}

// background runs fn once the listeners start (at once when they run),
// unless the server is stopping; Shutdown cancels its context and waits for
// it.
func (s *Server) background(fn func(ctx context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.deferred = append(s.deferred, fn)
		return
	}
	s.backgroundLocked(fn)
}

func (s *Server) backgroundLocked(fn func(ctx context.Context)) {
	if s.stopping {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		fn(s.bgCtx)
	}()
}

// agentFacing serves Baton's own paths for the agent on the egress listener
// (origin-form requests under a path the capabilities serve the agent, such
// as its approvals and referenced content) and passes everything else to
// the egress chain.
func agentFacing(egress http.Handler, paths map[string]http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Host == "" {
			for prefix, h := range paths {
				if strings.HasPrefix(r.URL.Path, prefix) {
					h.ServeHTTP(w, r)
					return
				}
			}
		}
		egress.ServeHTTP(w, r)
	})
}

// routedTransport sends handoffs along their peer's edge (records,
// breaker, retries), behind its gate when it has one, and external fetches
// over the guarded transport.
type routedTransport struct {
	edges    map[string]http.RoundTripper
	external http.RoundTripper
}

func (t *routedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	in := middleware.InfoFromContext(r.Context())
	if in == nil || !in.Handoff() {
		return t.external.RoundTrip(r)
	}
	return t.edges[in.To].RoundTrip(r)
}

// gated returns the edges as the egress sends on them: each behind gate,
// when one is plugged in.
func (s *Server) gated(gate Gate) map[string]http.RoundTripper {
	out := make(map[string]http.RoundTripper, len(s.edges))
	for name, e := range s.edges {
		out[name] = e
		if gate != nil {
			out[name] = gatedEdge{gate: gate, e: e}
		}
	}
	return out
}

// breakerOpen reports whether the breaker of the edge to peer is open.
func (s *Server) breakerOpen(peer string) bool {
	e, ok := s.edges[peer]
	return ok && e.breaker.State() == gobreaker.StateOpen
}
