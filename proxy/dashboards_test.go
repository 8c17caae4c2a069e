package proxy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The dashboard and alert rules shipped for Baton's chart.
const (
	dashboardFile = "../charts/baton/dashboards/baton.json"
	alertsFile    = "../charts/baton/dashboards/alerts.yaml"
)

// promqlGrouping are the keywords whose parenthesised list names labels,
// not series; promqlKeywords the other words that are not series names.
var (
	promqlGrouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
		"group_left": true, "group_right": true}
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"atan2": true, "inf": true, "nan": true,
		// aggregation operators, which a grouping clause may separate from
		// their "("
		"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
		"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
		"limitk": true, "limit_ratio": true}
)

// promqlMetrics returns the series names a PromQL expression selects: every
// identifier that is neither a function (followed by "("), an aggregation,
// a keyword, a label name in a grouping list, nor inside a label matcher
// block, a range or a string. Grafana variables ($x, ${x}) are skipped.
func promqlMetrics(expr string) []string {
	var out []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	// skip returns the index after the bracket closing the one at i,
	// stepping over strings.
	skip := func(i int, open, close byte) int {
		depth := 0
		for ; i < len(expr); i++ {
			switch c := expr[i]; {
			case c == '"' || c == '\'' || c == '`':
				i = skipString(expr, i) - 1
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{':
			i = skip(i, '{', '}')
		case c == '[':
			i = skip(i, '[', ']')
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				i = skip(i, '{', '}')
			}
			for i < len(expr) && isPart(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.') {
				i++
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && (expr[k] == ' ' || expr[k] == '\t' || expr[k] == '\n') {
				k++
			}
			lower := strings.ToLower(word)
			switch {
			case promqlGrouping[lower] && k < len(expr) && expr[k] == '(':
				j = skip(k, '(', ')')
			case promqlKeywords[lower]:
			case k < len(expr) && expr[k] == '(':
				// a function or an aggregation
			default:
				out = append(out, word)
			}
			i = j
		default:
			i++
		}
	}
	return out
}

// balanced reports whether the brackets of a PromQL expression pair up,
// strings aside.
func balanced(expr string) bool {
	var stack []byte
	pairs := map[byte]byte{')': '(', ']': '[', '}': '{'}
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; c {
		case '"', '\'', '`':
			i = skipString(expr, i) - 1
		case '(', '[', '{':
			stack = append(stack, c)
		case ')', ']', '}':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[c] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0
}

// skipString returns the index after the string literal opening at i.
func skipString(s string, i int) int {
	q := s[i]
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if q != '`' {
				i++
			}
		case q:
			return i + 1
		}
	}
	return i
}

func TestPromQLMetrics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want []string
	}{
		{`rate(foo_total[5m])`, []string{"foo_total"}},
		{`sum by (le, from) (rate(a_bucket{x="y", z=~"$v"}[$__rate_interval]))`, []string{"a_bucket"}},
		{`histogram_quantile(0.95, sum(rate(h_bucket[5m])) by (le))`, []string{"h_bucket"}},
		{`a / on(x) group_left(y) b`, []string{"a", "b"}},
		{`foo and bar unless baz offset 1h`, []string{"foo", "bar", "baz"}},
		{`max by (from, to) (g) == 2`, []string{"g"}},
		{`label_replace(x, "dst", "$1", "src", "(.*)") > bool 1e3`, []string{"x"}},
		{"sum(rate(a[5m]) # a comment naming b\n or rate(c{s=\"}\"}[1m]))", []string{"a", "c"}},
		{`${datasource} + vector(0)`, nil},
	}
	for _, tc := range tests {
		if got := promqlMetrics(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("promqlMetrics(%q) = %q, want %q", tc.expr, got, tc.want)
		}
		if !balanced(tc.expr) {
			t.Errorf("balanced(%q) = false", tc.expr)
		}
	}
	for _, bad := range []string{`sum(rate(a[5m])`, `rate(a[5m)]`, `a{x="y"`} {
		if balanced(bad) {
			t.Errorf("balanced(%q) = true", bad)
		}
	}
}

