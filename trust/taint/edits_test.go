package taint

import (
	"math/rand/v2"
	"strings"
)

// Edits an agent (or a model paraphrasing lightly) might make to text it
// copies. Each takes a passage of whole sentences.

// sentences splits prose into sentences, each with its final punctuation.
func sentences(p string) []string {
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		if (p[i] == '.' || p[i] == '?' || p[i] == '!') && (i+1 == len(p) || p[i+1] == ' ' || p[i+1] == '\n') {
			if s := strings.TrimSpace(p[start : i+1]); s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	return out
}

func editCase(rng *rand.Rand, s string) string {
	switch rng.IntN(3) {
	case 0:
		return strings.ToUpper(s)
	case 1:
		return strings.ToLower(s)
	}
	w := strings.Split(s, " ")
	for i := range w {
		if w[i] != "" {
			w[i] = strings.ToUpper(w[i][:1]) + w[i][1:]
		}
	}
	return strings.Join(w, " ")
}

func editWhitespace(rng *rand.Rand, s string) string {
	seps := []string{"  ", "\n", "\t", " \n ", "   ", "\r\n"}
	var b strings.Builder
	for i, w := range strings.Split(s, " ") {
		if i > 0 {
			if rng.IntN(2) == 0 {
				b.WriteString(seps[rng.IntN(len(seps))])
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(w)
	}
	return "\n  " + b.String() + "  \n"
}

func editPunctuation(rng *rand.Rand, s string) string {
	s = strings.ReplaceAll(s, ",", "")
	s = strings.ReplaceAll(s, ". ", "; ")
	w := strings.Split(s, " ")
	for i := range w {
		switch rng.IntN(8) {
		case 0:
			w[i] = "\u201c" + w[i] + "\u201d"
		case 1:
			w[i] = w[i] + " \u2014"
		case 2:
			w[i] = "(" + w[i] + ")"
		case 3:
			w[i] = w[i] + ","
		}
	}
	return strings.TrimSuffix(strings.Join(w, " "), ".") + "!"
}

// editReorder moves the first sentence to the end.
func editReorder(_ *rand.Rand, s string) string {
	ss := sentences(s)
	if len(ss) < 2 {
		return s
	}
	return strings.Join(append(ss[1:], ss[0]), " ")
}

// editSubstitute replaces n distinct words with other words.
func editSubstitute(rng *rand.Rand, s string, n int) string {
	w := strings.Split(s, " ")
	for _, j := range rng.Perm(len(w))[:min(n, len(w))] {
		repl := adjectives[rng.IntN(len(adjectives))]
		for strings.EqualFold(strings.Trim(w[j], ".,?"), repl) {
			repl = adjectives[rng.IntN(len(adjectives))]
		}
		w[j] = repl
	}
	return strings.Join(w, " ")
}

// embed puts the passage inside a paragraph of other prose.
func embed(g *proseGen, s string) string {
	return g.paragraph() + " " + s + " " + g.paragraph()
}
