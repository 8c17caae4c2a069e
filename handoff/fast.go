package handoff

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The fast path. jsonschema/v6 validates a decoded tree (map[string]any, …)
// and allocates three to four objects per value it visits (a scope, an
// uneval set, the validator, a copy of each string): a realistic 4 KiB
// envelope costs about 750 allocations and 55 µs to decode and validate, far
// over Baton's per-handoff budget. So Checker confirms a valid envelope by
// walking its tape against the schema that jsonschema compiled, interpreting
// the handful of keywords the envelope schema uses. The walk answers valid,
// invalid or unsure; anything but a sure valid goes to jsonschema, whose
// errors are the ones reported. The walk is built only when every keyword of
// the compiled schema is one it implements (otherwise jsonschema does all the
// work; TestFastPathCoversSchema keeps it on), and FuzzFastPath checks that it
// never disagrees with jsonschema.

type verdict uint8

const (
	unsure verdict = iota
	valid
	invalid
)

// and combines the verdicts of two keywords that must both hold.
func (v verdict) and(w verdict) verdict {
	switch {
	case v == invalid || w == invalid:
		return invalid
	case v == unsure || w == unsure:
		return unsure
	}
	return valid
}

func verdictOf(ok bool) verdict {
	if ok {
		return valid
	}
	return invalid
}

// JSON types as bits of fastNode.types.
const (
	tNull = 1 << iota
	tBoolean
	tNumber
	tInteger
	tString
	tArray
	tObject
)

var typeBits = map[string]uint8{
	"null": tNull, "boolean": tBoolean, "number": tNumber, "integer": tInteger,
	"string": tString, "array": tArray, "object": tObject,
}

// fastNode is one compiled schema, in the form the walk uses.
type fastNode struct {
	boolean  int8     // 1: the schema true; -1: false; 0: neither
	types    uint8    // allowed types; 0: any
	enum     []string // allowed strings (enum, or const)
	hasEnum  bool
	format   *jsonschema.Format
	minLen   int // -1: none
	maxLen   int // -1: none
	pattern  jsonschema.Regexp
	min, max float64        // NaN: none
	names    map[string]int // property and required names → bit
	props    []*fastNode    // by bit; nil for a name that is only required
	required uint64
	items    *fastNode
	oneOf    []*fastNode
	ifThen   [3]*fastNode // if, then, else
}

// buildFast returns the walk for s, or false when s uses a keyword the walk
// does not implement.
func buildFast(s *jsonschema.Schema) (*fastNode, bool) {
	if s == nil {
		return nil, true
	}
	if s.Bool != nil {
		if *s.Bool {
			return &fastNode{boolean: 1}, true
		}
		return &fastNode{boolean: -1}, true
	}
	if s.DraftVersion != 2020 || s.Ref != nil || s.RecursiveRef != nil || s.DynamicRef != nil ||
		s.Not != nil || len(s.AllOf) > 0 || len(s.AnyOf) > 0 ||
		len(s.Dependencies) > 0 || len(s.DependentRequired) > 0 || len(s.DependentSchemas) > 0 ||
		s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil || len(s.PatternProperties) > 0 ||
		s.PropertyNames != nil || s.MinProperties != nil || s.MaxProperties != nil ||
		s.MinItems != nil || s.MaxItems != nil || s.UniqueItems || s.Contains != nil ||
		s.MinContains != nil || s.MaxContains != nil || s.Items != nil || s.AdditionalItems != nil ||
		len(s.PrefixItems) > 0 || s.ContentEncoding != nil || s.ContentMediaType != nil ||
		s.ContentSchema != nil || s.MultipleOf != nil || s.ExclusiveMinimum != nil ||
		s.ExclusiveMaximum != nil || len(s.Extensions) > 0 {
		return nil, false
	}
	if ap, isBool := s.AdditionalProperties.(bool); s.AdditionalProperties != nil && !(isBool && ap) {
		return nil, false
	}
	n := &fastNode{format: s.Format, pattern: s.Pattern, minLen: -1, maxLen: -1, min: math.NaN(), max: math.NaN()}
	if s.Types != nil {
		for _, t := range s.Types.ToStrings() {
			n.types |= typeBits[t]
		}
	}
	if s.Const != nil {
		str, ok := (*s.Const).(string)
		if !ok {
			return nil, false
		}
		n.hasEnum, n.enum = true, []string{str} // a const is an enum of one
	}
	if s.Enum != nil {
		if n.hasEnum {
			return nil, false
		}
		n.hasEnum = true
		for _, v := range s.Enum.Values {
			str, ok := v.(string)
			if !ok {
				return nil, false
			}
			n.enum = append(n.enum, str)
		}
	}
	if s.MinLength != nil {
		n.minLen = *s.MinLength
	}
	if s.MaxLength != nil {
		n.maxLen = *s.MaxLength
	}
	if s.Minimum != nil {
		n.min, _ = s.Minimum.Float64()
	}
	if s.Maximum != nil {
		n.max, _ = s.Maximum.Float64()
	}
	if len(s.Properties)+len(s.Required) > 0 {
		n.names = make(map[string]int)
		add := func(name string) int {
			bit, ok := n.names[name]
			if !ok {
				bit = len(n.props)
				n.names[name] = bit
				n.props = append(n.props, nil)
			}
			return bit
		}
		for name, ps := range s.Properties {
			child, ok := buildFast(ps)
			if !ok {
				return nil, false
			}
			n.props[add(name)] = child
		}
		for _, name := range s.Required {
			n.required |= 1 << add(name)
		}
		if len(n.props) > 64 {
			return nil, false
		}
	}
	var ok bool
	if n.items, ok = buildFast(s.Items2020); !ok {
		return nil, false
	}
	for _, sub := range s.OneOf {
		child, ok := buildFast(sub)
		if !ok {
			return nil, false
		}
		n.oneOf = append(n.oneOf, child)
	}
	for i, sub := range [3]*jsonschema.Schema{s.If, s.Then, s.Else} {
		if n.ifThen[i], ok = buildFast(sub); !ok {
			return nil, false
		}
	}
	return n, true
}

