package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/batonproxy/baton/config"
)

func TestMemoryLimit(t *testing.T) {
	mem := &config.Config{Store: config.Store{Memory: config.Memory{MaxBytes: 64 << 20}}}
	redis := &config.Config{Store: config.Store{Redis: &config.Redis{}}}
	for _, c := range []struct {
		name      string
		cfg       *config.Config
		container int64
		want      int64
	}{
		{"memory store, no container limit", mem, 0, 128<<20 + workingSet},
		{"redis, no container limit", redis, 0, workingSet},
		{"memory store in a 256 MiB container", mem, 256 << 20, 256 << 20 / 10 * 9},
		{"redis in a 1 GiB container", redis, 1 << 30, 1 << 30 / 10 * 9},
	} {
		if got := memoryLimit(c.cfg, c.container); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestGCPercent(t *testing.T) {
	off := false
	for _, c := range []struct {
		name string
		cfg  *config.Config
		want int
	}{
		{"records in the in-memory store (the defaults)", &config.Config{}, 100},
		{"the in-memory store without records", &config.Config{Records: config.Records{Enabled: &off}}, 400},
		{"records in Redis", &config.Config{Store: config.Store{Redis: &config.Redis{}}}, 400},
	} {
		if got := gcPercent(c.cfg); got != c.want {
			t.Errorf("%s: GOGC %d, want %d", c.name, got, c.want)
		}
	}
}

func TestContainerMemoryMax(t *testing.T) {
	write := func(t *testing.T, dir, name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, file, body string
		want             int64
	}{
		{"v2 limit", "memory.max", "268435456\n", 256 << 20},
		{"v2 none", "memory.max", "max\n", 0},
		{"v1 limit", "memory/memory.limit_in_bytes", "134217728\n", 128 << 20},
		{"v1 none", "memory/memory.limit_in_bytes", "9223372036854771712\n", 0},
		{"garbage", "memory.max", "lots\n", 0},
	} {
		dir := t.TempDir()
		write(t, dir, c.file, c.body)
		if got := containerMemoryMax(dir); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if got := containerMemoryMax(t.TempDir()); got != 0 {
		t.Errorf("no cgroup files: %d", got)
	}
}
