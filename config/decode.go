package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// The yaml decoder's own errors name a line and a Go type ("line 3: field
// egres not found in type config.Listen"), and a custom unmarshaler cannot
// learn where it sits in the file. So before decoding, check walks the parsed
// node tree alongside the Go types, the way the decoder will, and reports each
// problem with its path ("listen.egres") and line, all of them at once.

// maxNodes bounds the nodes check visits. Aliases and merge keys can make a
// small file expand enormously; the decoder has its own guard, this is ours.
const maxNodes = 100_000

// document parses data and returns its root node: nil for an empty file, else
// a mapping. A second document with content, or a root that is not a
// mapping, is an error.
func document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	// A trailing empty document (a stray "---" left by templating) is
	// harmless; a second one with content would be silently ignored, so it
	// is an error.
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if len(next.Content) > 0 && resolve(next.Content[0]).ShortTag() != "!!null" {
			return nil, &FieldError{Expect: "the file must hold one YAML document, but another starts here", Line: next.Line}
		}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := resolve(doc.Content[0])
	if root.ShortTag() == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &FieldError{Value: shapeOf(root), Expect: `the file must be a mapping of keys like "agent: analyst"`, Line: root.Line}
	}
	return root, nil
}

// check reports, as errors.Join of *FieldError, every way in which the tree
// under n does not fit t.
func check(n *yaml.Node, t reflect.Type) error {
	var c checker
	c.value("", n, t)
	if c.nodes > maxNodes {
		return fmt.Errorf("config: the file expands to more than %d values (through aliases or merge keys)", maxNodes)
	}
	// Duplicate keys are found before values are walked; report in file order.
	slices.SortStableFunc(c.errs, func(a, b error) int {
		return cmp.Compare(a.(*FieldError).Line, b.(*FieldError).Line)
	})
	return join(c.errs)
}

// maxProblems bounds how many problems one report lists: past a few dozen,
// more lines do not help anyone fix a file.
const maxProblems = 50

// join is errors.Join of at most maxProblems problems, then one *FieldError
// counting the rest.
func join(errs []error) error {
	if n := len(errs) - maxProblems; n > 0 {
		errs = append(errs[:maxProblems:maxProblems], &FieldError{Expect: fmt.Sprintf("and %d more problems", n)})
	}
	return errors.Join(errs...)
}

var unmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

type checker struct {
	errs  []error // all *FieldError
	nodes int
}

func (c *checker) bad(path string, v any, expect string, line int) {
	c.errs = append(c.errs, &FieldError{Path: path, Value: v, Expect: expect, Line: line})
}

func (c *checker) value(path string, n *yaml.Node, t reflect.Type) {
	if c.nodes++; c.nodes > maxNodes {
		return
	}
	n = resolve(n)
	if n.ShortTag() == "!!null" {
		return // decodes to the zero value, as if absent
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.ScalarNode && reflect.PointerTo(t).Implements(unmarshaler):
		// a block with a scalar shorthand (by_reference: true)
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			c.bad(path, valueOf(n), "must be true or a mapping", n.Line)
		}
	case t.Kind() == reflect.Struct:
		c.structure(path, n, t)
	case t.Kind() == reflect.Map:
		c.mapping(path, n, t)
	case t.Kind() == reflect.Slice:
		c.sequence(path, n, t)
	default:
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			c.bad(path, valueOf(n), expect(t), n.Line)
		}
	}
}

func (c *checker) structure(path string, n *yaml.Node, t reflect.Type) {
	if n.Kind != yaml.MappingNode {
		c.bad(path, shapeOf(n), "must be a mapping", n.Line)
		return
	}
	names, types := fields(t)
	for _, p := range c.pairs(path, n) {
		at := joinPath(path, p.key)
		ft, ok := types[p.key]
		if !ok {
			c.bad(at, nil, unknown(p.key, names), p.line)
			continue
		}
		c.value(at, p.val, ft)
	}
}

func (c *checker) mapping(path string, n *yaml.Node, t reflect.Type) {
	if n.Kind != yaml.MappingNode {
		c.bad(path, shapeOf(n), "must be a mapping", n.Line)
		return
	}
	for _, p := range c.pairs(path, n) {
		c.value(joinPath(path, p.key), p.val, t.Elem())
	}
}

