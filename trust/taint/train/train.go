package main

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/batonproxy/baton/trust/taint"
)

type config struct {
	bits     uint
	window   int
	epochs   int
	rate     float64
	l2       float64
	tuneFP   float64
	shapeFP  float64 // the same for the tuning benign documents of one shape
	tunePart uint32  // percent of training documents kept for tuning
	prune    int     // quantized weights smaller than this are zeroed
	benignW  float64 // the benign class's total weight, the injected class's being 1
	benignN  int     // random windows of each benign document
}

func defaultConfig() config {
	return config{bits: 20, window: 8, epochs: 5, rate: 0.02, l2: 1e-5, tuneFP: 0.005, shapeFP: 0.01, tunePart: 25, prune: 2, benignW: 2, benignN: 3}
}

// prepared is a document's features: feats[off[i]:off[i+1]] are token i's.
type prepared struct {
	d              *doc
	feats          []uint32
	off            []int32
	spanLo, spanHi int // the tokens of the injected span, [lo, hi)
	weight         float64
}

func (p *prepared) tokens() int { return len(p.off) - 1 }

// window is a training example: tokens [from, to) of a document, less
// [cutFrom, cutTo) when that is not empty (an injected document's window
// without its injection: the benign twin of the injected window, so that
// the context around an injection learns nothing from being there).
type window struct {
	p              *prepared
	from, to       int
	label          float64
	cutFrom, cutTo int
}

func (x window) feats(f func(feat uint32, share float64)) {
	p := x.p
	for i := x.from; i < x.to; i++ {
		if x.cutFrom < x.cutTo && i >= x.cutFrom && i < x.cutTo {
			continue
		}
		p.token(i, f)
	}
}

// token calls f with token i's features, each with its share: the word,
// the pair and the head pair count whole, the character n-grams as their
// mean (taint.Model).
func (p *prepared) token(i int, f func(feat uint32, share float64)) {
	fs := p.feats[p.off[i]:p.off[i+1]]
	f(fs[0], 1)
	f(fs[1], 1)
	f(fs[2], 1)
	share := 1 / float64(max(1, len(fs)-3))
	for _, c := range fs[3:] {
		f(c, share)
	}
}

func prepare(d *doc, bits uint) *prepared {
	norm, _ := taint.ModelText(nil, nil, []byte(d.Text))
	toks, chars := taint.Tokenize(nil, nil, norm, bits)
	p := &prepared{d: d, off: make([]int32, 0, len(toks)+1)}
	for _, t := range toks {
		p.off = append(p.off, int32(len(p.feats)))
		p.feats = append(p.feats, t.Word, t.Pair, t.Head)
		p.feats = append(p.feats, chars[t.CharsFrom:t.CharsTo]...)
	}
	p.off = append(p.off, int32(len(p.feats)))
	p.spanLo, p.spanHi = 0, len(toks)
	if len(d.Span) == 2 {
		lo, _ := taint.ModelText(nil, nil, []byte(d.Text[:d.Span[0]]))
		hi, _ := taint.ModelText(nil, nil, []byte(d.Text[:d.Span[1]]))
		p.spanLo, p.spanHi = len(toks), 0
		for i, t := range toks {
			if int(t.End) > len(lo) && int(t.Start) < len(hi)+1 {
				p.spanLo, p.spanHi = min(p.spanLo, i), max(p.spanHi, i+1)
			}
		}
		if p.spanLo >= p.spanHi {
			p.spanLo, p.spanHi = 0, len(toks)
		}
	}
	return p
}

// tuning reports whether d is kept for tuning. A benign document is kept
// by its source and text; an injected one by its injection, whatever the
// source that put it in (InjecAgent's goals come in its tool responses and
// as tasks in other documents), so that the tuning part measures tasks and
// goals that training never saw, as the held-out sets do; and by its
// context (its text without the injection), so that the benign twin of a
// tuning context is not trained on either.
func tuning(d *doc, part uint32) bool {
	in := func(prefix, s string) bool {
		s = strings.TrimSpace(s)
		s = s[:min(len(s), 200)]
		h := fnv.New32a()
		h.Write([]byte(prefix + s))
		return h.Sum32()%100 < part
	}
	if len(d.Span) != 2 {
		return in(d.Source, d.Text)
	}
	return in(d.Source, d.Text[:d.Span[0]]+d.Text[d.Span[1]:]) || in("", d.Text[d.Span[0]:d.Span[1]])
}

// model is the float model being trained.
type model struct {
	w, g []float64
	bias float64
	gb   float64
}

// signBit marks a feature that subtracts its weight (taint.Weight).
const signBit = 1 << 31

func (m *model) get(f uint32) float64 {
	if f&signBit != 0 {
		return -m.w[f&^signBit]
	}
	return m.w[f]
}

func (m *model) logit(p *prepared, from, to int) float64 {
	return m.windowLogit(window{p: p, from: from, to: to})
}

func (m *model) windowLogit(x window) float64 {
	s := m.bias
	x.feats(func(f uint32, share float64) { s += share * m.get(f) })
	return s
}

