// Command train trains Baton's prompt-injection model and evaluates it.
//
//	python3 trust/taint/train/corpus.py --repos DIR --out CORPUS
//	go run ./trust/taint/train train -corpus CORPUS -out trust/taint/injection.weights
//	go run ./trust/taint/train eval -corpus CORPUS -report docs/injection-eval.md
//
// train fits a logistic regression over the hashed features of
// taint.Tokenize on windows of the training documents (CORPUS/train.jsonl),
// picks the operating point on a tuning part of them that is never trained
// on, and writes the weights file that taint embeds. eval scores the
// held-out documents (CORPUS/eval.jsonl) with taint.Detect, the code Baton
// runs, so it must run after the new weights are in place (a new go run
// compiles them in), and writes the report: recall per family, false
// positives per shape, and the curve of both against the threshold.
//
// Training is deterministic for a given corpus.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/batonproxy/baton/trust/taint"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: train train|eval -corpus DIR [flags], or train score < TEXTS")
	}
	if args[0] == "score" {
		// One text a line, \n for a line break: its score and reasons.
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			text := strings.ReplaceAll(sc.Text(), `\n`, "\n")
			sig := taint.Detect([]byte(text))
			fmt.Fprintf(stdout, "%.3f (model %.3f) %q\n\t%s\n", sig.Score, sig.Model, text[:min(len(text), 100)], strings.Join(sig.Reasons, "; "))
		}
		return sc.Err()
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	corpus := fs.String("corpus", "", "the corpus directory (corpus.py's -out)")
	out := fs.String("out", "trust/taint/injection.weights", "train: the weights file to write")
	report := fs.String("report", "", "eval: the Markdown report to write")
	weights := fs.String("weights", "", "eval: a weights file to score with instead of the embedded one")
	scores := fs.String("scores", "", "eval: a file to write every document's id, label, family, shape and score to, tab-separated")
	cfg := defaultConfig()
	fs.UintVar(&cfg.bits, "bits", cfg.bits, "train: log2 of the feature table's size")
	fs.IntVar(&cfg.window, "window", cfg.window, "train: words per window")
	fs.IntVar(&cfg.epochs, "epochs", cfg.epochs, "train: passes over the training windows")
	fs.Float64Var(&cfg.rate, "rate", cfg.rate, "train: AdaGrad learning rate")
	fs.Float64Var(&cfg.l2, "l2", cfg.l2, "train: L2 penalty")
	fs.IntVar(&cfg.prune, "prune", cfg.prune, "train: zero the quantized weights smaller than this")
	fs.Float64Var(&cfg.tuneFP, "tune-fp", cfg.tuneFP, "train: the false-positive rate on tuning benign documents the threshold is set for")
	fs.Float64Var(&cfg.shapeFP, "shape-fp", cfg.shapeFP, "train: the false-positive rate on the tuning benign documents of each shape the threshold is set for")
	fs.Float64Var(&cfg.benignW, "benign-weight", cfg.benignW, "train: the benign documents' total weight, the injected ones' being 1")
	tunePart := fs.Uint("tune-part", uint(cfg.tunePart), "train: percent of the training documents kept for tuning")
	fs.IntVar(&cfg.benignN, "benign-windows", cfg.benignN, "train: random windows of each benign document")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	cfg.tunePart = uint32(*tunePart)
	if *corpus == "" {
		return fmt.Errorf("-corpus is required")
	}
	switch args[0] {
	case "train":
		docs, err := readDocs(filepath.Join(*corpus, "train.jsonl"))
		if err != nil {
			return err
		}
		return train(docs, cfg, *out, stdout)
	case "eval":
		docs, err := readDocs(filepath.Join(*corpus, "eval.jsonl"))
		if err != nil {
			return err
		}
		m := taint.DefaultModel()
		if *weights != "" {
			b, err := os.ReadFile(*weights)
			if err != nil {
				return err
			}
			if m, err = taint.ParseModel(b); err != nil {
				return fmt.Errorf("%s: %w", *weights, err)
			}
		}
		return evaluate(docs, m, evalOut{report: *report, scores: *scores}, stdout)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// doc is one corpus document (corpus.py).
type doc struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	Split  string `json:"split"`
	Label  int    `json:"label"`
	Family string `json:"family"`
	Shape  string `json:"shape"`
	Text   string `json:"text"`
	Span   []int  `json:"span"`
	Attack string `json:"attack"`
}

func readDocs(path string) ([]doc, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var docs []doc
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var d doc
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		docs = append(docs, d)
	}
	return docs, sc.Err()
}
