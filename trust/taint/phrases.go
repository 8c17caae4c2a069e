package taint

import (
	"bytes"
	"strconv"
	"strings"
)

// The stock phrases Scan looks for in normalised text (scanPhrases): each a
// pattern over its words, indexed by the word that can open it.

// phrase is a pattern over the words of normalised text. Each space-separated
// element of its source is a slot: alternatives separated by "|", optional
// with a trailing "?", or "+N": between one and N arbitrary words.
type phrase struct {
	kind  int
	slots []slot
}

type slot struct {
	alts []string
	opt  bool
	gap  int // > 0 for a "+N" slot
}

var phraseSources = []struct {
	kind int
	src  string
}{
	{kIgnorePrevious, "ignore|disregard|forget|override|bypass|skip|drop|abandon all? of? the|any|your|my|these|those|its? " +
		"previous|prior|earlier|former|original|initial|old|existing|system|above|preceding|foregoing " +
		"instructions|instruction|prompts|prompt|directions|rules|guidelines|directives|commands|messages|context|guidance|constraints"},
	{kDisregardAbove, "ignore|disregard|forget everything|all? of? the? above|foregoing|preceding"},
	{kYouAreNow, "you are|re now"},
	{kFromNowOn, "from now on you|your"},
	{kNewInstructions, "new|updated|revised|additional|hidden|secret|real instructions|instruction|directives|directive"},
	{kSystemPrompt, "system prompt|prompts"},
	{kDoNotTell, "do|does not tell|inform|alert|notify|mention|reveal|show|warn the? user|users|human|operator"},
	{kDoNotTell, "don|doesn t tell|inform|alert|notify|mention|reveal|show|warn the? user|users|human|operator"},
	{kDoNotTell, "never tell|inform|alert|notify|mention|reveal|show|warn the? user|users|human|operator"},
	{kDoNotTell, "without telling|informing|alerting|notifying|warning the? user|users|human|operator"},
	{kActAs, "you|please|now|must|should act|acting as"},
	{kActAs, "act|acting as my|your|though|if"},
	{kActAs, "pretend to be|you"},
	{kActAs, "roleplay as"},
	{kForwardTo, "forward|forwarding +6 to"},
	{kSendToURL, "send|post|upload|transmit|forward|exfiltrate|submit|email|leak|copy|paste +8 to|at|into http|https|www|ftp"},
}

// phraseIndex maps the first word of each phrase to the phrases starting
// with it.
var phrases, phraseIndex = func() ([]phrase, map[string][]int) {
	ps := make([]phrase, 0, len(phraseSources))
	idx := map[string][]int{}
	for _, src := range phraseSources {
		p := phrase{kind: src.kind}
		for _, f := range strings.Fields(src.src) {
			var s slot
			if f[0] == '+' {
				n, err := strconv.Atoi(f[1:])
				if err != nil || n < 1 {
					panic("taint: bad phrase gap " + f)
				}
				s.gap = n
			} else {
				if strings.HasSuffix(f, "?") {
					s.opt = true
					f = f[:len(f)-1]
				}
				s.alts = strings.Split(f, "|")
			}
			p.slots = append(p.slots, s)
		}
		if first := p.slots[0]; first.opt || first.gap > 0 {
			panic("taint: a phrase must start with a plain word")
		}
		for _, w := range p.slots[0].alts {
			idx[w] = append(idx[w], len(ps))
		}
		ps = append(ps, p)
	}
	return ps, idx
}()

func (s *slot) has(w []byte) bool {
	for _, a := range s.alts {
		if string(w) == a {
			return true
		}
	}
	return false
}

// nextWord returns the word of the normalised text norm that starts at pos,
// and where the word after it starts.
func nextWord(norm []byte, pos int) (word []byte, next int) {
	end := bytes.IndexByte(norm[pos:], ' ')
	if end < 0 {
		return norm[pos:], len(norm)
	}
	return norm[pos : pos+end], pos + end + 1
}

// match reports whether p's slots from si on match the words of norm from
// pos on.
func (p *phrase) match(norm []byte, si, pos int) bool {
	if si == len(p.slots) {
		return true
	}
	sl := &p.slots[si]
	if sl.gap > 0 {
		for range sl.gap {
			if pos >= len(norm) {
				return false
			}
			_, pos = nextWord(norm, pos)
			if p.match(norm, si+1, pos) {
				return true
			}
		}
		return false
	}
	if pos < len(norm) {
		if w, next := nextWord(norm, pos); sl.has(w) && p.match(norm, si+1, next) {
			return true
		}
	}
	return sl.opt && p.match(norm, si+1, pos)
}

// triggerKey buckets a word by its length and first and last bytes, for a
// bitset that rules out most words before the phrase index is consulted.
func triggerKey(w []byte) uint {
	return uint(min(len(w), 15))<<10 | uint(w[0]&31)<<5 | uint(w[len(w)-1]&31)
}

var triggers = func() (t [1 << 14 / 64]uint64) {
	for w := range phraseIndex {
		k := triggerKey([]byte(w))
		t[k/64] |= 1 << (k % 64)
	}
	return t
}()
