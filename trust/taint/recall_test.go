package taint

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// fetchedPage is a web page as an agent gets it after its HTML is stripped.
const fetchedPage = `Skip to content
Home › Local news › Infrastructure

Harbour district to get a new tidal barrier by 2028

By a staff reporter · 6 min read

The city council approved on Tuesday a plan to build a tidal barrier across the mouth of the old harbour, ending a decade of debate about how to protect the low-lying district from winter storm surges. The barrier will consist of six steel gates that rest on the seabed and rise only when the forecast shows a surge higher than two metres. Engineers estimate that the gates will close around four times a year, although that number is expected to grow as sea levels rise.

Construction is due to start next spring and will take roughly three years. The council has set aside 410 million euros for the project, most of it from a regional climate fund; the remainder will come from a small levy on commercial properties inside the flood zone. Residents who spoke at Tuesday's meeting welcomed the decision but asked for guarantees that the fishing fleet would still be able to reach the inner harbour during construction.

Critics argue that the barrier treats the symptom rather than the cause. A coalition of environmental groups wants the council to restore the salt marshes north of the city, which once absorbed much of the surge before they were drained for farmland in the nineteenth century.

Related: Council budget 2025 · Ferry timetable changes · Letters to the editor
© 2024 The Harbour Gazette. All rights reserved.`

// copiedPassage is the two sentences of fetchedPage that the edits below
// start from.
const copiedPassage = `The barrier will consist of six steel gates that rest on the seabed and rise only when the forecast shows a surge higher than two metres. Engineers estimate that the gates will close around four times a year, although that number is expected to grow as sea levels rise.`

// agentProse is what an agent writes around what it copies.
const agentProse = `I looked into the flood protection question you raised yesterday and collected the relevant facts for the planning memo. Here is the part of the coverage that matters most for our timeline: `

const agentProseAfter = ` Based on this, I recommend that we schedule the warehouse move after the construction period and ask the logistics team to review the access routes to the quay before the end of the month.`

func TestRecallEditedCopies(t *testing.T) {
	t.Parallel()
	if !strings.Contains(fetchedPage, copiedPassage) {
		t.Fatal("copiedPassage is not in fetchedPage")
	}
	h := NewHasher(Default)
	untrusted := Set{}
	untrusted.Add(h.Sum(nil, []byte(fetchedPage))...)

	substituted := strings.NewReplacer("six", "eight", "seabed", "sea floor", "estimate", "believe").Replace(copiedPassage)
	sentencesOf := sentences(copiedPassage)
	tests := []struct{ name, field string }{
		{"verbatim", copiedPassage},
		{"upper case", strings.ToUpper(copiedPassage)},
		{"lower case", strings.ToLower(copiedPassage)},
		{"whitespace", strings.Join(strings.Fields(copiedPassage), "\n\t  ")},
		{"punctuation", strings.NewReplacer(".", "!", ",", "", " that ", " — that ", "seabed", "\u201cseabed\u201d").Replace(copiedPassage)},
		{"sentences reordered", sentencesOf[1] + " " + sentencesOf[0]},
		{"embedded in other prose", agentProse + copiedPassage + agentProseAfter},
		{"three words substituted", substituted},
		{"substituted and embedded", agentProse + substituted + agentProseAfter},
		{"everything at once", agentProse + strings.ToUpper(strings.NewReplacer(",", " -", ".", ";").Replace(
			sentencesOf[1]+"  "+strings.Replace(sentencesOf[0], "steel", "iron", 1))) + agentProseAfter},
		{"fullwidth and zero-width", "\uff34\uff48\uff45 bar\u200brier " + strings.TrimPrefix(copiedPassage, "The barrier ")},
		{"datamarked", string(Datamark(nil, []byte(copiedPassage)))},
		{"quoted in markdown", "> " + strings.ReplaceAll(copiedPassage, ". ", ".\n> ")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := NewHasher(Default)
			fps := h.Sum(nil, []byte(tc.field))
			m := untrusted.Matches(fps)
			t.Logf("matched %d of %d", m, len(fps))
			if !DefaultThreshold.Tainted(m, len(fps)) {
				t.Errorf("copy not caught: matched %d of %d fingerprints", m, len(fps))
			}
		})
	}
}

