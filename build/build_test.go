package build

import (
	"bufio"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// buildLine is the build stage's command: the script every build runs;
// fullLine its full build, for the injector's image.
var (
	buildLine = []string{"sh", "build/static.sh", "/out/baton"}
	fullLine  = []string{"env", "TAGS=", "sh", "build/static.sh", "/out/baton-full"}
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
	line int
}

// execForm returns the JSON array of an exec-form instruction, and false
// for the shell form.
func (in instruction) execForm() ([]string, bool) {
	var a []string
	if !strings.HasPrefix(in.args, "[") || json.Unmarshal([]byte(in.args), &a) != nil {
		return nil, false
	}
	return a, true
}

// stage is a FROM and what follows it.
type stage struct {
	from, name string
	body       []instruction
}

func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	var cur strings.Builder
	start := 0
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			return
		}
		if len(stages) == 0 {
			t.Fatalf("line %d: %s before FROM", in.line, in.cmd)
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if t := strings.TrimSpace(line); cur.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	return stages
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	stages := parseDockerfile(t, filepath.Join("..", "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a final one", len(stages))
	}

	// The binary is built by the shared script, in exec form.
	build := stages[0]
	if build.name != "build" || !strings.HasPrefix(build.from, "golang:1.26") {
		t.Errorf("first stage FROM %s AS %s, want golang:1.26 AS build", build.from, build.name)
	}
	var built bool
	for _, in := range build.body {
		if in.cmd != "RUN" {
			continue
		}
		if a, ok := in.execForm(); ok && slices.Equal(a, buildLine) {
			built = true
		} else if ok && slices.Equal(a, fullLine) {
			continue
		} else if strings.Contains(in.args, "go build") || strings.Contains(in.args, "static.sh") {
			t.Errorf("line %d: the build must be exactly RUN %q, got RUN %s", in.line, buildLine, in.args)
		}
	}
	if !built {
		t.Errorf("the build stage has no RUN %q", buildLine)
	}

	// The final stage: distroless, nothing run in it, UID 1337, /baton.
	final := stages[len(stages)-1]
	if final.from != "gcr.io/distroless/static-debian12:nonroot" && final.from != "scratch" {
		t.Errorf("final stage FROM %s, want distroless static or scratch", final.from)
	}
	var user, entrypoint string
	var copied bool
	for _, in := range final.body {
		switch in.cmd {
		case "RUN":
			if _, ok := in.execForm(); !ok {
				t.Errorf("line %d: shell-form RUN in the final stage (it has no shell): %s", in.line, in.args)
			}
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			copied = copied || in.args == "--from=build /out/baton /baton"
		}
	}
	if user != "1337" && user != "1337:1337" {
		t.Errorf("final USER %q, want 1337 (the UID baton iptables exempts)", user)
	}
	if a, _ := (instruction{args: entrypoint}).execForm(); !slices.Equal(a, []string{"/baton"}) {
		t.Errorf("final ENTRYPOINT %s, want [\"/baton\"] in exec form", entrypoint)
	}
	if !copied {
		t.Error("the final stage does not COPY --from=build /out/baton /baton")
	}

	// The init image carries the same binary; the injector's, the full
	// build.
	var init, injector bool
	for _, s := range stages[1 : len(stages)-1] {
		switch s.name {
		case "init":
			init = true
		case "injector":
			for _, in := range s.body {
				injector = injector || (in.cmd == "COPY" && in.args == "--from=build /out/baton-full /baton")
			}
		}
	}
	if !init {
		t.Error("no init stage (Baton with iptables, for transparent mode)")
	}
	if !injector {
		t.Error("no injector stage copying the full build (/out/baton-full) to /baton")
	}
}

// TestMakefileRunsTheScript keeps `make build` and `make
// image-build-check` on the script the image builds with.
func TestMakefileRunsTheScript(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	recipes := map[string][]string{}
	target := ""
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "\t") && target != "":
			recipes[target] = append(recipes[target], strings.TrimSpace(line))
		case strings.Contains(line, ":") && !strings.HasPrefix(line, "#") && !strings.Contains(line, "="):
			target = strings.TrimSpace(line[:strings.Index(line, ":")])
		default:
			target = ""
		}
	}
	for _, name := range []string{"build", "image-build-check"} {
		var runs bool
		for _, r := range recipes[name] {
			if strings.Contains(r, "sh build/static.sh ") {
				runs = true
			}
			if strings.Contains(r, "go build") || strings.Contains(r, "$(GO) build") {
				t.Errorf("make %s builds by itself (%q) instead of through build/static.sh", name, r)
			}
		}
		if !runs {
			t.Errorf("make %s does not run build/static.sh (recipe %q)", name, recipes[name])
		}
	}
}

// binary returns the binary to check: BATON_BINARY (what make
// image-build-check just built), else one built here by the script.
func binary(t *testing.T) (path, version string) {
	t.Helper()
	if p := os.Getenv("BATON_BINARY"); p != "" {
		return p, os.Getenv("BATON_VERSION")
	}
	version = "v0.0.0-buildtest"
	path = filepath.Join(t.TempDir(), "baton")
	cmd := exec.Command("sh", "static.sh", path)
	cmd.Env = append(os.Environ(), "VERSION="+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build/static.sh: %v\n%s", err, out)
	}
	return path, version
}

func TestStaticBinary(t *testing.T) {
	t.Parallel()
	path, version := binary(t)

	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter: it is dynamically linked")
		}
		if p.Type == elf.PT_DYNAMIC {
			t.Error("the binary has a dynamic section")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("shared libraries %q (%v), want none", libs, err)
	}
	if _, err := f.Symbols(); !errors.Is(err, elf.ErrNoSymbols) {
		t.Errorf("symbol table present (%v): not built with -s", err)
	}

	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("CGO_ENABLED=%q -trimpath=%q, want 0 and true", settings["CGO_ENABLED"], settings["-trimpath"])
	}
	// With -trimpath the build info leaves -ldflags out; what they did
	// shows in the binary: -s no symbol table (above), -w no DWARF, -X
	// the version (below).
	if ld, ok := settings["-ldflags"]; ok && !strings.HasPrefix(ld, "-s -w -X main.version=") {
		t.Errorf("-ldflags %q, want -s -w -X main.version=...", ld)
	}
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			t.Errorf("DWARF section %s: not built with -w", s.Name)
		}
	}
	// The sidecar's build is what runs beside every agent: it is held to
	// 35 MB (the full build, with the demo, chaos and the injector, is
	// not).
	if settings["-tags"] == "sidecar" {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		const most = 35 << 20
		if st.Size() > most {
			t.Errorf("the sidecar's binary is %.1f MiB, over %d MiB", float64(st.Size())/(1<<20), most>>20)
		}
	} else if os.Getenv("TAGS") == "" {
		t.Errorf("build/static.sh built with -tags %q, want sidecar by default", settings["-tags"])
	}
	if info.Path != "github.com/batonproxy/baton/cmd/baton" {
		t.Errorf("main package %s", info.Path)
	}

	if version != "" {
		out, err := exec.Command(path, "version").Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != "baton "+version {
			t.Errorf("version prints %q, want %q", got, "baton "+version)
		}
	}
}
