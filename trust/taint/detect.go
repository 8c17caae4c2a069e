package taint

import (
	"bytes"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Bounds on the text Detect scores: a longer span is scored on its first
// DetectHead and its last DetectTail bytes, and the rest is reported as
// unscored, so that a page of many megabytes costs no more than a long one.
const (
	DetectHead = 192 << 10
	DetectTail = 64 << 10
)

// reasonPhrases is how many of the phrases that weighed most a reason names.
const reasonPhrases = 3

// ReasonScore is the model's score from which Detect names the phrases of
// the best window, so that a span just short of the threshold says why;
// below it, Detect allocates nothing.
const ReasonScore = 0.4

// detectScratch holds Detect's buffers between calls.
type detectScratch struct {
	text, enc modelScratch // the text's words, and an encoded run's
	decoded   []byte
}

// modelScratch holds the words of one scored text.
type modelScratch struct {
	norm    []byte
	marked  []byte
	words   []scoredWord
	contrib []int32
}

// scoredWord is one word of the normalised text with the indexes of its
// word and pair weights; contrib holds the sum of all its weights.
type scoredWord struct {
	start, end int32
	word, pair uint32
}

var detectPool = sync.Pool{New: func() any { return &detectScratch{decoded: make([]byte, 0, maxDecoded+3)} }}

// Detect scores an untrusted span for prompt injection: the model's score
// (a logistic regression over hashed words, word pairs and character
// n-grams of the normalised text, trained on public injection datasets and
// benign text of the same shapes) on the window of Model.Window words that
// scores highest, so that one injected paragraph in a long document is
// found; and Scan's structural signs (role markers, tool-call syntax,
// invisible characters, encoded blobs, stock phrases). The span's score is
// the higher of the two: whatever Scan flags stays flagged. Reasons are
// Scan's, then, when the model scores at least ReasonScore,
// "model 0.93: "phrase", "phrase", "phrase"" naming the words and word
// pairs of the best window that weighed most.
//
// Text beyond DetectHead+DetectTail bytes is left out (Signal.Unscored).
// Detect does not allocate for text that scores low, once its pooled
// buffers have grown.
func Detect(text []byte) Signal {
	return DefaultModel().Detect(text)
}

// Detect is Detect with model m.
func (m *Model) Detect(text []byte) Signal {
	parts := [2][]byte{text, nil}
	unscored := 0
	if len(text) > DetectHead+DetectTail {
		parts = [2][]byte{text[:DetectHead], text[len(text)-DetectTail:]}
		unscored = len(text) - DetectHead - DetectTail
	}
	sig, longest0 := scan(parts[0])
	longest := [2]int{longest0}
	if parts[1] != nil {
		var tail Signal
		tail, longest[1] = scan(parts[1])
		sig = mergeSignals(sig, tail)
	}
	sc := detectPool.Get().(*detectScratch)
	defer detectPool.Put(sc)

	// The best window of the text, and of any encoded payload in it.
	var best struct {
		p     float64
		from  int
		part  int
		run   []byte // the encoded run, nil for the text itself
		isHex bool
	}
	decoded := 0
	for i, part := range parts {
		if part == nil {
			continue
		}
		if p, from := m.score(&sc.text, part); p > best.p || i == 0 {
			best.p, best.from, best.part, best.run = p, from, i, nil
		}
		if longest[i] < minEncoded {
			continue // no run to decode: encodedRuns would find none
		}
		encodedRuns(part, func(run []byte, isHex bool) bool {
			if decoded >= maxDecodedTotal {
				return false
			}
			var ok bool
			sc.decoded, ok = decodeRun(sc.decoded[:cap(sc.decoded)], run, isHex)
			decoded += len(sc.decoded)
			if ok {
				if p, _ := m.score(&sc.enc, sc.decoded); p > best.p {
					best.p, best.part, best.run, best.isHex = p, i, run, isHex
				}
			}
			return true
		})
	}
	sig.Model = best.p
	sig.Unscored = unscored
	sig.Score = max(sig.Score, best.p)
	if best.p < ReasonScore {
		return sig
	}
	// The words of the best part: sc.text holds the last part's.
	ms, prefix := &sc.text, ""
	switch {
	case best.run != nil:
		sc.decoded, _ = decodeRun(sc.decoded[:cap(sc.decoded)], best.run, best.isHex)
		ms, prefix = &sc.enc, "encoded payload (base64): "
		if best.isHex {
			prefix = "encoded payload (hex): "
		}
		_, best.from = m.score(ms, sc.decoded)
	case parts[1] != nil && best.part == 0:
		m.score(ms, parts[0])
	}
	sig.Reasons = append(sig.Reasons, prefix+m.reason(ms, best.p, best.from))
	return sig
}

// score returns the model's score of text's best window, and the window's
// first word (sc holds text's words after).
func (m *Model) score(sc *modelScratch, text []byte) (float64, int) {
	sc.norm, sc.marked = ModelText(sc.norm[:0], sc.marked, text)
	sc.words, sc.contrib = sc.words[:0], sc.contrib[:0]
	t := tokenizer{norm: sc.norm, mask: uint64(1)<<m.Bits - 1}
	w := m.Weights
	for {
		start, end, word, pair, head, padded, ok := t.next()
		if !ok {
			break
		}
		// The character n-grams count as their mean, so that a long word
		// weighs no more than a short one.
		var grams, n int32
		for i := 0; i+FeatureChars <= padded; i++ {
			grams += Weight(w, charIndex(t.pad[:padded], i, t.mask))
			n++
		}
		c := Weight(w, word) + Weight(w, pair) + Weight(w, head) + grams/max(n, 1)
		sc.words = append(sc.words, scoredWord{int32(start), int32(end), word, pair})
		sc.contrib = append(sc.contrib, c)
	}
	if len(sc.words) == 0 {
		return 0, 0
	}
	best, from := m.bestWindow(sc.contrib)
	return m.Probability(best), from
}

// reason names the phrases of the window from token from that weighed most:
// each of the heaviest tokens as the word pair ending in it when the pair
// weighs more than the word alone.
func (m *Model) reason(sc *modelScratch, p float64, from int) string {
	to := min(from+m.Window, len(sc.words))
	var top [reasonPhrases]int
	n := 0
	for i := from; i < to; i++ {
		c := sc.contrib[i]
		if t := &sc.words[i]; c <= 0 || string(sc.norm[t.start:t.end]) == SentenceMark {
			continue
		}
		j := min(n, reasonPhrases-1)
		if n == reasonPhrases && c <= sc.contrib[top[j]] {
			continue
		}
		for j > 0 && sc.contrib[top[j-1]] < c {
			top[j] = top[j-1]
			j--
		}
		top[j] = i
		n = min(n+1, reasonPhrases)
	}
	b := []byte("model ")
	b = strconv.AppendFloat(b, p, 'f', 2, 64)
	for k := range n {
		t := &sc.words[top[k]]
		start := t.start
		if top[k] > from && Weight(m.Weights, t.pair) > Weight(m.Weights, t.word) {
			start = sc.words[top[k]-1].start
		}
		phrase := bytes.TrimPrefix(sc.norm[start:t.end], []byte(SentenceMark+" "))
		if len(phrase) > 40 {
			phrase = phrase[:40]
			for len(phrase) > 0 && !utf8.Valid(phrase) {
				phrase = phrase[:len(phrase)-1]
			}
		}
		if k == 0 {
			b = append(b, ':')
		} else {
			b = append(b, ',')
		}
		b = append(b, ' ')
		b = strconv.AppendQuote(b, string(phrase))
	}
	return string(b)
}

// mergeSignals combines the signals of two parts of one text.
func mergeSignals(a, b Signal) Signal {
	a.Score = max(a.Score, b.Score)
	for _, r := range b.Reasons {
		dup := false
		for _, s := range a.Reasons {
			dup = dup || s == r
		}
		if !dup {
			a.Reasons = append(a.Reasons, r)
		}
	}
	return a
}