// dashboardExprs returns the PromQL of every panel target of the dashboard
// (rows' own panels included), the series its variables query, and its row
// titles.
func dashboardExprs(t *testing.T) (exprs, variables, rows []string) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Type    string  `json:"type"`
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var d struct {
		Title      string  `json:"title"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				rows = append(rows, p.Title)
			}
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := ""
		switch x := v.Query.(type) {
		case string:
			q = x
		case map[string]any:
			q, _ = x["query"].(string)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("dashboard variable query %q is not label_values(series, label)", q)
			continue
		}
		variables = append(variables, m[1])
	}
	return exprs, variables, rows
}

// alertRules returns the alert rules by name with their PromQL.
func alertRules(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert string            `yaml:"alert"`
				Expr  string            `yaml:"expr"`
				For   string            `yaml:"for"`
				Label map[string]string `yaml:"labels"`
				Notes map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("%s: group %q without a name or rules", alertsFile, g.Name)
		}
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Label["severity"] == "" || r.Notes["summary"] == "" {
				t.Errorf("%s: rule %q lacks alert, expr, a severity label or a summary", alertsFile, r.Alert)
			}
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// TestDashboardsNameExportedSeries checks that every series the dashboard
// and the alert rules query is one a Baton that served handoffs exports, as
// its /metrics renders it.
func TestDashboardsNameExportedSeries(t *testing.T) {
	t.Parallel()
	sc := metricsScenario(t)
	exported := map[string]bool{}
	for _, s := range []scrape{sc.sa, sc.sb, tlsScrape(t)} {
		for _, n := range s.names() {
			exported[n] = true
		}
	}
	exprs, variables, rows := dashboardExprs(t)
	for _, want := range []string{"Traffic & latency", "Errors & retries", "Breakers & dead letters", "Dedupe",
		"Contract", "Trust & untrusted", "Store", "Mutual TLS"} {
		if !slices.Contains(rows, want) {
			t.Errorf("dashboard has no row %q (rows: %q)", want, rows)
		}
	}
	rules := alertRules(t)
	for _, want := range []string{"BatonRetryRateHigh", "BatonContractViolation", "BatonHandoffFailureRateHigh",
		"BatonCompletenessLow", "BatonCircuitBreakerOpen", "BatonTLSCertificateExpiring"} {
		if rules[want] == "" {
			t.Errorf("alerts.yaml has no rule %s", want)
		}
	}
	type use struct{ where, expr string }
	var uses []use
	for _, e := range exprs {
		uses = append(uses, use{"dashboard", e})
	}
	for name, e := range rules {
		uses = append(uses, use{"alert " + name, e})
	}
	if len(exprs) < 30 {
		t.Errorf("only %d dashboard queries", len(exprs))
	}
	seen := map[string]bool{}
	for _, u := range uses {
		if !balanced(u.expr) {
			t.Errorf("%s: unbalanced brackets in %q", u.where, u.expr)
		}
		names := promqlMetrics(u.expr)
		if len(names) == 0 {
			t.Errorf("%s: no series in %q", u.where, u.expr)
		}
		for _, n := range names {
			seen[n] = true
			if !exported[n] {
				t.Errorf("%s queries %s, which Baton does not export; in %q", u.where, n, u.expr)
			}
		}
	}
	for _, n := range variables {
		if !exported[n] {
			t.Errorf("dashboard variable queries %s, which Baton does not export", n)
		}
	}
	// Every Baton series family has a place on the dashboard.
	for n := range exported {
		if !strings.HasPrefix(n, "baton_") && !strings.HasPrefix(n, "http_") {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		covered := false
		for s := range seen {
			covered = covered || strings.HasPrefix(s, base)
		}
		if !covered {
			t.Errorf("the dashboard shows nothing of %s", n)
		}
	}
}

// TestMetricsDocumented checks that docs/metrics.md describes every Baton
// series a Baton that served handoffs exports.
func TestMetricsDocumented(t *testing.T) {
	t.Parallel()
	sc := metricsScenario(t)
	var names []string
	for _, s := range []scrape{sc.sa, sc.sb, tlsScrape(t)} {
		for name := range s {
			if strings.HasPrefix(name, "baton_") || strings.HasPrefix(name, "http_") {
				names = append(names, name)
			}
		}
	}
	documented(t, names...)
}

// documented fails t for each series name docs/metrics.md does not
// describe.
func documented(t *testing.T, names ...string) {
	t.Helper()
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/metrics.md does not describe `%s`", name)
		}
	}
}
