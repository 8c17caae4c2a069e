package intercept_test

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the output")

// backends lists the backends to test: both, which the iptables package
// installs together.
var backends = []string{"nft", "legacy"}

// tools returns the save command of a backend and family.
func saveCmd(backend, family string) string {
	if family == "6" {
		return "ip6tables-" + backend + "-save"
	}
	return "iptables-" + backend + "-save"
}

func TestIptablesApplyTwiceAndCleanup(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be, func(t *testing.T) {
			t.Parallel()
			need(t, "iptables-"+be, "ip6tables-"+be, saveCmd(be, "4"), saveCmd(be, "6"))
			ns := newNetns(t, "rules")
			// Rules that are not Baton's, which nothing of Baton's may touch.
			for _, cmd := range []string{"iptables-" + be, "ip6tables-" + be} {
				ns.sh(t, cmd, "-t", "nat", "-N", "KEEP")
				ns.sh(t, cmd, "-t", "nat", "-A", "OUTPUT", "-p", "udp", "--dport", "53", "-j", "KEEP")
				ns.sh(t, cmd, "-t", "nat", "-A", "KEEP", "-j", "RETURN")
			}
			before := map[string]string{"4": ns.saved(t, saveCmd(be, "4")), "6": ns.saved(t, saveCmd(be, "6"))}

			if out, err := ns.baton("iptables", "--backend", be, "--exclude-outbound-cidrs", "192.0.2.0/24,2001:db8:ffff::/48"); err != nil {
				t.Fatalf("baton iptables: %v\n%s", err, out)
			}
			once := map[string]string{"4": ns.saved(t, saveCmd(be, "4")), "6": ns.saved(t, saveCmd(be, "6"))}
			for fam, s := range once {
				for _, want := range []string{
					"-A OUTPUT -p tcp -j BATON_OUTPUT", "-A PREROUTING -p tcp -j BATON_INBOUND",
					"-A BATON_OUTPUT -m owner --uid-owner 1337 -j RETURN",
					"-A BATON_REDIRECT -p tcp -j REDIRECT --to-ports 15001",
					"-A BATON_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006",
					"-A KEEP -j RETURN",
				} {
					if !strings.Contains(s, want+"\n") {
						t.Errorf("IPv%s after apply lacks %q:\n%s", fam, want, s)
					}
				}
			}
			if !strings.Contains(once["4"], "-d 192.0.2.0/24 -j RETURN") || strings.Contains(once["4"], "2001:db8:ffff") ||
				!strings.Contains(once["6"], "-d 2001:db8:ffff::/48 -j RETURN") || strings.Contains(once["6"], "192.0.2.0") {
				t.Errorf("excluded CIDRs not sorted by family:\n%s\n%s", once["4"], once["6"])
			}
			// The other backend saw nothing.
			other := map[string]string{"nft": "legacy", "legacy": "nft"}[be]
			if p, err := exec.LookPath(saveCmd(other, "4")); err == nil {
				if s := ns.saved(t, p); strings.Contains(s, "BATON_") {
					t.Errorf("rules landed in the %s backend too:\n%s", other, s)
				}
			}

			if out, err := ns.baton("iptables", "--backend", be, "--exclude-outbound-cidrs", "192.0.2.0/24,2001:db8:ffff::/48"); err != nil {
				t.Fatalf("baton iptables, again: %v\n%s", err, out)
			}
			for fam := range once {
				if twice := ns.saved(t, saveCmd(be, fam)); twice != once[fam] {
					t.Errorf("IPv%s rules after a second apply differ:\n%s\nafter one:\n%s", fam, twice, once[fam])
				}
			}

			for range 2 { // cleanup is idempotent too
				if out, err := ns.baton("iptables", "--cleanup", "--backend", be); err != nil {
					t.Fatalf("baton iptables --cleanup: %v\n%s", err, out)
				}
				for fam := range before {
					if after := ns.saved(t, saveCmd(be, fam)); after != before[fam] {
						t.Errorf("IPv%s rules after cleanup:\n%s\nbefore apply:\n%s", fam, after, before[fam])
					}
				}
			}
		})
	}
}

// With --backend auto the rules go to the backend that already has rules.
func TestIptablesAutoPrefersTheBackendInUse(t *testing.T) {
	t.Parallel()
	need(t, "iptables-nft", "iptables-legacy", "iptables-legacy-save", "iptables-nft-save")
	for _, be := range backends {
		t.Run(be, func(t *testing.T) {
			t.Parallel()
			ns := newNetns(t, "auto")
			ns.sh(t, "iptables-"+be, "-t", "nat", "-A", "OUTPUT", "-p", "udp", "-j", "RETURN")
			if out, err := ns.baton("iptables"); err != nil {
				t.Fatalf("baton iptables: %v\n%s", err, out)
			}
			other := map[string]string{"nft": "legacy", "legacy": "nft"}[be]
			if !strings.Contains(ns.saved(t, saveCmd(be, "4")), "BATON_OUTPUT") {
				t.Errorf("no rules in the %s backend, which had rules", be)
			}
			if strings.Contains(ns.saved(t, saveCmd(other, "4")), "BATON_") {
				t.Errorf("rules in the %s backend, which had none", other)
			}
			if out, err := ns.baton("iptables", "--cleanup"); err != nil {
				t.Fatalf("cleanup: %v\n%s", err, out)
			}
			if strings.Contains(ns.saved(t, saveCmd(be, "4")), "BATON_") {
				t.Errorf("cleanup with auto left rules in %s", be)
			}
		})
	}
}

