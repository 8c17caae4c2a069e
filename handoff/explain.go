package handoff

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// explain turns jsonschema's error tree into one violation per failed
// keyword, each a sentence that names the field by its path, says what it
// must be and what it is, and why the field exists.
func (ck *check) explain(verr *jsonschema.ValidationError) {
	switch verr.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		for _, cause := range verr.Causes {
			ck.explain(cause)
		}
		return
	}
	loc := verr.InstanceLocation
	if len(loc) > 0 && loc[0] == "schema_version" {
		return // reported as a version violation
	}
	ptr, field := pointer(loc), dotted(pointer(loc))
	switch k := verr.ErrorKind.(type) {
	case *kind.Required:
		for _, name := range k.Missing {
			if len(loc) == 0 && name == "schema_version" {
				continue
			}
			child := ptr + "/" + escapeToken(name)
			ck.add(child, KindSchema, fmt.Sprintf("%s is missing%s%s", dotted(child), ck.c.condition(verr.SchemaURL), ck.c.hint(verr.SchemaURL, name)))
		}
	case *kind.Type:
		ck.add(ptr, KindSchema, fmt.Sprintf("%s must be %s, not %s", field, orList(k.Want, typeName), typeName(k.Got)))
	case *kind.Enum:
		ck.add(ptr, KindSchema, fmt.Sprintf("%s must be %s, not %s", field, orList(k.Want, quoteJSON), quoteJSON(k.Got)))
	case *kind.Const:
		ck.add(ptr, KindSchema, fmt.Sprintf("%s must be %s, not %s", field, quoteJSON(k.Want), quoteJSON(k.Got)))
	case *kind.MinLength:
		if k.Want == 1 {
			ck.add(ptr, KindSchema, field+" must not be empty")
		} else {
			ck.add(ptr, KindSchema, fmt.Sprintf("%s must be at least %d characters long, not %d", field, k.Want, k.Got))
		}
	case *kind.MaxLength:
		ck.add(ptr, KindSchema, fmt.Sprintf("%s must be at most %d characters long, not %d", field, k.Want, k.Got))
	case *kind.Pattern:
		ck.add(ptr, KindSchema, fmt.Sprintf("%s must be %s, not %s", field, patternName(loc, k.Want), quoteJSON(k.Got)))
	case *kind.Format:
		want := "a valid " + k.Want
		if k.Want == "date-time" {
			want = "an RFC 3339 date-time such as 2025-01-31T09:30:00Z"
		}
		ck.add(ptr, KindSchema, fmt.Sprintf("%s must be %s, not %s", field, want, quoteJSON(k.Got)))
	case *kind.Minimum:
		ck.add(ptr, KindSchema, fmt.Sprintf("%s must be at least %s, not %s", field, ratString(k.Want), ratString(k.Got)))
	case *kind.Maximum:
		ck.add(ptr, KindSchema, fmt.Sprintf("%s must be at most %s, not %s", field, ratString(k.Want), ratString(k.Got)))
	case *kind.OneOf:
		ck.add(ptr, KindSchema, ck.oneOf(field, verr, k))
	case *kind.AnyOf:
		ck.add(ptr, KindSchema, field+" matches none of the allowed forms: "+ck.alternatives(verr))
	case *kind.FalseSchema:
		ck.add(ptr, KindSchema, field+" is not allowed here")
	case *kind.AdditionalProperties:
		ck.add(ptr, KindSchema, fmt.Sprintf("%s has members the schema does not allow: %s", field, strings.Join(k.Properties, ", ")))
	default: // a keyword the v1 schema does not use: jsonschema's own words
		msg := strings.ReplaceAll(verr.Error(), "\n", "; ")
		if u := verr.BasicOutput(); u.Error != nil {
			msg = u.Error.String()
		}
		ck.add(ptr, KindSchema, field+": "+msg)
	}
}

// oneOf words a failed oneOf. When each alternative only requires one member
// (artifacts: content or ref), it names them.
func (ck *check) oneOf(field string, verr *jsonschema.ValidationError, k *kind.OneOf) string {
	var alts []string
	if s := ck.c.byLoc[verr.SchemaURL]; s != nil {
		for _, alt := range s.OneOf {
			if len(alt.Required) != 1 || len(alt.Properties) > 0 {
				alts = nil
				break
			}
			alts = append(alts, alt.Required[0])
		}
	}
	switch {
	case alts != nil && k.Subschemas == nil:
		return fmt.Sprintf("%s must have exactly one of %s; it has none", field, orList(alts, identity))
	case alts != nil:
		return fmt.Sprintf("%s must have exactly one of %s, not several", field, orList(alts, identity))
	case k.Subschemas == nil:
		return field + " matches none of the allowed forms: " + ck.alternatives(verr)
	}
	return fmt.Sprintf("%s matches more than one of the allowed forms (%d and %d), and must match exactly one", field, k.Subschemas[0]+1, k.Subschemas[1]+1)
}