// check walks value i of t against n.
func (n *fastNode) check(t *tape, i int) verdict {
	if n.boolean != 0 {
		return verdictOf(n.boolean > 0)
	}
	c := t.kind(i)
	isNum := c == '-' || isDigit(c)
	if n.types != 0 {
		var ty uint8
		switch {
		case c == '{':
			ty = tObject
		case c == '[':
			ty = tArray
		case c == '"':
			ty = tString
		case c == 't' || c == 'f':
			ty = tBoolean
		case c == 'n':
			ty = tNull
		case plainInteger(t.b[t.n[i].s:t.n[i].e]):
			ty = tNumber | tInteger
		default:
			ty = tNumber
		}
		if n.types&ty == 0 {
			if ty == tNumber && n.types&tInteger != 0 {
				return unsure // 1.0 and 1e2 are integers to jsonschema
			}
			return invalid
		}
	}
	out := valid
	if n.hasEnum {
		in := false
		for _, want := range n.enum {
			in = in || t.is(i, want)
		}
		if !in {
			return invalid
		}
	}
	switch {
	case c == '"':
		out = out.and(n.checkString(t, i))
	case n.format != nil:
		out = out.and(unsure)
	case isNum:
		out = out.and(n.checkNumber(t, i))
	case c == '{' && n.names != nil:
		out = out.and(n.checkObject(t, i))
	case c == '[' && n.items != nil:
		for k, end := t.first(i); k < end && out != invalid; k = t.after(k) {
			out = out.and(n.items.check(t, k))
		}
	}
	if len(n.oneOf) > 0 && out != invalid {
		out = out.and(n.checkOneOf(t, i))
	}
	if n.ifThen[0] != nil && out != invalid {
		branch := n.ifThen[2]
		switch n.ifThen[0].check(t, i) {
		case unsure:
			return unsure
		case valid:
			branch = n.ifThen[1]
		}
		if branch != nil {
			out = out.and(branch.check(t, i))
		}
	}
	return out
}

func plainInteger(num []byte) bool {
	for _, c := range num {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

func (n *fastNode) checkString(t *tape, i int) verdict {
	if n.minLen < 0 && n.maxLen < 0 && n.pattern == nil && n.format == nil {
		return valid
	}
	exact := t.exact(i)
	out := valid
	if n.minLen >= 0 || n.maxLen >= 0 {
		var count int
		if exact {
			count = utf8.RuneCount(t.raw(i))
		} else {
			s, ok := unquote(t.raw(i))
			if !ok {
				return unsure
			}
			count = utf8.RuneCountInString(s)
		}
		out = verdictOf((n.minLen < 0 || count >= n.minLen) && (n.maxLen < 0 || count <= n.maxLen))
	}
	if out == invalid || (n.pattern == nil && n.format == nil) {
		return out
	}
	s, ok := t.str(i)
	if !ok {
		return unsure
	}
	if n.pattern != nil && !n.pattern.MatchString(s) {
		return invalid
	}
	if n.format != nil && n.format.Validate(s) != nil {
		return invalid
	}
	return out
}

// checkNumber compares with minimum and maximum in float64, and is sure only
// when the number is clearly away from the bound (jsonschema compares exactly).
func (n *fastNode) checkNumber(t *tape, i int) verdict {
	if math.IsNaN(n.min) && math.IsNaN(n.max) {
		return valid
	}
	x, err := strconv.ParseFloat(string(t.b[t.n[i].s:t.n[i].e]), 64)
	if err != nil {
		return unsure
	}
	out := valid
	if !math.IsNaN(n.min) {
		out = out.and(compare(x, n.min))
	}
	if !math.IsNaN(n.max) {
		out = out.and(compare(n.max, x))
	}
	return out
}

// compare is the verdict on hi >= lo.
func compare(hi, lo float64) verdict {
	margin := 1e-9 * math.Max(1, math.Max(math.Abs(hi), math.Abs(lo)))
	switch {
	case hi-lo > margin:
		return valid
	case lo-hi > margin:
		return invalid
	}
	return unsure
}

func (n *fastNode) checkObject(t *tape, i int) verdict {
	out := valid
	var seen uint64
	for k, end := t.first(i); k < end; k = t.after(k + 1) {
		var bit int
		var ok bool
		if t.n[k].flags&strEscaped != 0 {
			name, _ := unquote(t.raw(k))
			bit, ok = n.names[name]
		} else {
			bit, ok = n.names[string(t.raw(k))]
		}
		if !ok {
			continue
		}
		if seen&(1<<bit) != 0 {
			return unsure // a repeated member: decoders keep the last copy
		}
		seen |= 1 << bit
		if p := n.props[bit]; p != nil && out != invalid {
			out = out.and(p.check(t, k+1))
		}
	}
	if seen&n.required != n.required {
		return invalid
	}
	return out
}

func (n *fastNode) checkOneOf(t *tape, i int) verdict {
	matched := 0
	sure := true
	for _, alt := range n.oneOf {
		switch alt.check(t, i) {
		case valid:
			matched++
		case unsure:
			sure = false
		}
	}
	switch {
	case matched > 1:
		return invalid
	case !sure:
		return unsure
	}
	return verdictOf(matched == 1)
}