func TestIptablesDryRun(t *testing.T) {
	t.Parallel()
	need(t, "iptables-nft", "ip6tables-nft", "iptables-nft-save", "ip6tables-nft-save")
	ns := newNetns(t, "dry")
	before := ns.saved(t, "iptables-nft-save") + ns.saved(t, "ip6tables-nft-save")
	out, err := ns.baton("iptables", "--dry-run", "--backend", "nft", "--ipv6",
		"--proxy-uid", "2000", "--inbound-ports", "8080,9090", "--exclude-inbound-ports", "9090",
		"--exclude-outbound-ports", "5432", "--exclude-outbound-cidrs", "10.96.0.0/12,fd00::/8")
	if err != nil {
		t.Fatalf("--dry-run: %v\n%s", err, out)
	}
	if after := ns.saved(t, "iptables-nft-save") + ns.saved(t, "ip6tables-nft-save"); after != before {
		t.Errorf("--dry-run changed the rules:\n%s\nbefore:\n%s", after, before)
	}
	// Commands appear by their full path; the golden file names them.
	for _, cmd := range []string{"iptables-nft-restore", "iptables-nft", "ip6tables-nft-restore", "ip6tables-nft"} {
		if p, err := exec.LookPath(cmd); err == nil {
			out = strings.ReplaceAll(out, p+" ", cmd+" ")
		}
	}
	golden(t, "dryrun.golden", out)

	// What it prints is what it does: run as a shell script, it installs
	// the rules `baton iptables` installs with the same flags.
	script := filepath.Join(t.TempDir(), "rules.sh")
	if err := os.WriteFile(script, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	ns.sh(t, "sh", "-e", script)
	byScript := ns.saved(t, "iptables-nft-save") + ns.saved(t, "ip6tables-nft-save")
	if out, err := ns.baton("iptables", "--cleanup", "--backend", "nft"); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out)
	}
	if out, err := ns.baton("iptables", "--backend", "nft", "--ipv6",
		"--proxy-uid", "2000", "--inbound-ports", "8080,9090", "--exclude-inbound-ports", "9090",
		"--exclude-outbound-ports", "5432", "--exclude-outbound-cidrs", "10.96.0.0/12,fd00::/8"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if byBaton := ns.saved(t, "iptables-nft-save") + ns.saved(t, "ip6tables-nft-save"); byBaton != byScript {
		t.Errorf("the printed script installs:\n%s\nbaton iptables installs:\n%s", byScript, byBaton)
	}

	// Cleanup's dry run prints the removal of what is there, and removes
	// nothing.
	installed := ns.saved(t, "iptables-nft-save")
	out, err = ns.baton("iptables", "--cleanup", "--dry-run", "--backend", "nft")
	if err != nil || !strings.Contains(out, "-D OUTPUT -p tcp -j BATON_OUTPUT\n") || !strings.Contains(out, "-X BATON_REDIRECT\n") {
		t.Errorf("--cleanup --dry-run: %v\n%s", err, out)
	}
	if ns.saved(t, "iptables-nft-save") != installed {
		t.Error("--cleanup --dry-run changed the rules")
	}
}

func TestIptablesErrors(t *testing.T) {
	t.Parallel()
	need(t)
	ns := newNetns(t, "errors")
	for _, tt := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"--backend", "xtables"}, 2, "want auto, nft or legacy"},
		{[]string{"--inbound-ports", "http"}, 2, "--inbound-ports"},
		{[]string{"--exclude-outbound-cidrs", "10.0.0.0/40"}, 2, "--exclude-outbound-cidrs"},
		{[]string{"--egress-port", "15006"}, 2, "egress and ingress ports must differ"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
	} {
		out, err := run("ip", append([]string{"netns", "exec", ns.name, bin, "iptables"}, tt.args...)...)
		if !isExit(err, tt.code) || !strings.Contains(err.Error(), tt.say) {
			t.Errorf("baton iptables %v: %v (%s); want exit %d saying %q", tt.args, err, out, tt.code, tt.say)
		}
	}
	// Not root: iptables refuses, Baton says so and exits 1.
	cmd := exec.Command("ip", "netns", "exec", ns.name, "setpriv", "--reuid", "1337", "--regid", "1337", "--clear-groups", bin, "iptables")
	if _, err := exec.LookPath("setpriv"); err != nil {
		return
	}
	out, err := cmd.CombinedOutput()
	if !isExit(err, 1) || !strings.Contains(string(out), "baton: iptables:") || !strings.Contains(string(out), "root") {
		t.Errorf("baton iptables as UID 1337: %v\n%s", err, out)
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update if the change is right):\n%s", path, got)
	}
}