// alternatives words the failures of each alternative of an anyOf or oneOf.
func (ck *check) alternatives(verr *jsonschema.ValidationError) string {
	sub := check{c: ck.c, prefix: ck.prefix}
	for _, cause := range verr.Causes {
		sub.explain(cause)
	}
	details := make([]string, len(sub.out))
	for i, v := range sub.out {
		details[i] = v.Detail
	}
	return strings.Join(details, "; or ")
}

// hint says what a member of the object at schemaURL is for, from the
// schema's description.
func (c *Checker) hint(schemaURL, name string) string {
	for {
		if s := c.byLoc[schemaURL]; s != nil {
			if p := s.Properties[name]; p != nil && p.Description != "" {
				return " (" + describe(p.Description) + ")"
			}
		}
		i := strings.LastIndexByte(schemaURL, '/')
		if i < 0 || !strings.Contains(schemaURL[:i], "#") {
			return ""
		}
		schemaURL = schemaURL[:i] // from …/items/then to …/items
	}
}

// condition says when a conditional requirement applies: for the "then" of
// an if whose properties are consts, "when trust is "untrusted"".
func (c *Checker) condition(schemaURL string) string {
	parent, ok := strings.CutSuffix(schemaURL, "/then")
	s := c.byLoc[parent]
	if !ok || s == nil || s.If == nil {
		return ""
	}
	var conds []string
	for name, p := range s.If.Properties {
		if p.Const != nil {
			conds = append(conds, name+" is "+quoteJSON(*p.Const))
		}
	}
	if len(conds) == 0 {
		return ""
	}
	slices.Sort(conds)
	return ", which is required when " + strings.Join(conds, " and ")
}

// hintAt says what the member at the JSON pointer ptr of the envelope is for.
func (c *Checker) hintAt(ptr string) string {
	s := c.schema
	for _, tok := range strings.Split(ptr, "/")[1:] {
		switch {
		case s == nil:
			return ""
		case s.Items2020 != nil && tok != "" && strings.Trim(tok, "0123456789") == "":
			s = s.Items2020
		default:
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			s = s.Properties[tok]
		}
	}
	if s == nil || s.Description == "" {
		return ""
	}
	return " (" + describe(s.Description) + ")"
}

// describe turns a schema description into a clause: "The sender's …." →
// "the sender's …".
func describe(d string) string {
	d = strings.TrimSuffix(d, ".")
	if len(d) > 1 && 'A' <= d[0] && d[0] <= 'Z' && !('A' <= d[1] && d[1] <= 'Z') {
		d = string(d[0]+'a'-'A') + d[1:]
	}
	return d
}

// pointer is the JSON pointer of a jsonschema instance location.
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(escapeToken(tok))
	}
	return b.String()
}

// dotted names the value at a JSON pointer the way a developer writes it:
// /artifacts/1/source → artifacts[1].source, /a/b.c → a["b.c"], "" → the
// envelope.
func dotted(ptr string) string {
	if ptr == "" {
		return "the envelope"
	}
	var b strings.Builder
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if strings.ContainsAny(tok, "./~[]\" ") {
			b.WriteString("[" + strconv.Quote(tok) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// patternName says in words what the string at loc must look like.
func patternName(loc []string, pattern string) string {
	if len(loc) > 0 {
		switch loc[len(loc)-1] {
		case "trace_id":
			return "a W3C trace id: 32 lowercase hexadecimal digits"
		case "media_type":
			return "a media type such as text/plain or application/json"
		}
	}
	return "a string matching " + pattern
}

// ratString writes a number as JSON would: 1.5, not 3/2.
func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.RatString()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func typeName(t string) string {
	switch t {
	case "object":
		return "an object"
	case "array":
		return "an array"
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "integer":
		return "a whole number"
	case "boolean":
		return "true or false"
	}
	return t
}

func identity(s string) string { return s }

// quoteJSON renders a decoded JSON value, shortened.
func quoteJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if s := string(b); len([]rune(s)) > 60 {
		return string([]rune(s)[:57]) + "…"
	}
	return string(b)
}

// orList joins words as "a, b or c".
func orList[T any](items []T, word func(T) string) string {
	var b strings.Builder
	for i, it := range items {
		switch {
		case i == 0:
		case i == len(items)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(word(it))
	}
	return b.String()
}

// kindRank orders violations: what stops reading first, then the schema,
// then the edge's policy.
var kindRank = map[Kind]int{KindSize: 0, KindVersion: 1, KindSchema: 2, KindRequired: 3, KindCompleteness: 4, KindIdentity: 5}

// sortViolations orders violations by kind, then by pointer (array indexes
// in numeric order), so that output is stable.
func sortViolations(vs []Violation) {
	slices.SortStableFunc(vs, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(kindRank[a.Kind], kindRank[b.Kind]), comparePointers(a.Pointer, b.Pointer), cmp.Compare(a.Detail, b.Detail))
	})
}

func comparePointers(a, b string) int {
	ta, tb := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(ta) && i < len(tb); i++ {
		c := cmp.Compare(ta[i], tb[i])
		na, ea := strconv.Atoi(ta[i])
		nb, eb := strconv.Atoi(tb[i])
		if ea == nil && eb == nil {
			c = cmp.Compare(na, nb)
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(ta), len(tb))
}