func (c *checker) sequence(path string, n *yaml.Node, t reflect.Type) {
	if n.Kind != yaml.SequenceNode {
		c.bad(path, shapeOf(n), "must be a list", n.Line)
		return
	}
	for i, e := range n.Content {
		at := fmt.Sprintf("%s[%d]", path, i)
		if r := resolve(e); r.ShortTag() == "!!null" {
			c.bad(at, nil, "must not be empty", r.Line)
			continue
		}
		c.value(at, e, t.Elem())
	}
}

type pair struct {
	key  string
	line int
	val  *yaml.Node
}

// pairs returns the entries of mapping n in order, with merge keys ("<<")
// expanded as the decoder expands them: a key already present wins over a
// merged one. A key repeated within one mapping is reported.
func (c *checker) pairs(path string, n *yaml.Node) []pair {
	var out []pair
	c.collect(path, n, map[string]bool{}, &out)
	return out
}

func (c *checker) collect(path string, n *yaml.Node, taken map[string]bool, out *[]pair) {
	first := map[string]int{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if c.nodes++; c.nodes > maxNodes {
			return
		}
		raw, v := n.Content[i], n.Content[i+1]
		k := resolve(raw)
		if k.Kind != yaml.ScalarNode {
			c.bad(path, shapeOf(k), "keys must be plain names", k.Line)
			continue
		}
		if line, dup := first[k.Value]; dup {
			c.bad(joinPath(path, k.Value), nil, fmt.Sprintf("duplicate key, first set on line %d", line), k.Line)
			continue
		}
		first[k.Value] = k.Line
		if raw.Kind == yaml.ScalarNode && raw.Value == "<<" && raw.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if taken[k.Value] {
			continue
		}
		taken[k.Value] = true
		*out = append(*out, pair{key: k.Value, line: k.Line, val: v})
	}
	for _, m := range merges {
		m = resolve(m)
		items := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			items = m.Content
		}
		for _, it := range items {
			if it = resolve(it); it.Kind != yaml.MappingNode {
				c.bad(joinPath(path, "<<"), shapeOf(it), "must be a mapping or a list of mappings to merge", it.Line)
				continue
			}
			c.collect(path, it, taken, out)
		}
	}
}

// fields lists the YAML keys of struct t, in declaration order, as the
// decoder derives them from the yaml tags.
func fields(t reflect.Type) ([]string, map[string]reflect.Type) {
	var names []string
	types := map[string]reflect.Type{}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" && opts == "" {
				continue
			}
			if strings.Contains(","+opts+",", ",inline,") && f.Type.Kind() == reflect.Struct {
				add(f.Type)
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			names = append(names, name)
			types[name] = f.Type
		}
	}
	add(t)
	return names, types
}

func unknown(key string, names []string) string {
	// Suggest only a near miss: at most two edits, and no more than half the
	// key, so that "db" under edges does not suggest "to".
	best, dist := "", min(3, len(key)/2+1)
	for _, n := range names {
		if d := distance(key, n); d < dist {
			best, dist = n, d
		}
	}
	if best != "" {
		return "unknown key, did you mean " + best + "?"
	}
	return "unknown key, want one of " + strings.Join(names, ", ")
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64 // not a typo; and keeps the work small
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func expect(t reflect.Type) string {
	if t == reflect.TypeFor[Duration]() {
		return expectDuration
	}
	switch t.Kind() {
	case reflect.String:
		return "must be a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "must be an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "must be an integer >= 0"
	case reflect.Bool:
		return "must be true or false"
	case reflect.Float32, reflect.Float64:
		return "must be a number"
	default:
		return "must be a " + t.String()
	}
}

// shape is shown unquoted in a FieldError: it describes a value rather than
// quoting one.
type shape string

func shapeOf(n *yaml.Node) shape {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return shape(fmt.Sprintf("%q", n.Value))
	}
}

func valueOf(n *yaml.Node) any {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return shapeOf(n)
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// joinPath names key below path; a key with spaces or characters that do
// not print is quoted, so that a message keeps to one line.
func joinPath(path, key string) string {
	if strings.ContainsFunc(key, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
