// Command gen writes handoff/tokens' encodings from
// github.com/tiktoken-go/tokenizer (MIT licence, Copyright (c) 2023
// tiktoken-go), the module go.mod names: each vocabulary as a compact
// embedded file, and each encoding's pre-tokenization pattern and special
// tokens, with the model names that pick an encoding, as encodings.go.
// The vocabularies are OpenAI's, published with tiktoken (MIT licence,
// Copyright (c) 2022 OpenAI, Shantanu Jain).
//
// Run it from handoff/tokens with go generate. The vocabularies are read
// through the library's API (Decode of each rank); the patterns, special
// tokens and model prefixes are unexported there, so they are read from the
// library's source in the module cache.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tiktoken-go/tokenizer"
)

const module = "github.com/tiktoken-go/tokenizer"

// encoding is one encoding as the library's source defines it.
type encoding struct {
	Name    string
	Vocab   string // the vocabulary's file, shared by encodings with one vocabulary
	Ranks   int    // ranks 0..Ranks-1, some with no token
	Base    string // the vocabulary this one extends, or ""
	Pattern string
	Special []special
}

type special struct {
	Token string
	Rank  int
}

type model struct{ Name, Encoding string }

func main() {
	log.SetFlags(0)
	log.SetPrefix("gen: ")
	out := flag.String("out", ".", "the directory of package tokens")
	flag.Parse()
	if err := run(*out); err != nil {
		log.Fatal(err)
	}
}

func run(out string) error {
	dir, version, err := moduleDir()
	if err != nil {
		return err
	}
	encs, err := parseCodecs(filepath.Join(dir, "codec"))
	if err != nil {
		return err
	}
	vocabs := map[string][][]byte{} // tokens by vocabulary file
	for i := range encs {
		e := &encs[i]
		tokens, err := vocabulary(e.Name, e.Special)
		if err != nil {
			return err
		}
		e.Ranks = len(tokens)
		if v, ok := vocabs[e.Vocab]; ok && (len(v) != len(tokens) || !extends(tokens, v)) {
			return fmt.Errorf("%s: its vocabulary differs from the other encodings' of vocabulary %s", e.Name, e.Vocab)
		}
		vocabs[e.Vocab] = tokens
	}
	for i := range encs {
		e := &encs[i]
		e.Base = base(e.Vocab, vocabs)
	}
	for _, name := range slices.Sorted(maps.Keys(vocabs)) {
		tokens := vocabs[name]
		from := 0
		if b := base(name, vocabs); b != "" {
			from = len(vocabs[b])
		}
		data, err := compact(tokens, from)
		if err != nil {
			return err
		}
		path := filepath.Join(out, "vocab", name+".bpe.gz")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		log.Printf("%s: ranks %d to %d, %d bytes", path, from, len(tokens)-1, len(data))
	}
	models, prefixes, err := parseModels(filepath.Join(dir, "tokenizer.go"))
	if err != nil {
		return err
	}
	return writeTables(filepath.Join(out, "encodings.go"), version, encs, models, prefixes)
}

