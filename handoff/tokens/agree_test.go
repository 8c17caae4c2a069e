package tokens_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonproxy/baton/handoff/tokens"
	"github.com/tiktoken-go/tokenizer"
)

// The tests in this file hold Baton's counts to OpenAI's tiktoken (the
// reference: see reference_test.go) and compare them with
// github.com/tiktoken-go/tokenizer's, the library the vocabularies came
// from, as Baton counted before it had its own encoder: the library's
// Count, or bytes/4 where it errs (it does not, for invalid UTF-8 either).
// Where the library and tiktoken differ, the library is wrong (its
// compiled patterns skip U+007F, and split some runs of whitespace that
// hold more than one newline), and Baton counts as tiktoken does.

var names = []string{"o200k_base", "cl100k_base", "p50k_base", "p50k_edit", "r50k_base"}

// pair is one encoding's counter and the library's codec.
type pair struct {
	name string
	ours *tokens.Counter
	lib  tokenizer.Codec
}

func pairs(t testing.TB) []pair {
	t.Helper()
	var out []pair
	for _, name := range names {
		ours, err := tokens.For("", name)
		if err != nil {
			t.Fatal(err)
		}
		lib, err := tokenizer.Get(tokenizer.Encoding(name))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pair{name, ours, lib})
	}
	return out
}

// libCount is the library's count as Baton took it.
func libCount(lib tokenizer.Codec, text []byte) int {
	if n, err := lib.Count(string(text)); err == nil {
		return n
	}
	return (len(text) + 3) / 4
}

func TestAgreesWithTiktoken(t *testing.T) {
	texts := corpus(t)
	size := 0
	for _, x := range texts {
		size += len(x.text)
	}
	t.Logf("corpus: %d texts, %d bytes", len(texts), size)
	ref := startTiktoken(t)
	for _, p := range pairs(t) {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel() // with the others' counting while tiktoken counts
			want := ref.countAll(t, p.name, texts)
			total, libWrong := 0, 0
			for i, x := range texts {
				got, lib := p.ours.Count(x.text), libCount(p.lib, x.text)
				if got != want[i] {
					t.Errorf("%s: %d tokens, tiktoken counts %d (the library %d): %.80q", x.name, got, want[i], lib, x.text)
				}
				if lib != want[i] {
					libWrong++
				}
				total += got
			}
			t.Logf("%d tokens in all; the library's count differs from tiktoken's for %d of %d texts", total, libWrong, len(texts))
		})
	}
}

// TestLibraryDifferences: where github.com/tiktoken-go/tokenizer is known
// to count differently from tiktoken, Baton counts as tiktoken does.
func TestLibraryDifferences(t *testing.T) {
	ref := startTiktoken(t)
	for _, p := range pairs(t) {
		for _, s := range []string{"\x7f", "a\x7fb", " \n \n", "x \n \n\ty", "\u0085\n\u2028\n"} {
			text := []byte(s)
			got, want, lib := p.ours.Count(text), ref.count(t, p.name, text), libCount(p.lib, text)
			if got != want {
				t.Errorf("%s: %q is %d tokens, tiktoken counts %d", p.name, s, got, want)
			}
			if lib != want {
				t.Logf("%s: %q: the library counts %d, tiktoken and Baton %d", p.name, s, lib, want)
			}
		}
	}
}

// TestSpecialTokensAreText: "<|endoftext|>" in a handoff's text is not the
// special token; tiktoken's encode_ordinary and the library's Count, and so
// Baton, encode it as text.
func TestSpecialTokensAreText(t *testing.T) {
	ref := startTiktoken(t)
	for _, p := range pairs(t) {
		text := []byte("<|endoftext|>")
		if n := p.ours.Count(text); n <= 1 || n != ref.count(t, p.name, text) || n != libCount(p.lib, text) {
			t.Errorf("%s: %q is %d tokens (tiktoken: %d, the library: %d), want it counted as text", p.name, text, n, ref.count(t, p.name, text), libCount(p.lib, text))
		}
	}
}

// FuzzAgreesWithTiktoken holds Baton's count of any input to tiktoken's,
// with every encoding.
func FuzzAgreesWithTiktoken(f *testing.F) {
	for _, x := range corpus(f) {
		if len(x.text) < 256 {
			f.Add(x.text)
		}
	}
	ps := pairs(f)
	ref := startTiktoken(f)
	f.Fuzz(func(t *testing.T, text []byte) {
		for _, p := range ps {
			if got, want := p.ours.Count(text), ref.count(t, p.name, text); got != want {
				t.Errorf("%s: %d tokens, tiktoken counts %d (the library %d): %q", p.name, got, want, libCount(p.lib, text), text)
			}
		}
	})
}

type text struct {
	name string
	text []byte
}

