package proxy_test

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/sidecar"
	"github.com/batonproxy/baton/state"
)

// childEnv names the variable that turns the test binary into a Baton
// process (configured by its value, YAML), so that tests can kill a real
// Baton with SIGKILL.
const childEnv = "BATON_PROXY_TEST_CHILD"

func TestMain(m *testing.M) {
	if yaml := os.Getenv(childEnv); yaml != "" {
		os.Exit(runChild(yaml))
	}
	os.Exit(m.Run())
}

func runChild(yaml string) int {
	c, err := config.Parse(strings.NewReader(yaml), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	store, err := state.Open(c.Store)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := sidecar.New(proxy.Options{Config: c, Store: store, TracerProvider: sdktrace.NewTracerProvider(),
		Propagator: propagation.TraceContext{}, Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil))})
	if err == nil {
		err = s.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("ready %s\n", s.IngressAddr())
	select {} // until killed
}
