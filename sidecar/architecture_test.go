package sidecar

import (
	"bufio"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/batonproxy/baton/"

// TestArchitecture holds the packages to docs/architecture.md: the request
// path (proxy) and the packages below it import no capability; no
// capability imports proxy or sidecar; a capability imports another only
// where the document says why.
func TestArchitecture(t *testing.T) {
	caps, allowed := readArchitecture(t)
	if len(caps) == 0 {
		t.Fatal("docs/architecture.md names no capability")
	}
	below := []string{"proxy", "proxy/intercept", "middleware", "handoff", "handoff/record", "state", "trust", "trust/mtls",
		"trust/taint", "config", "problem"}
	for _, pkg := range below {
		for _, imp := range imports(t, pkg) {
			if caps[imp] {
				t.Errorf("%s imports the capability %s: the request path and what it stands on never do", pkg, imp)
			}
			if imp == "sidecar" {
				t.Errorf("%s imports sidecar", pkg)
			}
		}
	}
	for c := range caps {
		for _, imp := range imports(t, c) {
			switch {
			case imp == "proxy" || strings.HasPrefix(imp, "proxy/") || imp == "sidecar":
				t.Errorf("capability %s imports %s: capabilities reach the request path through proxy.Parts only", c, imp)
			case caps[imp] && !allowed[c+" "+imp]:
				t.Errorf("capability %s imports capability %s, and docs/architecture.md does not say why", c, imp)
			}
		}
	}
}

// readArchitecture reads the capabilities (the first column of the table of
// where they plug in) and the capability imports the document allows.
func readArchitecture(t *testing.T) (caps, allowed map[string]bool) {
	f, err := os.Open("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	caps, allowed = map[string]bool{}, map[string]bool{}
	table := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| capability | plugs in at |"):
			table = "plugs"
			continue
		case strings.HasPrefix(line, "| package | uses | why |"):
			table = "uses"
			continue
		case !strings.HasPrefix(line, "|"):
			table = ""
			continue
		case strings.HasPrefix(line, "| ---"):
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		name := func(i int) string { return strings.Trim(strings.TrimSpace(cells[i]), "`") }
		switch table {
		case "plugs":
			caps[name(1)] = true
		case "uses":
			allowed[name(1)+" "+name(2)] = true
		}
	}
	return caps, allowed
}

// imports lists the packages of this module that pkg's non-test files
// import, relative to the module.
func imports(t *testing.T, pkg string) []string {
	t.Helper()
	dir := filepath.Join("..", pkg)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%s: %v", pkg, err)
	}
	seen := map[string]bool{}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if rel, ok := strings.CutPrefix(p, module); ok && !seen[rel] {
				seen[rel] = true
				out = append(out, rel)
			}
		}
	}
	return out
}