func (m *model) step(x window, weight float64, cfg config) {
	z := m.windowLogit(x)
	g := (1/(1+math.Exp(-z)) - x.label) * weight
	x.feats(func(f uint32, share float64) {
		sign := share
		if f&signBit != 0 {
			f, sign = f&^signBit, -share
		}
		if f == 0 {
			return // the slot of no feature (taint.Tokenize)
		}
		gf := sign*g + cfg.l2*m.w[f]
		m.g[f] += gf * gf
		m.w[f] -= cfg.rate * gf / math.Sqrt(m.g[f]+1e-8)
	})
	m.gb += g * g
	m.bias -= cfg.rate * g / math.Sqrt(m.gb+1e-8)
}

// best returns the window of p with the highest logit among those that
// start in [lo, hi).
func (m *model) best(p *prepared, win, lo, hi int) (int, int) {
	n := p.tokens()
	if n <= win {
		return 0, n
	}
	lo, hi = max(0, min(lo, n-win)), max(1, min(hi, n-win+1))
	bestFrom, bestZ := lo, math.Inf(-1)
	for from := lo; from < hi; from++ {
		if z := m.logit(p, from, from+win); z > bestZ {
			bestFrom, bestZ = from, z
		}
	}
	return bestFrom, bestFrom + win
}

// examples are a document's fixed training windows: for an injected one,
// windows that hold its span (or lie inside it); for a benign one, random
// windows.
func examples(p *prepared, win, benignN int, rng *rand.Rand) []window {
	n := p.tokens()
	y := float64(p.d.Label)
	var out []window
	if y == 1 && p.spanHi-p.spanLo < n {
		// The benign twins: the whole document, or a window around the
		// injection, without it.
		from, to := max(0, p.spanLo-win/2), min(n, p.spanHi+win/2)
		out = append(out, window{p: p, from: from, to: to, cutFrom: p.spanLo, cutTo: p.spanHi})
	}
	if n <= win {
		return append(out, window{p: p, to: n, label: y})
	}
	if p.d.Label == 1 {
		lo, hi := p.spanLo, p.spanHi
		if hi-lo >= win {
			out = append(out, window{p: p, from: lo, to: lo + win, label: 1})
			from := lo + rng.IntN(hi-lo-win+1)
			out = append(out, window{p: p, from: from, to: from + win, label: 1})
		} else {
			first, last := max(0, hi-win), min(lo, n-win)
			for range 2 {
				from := first + rng.IntN(last-first+1)
				out = append(out, window{p: p, from: from, to: from + win, label: 1})
			}
		}
		return out
	}
	for range benignN {
		from := rng.IntN(n - win + 1)
		out = append(out, window{p: p, from: from, to: from + win})
	}
	return out
}

func train(docs []doc, cfg config, out string, stdout io.Writer) error {
	rng := rand.New(rand.NewPCG(1, 2))
	var trainSet, tuneSet []*prepared
	for i := range docs {
		p := prepare(&docs[i], cfg.bits)
		if p.tokens() == 0 {
			continue
		}
		if tuning(p.d, cfg.tunePart) {
			tuneSet = append(tuneSet, p)
		} else {
			trainSet = append(trainSet, p)
		}
	}
	// Each class weighs the same in total, and within a class each source
	// by the square root of its size, so that one large source does not
	// drown the others.
	count := map[[2]string]int{}
	for _, p := range trainSet {
		count[[2]string{p.d.Source, fmt.Sprint(p.d.Label)}]++
	}
	classSum := [2]float64{}
	for _, p := range trainSet {
		p.weight = 1 / math.Sqrt(float64(count[[2]string{p.d.Source, fmt.Sprint(p.d.Label)}]))
		classSum[p.d.Label] += p.weight
	}
	for _, p := range trainSet {
		p.weight *= float64(len(trainSet)) / 2 / classSum[p.d.Label]
		if p.d.Label == 0 {
			p.weight *= cfg.benignW
		}
	}
	var fixed []window
	for _, p := range trainSet {
		fixed = append(fixed, examples(p, cfg.window, cfg.benignN, rng)...)
	}
	m := &model{w: make([]float64, 1<<cfg.bits), g: make([]float64, 1<<cfg.bits)}
	for epoch := range cfg.epochs {
		xs := slices.Clone(fixed)
		if epoch > 0 {
			// The windows Detect would pick: the best window of every
			// benign document, and the best one over each injected span.
			for _, p := range trainSet {
				if p.tokens() <= cfg.window {
					continue
				}
				lo, hi := 0, p.tokens()
				if p.d.Label == 1 {
					lo, hi = p.spanLo-cfg.window+1, p.spanHi
				}
				from, to := m.best(p, cfg.window, lo, hi)
				xs = append(xs, window{p: p, from: from, to: to, label: float64(p.d.Label)})
			}
		}
		rng.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
		loss := 0.0
		for _, x := range xs {
			z := m.windowLogit(x)
			loss += x.p.weight * (math.Log1p(math.Exp(-math.Abs(z))) + max(z, 0) - x.label*z)
			m.step(x, x.p.weight, cfg)
		}
		fmt.Fprintf(stdout, "epoch %d: %d windows, loss %.4f\n", epoch+1, len(xs), loss/float64(len(xs)))
	}
	q := quantize(m, cfg)
	threshold, err := operatingPoint(q, tuneSet, cfg, stdout)
	if err != nil {
		return err
	}
	q.Bias -= threshold
	b, err := q.MarshalBinary()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d bytes, %d of %d weights non-zero\n", out, len(b), nonZero(q.Weights), len(q.Weights))
	return os.WriteFile(out, b, 0o644)
}

