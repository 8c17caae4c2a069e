package tokens_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
)

// tiktoken counts with OpenAI's tiktoken: its Rust core built to
// WebAssembly (the npm package tiktoken, pinned in testdata/tiktoken), run
// by node as one process that answers a line per text. It is the reference
// both Baton's encoder and github.com/tiktoken-go/tokenizer are held to.
type tiktoken struct {
	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Scanner
}

var (
	tiktokenInstall    sync.Once
	tiktokenInstallErr error
)

// startTiktoken starts the reference, installing the pinned package first
// when .ci/run has not.
func startTiktoken(t testing.TB) *tiktoken {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("counting against tiktoken needs node and npm (.ci/run installs them: apt-get install nodejs npm)")
	}
	tiktokenInstall.Do(func() {
		if _, err := os.Stat("testdata/tiktoken/node_modules/tiktoken"); err == nil {
			return
		}
		install := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		install.Dir = "testdata/tiktoken"
		if out, err := install.CombinedOutput(); err != nil {
			tiktokenInstallErr = fmt.Errorf("npm ci in handoff/tokens/testdata/tiktoken: %w\n%s", err, out)
		}
	})
	if tiktokenInstallErr != nil {
		t.Fatal(tiktokenInstallErr)
	}
	cmd := exec.Command(node, "count.cjs")
	cmd.Dir = "testdata/tiktoken"
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	return &tiktoken{in: in, out: bufio.NewScanner(out)}
}

// count returns tiktoken's count of text. Bytes that are not UTF-8 are
// sent as U+FFFD each, as Baton's split reads them (a JavaScript string
// can hold no invalid UTF-8).
func (r *tiktoken) count(t testing.TB, encoding string, text []byte) int {
	t.Helper()
	line, err := json.Marshal([2]string{encoding, string([]rune(string(text)))})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.in.Write(append(line, '\n')); err != nil {
		t.Fatalf("tiktoken: %v", err)
	}
	if !r.out.Scan() {
		t.Fatalf("tiktoken: no answer: %v", r.out.Err())
	}
	n, err := strconv.Atoi(r.out.Text())
	if err != nil {
		t.Fatalf("tiktoken: %q: %v", r.out.Text(), err)
	}
	return n
}

// countAll returns tiktoken's counts of texts, sent all at once.
func (r *tiktoken) countAll(t testing.TB, encoding string, texts []text) []int {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	sent := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(r.in)
		for _, x := range texts {
			line, err := json.Marshal([2]string{encoding, string([]rune(string(x.text)))})
			if err == nil {
				_, err = w.Write(append(line, '\n'))
			}
			if err != nil {
				sent <- err
				return
			}
		}
		sent <- w.Flush()
	}()
	counts := make([]int, 0, len(texts))
	for range texts {
		if !r.out.Scan() {
			t.Fatalf("tiktoken: no answer: %v", r.out.Err())
		}
		n, err := strconv.Atoi(r.out.Text())
		if err != nil {
			t.Fatalf("tiktoken: %q: %v", r.out.Text(), err)
		}
		counts = append(counts, n)
	}
	if err := <-sent; err != nil {
		t.Fatalf("tiktoken: %v", err)
	}
	return counts
}
