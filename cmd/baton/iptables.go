package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/proxy/intercept"
)

// iptablesUsage is the iptables part of baton's usage text.
const iptablesUsage = `  baton iptables [--dry-run | --cleanup] [flags]
                                 install the nat rules of transparent interception in
                                 this network namespace: the agent's outbound TCP to
                                 egress, inbound TCP to ingress, Baton's UID excluded
                                 (needs root or NET_ADMIN+NET_RAW; docs/interception.md)
`

const iptablesFlags = `Flags:
  --proxy-uid UID                 Baton's UID, whose traffic is never redirected (1337)
  --proxy-gid GID                 Baton's GID, likewise (default: the UID; -1 for none)
  --egress-port PORT              where outbound TCP is redirected (15001)
  --ingress-port PORT             where inbound TCP is redirected (15006)
  --admin-port PORT               Baton's admin port, never redirected (15000)
  --inbound-ports PORTS           inbound ports to redirect: "*" for all but the
                                  excluded ones (default), a list like 8080,9090,
                                  or "" for no inbound interception
  --exclude-inbound-ports PORTS   inbound ports never redirected (e.g. 22)
  --exclude-outbound-ports PORTS  outbound destination ports never redirected
  --exclude-outbound-cidrs CIDRS  outbound destinations never redirected
                                  (e.g. 10.96.0.0/12,fd00::/8)
  --ipv6[=true|false]             program ip6tables too (default: when ip6tables is
                                  installed and the kernel has IPv6)
  --backend auto|nft|legacy       iptables backend (auto: the one that already has
                                  rules, else nft when installed, else legacy)
  --dry-run                       print the commands and rules, change nothing
  --cleanup                       remove every rule and chain Baton installed
`

// triBool is a flag that is unset (auto), true or false; "--ipv6" alone
// means true.
type triBool struct{ v intercept.IPv6Mode }

func (t *triBool) String() string {
	switch t.v {
	case intercept.IPv6On:
		return "true"
	case intercept.IPv6Off:
		return "false"
	}
	return "auto"
}

func (t *triBool) Set(s string) error {
	if s == "auto" {
		t.v = intercept.IPv6Auto
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true, false or auto")
	}
	t.v = intercept.IPv6Off
	if b {
		t.v = intercept.IPv6On
	}
	return nil
}

func (t *triBool) IsBoolFlag() bool { return true }

// iptablesCmd runs `baton iptables`.
func iptablesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("iptables", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	o := intercept.DefaultOptions()
	fl.IntVar(&o.ProxyUID, "proxy-uid", o.ProxyUID, "")
	gid := fl.Int("proxy-gid", 0, "")
	fl.IntVar(&o.EgressPort, "egress-port", o.EgressPort, "")
	fl.IntVar(&o.IngressPort, "ingress-port", o.IngressPort, "")
	fl.IntVar(&o.AdminPort, "admin-port", o.AdminPort, "")
	inbound := fl.String("inbound-ports", "*", "")
	exIn := fl.String("exclude-inbound-ports", "", "")
	exOut := fl.String("exclude-outbound-ports", "", "")
	exCIDR := fl.String("exclude-outbound-cidrs", "", "")
	var v6 triBool
	fl.Var(&v6, "ipv6", "")
	backend := fl.String("backend", string(intercept.Auto), "")
	dry := fl.Bool("dry-run", false, "")
	cleanup := fl.Bool("cleanup", false, "")
	bad, done, err := parseCommand(fl, args, "iptables", iptablesUsage+"\n"+iptablesFlags, stdout, stderr)
	if done || err != nil {
		return err
	}
	o.ProxyGID = o.ProxyUID
	gidSet := false
	fl.Visit(func(f *flag.Flag) { gidSet = gidSet || f.Name == "proxy-gid" })
	if gidSet {
		o.ProxyGID = *gid
	}
	switch s := strings.TrimSpace(*inbound); s {
	case "*":
		o.InboundAll = true
	default:
		o.InboundAll = false
		if o.InboundPorts, err = intercept.ParsePorts(s); err != nil {
			return bad("--inbound-ports: " + err.Error() + ` (or "*" for all)`)
		}
	}
	if o.ExcludeInboundPorts, err = intercept.ParsePorts(*exIn); err != nil {
		return bad("--exclude-inbound-ports: " + err.Error())
	}
	if o.ExcludeOutboundPorts, err = intercept.ParsePorts(*exOut); err != nil {
		return bad("--exclude-outbound-ports: " + err.Error())
	}
	if o.ExcludeOutboundCIDRs, err = intercept.ParseCIDRs(*exCIDR); err != nil {
		return bad("--exclude-outbound-cidrs: " + err.Error())
	}
	be, err := intercept.ParseBackend(*backend)
	if err != nil {
		return bad("--backend: " + err.Error())
	}
	if err := o.Validate(); err != nil {
		return bad(strings.TrimPrefix(err.Error(), "intercept: "))
	}
	if *cleanup && *dry {
		// Printing what cleanup would remove reads the rules installed now.
		s, err := intercept.Detect(ctx, intercept.SystemEnv(), be, v6.v)
		if err != nil {
			return fmt.Errorf("iptables: %w", err)
		}
		return wrapIptables(intercept.CleanupScript(ctx, stdout, intercept.Exec, s))
	}

	s, err := intercept.Detect(ctx, intercept.SystemEnv(), be, v6.v)
	if errors.Is(err, intercept.ErrNoIptables) && *dry {
		s, err = intercept.PlainSetup(v6.v), nil
	}
	if err != nil {
		return fmt.Errorf("iptables: %w", err)
	}
	switch {
	case *dry:
		return wrapIptables(intercept.Script(stdout, s, o))
	case *cleanup:
		if err := intercept.Cleanup(ctx, intercept.Exec, s); err != nil {
			return wrapIptables(err)
		}
		fmt.Fprintf(stderr, "baton iptables: removed Baton's rules and chains (%s, %s)\n", s.Backend, families(s))
		return nil
	default:
		if err := intercept.Apply(ctx, intercept.Exec, s, o); err != nil {
			return wrapIptables(err)
		}
		fmt.Fprintf(stderr, "baton iptables: installed (%s, %s): outbound TCP to :%d except UID %d; inbound %s\n",
			s.Backend, families(s), o.EgressPort, o.ProxyUID, inboundText(o))
		return nil
	}
}

func wrapIptables(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("iptables: %s", strings.TrimPrefix(err.Error(), "intercept: "))
}

func families(s intercept.Setup) string {
	var f []string
	for _, x := range s.Families {
		f = append(f, x.String())
	}
	return strings.Join(f, "+")
}

func inboundText(o intercept.Options) string {
	switch {
	case o.InboundAll:
		return fmt.Sprintf("TCP to every port to :%d", o.IngressPort)
	case len(o.InboundPorts) == 0:
		return "not intercepted"
	default:
		var p []string
		for _, x := range o.InboundPorts {
			p = append(p, strconv.Itoa(x))
		}
		return fmt.Sprintf("TCP to ports %s to :%d", strings.Join(p, ","), o.IngressPort)
	}
}