// quantize turns the float weights into int8 with one scale.
func quantize(m *model, cfg config) *taint.Model {
	peak := 0.0
	for _, w := range m.w {
		peak = max(peak, math.Abs(w))
	}
	scale := peak / 127
	q := &taint.Model{Bits: cfg.bits, Window: cfg.window, Scale: float32(scale), Bias: float32(m.bias),
		Weights: make([]int8, len(m.w))}
	for i, w := range m.w {
		v := math.Round(w / scale)
		if math.Abs(v) < float64(cfg.prune) {
			// A weight this small says little, and every feature that
			// shares its slot by chance would hear it as noise.
			v = 0
		}
		q.Weights[i] = int8(v)
	}
	return q
}

func nonZero(w []int8) int {
	n := 0
	for _, x := range w {
		if x != 0 {
			n++
		}
	}
	return n
}

// minShapeTuning is the fewest tuning benign documents of one shape that
// set an operating point of their own.
const minShapeTuning = 100

// operatingPoint returns the logit at which the quantized model flags no
// more than cfg.tuneFP of the tuning benign documents, scored as Detect
// scores them (the best window), and prints the tuning recall there.
func operatingPoint(q *taint.Model, tune []*prepared, cfg config, stdout io.Writer) (float32, error) {
	var benign, injected []float64
	var families []string
	byShape := map[string][]float64{}
	type top struct {
		z  float64
		id string
	}
	var tops []top
	defer func() {
		sort.Slice(tops, func(i, j int) bool { return tops[i].z > tops[j].z })
		for _, t := range tops[:min(5, len(tops))] {
			fmt.Fprintf(stdout, "  highest tuning benign: %s %.2f\n", t.id, t.z)
		}
	}()
	for _, p := range tune {
		pr := q.Detect([]byte(p.d.Text)).Model
		z := math.Log(pr) - math.Log1p(-pr)
		if p.d.Label == 1 {
			injected = append(injected, z)
			families = append(families, p.d.Family+", "+p.d.Source)
		} else {
			benign = append(benign, z)
			byShape[p.d.Shape] = append(byShape[p.d.Shape], z)
			tops = append(tops, top{z, p.d.ID})
		}
	}
	if len(benign) == 0 || len(injected) == 0 {
		return 0, fmt.Errorf("the tuning part has %d benign and %d injected documents: the corpus is too small", len(benign), len(injected))
	}
	// The point holds for the tuning benign documents as a whole and for
	// those of each shape that has enough of them to say, so that one
	// shape (emails, tool results) is not flagged more often than the rest.
	quantile := func(zs []float64, fp float64) float64 {
		sort.Float64s(zs)
		return zs[len(zs)-1-int(math.Floor(fp*float64(len(zs))))] + 1e-3
	}
	threshold := quantile(benign, cfg.tuneFP)
	k := int(math.Floor(cfg.tuneFP * float64(len(benign))))
	for _, shape := range slices.Sorted(maps.Keys(byShape)) {
		zs := byShape[shape]
		if len(zs) < minShapeTuning {
			continue
		}
		t := quantile(zs, cfg.shapeFP)
		fmt.Fprintf(stdout, "  tuning benign, %s: %d documents, point %.3f\n", shape, len(zs), t)
		threshold = max(threshold, t)
	}
	caught := 0
	famN, famHit := map[string]int{}, map[string]int{}
	for i, z := range injected {
		family, _, _ := strings.Cut(families[i], ", ")
		for _, k := range []string{family, families[i]} {
			famN[k]++
			if z >= threshold {
				famHit[k]++
			}
		}
		if z >= threshold {
			caught++
		}
	}
	for _, f := range slices.Sorted(maps.Keys(famN)) {
		fmt.Fprintf(stdout, "  tuning recall, %s: %d/%d = %.3f\n", f, famHit[f], famN[f], float64(famHit[f])/float64(famN[f]))
	}
	for _, fp := range []float64{0.005, 0.01, 0.02, 0.05} {
		t := benign[len(benign)-1-int(fp*float64(len(benign)))]
		n := 0
		for _, z := range injected {
			n += btoi(z > t)
		}
		fmt.Fprintf(stdout, "  tuning recall at %.1f%% benign flagged: %.3f\n", 100*fp, float64(n)/float64(len(injected)))
	}
	fmt.Fprintf(stdout, "operating point: logit %.3f; tuning: %d benign, %d flagged; %d injected, recall %.3f\n",
		threshold, len(benign), k, len(injected), float64(caught)/float64(len(injected)))
	return float32(threshold), nil
}
