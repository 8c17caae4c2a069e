package tlsintercept

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
)

// Interceptor is what the egress asks about the destinations it may
// terminate (proxy.TLSInterceptor): the minter's list and server
// configurations, and the agents that refused its certificates, counted by
// the entry that listed the name and logged by the name.
type Interceptor struct {
	*Minter
	CA      *CA
	log     *slog.Logger
	refused metric.Int64Counter // nil: not counted
	logged  *state.FIFO[struct{}]
}

// refusedLogEvery bounds the log lines of one name's refused handshakes.
const refusedLogEvery = time.Minute

// New makes the interceptor the config asks for (intercept.tls): the CA,
// loaded from its files or made now, the minter of its leaves, and the
// bundle published where the agent's environment points. A bundle written
// without system roots is logged, not fatal: the agent's other TLS may need
// a bundle of its own then.
func New(c *config.Config, mp metric.MeterProvider, log *slog.Logger) (*Interceptor, error) {
	t := c.Intercept.TLS
	hosts, err := ParseHosts(t.Hosts)
	if err != nil {
		return nil, fmt.Errorf("intercept.tls.hosts: %w", err)
	}
	var ca *CA
	if t.CA.CertFile != "" {
		ca, err = LoadCA(t.CA.CertFile, t.CA.KeyFile)
	} else {
		ca, err = NewCA(c.Agent)
	}
	if err != nil {
		return nil, fmt.Errorf("intercept.tls.ca: %w", err)
	}
	m, err := NewMinter(ca, hosts, MinterOptions{LeafTTL: t.LeafTTL.D(), CacheSize: t.CacheSize}, mp)
	if err != nil {
		return nil, err
	}
	switch err := ca.PublishBundle(t.Bundle); {
	case errors.Is(err, ErrNoSystemRoots):
		log.Warn("TLS interception: the CA bundle holds the CA alone: no system roots were found to add", "bundle", t.Bundle)
	case err != nil:
		return nil, fmt.Errorf("intercept.tls.bundle: %w", err)
	}
	log.Info("TLS interception: CA bundle published", "bundle", t.Bundle, "ca", ca, "hosts", hosts.Entries())
	i := &Interceptor{Minter: m, CA: ca, log: log, logged: state.NewFIFO[struct{}](1024, refusedLogEvery)}
	if mp != nil {
		i.refused, err = mp.Meter("github.com/batonproxy/baton").Int64Counter("baton.tls.intercept.handshakes.refused",
			metric.WithUnit("{handshake}"),
			metric.WithDescription("Agents' TLS handshakes with Baton that did not complete, by the intercept.tls.hosts entry listing the name: "+
				"a client that pins its server's certificate, or does not trust Baton's CA."))
		if err != nil {
			return nil, fmt.Errorf("tlsintercept: metrics: %w", err)
		}
	}
	return i, nil
}

// Refused counts an agent's handshake for host:port that did not complete,
// and logs it (once a minute per name).
func (i *Interceptor) Refused(host string, port uint16, err error) {
	entry := i.hosts.Entry(host, port)
	if i.refused != nil {
		i.refused.Add(context.Background(), 1, metric.WithAttributes(attribute.String("listed", entry)))
	}
	name := normalName(host)
	if _, seen := i.logged.Get(name); seen {
		return
	}
	i.logged.Set(name, struct{}{})
	i.log.Warn("TLS interception: the agent did not complete its handshake with Baton's certificate "+
		"(a client that pins its server's certificate, or does not trust the CA bundle); "+
		"if it pins, take the host off intercept.tls.hosts", "host", host, "port", port, "listed", entry, "error", err.Error())
}
