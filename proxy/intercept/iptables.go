package intercept

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Rules are installed with iptables-restore --noflush rather than one
// iptables command per rule: a restore is one transaction per table, so
// Baton's chains are replaced whole (never seen half-built by a packet),
// and the nft backend commits it as one netlink batch, which is also much
// faster. The two jump rules are the exception: restore cannot say "add
// unless present", so they are checked with iptables -C and added with -A
// after the chains exist. Cleanup reads iptables-save and removes, again in
// one restore, every rule that jumps to Baton's chains and then the chains.

// Backend is an iptables implementation: nft (iptables-nft, the nf_tables
// kernel API) or legacy (iptables-legacy, the x_tables one). Rules of one
// backend are invisible to the other, so Baton must use the one the host
// (or pod) already uses.
type Backend string

// The backends; Auto detects as Istio does: the one that already has
// rules, else nft when installed, else legacy.
const (
	Auto   Backend = "auto"
	NFT    Backend = "nft"
	Legacy Backend = "legacy"
)

// ParseBackend checks a --backend value.
func ParseBackend(s string) (Backend, error) {
	switch b := Backend(s); b {
	case Auto, NFT, Legacy:
		return b, nil
	}
	return "", fmt.Errorf("backend %q: want auto, nft or legacy", s)
}

// Tools are the three commands of one backend and family.
type Tools struct {
	Iptables, Save, Restore string
}

// Setup is what Apply and Cleanup drive: a backend and the tools of each
// family to program (IPv4 always, IPv6 when enabled).
type Setup struct {
	Backend Backend
	Tools   map[Family]Tools
	// Families in the order they are programmed.
	Families []Family
}

// Runner runs one command with stdin and returns its stdout; a non-zero
// exit is an *ExitError carrying stderr.
type Runner func(ctx context.Context, name string, args []string, stdin string) (string, error)

// ExitError is a command that ran and failed.
type ExitError struct {
	Cmd    string
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = "no message"
	}
	hint := ""
	if strings.Contains(msg, "Permission denied") || strings.Contains(msg, "Operation not permitted") {
		hint = " (programming iptables needs root, or CAP_NET_ADMIN and CAP_NET_RAW)"
	}
	return fmt.Sprintf("%s: exit status %d: %s%s", e.Cmd, e.Code, msg, hint)
}

// Exec is the Runner that runs real commands.
func Exec(ctx context.Context, name string, args []string, stdin string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), &ExitError{Cmd: filepath.Base(name), Code: ee.ExitCode(), Stderr: errb.String()}
	}
	if err != nil {
		return out.String(), fmt.Errorf("intercept: running %s: %w", name, err)
	}
	return out.String(), nil
}

// LookPath finds a command in PATH, then in the sbin directories that a
// non-root PATH often lacks.
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// Env is what Detect looks at: commands, their output, and whether the
// kernel has IPv6.
type Env struct {
	Look func(name string) (string, error)
	Run  Runner
	// HasIPv6 reports whether the kernel has IPv6 enabled.
	HasIPv6 func() bool
}

// SystemEnv is the real machine.
func SystemEnv() Env {
	return Env{Look: LookPath, Run: Exec, HasIPv6: func() bool {
		_, err := os.Stat("/proc/net/if_inet6")
		return err == nil
	}}
}

// IPv6Mode says whether to program ip6tables: on, off, or when ip6tables
// of the chosen backend is installed and the kernel has IPv6.
type IPv6Mode int

// The IPv6 modes.
const (
	IPv6Auto IPv6Mode = iota
	IPv6On
	IPv6Off
)

// ErrNoIptables reports that no backend's tools are installed.
var ErrNoIptables = errors.New("no iptables found: install iptables (it provides iptables-nft and iptables-legacy), or use --dry-run")

