package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff/tokens"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/sidecar"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust/mtls"
)

// configFlag parses the --config flag of a subcommand.
func configFlag(name string, args []string, env func(string) string) (string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", env("BATON_CONFIG"), "configuration file")
	if err := fs.Parse(args); err != nil {
		return "", usageError{msg: fmt.Sprintf("%s: %v", name, err)}
	}
	if fs.NArg() > 0 {
		return "", usageError{msg: fmt.Sprintf("%s: unexpected argument %q", name, fs.Arg(0))}
	}
	if *path == "" {
		return "", usageError{msg: name + ": --config FILE is required"}
	}
	return *path, nil
}

func validate(args []string, stdout io.Writer, env func(string) string) error {
	path, err := configFlag("validate", args, env)
	if err != nil {
		return err
	}
	c, err := config.Load(path, env)
	if err != nil {
		return err
	}
	for i, e := range c.Edges {
		x := e.Context
		if x != nil && c.Store.Redis == nil && e.To != "" && (x.ByReference != nil || x.Budget != nil && x.Budget.Over == config.BudgetTrim) {
			fmt.Fprintf(stdout, "%s: note: edges[%d].context: content passed by reference is read from the store, and the memory store is this process's only: the peer's Baton must share it (store.redis)\n", path, i)
		}
		if b := e.Context; b != nil && b.Budget != nil {
			if ctr, err := tokens.For(b.Budget.Model, b.Budget.Tokenizer); err == nil && ctr.Note != "" {
				fmt.Fprintf(stdout, "%s: note: edges[%d].context.budget: %s\n", path, i, ctr.Note)
			}
		}
	}
	if t := c.TLS; t != nil {
		src, err := mtls.Load(mtls.Options{CertFile: t.CertFile, KeyFile: t.KeyFile, CAFile: t.CAFile, TrustDomain: t.TrustDomain, IDPath: t.IDPath})
		if err != nil {
			return fmt.Errorf("%s: tls: %w", path, err)
		}
		if id := src.ID(); src.AgentOfOwn() != c.Agent {
			return fmt.Errorf("%s: tls.cert_file names %s, the identity of agent %s, not of %s", path, id, src.AgentOfOwn(), c.Agent)
		}
		switch left := time.Until(src.NotAfter()); {
		case left <= 0:
			return fmt.Errorf("%s: tls.cert_file expired at %s", path, src.NotAfter().UTC().Format(time.RFC3339))
		case left < 7*24*time.Hour:
			fmt.Fprintf(stdout, "%s: note: tls.cert_file expires in %s (%s): rotate it\n", path, left.Round(time.Minute), src.NotAfter().UTC().Format(time.RFC3339))
		}
	}
	if err := proxy.CheckCallers(c, env); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	return nil
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// settleTrim is when, after it starts serving, serve trims its start-up
// pages and garbage.
const settleTrim = 3 * time.Second

// logFlushInterval bounds how long a log line may sit in the buffer.
const logFlushInterval = 200 * time.Millisecond

func serve(ctx context.Context, args []string, stderr io.Writer, env func(string) string) error {
	path, err := configFlag("serve", args, env)
	if err != nil {
		return err
	}
	cfg, err := config.Load(path, env)
	if err != nil {
		return err
	}
	logOut := newLogWriter(stderr, logFlushInterval)
	defer logOut.Close()
	log := newLogger(logOut, cfg.LogLevel)
	if env("GOGC") == "" {
		debug.SetGCPercent(gcPercent(cfg))
	}
	if env("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit(cfg, containerMemoryMax("/sys/fs/cgroup")))
	}
	tel, err := setupTelemetry(ctx, env, cfg.Agent)
	if err != nil {
		return err
	}
	otel.SetTracerProvider(tel.provider)
	otel.SetTextMapPropagator(tel.propagator)

	store, err := state.Open(cfg.Store)
	if err != nil {
		return err
	}
	srv, err := sidecar.New(proxy.Options{
		Config: cfg, Store: store, Logger: log,
		TracerProvider: tel.provider, Propagator: tel.propagator, Env: env, AccessLog: logOut,
		MeterProvider: tel.meters.provider, Metrics: tel.meters.handler,
	})
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	// Start-up garbage (config decoding, the envelope schema's compilation)
	// and the work of the first seconds (the first announcement to the
	// mesh, the first scrape of its own metrics, the store's first
	// connections) go back to the OS, and the executable's start-up pages
	// leave this process's resident set, once that work is done. Not
	// before the listeners open as well: a forced collection and a walk of
	// the mappings there cost as much as the rest of start-up after package
	// initialisation, and an idle Baton held less than a MiB less for it.
	settle := time.AfterFunc(settleTrim, func() {
		debug.FreeOSMemory()
		trimStartupPages()
	})
	defer settle.Stop()
	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "grace", cfg.ShutdownGrace.D().String())
	case runErr = <-srv.Errors():
		log.Error("listener failed", "error", runErr.Error())
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace.D())
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("in-flight requests cut at the end of the grace period", "error", err.Error())
	}
	if err := tel.shutdown(sctx); err != nil {
		log.Warn("flushing spans and metrics", "error", err.Error())
	}
	if err := store.Close(); err != nil {
		log.Warn("closing store", "error", err.Error())
	}
	log.Info("stopped")
	if runErr != nil {
		return runErr
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return nil
}
