package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/batonproxy/baton/trust/taint"
)

// scored is one held-out document with Detect's and Scan's scores.
type scored struct {
	d            *doc
	detect, scan float64
}

// evalOut names the files evaluate writes besides its output: the Markdown
// report, and every document's score.
type evalOut struct {
	report, scores string
}

// evaluate scores the held-out documents with m and prints (and writes to
// the report, when set) recall per family and false positives per shape at
// the default threshold, with the heuristic alone for comparison, and the
// curve.
func evaluate(docs []doc, m *taint.Model, files evalOut, stdout io.Writer) error {
	var out []scored
	var bytesIn int
	start := time.Now()
	for i := range docs {
		d := &docs[i]
		out = append(out, scored{d: d, detect: m.Detect([]byte(d.Text)).Score})
		bytesIn += len(d.Text)
	}
	elapsed := time.Since(start)
	for i := range out {
		out[i].scan = taint.Scan([]byte(out[i].d.Text)).Score
	}
	if files.scores != "" {
		if err := writeScores(files.scores, out); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	writeReport(&b, m, out, taint.DefaultInjectionScore)
	writeLong(&b, m, docs, taint.DefaultInjectionScore)
	fmt.Fprintf(&b, "\nScored %d documents (%.1f MB) in %v on %s/%s (%d CPUs): %.1f µs per KiB, one core, allocations included.\n",
		len(out), float64(bytesIn)/1e6, elapsed.Round(time.Millisecond), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(),
		float64(elapsed.Microseconds())/(float64(bytesIn)/1024))
	if _, err := stdout.Write(b.Bytes()); err != nil {
		return err
	}
	if files.report == "" {
		return nil
	}
	return writeDoc(files.report, b.String())
}

// writeScores writes one line a document: id, label, family, shape, source
// and score, tab-separated.
func writeScores(path string, out []scored) error {
	var b bytes.Buffer
	for _, s := range out {
		fmt.Fprintf(&b, "%s\t%d\t%s\t%s\t%s\t%.4f\n", s.d.ID, s.d.Label, s.d.Family, s.d.Shape, s.d.Source, s.detect)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// interval is the Wilson score interval of n successes in of trials at 95%
// confidence: where the share flagged would lie on other documents like
// these, so that a figure a few documents from a target reads as such.
func interval(n, of int) string {
	if of == 0 {
		return "–"
	}
	lo, hi := wilson(n, of)
	return fmt.Sprintf("%.1f–%.1f%%", 100*lo, 100*hi)
}

func wilson(n, of int) (lo, hi float64) {
	const z = 1.959964
	p, m := float64(n)/float64(of), float64(of)
	center := (p + z*z/(2*m)) / (1 + z*z/m)
	half := z * math.Sqrt(p*(1-p)/m+z*z/(4*m*m)) / (1 + z*z/m)
	return max(0, center-half), min(1, center+half)
}

func rate(n, of int) string {
	if of == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", 100*float64(n)/float64(of), n, of)
}

func writeReport(w io.Writer, m *taint.Model, out []scored, threshold float64) {
	families := []string{"framed", "role", "plain", "encoded", "lang"}
	shapes := []string{"email", "web", "table", "code", "tool", "about"}
	fmt.Fprintf(w, "Threshold %.2f (`taint.injection_score`).\n\n", threshold)
	fmt.Fprintf(w, "| injected, family | source | documents | flagged (model + structural) | 95%% interval | flagged (structural alone) |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, fam := range families {
		sources := map[string]bool{}
		for _, s := range out {
			if s.d.Label == 1 && s.d.Family == fam {
				sources[s.d.Source] = true
			}
		}
		for _, src := range append(sortedKeys(sources), "all") {
			n, hit, old := 0, 0, 0
			for _, s := range out {
				if s.d.Label != 1 || s.d.Family != fam || (src != "all" && s.d.Source != src) {
					continue
				}
				n++
				hit += btoi(s.detect >= threshold)
				old += btoi(s.scan >= threshold)
			}
			if src == "all" && len(sources) < 2 {
				continue
			}
			name := fam
			if src == "all" {
				name, src = "**"+fam+"**", "all"
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s |\n", name, src, n, rate(hit, n), interval(hit, n), rate(old, n))
		}
	}
	writeAttacks(w, out, threshold, "AgentDojo's attacks (its goals in its documents, and in BIPIA's held-out ones)", "attack", "")
	writeAttacks(w, out, threshold, "garak's latent-injection templates ({P} is the payload: a task, a notice, a link or a "+
		"statement; its family is the template's form, or the payload's when the template is bare or a task)", "template", "garak: ")
	fmt.Fprintf(w, "\n| benign, shape | sources | documents | flagged (model + structural) | 95%% interval | flagged (structural alone) |\n| --- | --- | --- | --- | --- | --- |\n")
	total, totalHit, totalOld := 0, 0, 0
	for _, shape := range shapes {
		sources := map[string]bool{}
		n, hit, old := 0, 0, 0
		for _, s := range out {
			if s.d.Label != 0 || s.d.Shape != shape {
				continue
			}
			sources[s.d.Source] = true
			n++
			hit += btoi(s.detect >= threshold)
			old += btoi(s.scan >= threshold)
		}
		total, totalHit, totalOld = total+n, totalHit+hit, totalOld+old
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s |\n", shape, strings.Join(sortedKeys(sources), ", "), n, rate(hit, n), interval(hit, n), rate(old, n))
	}
	fmt.Fprintf(w, "| **all benign** | | %d | %s | %s | %s |\n", total, rate(totalHit, total), interval(totalHit, total), rate(totalOld, total))
	fmt.Fprintf(w, "\nThe curve (model + structural): the share flagged at each threshold.\n\n")
	fmt.Fprintf(w, "| threshold | framed | role | plain | encoded | lang | benign (all) | benign (about injection) |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, t := range []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95} {
		fmt.Fprintf(w, "| %.2f |", t)
		for _, fam := range families {
			fmt.Fprintf(w, " %s |", share(out, t, func(d *doc) bool { return d.Label == 1 && d.Family == fam }))
		}
		fmt.Fprintf(w, " %s | %s |\n", share(out, t, func(d *doc) bool { return d.Label == 0 }),
			share(out, t, func(d *doc) bool { return d.Label == 0 && d.Shape == "about" }))
	}
	var fps []scored
	for _, s := range out {
		if s.d.Label == 0 && s.detect >= threshold {
			fps = append(fps, s)
		}
	}
	sort.Slice(fps, func(i, j int) bool { return fps[i].detect > fps[j].detect })
	if len(fps) > 0 {
		fmt.Fprintf(w, "\nBenign documents flagged (the first %d):\n\n", min(len(fps), 12))
		for _, s := range fps[:min(len(fps), 12)] {
			sig := m.Detect([]byte(s.d.Text))
			fmt.Fprintf(w, "- %s (%s, %.2f): %s\n", s.d.ID, s.d.Shape, s.detect, strings.Join(sig.Reasons, "; "))
		}
	}
}

// writeLong reports false positives on long pages: the benign documents of
// each shape joined, in corpus order, into pages of 64 KiB and more, since
// the best of many windows is more likely to reach the threshold.
func writeLong(w io.Writer, m *taint.Model, docs []doc, threshold float64) {
	const size = 64 << 10
	fmt.Fprintf(w, "\nLong pages: the benign documents of a shape joined into pages of at least 64 KiB.\n\n")
	fmt.Fprintf(w, "| shape | pages | flagged |\n| --- | --- | --- |\n")
	for _, shape := range []string{"email", "web", "table", "code", "tool", "about"} {
		var page strings.Builder
		n, hit := 0, 0
		for i := range docs {
			d := &docs[i]
			if d.Label != 0 || d.Shape != shape {
				continue
			}
			page.WriteString(d.Text)
			page.WriteString("\n\n")
			if page.Len() >= size {
				n++
				hit += btoi(m.Detect([]byte(page.String())).Score >= threshold)
				page.Reset()
			}
		}
		fmt.Fprintf(w, "| %s | %d | %s |\n", shape, n, rate(hit, n))
	}
}

func share(out []scored, t float64, keep func(*doc) bool) string {
	n, hit := 0, 0
	for _, s := range out {
		if keep(s.d) {
			n++
			hit += btoi(s.detect >= t)
		}
	}
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(hit)/float64(n))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// writeDoc replaces the part of the report between its markers with text,
// or writes text alone when the report has none.
func writeDoc(path, text string) error {
	const begin, end = "<!-- eval:begin -->\n", "<!-- eval:end -->"
	old, err := os.ReadFile(path)
	if err == nil {
		s := string(old)
		if i, j := strings.Index(s, begin), strings.Index(s, end); i >= 0 && j > i {
			return os.WriteFile(path, []byte(s[:i+len(begin)]+text+s[j:]), 0o644)
		}
	}
	return os.WriteFile(path, []byte(begin+text+end+"\n"), 0o644)
}

// writeAttacks writes the table of the attacks whose names start with
// prefix (none: those with no source prefix), by name without it.
func writeAttacks(w io.Writer, out []scored, threshold float64, title, column, prefix string) {
	attacks := map[string]bool{}
	for _, s := range out {
		a := s.d.Attack
		if a == "" || (prefix == "" && strings.Contains(a, ": ")) || !strings.HasPrefix(a, prefix) {
			continue
		}
		attacks[a] = true
	}
	if len(attacks) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n\n| %s | family | documents | flagged (model + structural) | flagged (structural alone) |\n| --- | --- | --- | --- | --- |\n", title, column)
	for _, a := range sortedKeys(attacks) {
		n, hit, old := 0, 0, 0
		families := map[string]bool{}
		for _, s := range out {
			if s.d.Attack == a {
				n++
				hit += btoi(s.detect >= threshold)
				old += btoi(s.scan >= threshold)
				families[s.d.Family] = true
			}
		}
		name := strings.ReplaceAll(strings.TrimPrefix(a, prefix), "|", "\\|")
		if prefix != "" {
			name = "`" + name + "`" // a template's text, markup and all
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s |\n", name, strings.Join(sortedKeys(families), ", "), n, rate(hit, n), rate(old, n))
	}
}