// Detect picks the backend and the tools of each family.
func Detect(ctx context.Context, env Env, want Backend, v6 IPv6Mode) (Setup, error) {
	backends := []Backend{NFT, Legacy}
	if want != Auto {
		backends = []Backend{want}
	}
	type found struct {
		b     Backend
		tools map[Family]Tools
		rules int
	}
	var cands []found
	for _, b := range backends {
		t4, ok := toolsFor(ctx, env, b, IPv4)
		if !ok {
			continue
		}
		f := found{b: b, tools: map[Family]Tools{IPv4: t4}}
		if t6, ok := toolsFor(ctx, env, b, IPv6); ok {
			f.tools[IPv6] = t6
		}
		if want == Auto {
			for _, t := range f.tools {
				f.rules += countRules(ctx, env.Run, t.Save)
			}
		}
		cands = append(cands, f)
	}
	if len(cands) == 0 {
		if want != Auto {
			return Setup{}, fmt.Errorf("intercept: the %s backend's iptables is not installed (looked for iptables-%s, or iptables reporting %s)", want, want, want)
		}
		return Setup{}, fmt.Errorf("intercept: %w", ErrNoIptables)
	}
	// The first candidate is nft when installed; one with rules wins, the
	// one with more rules when both have some.
	best := cands[0]
	for _, c := range cands[1:] {
		if c.rules > best.rules {
			best = c
		}
	}
	s := Setup{Backend: best.b, Tools: best.tools, Families: []Family{IPv4}}
	_, have6 := best.tools[IPv6]
	switch v6 {
	case IPv6On:
		if !have6 {
			return Setup{}, fmt.Errorf("intercept: --ipv6 asked for, but ip6tables of the %s backend is not installed", best.b)
		}
		s.Families = append(s.Families, IPv6)
	case IPv6Auto:
		if have6 && env.HasIPv6() {
			s.Families = append(s.Families, IPv6)
		}
	}
	for _, f := range []Family{IPv4, IPv6} {
		if !slices.Contains(s.Families, f) {
			delete(s.Tools, f)
		}
	}
	return s, nil
}

// PlainSetup is a setup that names the generic commands (iptables,
// ip6tables), for printing rules on a machine that has none installed.
func PlainSetup(v6 IPv6Mode) Setup {
	s := Setup{Backend: Auto, Tools: map[Family]Tools{IPv4: plainTools(IPv4)}, Families: []Family{IPv4}}
	if v6 != IPv6Off {
		s.Tools[IPv6] = plainTools(IPv6)
		s.Families = append(s.Families, IPv6)
	}
	return s
}

func plainTools(f Family) Tools {
	base := "iptables"
	if f == IPv6 {
		base = "ip6tables"
	}
	return Tools{Iptables: base, Save: base + "-save", Restore: base + "-restore"}
}

// toolsFor finds a backend's commands for a family: the suffixed names
// (iptables-nft, iptables-legacy-save, ...), else the plain ones when
// `iptables --version` says they are that backend ("(nf_tables)" or
// "(legacy)"; iptables before 1.8 says neither and is legacy).
func toolsFor(ctx context.Context, env Env, b Backend, f Family) (Tools, bool) {
	plain := plainTools(f)
	suffixed := Tools{
		Iptables: plain.Iptables + "-" + string(b),
		Save:     plain.Iptables + "-" + string(b) + "-save",
		Restore:  plain.Iptables + "-" + string(b) + "-restore",
	}
	if t, ok := lookAll(env, suffixed); ok {
		return t, true
	}
	t, ok := lookAll(env, plain)
	if !ok {
		return Tools{}, false
	}
	out, err := env.Run(ctx, t.Iptables, []string{"--version"}, "")
	if err != nil {
		return Tools{}, false
	}
	if versionBackend(out) != b {
		return Tools{}, false
	}
	return t, true
}

func versionBackend(version string) Backend {
	switch {
	case strings.Contains(version, "nf_tables"):
		return NFT
	default:
		return Legacy
	}
}

func lookAll(env Env, t Tools) (Tools, bool) {
	var err error
	for _, p := range []*string{&t.Iptables, &t.Save, &t.Restore} {
		if *p, err = env.Look(*p); err != nil {
			return Tools{}, false
		}
	}
	return t, true
}

// countRules counts the rules a save command lists, in every table; a
// failing command counts none.
func countRules(ctx context.Context, run Runner, save string) int {
	out, err := run(ctx, save, nil, "")
	if err != nil {
		return 0
	}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "-A ") {
			n++
		}
	}
	return n
}

// Apply installs the rules of every family of s: Baton's chains replaced
// whole, then the jumps into them added unless present. Running it again
// leaves one set of rules.
func Apply(ctx context.Context, run Runner, s Setup, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	for _, f := range s.Families {
		t := s.Tools[f]
		p := PlanFor(o, f)
		if _, err := run(ctx, t.Restore, []string{"-w", "5", "--noflush"}, p.Restore); err != nil {
			return fmt.Errorf("intercept: installing %s chains: %w", f, err)
		}
		for _, j := range p.Jumps {
			present, err := hasRule(ctx, run, t, j)
			if err != nil {
				return fmt.Errorf("intercept: checking %s rule %q: %w", f, strings.Join(j, " "), err)
			}
			if present {
				continue
			}
			if _, err := run(ctx, t.Iptables, append([]string{"-w", "5", "-t", "nat"}, j...), ""); err != nil {
				return fmt.Errorf("intercept: adding %s rule %q: %w", f, strings.Join(j, " "), err)
			}
		}
	}
	return nil
}