func TestRecallThroughJSONHandoff(t *testing.T) {
	t.Parallel()
	h := NewHasher(Default)
	untrusted := Set{}
	untrusted.Add(h.Sum(nil, []byte(fetchedPage))...)
	body, err := json.Marshal(map[string]any{
		"task": "flood memo",
		"artifacts": []any{
			map[string]any{"name": "summary", "text": agentProse + copiedPassage + agentProseAfter},
			map[string]any{"name": "notes", "text": agentProseAfter},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var tainted []string
	var fps []uint64
	err = Spans(body, MinText, func(ptr string, text []byte) {
		fps = h.Sum(fps[:0], text)
		if DefaultThreshold.Tainted(untrusted.Matches(fps), len(fps)) {
			tainted = append(tainted, ptr)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tainted) != "[/artifacts/0/text]" {
		t.Errorf("tainted spans %q, want only /artifacts/0/text", tainted)
	}
}

func TestNotTaintedByOwnWords(t *testing.T) {
	t.Parallel()
	h := NewHasher(Default)
	untrusted := Set{}
	untrusted.Add(h.Sum(nil, []byte(fetchedPage))...)
	for _, field := range []string{
		agentProse + agentProseAfter,
		// A summary of the same facts in other words: paraphrase is not a
		// copy (and is not caught, by design).
		"The council voted to build a six-gate tidal barrier at the harbour entrance; the gates stay on the " +
			"sea floor and only lift for surges above two metres, which engineers expect about four times " +
			"annually, more often as the sea rises. Work begins next spring, takes about three years and " +
			"costs 410 million euros, mostly from a regional climate fund.",
	} {
		fps := h.Sum(nil, []byte(field))
		if m := untrusted.Matches(fps); DefaultThreshold.Tainted(m, len(fps)) {
			t.Errorf("own words tainted: matched %d of %d: %.60q", m, len(fps), field)
		}
	}
}

// passages yields, for each paragraph of each page, its first sentences
// making up at least 150 bytes.
func passages(page string) []string {
	var out []string
	for _, para := range strings.Split(page, "\n\n")[1:] {
		ss := sentences(para)
		for n := 2; n <= len(ss); n++ {
			if p := strings.Join(ss[:n], " "); len(p) >= 150 {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// TestRecallGenerated measures recall over many passages of generated pages,
// each copied with one kind of edit into a field, against the page's
// fingerprints alone.
func TestRecallGenerated(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	pages := newProseGen(7)
	other := newProseGen(3)
	type edit struct {
		name string
		f    func(string) string
		min  float64 // the least recall accepted
	}
	edits := []edit{
		{"case", func(s string) string { return editCase(rng, s) }, 1},
		{"whitespace", func(s string) string { return editWhitespace(rng, s) }, 1},
		{"punctuation", func(s string) string { return editPunctuation(rng, s) }, 1},
		{"reorder", func(s string) string { return editReorder(rng, s) }, 1},
		{"embed", func(s string) string { return embed(other, s) }, 1},
		{"substitute 1", func(s string) string { return editSubstitute(rng, s, 1) }, 0.995},
		{"substitute 2", func(s string) string { return editSubstitute(rng, s, 2) }, 0.95},
		{"substitute 2, embed", func(s string) string { return embed(other, editSubstitute(rng, s, 2)) }, 0.95},
		{"substitute 3", func(s string) string { return editSubstitute(rng, s, 3) }, 0.75},
	}
	caught := make([]int, len(edits))
	trials := 0
	h := NewHasher(Default)
	var fps []uint64
	for range 300 {
		page := pages.page()
		set := Set{}
		set.Add(h.Sum(nil, []byte(page))...)
		for _, p := range passages(page) {
			trials++
			for i, e := range edits {
				fps = h.Sum(fps[:0], []byte(e.f(p)))
				if DefaultThreshold.Tainted(set.Matches(fps), len(fps)) {
					caught[i]++
				}
			}
		}
	}
	for i, e := range edits {
		recall := float64(caught[i]) / float64(trials)
		t.Logf("%-20s recall %.3f (%d of %d passages)", e.name, recall, caught[i], trials)
		if recall < e.min {
			t.Errorf("%s: recall %.3f, want at least %.3f", e.name, recall, e.min)
		}
	}
}

// TestFalsePositives labels 1,000 paragraphs of ordinary prose, and every
// sentence of them as a field of its own, against 200 untrusted pages from
// the same generator (same vocabulary, same stock phrases, another seed):
// none may be tainted.
func TestFalsePositives(t *testing.T) {
	t.Parallel()
	h := NewHasher(Default)
	untrusted := Set{}
	pages := newProseGen(1)
	for range 200 {
		untrusted.Add(h.Sum(nil, []byte(pages.page()))...)
	}
	prose := newProseGen(2)
	var fps []uint64
	var fp, fields int
	var worst, worstTotal int
	var worstFrac float64
	var worstFracM, worstFracTotal int
	label := func(field string) {
		fields++
		fps = h.Sum(fps[:0], []byte(field))
		m := untrusted.Matches(fps)
		if DefaultThreshold.Tainted(m, len(fps)) {
			fp++
			t.Errorf("false positive: matched %d of %d: %q", m, len(fps), field)
		}
		if m > worst {
			worst, worstTotal = m, len(fps)
		}
		if len(fps) > 0 && float64(m)/float64(len(fps)) > worstFrac {
			worstFrac, worstFracM, worstFracTotal = float64(m)/float64(len(fps)), m, len(fps)
		}
	}
	for range 1000 {
		para := prose.paragraph()
		label(para)
		for _, s := range sentences(para) {
			label(s)
		}
	}
	t.Logf("false positives: %d of %d fields (1,000 paragraphs and their sentences) against %d untrusted fingerprints",
		fp, fields, len(untrusted))
	t.Logf("closest: most matches %d of %d fingerprints (threshold %d); highest fraction %.2f (%d of %d, threshold %.2f)",
		worst, worstTotal, DefaultThreshold.MinMatches, worstFrac, worstFracM, worstFracTotal, DefaultThreshold.MinFraction)
}
