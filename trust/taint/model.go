package taint

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// The injection model: a logistic regression over hashed features
// (features.go), scored over windows of the normalised text. Its weights
// are trained by trust/taint/train from public datasets
// (trust/taint/train/DATASETS.md) and shipped in injection.weights.

//go:embed injection.weights
var weightsFile []byte

// Model is a trained injection model.
type Model struct {
	// Bits is the log2 of the feature table's size.
	Bits uint
	// Window is how many words one window holds.
	Window int
	// Scale turns the sum of a window's int8 weights into a logit, to which
	// Bias is added; the operating point (DefaultInjectionScore) is folded
	// into Bias, so a window at the chosen threshold scores 0.5.
	Scale, Bias float32
	// Weights is the feature table, 1<<Bits weights.
	Weights []int8
}

// The weights file: magic, version, then little-endian fields.
const (
	weightsMagic   = "BTNJ"
	weightsVersion = 2 // 2: the sentence-head feature (features.go)
	weightsHeader  = 4 + 4 + 4 + 4 + 4 + 4
)

// ErrWeights is returned for a weights file Baton cannot read.
var ErrWeights = errors.New("taint: bad injection weights")

// ParseModel reads a weights file (as Model.MarshalBinary writes it). The
// model keeps a reference to b.
func ParseModel(b []byte) (*Model, error) {
	if len(b) < weightsHeader || string(b[:4]) != weightsMagic {
		return nil, ErrWeights
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[4:]); v != weightsVersion {
		return nil, fmt.Errorf("%w: version %d", ErrWeights, v)
	}
	m := &Model{
		Bits:   uint(le.Uint32(b[8:])),
		Window: int(le.Uint32(b[12:])),
		Scale:  math.Float32frombits(le.Uint32(b[16:])),
		Bias:   math.Float32frombits(le.Uint32(b[20:])),
	}
	finite := func(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
	if m.Bits < 8 || m.Bits > 24 || m.Window < 1 || len(b)-weightsHeader != 1<<m.Bits || !finite(m.Bias) || !finite(m.Scale) || m.Scale <= 0 {
		return nil, fmt.Errorf("%w: %d bits, window %d, %d bytes", ErrWeights, m.Bits, m.Window, len(b))
	}
	w := b[weightsHeader:]
	m.Weights = make([]int8, len(w))
	for i, c := range w {
		m.Weights[i] = int8(c)
	}
	return m, nil
}

// MarshalBinary writes the weights file.
func (m *Model) MarshalBinary() ([]byte, error) {
	if len(m.Weights) != 1<<m.Bits {
		return nil, fmt.Errorf("%w: %d weights for %d bits", ErrWeights, len(m.Weights), m.Bits)
	}
	le := binary.LittleEndian
	b := make([]byte, weightsHeader, weightsHeader+len(m.Weights))
	copy(b, weightsMagic)
	le.PutUint32(b[4:], weightsVersion)
	le.PutUint32(b[8:], uint32(m.Bits))
	le.PutUint32(b[12:], uint32(m.Window))
	le.PutUint32(b[16:], math.Float32bits(m.Scale))
	le.PutUint32(b[20:], math.Float32bits(m.Bias))
	for _, w := range m.Weights {
		b = append(b, byte(w))
	}
	return b, nil
}

// defaultModel is the shipped model, parsed on first use (the first Detect),
// not at start: its megabyte of weights costs a process that starts (baton
// serve, every command of the CLI) a millisecond it need not wait for. It
// is never modified.
var defaultModel = sync.OnceValue(func() *Model {
	defaultParsed.Store(true)
	m, err := ParseModel(weightsFile)
	if err != nil {
		panic(err)
	}
	return m
})

// defaultParsed reports whether the shipped model has been parsed (for the
// test that start-up does not).
var defaultParsed atomic.Bool

// DefaultModel returns the shipped model. It must not be modified.
func DefaultModel() *Model { return defaultModel() }

// bestWindow returns the highest window sum of contrib (every run of
// m.Window consecutive tokens, or all of them when there are fewer) and
// the first token of that window.
func (m *Model) bestWindow(contrib []int32) (best int32, from int) {
	n := min(m.Window, len(contrib))
	var sum int32
	for _, c := range contrib[:n] {
		sum += c
	}
	best = sum
	for i := n; i < len(contrib); i++ {
		sum += contrib[i] - contrib[i-n]
		if sum > best {
			best, from = sum, i-n+1
		}
	}
	return best, from
}

// Probability turns a window sum into the model's score.
func (m *Model) Probability(sum int32) float64 {
	return 1 / (1 + math.Exp(-float64(m.Scale*float32(sum)+m.Bias)))
}