// moduleDir returns the library's directory in the module cache and its
// version, as go.mod requires it.
func moduleDir() (dir, version string, err error) {
	b, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", module).Output()
	if err != nil {
		return "", "", fmt.Errorf("go list -m %s: %w", module, err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "" {
		return "", "", fmt.Errorf("go list -m %s: %q: not downloaded? (go mod download)", module, b)
	}
	return f[0], f[1], nil
}

// vocabulary returns the tokens of an encoding by rank, nil where a rank
// has none (a special token's). It asks for every rank up to well past
// the highest special token's and its last token's.
func vocabulary(name string, specials []special) ([][]byte, error) {
	codec, err := tokenizer.Get(tokenizer.Encoding(name))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	limit := 0
	for _, s := range specials {
		limit = max(limit, s.Rank+1)
	}
	var tokens [][]byte
	seen := map[string]bool{}
	for rank, misses := 0, 0; rank < limit || misses < 1<<16; rank++ {
		t, err := codec.Decode([]uint{uint(rank)})
		if err != nil {
			tokens = append(tokens, nil)
			misses++
			continue
		}
		misses = 0
		if t == "" || seen[t] {
			return nil, fmt.Errorf("%s: rank %d: empty or repeated token %q", name, rank, t)
		}
		seen[t] = true
		tokens = append(tokens, []byte(t))
	}
	for len(tokens) > 0 && tokens[len(tokens)-1] == nil {
		tokens = tokens[:len(tokens)-1]
	}
	return tokens, nil
}

// compact writes the count of tokens' ranks and the first rank it holds
// (uvarints), then each token from that rank on, in rank order: its length
// (uvarint) and bytes, length 0 where a rank has no token; all
// gzip-compressed.
func compact(tokens [][]byte, from int) ([]byte, error) {
	var raw []byte
	raw = binary.AppendUvarint(raw, uint64(len(tokens)))
	raw = binary.AppendUvarint(raw, uint64(from))
	for _, t := range tokens[from:] {
		raw = binary.AppendUvarint(raw, uint64(len(t)))
		raw = append(raw, t...)
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// base returns the largest other vocabulary that vocabulary name extends
// (p50k_base is r50k_base and 25 tokens more), or "". Its file holds only
// the tokens past its base's.
func base(name string, vocabs map[string][][]byte) string {
	b := ""
	for other, tokens := range vocabs {
		if other != name && len(tokens) < len(vocabs[name]) && extends(vocabs[name], tokens) &&
			(b == "" || len(tokens) > len(vocabs[b])) {
			b = other
		}
	}
	return b
}

// extends reports whether tokens begin with the tokens of base.
func extends(tokens, base [][]byte) bool {
	return len(tokens) >= len(base) && slices.EqualFunc(tokens[:len(base)], base, bytes.Equal)
}

// parseCodecs reads each encoding's constructor in the library's codec
// package: the Codec literal's name, vocabulary, specialTokens, and the
// pattern its regexp2.MustCompile compiles.
func parseCodecs(dir string) ([]encoding, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var encs []encoding
	for _, path := range files {
		if strings.HasSuffix(path, "_vocab.go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, ".gen.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "New") {
				continue
			}
			e, err := parseConstructor(fn)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", filepath.Base(path), fn.Name.Name, err)
			}
			encs = append(encs, e)
		}
	}
	if len(encs) == 0 {
		return nil, errors.New("no encodings found in " + dir)
	}
	slices.SortFunc(encs, func(a, b encoding) int { return strings.Compare(a.Name, b.Name) })
	return encs, nil
}

func parseConstructor(fn *ast.FuncDecl) (encoding, error) {
	var e encoding
	var err error
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "MustCompile" && len(n.Args) > 0 {
				e.Pattern, err = unquote(n.Args[0])
			}
		case *ast.KeyValueExpr:
			key, _ := n.Key.(*ast.Ident)
			if key == nil {
				return true
			}
			switch key.Name {
			case "name":
				e.Name, err = unquote(n.Value)
			case "vocabulary":
				if id, ok := n.Value.(*ast.Ident); ok {
					e.Vocab = vocabFile(id.Name)
				}
			case "specialTokens":
				e.Special, err = parseSpecials(n.Value)
				return false
			}
		}
		return err == nil
	})
	switch {
	case err != nil:
		return e, err
	case e.Name == "" || e.Vocab == "" || e.Pattern == "" || len(e.Special) == 0:
		return e, fmt.Errorf("found name %q, vocabulary %q, pattern %q, %d special tokens: the library's source changed shape", e.Name, e.Vocab, e.Pattern, len(e.Special))
	}
	return e, nil
}

// vocabFile names a vocabulary's file for its variable: p50kBaseVocab is
// p50k_base.
func vocabFile(ident string) string {
	s := strings.TrimSuffix(ident, "Vocab")
	var b strings.Builder
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func parseSpecials(x ast.Expr) ([]special, error) {
	lit, ok := x.(*ast.CompositeLit)
	if !ok {
		return nil, errors.New("specialTokens is not a map literal")
	}
	var out []special
	for _, el := range lit.Elts {
		kv := el.(*ast.KeyValueExpr)
		tok, err := unquote(kv.Key)
		if err != nil {
			return nil, err
		}
		v, ok := kv.Value.(*ast.BasicLit)
		if !ok {
			return nil, fmt.Errorf("special token %q: rank is not a literal", tok)
		}
		rank, err := strconv.Atoi(v.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, special{tok, rank})
	}
	slices.SortFunc(out, func(a, b special) int { return a.Rank - b.Rank })
	return out, nil
}

func unquote(x ast.Expr) (string, error) {
	lit, ok := x.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", errors.New("not a string literal")
	}
	return strconv.Unquote(lit.Value)
}
