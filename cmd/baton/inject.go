//go:build !sidecar

package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/batonproxy/baton/inject"
)

// injectUsage is the inject part of baton's usage text.
const injectUsage = `  baton inject -f FILE [-f FILE]... [--intercept proxy|transparent] [--agent NAME]
         [--agent-port PORT] [--config-map NAME] [--image IMAGE] [--init-image IMAGE]
         [--instrument nodejs|python|java|dotnet] [--config FILE]
                                 print the manifests (YAML, several documents, List
                                 kinds; FILE - is stdin) with Baton added to every
                                 Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet,
                                 Job and CronJob, as the webhook would; other kinds
                                 are printed unchanged; --instrument adds zero-code
                                 OpenTelemetry instrumentation to the app containers
  baton inject-webhook --tls-cert FILE --tls-key FILE [--listen :8443] [--config FILE]
                                 serve the mutating admission webhook over HTTPS
                                 (POST /mutate, /mutate/namespace; /healthz, /readyz);
                                 the key pair is reloaded when its files change
`

// imageRepository is where Baton's image is published; the tag is the
// binary's version.
const imageRepository = "ghcr.io/batonproxy/baton"

var releaseVersion = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+$`)

// defaultImage is the image of this release, or :latest for a build that is
// not one; defaultInitImage is its init image (with iptables).
func defaultImage() string     { return imageRepository + ":" + imageTag() }
func defaultInitImage() string { return imageRepository + "-init:" + imageTag() }

func imageTag() string {
	if releaseVersion.MatchString(version) {
		return strings.TrimPrefix(version, "v")
	}
	return "latest"
}

// injectorConfig reads the injector configuration at path (empty: the
// defaults), with image and initImage, when set, overriding the file's, and
// the release's images when neither names one.
func injectorConfig(path, image, initImage string) (*inject.Config, error) {
	cfg := &inject.Config{}
	cfg.ApplyDefaults()
	if path != "" {
		var err error
		if cfg, err = inject.ReadConfig(path); err != nil {
			return nil, err
		}
	}
	if image != "" {
		cfg.Image = image
	}
	if initImage != "" {
		cfg.InitImage = initImage
	}
	if cfg.Image == "" {
		cfg.Image = defaultImage()
		if cfg.InitImage == "" {
			cfg.InitImage = defaultInitImage()
		}
	}
	return cfg, cfg.Validate()
}

// injectCmd runs `baton inject`: each -f file's documents in turn, to
// stdout, and a line per workload on stderr.
func injectCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("inject", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	var files multiFlag
	fl.Var(&files, "f", "manifest file, - for stdin (repeatable)")
	var ov inject.Overrides
	fl.StringVar(&ov.Intercept, "intercept", "", "proxy or transparent (default: the configuration's, proxy)")
	fl.StringVar(&ov.Agent, "agent", "", "the agent's name (default: the template's app label, else the workload's name)")
	port := fl.Int("agent-port", 0, "the agent's port, where ingress delivers (default 8080)")
	fl.StringVar(&ov.ConfigMap, "config-map", "", "ConfigMap holding baton.yaml (default baton)")
	fl.StringVar(&ov.Instrument, "instrument", "", "zero-code OpenTelemetry instrumentation: nodejs, python, java or dotnet")
	image := fl.String("image", "", "Baton's image (default "+defaultImage()+")")
	initImage := fl.String("init-image", "", "the iptables init container's image (default "+defaultInitImage()+", or --image)")
	cfgPath := fl.String("config", "", "injector configuration file (the chart's injector.yaml)")
	bad, done, err := parseCommand(fl, args, "inject", injectUsage, stdout, stderr)
	if done || err != nil {
		return err
	}
	switch {
	case len(files) == 0:
		return bad("-f FILE is required (- for stdin)")
	case *port < 0 || *port > 65535:
		return bad(fmt.Sprintf("--agent-port: must be between 1 and 65535, got %d", *port))
	}
	ov.AgentPort = int32(*port)
	if err := ov.Validate(); err != nil {
		return bad(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	cfg, err := injectorConfig(*cfgPath, *image, *initImage)
	if err != nil {
		return fmt.Errorf("inject: %w", err)
	}
	in, err := inject.New(cfg)
	if err != nil {
		return fmt.Errorf("inject: %w", err)
	}
	// Every file is injected before anything is printed, so that a bad
	// document leaves no partial output.
	var out bytes.Buffer
	var results []inject.Result
	for _, name := range files {
		var r io.Reader = stdin
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				return fmt.Errorf("inject: %w", err)
			}
			defer f.Close()
			r = f
		}
		if out.Len() > 0 {
			out.WriteString("---\n")
		}
		res, err := in.Manifests(r, &out, ov)
		if err != nil {
			return fmt.Errorf("inject: %s: %w", name, err)
		}
		results = append(results, res...)
	}
	if _, err := stdout.Write(out.Bytes()); err != nil {
		return fmt.Errorf("inject: %w", err)
	}
	for _, r := range results {
		fmt.Fprintln(stderr, r)
	}
	return nil
}

// injectWebhookCmd runs `baton inject-webhook` until ctx ends.
func injectWebhookCmd(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	fl := flag.NewFlagSet("inject-webhook", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	listen := fl.String("listen", ":8443", "HTTPS listen address")
	certFile := fl.String("tls-cert", "", "serving certificate (PEM), reloaded when it changes")
	keyFile := fl.String("tls-key", "", "serving key (PEM), reloaded when it changes")
	cfgPath := fl.String("config", "", "injector configuration file (the chart's injector.yaml)")
	image := fl.String("image", "", "Baton's image, overriding the configuration's")
	initImage := fl.String("init-image", "", "the iptables init container's image, overriding the configuration's")
	grace := fl.Duration("shutdown-grace", 10*time.Second, "time for requests in flight after SIGTERM")
	bad, done, err := parseCommand(fl, args, "inject-webhook", injectUsage, stdout, stderr)
	if done || err != nil {
		return err
	}
	switch {
	case *certFile == "" || *keyFile == "":
		return bad("--tls-cert FILE and --tls-key FILE are required")
	}
	level := env("BATON_LOG_LEVEL")
	if level == "" {
		level = "info"
	}
	log := newLogger(stderr, level)
	cfg, err := injectorConfig(*cfgPath, *image, *initImage)
	if err != nil {
		return fmt.Errorf("inject-webhook: %w", err)
	}
	in, err := inject.New(cfg)
	if err != nil {
		return fmt.Errorf("inject-webhook: %w", err)
	}
	certs, err := inject.NewCertReloader(*certFile, *keyFile, log)
	if err != nil {
		return fmt.Errorf("inject-webhook: %w", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("inject-webhook: %w", err)
	}
	log.Info("injector serving", "addr", ln.Addr().String(), "image", cfg.Image, "intercept", cfg.Intercept, "version", version)
	return inject.Serve(ctx, ln, inject.NewWebhook(in, log, certs.Ready), certs, *grace)
}
