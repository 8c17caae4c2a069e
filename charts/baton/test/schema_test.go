package test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The fields of cert-manager's and the Prometheus Operator's kinds that the
// chart renders, after their published schemas (cert-manager.io/v1,
// monitoring.coreos.com/v1). Decoded strictly, they catch a key the CRD
// would not know; validate checks the values the CRD would refuse.

// promDuration is a Prometheus duration: 5m, 1h30m, 2d, 1w.
var promDuration = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)

type certificate struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		SecretName  string   `json:"secretName"`
		CommonName  string   `json:"commonName"`
		DNSNames    []string `json:"dnsNames"`
		URIs        []string `json:"uris"`
		Duration    string   `json:"duration"`
		RenewBefore string   `json:"renewBefore"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
		Usages    []string  `json:"usages"`
		IssuerRef issuerRef `json:"issuerRef"`
	} `json:"spec"`
}

type issuerRef struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Group string `json:"group"`
}

func (c *certificate) validate() error {
	s := c.Spec
	if s.SecretName == "" || s.IssuerRef.Name == "" {
		return fmt.Errorf("certificate %s: secretName and issuerRef.name are required", c.Metadata.Name)
	}
	if s.CommonName == "" && len(s.DNSNames) == 0 && len(s.URIs) == 0 {
		return fmt.Errorf("certificate %s: one of commonName, dnsNames or uris is required", c.Metadata.Name)
	}
	for _, u := range s.URIs {
		if p, err := url.Parse(u); err != nil || p.Scheme == "" {
			return fmt.Errorf("certificate %s: uri %q is not a URI", c.Metadata.Name, u)
		}
	}
	d, err := time.ParseDuration(s.Duration)
	if err != nil {
		return fmt.Errorf("certificate duration: %w", err)
	}
	r, err := time.ParseDuration(s.RenewBefore)
	if err != nil {
		return fmt.Errorf("certificate renewBefore: %w", err)
	}
	if r >= d {
		return fmt.Errorf("certificate renewBefore %s is not shorter than duration %s", r, d)
	}
	if !slices.Contains([]string{"RSA", "ECDSA", "Ed25519"}, s.PrivateKey.Algorithm) ||
		!slices.Contains([]string{"", "Never", "Always"}, s.PrivateKey.RotationPolicy) {
		return fmt.Errorf("certificate privateKey %+v", s.PrivateKey)
	}
	for _, u := range s.Usages {
		if !slices.Contains([]string{"server auth", "client auth", "digital signature", "key encipherment"}, u) {
			return fmt.Errorf("certificate usage %q", u)
		}
	}
	if !slices.Contains([]string{"", "Issuer", "ClusterIssuer"}, s.IssuerRef.Kind) {
		return fmt.Errorf("issuerRef.kind %q", s.IssuerRef.Kind)
	}
	return nil
}

type issuer struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		SelfSigned *struct{} `json:"selfSigned"`
	} `json:"spec"`
}

type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

type ruleGroup struct {
	Name                    string            `json:"name"`
	Interval                string            `json:"interval,omitempty"`
	Limit                   *int              `json:"limit,omitempty"`
	PartialResponseStrategy string            `json:"partial_response_strategy,omitempty"`
	QueryOffset             string            `json:"query_offset,omitempty"`
	Labels                  map[string]string `json:"labels,omitempty"`
	Rules                   []rule            `json:"rules"`
}

type rule struct {
	Record        string            `json:"record,omitempty"`
	Alert         string            `json:"alert,omitempty"`
	Expr          json.RawMessage   `json:"expr"`
	For           string            `json:"for,omitempty"`
	KeepFiringFor string            `json:"keep_firing_for,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

func (p *prometheusRule) validate() error {
	if len(p.Spec.Groups) == 0 {
		return fmt.Errorf("PrometheusRule %s has no groups", p.Metadata.Name)
	}
	seen := map[string]bool{}
	for _, g := range p.Spec.Groups {
		if g.Name == "" || seen[g.Name] {
			return fmt.Errorf("group name %q empty or repeated", g.Name)
		}
		seen[g.Name] = true
		if len(g.Rules) == 0 {
			return fmt.Errorf("group %s has no rules", g.Name)
		}
		for _, r := range g.Rules {
			if (r.Alert == "") == (r.Record == "") {
				return fmt.Errorf("group %s: a rule needs exactly one of alert and record: %+v", g.Name, r)
			}
			var expr any
			if err := json.Unmarshal(r.Expr, &expr); err != nil || expr == nil || expr == "" {
				return fmt.Errorf("group %s rule %s%s: no expr", g.Name, r.Alert, r.Record)
			}
			for _, d := range []string{r.For, r.KeepFiringFor} {
				if d == "" {
					continue
				}
				if _, err := time.ParseDuration(d); err != nil && !promDuration.MatchString(d) {
					return fmt.Errorf("group %s rule %s: duration %q", g.Name, r.Alert, d)
				}
			}
		}
	}
	return nil
}
