package state

import (
	"strconv"
	"testing"
	"time"
)

func TestFIFO(t *testing.T) {
	t.Parallel()
	f := NewFIFO[int](3, 0)
	for i := range 4 {
		f.Set(strconv.Itoa(i), i)
	}
	if _, ok := f.Get("0"); ok {
		t.Error("the oldest key was not forgotten when a fourth came")
	}
	for _, k := range []string{"1", "2", "3"} {
		if v, ok := f.Get(k); !ok || strconv.Itoa(v) != k {
			t.Errorf("Get(%s) = %d, %v", k, v, ok)
		}
	}
	if got := f.Update("1", func(old int, ok bool) (int, bool) { return old + 10, ok }); got != 11 {
		t.Errorf("Update returned %d, want 11", got)
	}
	if got := f.Update("9", func(old int, ok bool) (int, bool) { return 99, false }); got != 99 {
		t.Errorf("Update not kept returned %d, want 99", got)
	}
	if _, ok := f.Get("9"); ok {
		t.Error("a value Update was told not to keep is kept")
	}
	f.Remove("1")
	if _, ok := f.Get("1"); ok || f.Empty() {
		t.Error("Remove left the key, or emptied the rest")
	}

	expiring := NewFIFO[string](2, time.Nanosecond)
	expiring.Set("k", "v")
	time.Sleep(time.Millisecond)
	if _, ok := expiring.Get("k"); ok {
		t.Error("an expired key is found")
	}
	expiring.Update("k", func(old string, ok bool) (string, bool) {
		if ok || old != "" {
			t.Errorf("Update saw an expired value: %q, %v", old, ok)
		}
		return "new", true
	})
}