// corpus is varied text: the repository's docs and some of its code,
// prose and code in many languages and scripts, JSON, emoji, runs of
// whitespace, numbers and long words, invalid UTF-8, the special tokens,
// and random mixes of all of these.
func corpus(t testing.TB) []text {
	t.Helper()
	var out []text
	add := func(name, s string) { out = append(out, text{name, []byte(s)}) }
	for _, pattern := range []string{"../../README.md", "../../docs/*.md", "../../middleware/*.go", "../../config/*.go", "../../charts/baton/values.yaml"} {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("corpus: no files %s (%v)", pattern, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, text{f, b})
		}
	}
	for i, s := range samples {
		add(fmt.Sprintf("samples[%d]", i), s)
	}
	for _, r := range runs {
		for _, n := range []int{1, 2, 3, 4, 7, 16, 95, 96, 127, 128, 129, 300, 1500} {
			add(fmt.Sprintf("%q×%d", r, n), strings.Repeat(r, n))
			add(fmt.Sprintf("x%q×%dy", r, n), "x"+strings.Repeat(r, n)+"y")
		}
	}
	j, err := json.MarshalIndent(map[string]any{
		"task": "reconcile invoices", "amount": 1234.5, "ids": []int{1, 22, 333, 4444, 55555},
		"notes": []string{"naïve café", "東京", "🙂"}, "nested": map[string]any{"ok": true, "null": nil},
	}, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	add("json", string(j))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		add(fmt.Sprintf("mix[%d]", i), mix(rng, 1+rng.IntN(400)))
	}
	return out
}

// mix strings together fragments of many classes at random.
func mix(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		switch k := rng.IntN(10); {
		case k < 4:
			r := []rune(fragments[rng.IntN(len(fragments))] + ".")
			i := rng.IntN(len(r))
			b.WriteString(string(r[i:min(len(r), i+1+rng.IntN(12))]))
		case k < 6:
			b.WriteString(runs[rng.IntN(len(runs))])
		case k < 8:
			b.WriteRune(rune(rng.IntN(0x3000)))
		case k < 9:
			fmt.Fprint(&b, rng.Int64N(1_000_000_000))
		default:
			b.WriteByte(byte(rng.IntN(256)))
		}
	}
	return b.String()
}

var runs = []string{" ", "  ", "\t", "\n", "\r\n", "\n\n", " \n", "a", "ab", "0", "!", "'s", "é", "日", "🙂", "\u200d", "\xff", "=", "-", "/", ".", "AbC"}

var fragments = append(append([]string{}, samples...), "<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>")

var samples = []string{
	"",
	"hello world",
	"The checkout latency doubled after Tuesday's deploy; we've rolled back, and I'll write up what we'd missed.",
	"THEY'LL SAY IT'S FINE. They'Re sure we'VE checked. i'M not.",
	"Supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
	"func (c *Counter) Count(text []byte) int {\n\tif c.enc != nil {\n\t\treturn c.enc.count(string(text))\n\t}\n\treturn (len(text) + 3) / 4\n}\n",
	"def merge(parts):\n    while len(parts) > 1:\n        parts = [a + b for a, b in zip(parts[::2], parts[1::2])]\n    return parts\r\n",
	"SELECT id, total FROM invoices WHERE status = 'open' AND due < now() - interval '30 days';",
	`{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"hi"}]}}}`,
	"<|endoftext|>The end.<|endofprompt|><|fim_prefix|>a<|fim_middle|>b<|fim_suffix|>",
	"3.14159265358979 1,000,000 2026-01-02T15:04:05Z 0x7fffffff 1e-9 +49 30 1234567 №42 ½ ²³ ٣٤٥ ५६७",
	"Der Lieferant hat die Rechnung storniert, weil die Mengenangaben nicht übereinstimmten.",
	"Le délai de traitement a doublé ; nous avons annulé le déploiement à 14 h.",
	"Срок обработки удвоился после развёртывания во вторник.",
	"Ο χρόνος επεξεργασίας διπλασιάστηκε μετά την ανάπτυξη της Τρίτης.",
	"処理時間は火曜日のデプロイ後に倍増しました。ロールバック済みです。",
	"处理延迟在周二部署后翻了一倍，我们已经回滚。",
	"화요일 배포 이후 처리 지연이 두 배가 되었습니다.",
	"تضاعف زمن المعالجة بعد النشر يوم الثلاثاء.",
	"זמן העיבוד הוכפל לאחר הפריסה ביום שלישי.",
	"मंगलवार की तैनाती के बाद प्रसंस्करण समय दोगुना हो गया।",
	"เวลาประมวลผลเพิ่มขึ้นเป็นสองเท่าหลังการปรับใช้เมื่อวันอังคาร",
	"Thời gian xử lý tăng gấp đôi sau đợt triển khai hôm thứ Ba.",
	"e\u0301 a\u0308 n\u0303 \u1e9b\u0323 Å Ω ﬁ ẞ ǅ ǈ ᾼ",
	"🙂👍🏽👨‍👩‍👧‍👦🏳️‍🌈🇫🇷 ❤️ ✅ 🚀🚀🚀",
	"   leading and trailing   \t\t\n\n\n   \r\n\r\n  ",
	"a\xffb\xfe\xc3(\xe2\x82 \xf0\x9f\x99 \xed\xa0\x80 \xc0\xaf end",
	"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
	"https://example.com/v1/chains/abc-123/spend?trace=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"\x00\x01\x02\x7f \u0085 \u00a0 \u2028 \u2029 \u3000 \ufeff \ufffd",
}
