package mesh

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// An edge's labels are two lines of 11px text centred on a point of its
// path: the first above the path, the second below it. Their room is
// estimated from the text's length (at most labelCharW a character, wider
// than the console's font draws digits and letters) so that no two labels,
// and no label and node, share any of it.
const (
	labelCharW   = 7  // per character, at most
	labelPad     = 8  // around the text, left and right together
	labelAbove   = 6  // the first line's baseline, above the path
	labelBelow   = 16 // the second line's baseline, below the path
	labelAscent  = 11 // above a baseline
	labelDescent = 4  // below a baseline
	// labelStep is how far a label is moved, up or down, from its edge's
	// middle when no point of the edge has room for it.
	labelStep = 8
	// nodeClear keeps labels off a node's sides, where edges' arrows end.
	nodeClear = 8
	// maxColGap bounds how far columns spread for long labels; a label
	// wider than the room between two columns is moved where it fits.
	maxColGap = 520
)

// The points along an edge's path tried for its labels, as a share of the
// path: the middle first, then out towards either end; for one of several
// edges out of a node, towards its own end first, where its path has left
// the others (and, for one of several into a node, towards its start).
var (
	labelTs     = []float64{0.5, 0.38, 0.62, 0.28, 0.72, 0.2, 0.8}
	labelTsOut  = []float64{0.62, 0.72, 0.5, 0.8, 0.38, 0.28, 0.2}
	labelTsInto = []float64{0.38, 0.28, 0.5, 0.2, 0.62, 0.72, 0.8}
)

// box is a rectangle in the graph's coordinates: [X0, X1) × [Y0, Y1).
type box struct{ X0, Y0, X1, Y1 int }

func (b box) overlaps(o box) bool { return b.X0 < o.X1 && o.X0 < b.X1 && b.Y0 < o.Y1 && o.Y0 < b.Y1 }

// labelWidth is the room an edge's labels take across.
func labelWidth(e *Edge) int {
	return max(utf8.RuneCountInString(e.Label), utf8.RuneCountInString(e.Label2))*labelCharW + labelPad
}

// labelBox is the room e's labels take when centred on the path at (x, y).
func labelBox(e *Edge, x, y int) box {
	w := labelWidth(e)
	bottom := y - labelAbove + labelDescent
	if e.Label2 != "" {
		bottom = y + labelBelow + labelDescent
	}
	return box{X0: x - w/2, Y0: y - labelAbove - labelAscent, X1: x - w/2 + w, Y1: bottom}
}

// bezier is a cubic Bézier curve: an edge's path.
type bezier [4][2]float64

func (c bezier) at(t float64) (int, int) {
	u := 1 - t
	a, b, cc, d := u*u*u, 3*u*u*t, 3*u*t*t, t*t*t
	x := a*c[0][0] + b*c[1][0] + cc*c[2][0] + d*c[3][0]
	y := a*c[0][1] + b*c[1][1] + cc*c[2][1] + d*c[3][1]
	return int(math.Round(x)), int(math.Round(y))
}

// labeller places edges' labels one after another, each where it meets
// none placed before it and no node.
type labeller struct {
	taken []box
}

func newLabeller(nodes []Node) *labeller {
	l := &labeller{taken: make([]box, 0, 2*len(nodes))}
	for _, n := range nodes {
		l.taken = append(l.taken, box{X0: n.X - nodeClear, Y0: n.Y, X1: n.X + n.W + nodeClear, Y1: n.Y + n.H})
	}
	return l
}

func (l *labeller) free(b box) bool {
	for _, t := range l.taken {
		if b.overlaps(t) {
			return false
		}
	}
	return true
}

// place sets e's label position on its path c: the first of ts with room,
// else the middle of the path moved up or down, a step at a time, until
// there is room. It returns the room taken.
func (l *labeller) place(e *Edge, c bezier, ts []float64) box {
	w := labelWidth(e)
	for _, t := range ts {
		x, y := c.at(t)
		x = max(x, w/2) // never past the graph's left side
		if b := labelBox(e, x, y); b.Y0 >= 0 && l.free(b) {
			return l.take(e, x, y, b)
		}
	}
	x, y := c.at(0.5)
	x = max(x, w/2)
	for k := 1; ; k++ {
		for _, dy := range [2]int{k * labelStep, -k * labelStep} {
			if b := labelBox(e, x, y+dy); b.Y0 >= 0 && l.free(b) {
				return l.take(e, x, y+dy, b)
			}
		}
	}
}

func (l *labeller) take(e *Edge, x, y int, b box) box {
	e.LabelX, e.LabelY = x, y-labelAbove
	e.Under = underText(e.Label, x, e.LabelY)
	if e.Label2 != "" {
		e.Under += underText(e.Label2, x, e.LabelY+labelAbove+labelBelow)
	}
	l.taken = append(l.taken, b)
	return b
}

// underText is SVG path data of the room under one line of label text
// whose baseline is at (x, baseline): about as wide as the text is drawn,
// less than the room kept for it.
func underText(text string, x, baseline int) string {
	w := utf8.RuneCountInString(text)*(labelCharW-1) + 4
	h := labelAscent + labelDescent - 2
	return "M" + strconv.Itoa(x-w/2) + "," + strconv.Itoa(baseline-labelAscent+1) +
		"h" + strconv.Itoa(w) + "v" + strconv.Itoa(h) + "h" + strconv.Itoa(-w) + "z"
}
