package trust

import (
	"errors"
	"reflect"
	"testing"
)

func TestLabelsRoundTrip(t *testing.T) {
	var l Labels
	l.Add("/summary", "https://news.example/a?q=1")
	l.Add("/artifacts/0/content", "peer:planner", "https://news.example/a?q=1")
	l.Add("/artifacts/0/content", "peer:planner") // merged, not repeated
	l.Add("/k\u00e9y with space/x%y", "https://ex.example/p\u00e4ge \"quoted\"")
	l.Add("", "peer:scraper")
	l.Unscanned = true
	v := l.String()
	want := `untrusted=("";src="peer:scraper" "/artifacts/0/content";src="peer:planner https://news.example/a?q=1" ` +
		`"/k%C3%A9y%20with%20space/x%25y";src="https://ex.example/p%C3%A4ge%20\"quoted\"" "/summary";src="https://news.example/a?q=1"), unscanned`
	if v != want {
		t.Fatalf("String =\n %s\nwant\n %s", v, want)
	}
	got, err := ParseLabels(v)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, l) {
		t.Fatalf("ParseLabels(String) = %+v, want %+v", got, l)
	}
}

// A usual value (a span or two, a source each) renders with one allocation,
// the string: Baton-Trust is set on every handoff with untrusted content.
func TestLabelsStringAllocs(t *testing.T) {
	var l Labels
	l.Add("/task", "peer:planner")
	l.Add("/context/0", "https://news.example/a?q=1", "peer:scraper")
	if n := testing.AllocsPerRun(100, func() { _ = l.String() }); n != 1 {
		t.Errorf("Labels.String: %v allocations, want 1", n)
	}
}

func TestLabelsFind(t *testing.T) {
	var l Labels
	l.Add("/artifacts/1", "u")
	for ptr, want := range map[string]bool{"/artifacts/1": true, "/artifacts/1/content": true, "/artifacts/10": false, "/summary": false} {
		if _, ok := l.Find(ptr); ok != want {
			t.Errorf("Find(%q) = %v, want %v", ptr, ok, want)
		}
	}
	l.Add("", "peer:x")
	if _, ok := l.Find("/summary"); !ok {
		t.Error(`a label on "" must cover every pointer`)
	}
}

func TestParseLabelsMalformed(t *testing.T) {
	for _, v := range []string{
		`untrusted=`,
		`untrusted="/a"`,
		`untrusted=(/a)`,
		`untrusted=(1)`,
		`untrusted=("a")`,
		`untrusted=("/a";src=1)`,
		`untrusted=("/a";src="%zz")`,
		`untrusted=("/a"`,
	} {
		if _, err := ParseLabels(v); !errors.Is(err, ErrLabels) {
			t.Errorf("ParseLabels(%q) error = %v, want ErrLabels", v, err)
		}
	}
	l, err := ParseLabels(`unscanned, later=?1`)
	if err != nil || !l.Unscanned || len(l.Spans) != 0 {
		t.Fatalf("ParseLabels with an unknown member = %+v, %v", l, err)
	}
}