// hasRule asks iptables -C whether an -A rule is present: exit 0 yes, 1 no.
func hasRule(ctx context.Context, run Runner, t Tools, rule []string) (bool, error) {
	args := append([]string{"-w", "5", "-t", "nat", "-C"}, rule[1:]...)
	_, err := run(ctx, t.Iptables, args, "")
	var ee *ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee) && ee.Code == 1:
		return false, nil
	default:
		return false, err
	}
}

// Cleanup removes, for every family of s, each rule that jumps to one of
// Baton's chains and then the chains. What is absent is skipped, so it may
// run any number of times.
func Cleanup(ctx context.Context, run Runner, s Setup) error {
	for _, f := range s.Families {
		t := s.Tools[f]
		in, err := cleanupInput(ctx, run, t)
		if err != nil {
			return fmt.Errorf("intercept: reading %s rules: %w", f, err)
		}
		if in == "" {
			continue
		}
		if _, err := run(ctx, t.Restore, []string{"-w", "5", "--noflush"}, in); err != nil {
			return fmt.Errorf("intercept: removing %s rules: %w", f, err)
		}
	}
	return nil
}

func cleanupInput(ctx context.Context, run Runner, t Tools) (string, error) {
	saved, err := run(ctx, t.Save, []string{"-t", "nat"}, "")
	if err != nil {
		return "", err
	}
	return CleanupRestore(saved), nil
}

// CleanupRestore turns iptables-save output for the nat table into the
// iptables-restore input that removes Baton's rules and chains from it: a
// -D for every rule elsewhere that jumps (or goes) to one of Baton's
// chains, then -F and -X of each of Baton's chains present. It returns ""
// when there is nothing of Baton's.
func CleanupRestore(saved string) string {
	var dels, present []string
	inNat := false
	sc := bufio.NewScanner(strings.NewReader(saved))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			inNat = line == "*nat"
		case !inNat:
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			if ours(name) {
				present = append(present, name)
			}
		case strings.HasPrefix(line, "-A "):
			fields := strings.Fields(line)
			if len(fields) < 2 || ours(fields[1]) {
				continue
			}
			for i := 2; i+1 < len(fields); i++ {
				if (fields[i] == "-j" || fields[i] == "-g" || fields[i] == "--jump" || fields[i] == "--goto") && ours(fields[i+1]) {
					dels = append(dels, "-D "+line[len("-A "):])
					break
				}
			}
		}
	}
	if len(dels) == 0 && len(present) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("*nat\n")
	for _, d := range dels {
		b.WriteString(d + "\n")
	}
	for _, c := range present {
		b.WriteString("-F " + c + "\n")
	}
	for _, c := range present {
		b.WriteString("-X " + c + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

func ours(chain string) bool { return slices.Contains(chains[:], chain) }

// Script writes, as a shell script, exactly what Apply would run.
func Script(w io.Writer, s Setup, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	fmt.Fprintf(w, "# Baton transparent interception (backend %s)\n", s.Backend)
	for _, f := range s.Families {
		t := s.Tools[f]
		p := PlanFor(o, f)
		fmt.Fprintf(w, "\n# %s: Baton's chains, replaced whole\n", f)
		fmt.Fprintf(w, "%s -w 5 --noflush <<'EOF'\n%sEOF\n", t.Restore, p.Restore)
		fmt.Fprintf(w, "# %s: the jumps into them, unless present\n", f)
		for _, j := range p.Jumps {
			spec := strings.Join(j[1:], " ")
			fmt.Fprintf(w, "%s -w 5 -t nat -C %s 2>/dev/null || %s -w 5 -t nat -A %s\n", t.Iptables, spec, t.Iptables, spec)
		}
	}
	return nil
}

// CleanupScript writes, as a shell script, exactly what Cleanup would run
// given the rules installed now.
func CleanupScript(ctx context.Context, w io.Writer, run Runner, s Setup) error {
	fmt.Fprintf(w, "# Baton transparent interception cleanup (backend %s)\n", s.Backend)
	for _, f := range s.Families {
		t := s.Tools[f]
		in, err := cleanupInput(ctx, run, t)
		if err != nil {
			return fmt.Errorf("intercept: reading %s rules: %w", f, err)
		}
		if in == "" {
			fmt.Fprintf(w, "\n# %s: nothing of Baton's installed\n", f)
			continue
		}
		fmt.Fprintf(w, "\n# %s\n%s -w 5 --noflush <<'EOF'\n%sEOF\n", f, t.Restore, in)
	}
	return nil
}
