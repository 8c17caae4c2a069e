package config

// BATON_* overrides and loading the file.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseEnv(t *testing.T) {
	t.Parallel()
	withRedis := minimal + "store: {redis: {url: redis://127.0.0.1:6379/0, password: fromfile}}\n"
	tests := []struct {
		name    string
		in      string
		env     map[string]string
		check   func(t *testing.T, c *Config)
		wantErr []string
	}{
		{
			name: "BATON_AGENT overrides the file",
			in:   minimal,
			env:  map[string]string{"BATON_AGENT": "planner"},
			check: func(t *testing.T, c *Config) {
				if c.Agent != "planner" {
					t.Errorf("Agent = %q, want planner", c.Agent)
				}
			},
		},
		{
			name: "BATON_AGENT and BATON_UPSTREAM configure an empty file",
			in:   "",
			env:  map[string]string{"BATON_AGENT": "planner", "BATON_UPSTREAM": "http://127.0.0.1:7000"},
			check: func(t *testing.T, c *Config) {
				if c.Agent != "planner" || c.Upstream != "http://127.0.0.1:7000" || c.UpstreamURL.Host != "127.0.0.1:7000" {
					t.Errorf("Agent, Upstream = %q, %q", c.Agent, c.Upstream)
				}
			},
		},
		{
			name: "BATON_UPSTREAM overrides the file",
			in:   minimal,
			env:  map[string]string{"BATON_UPSTREAM": "https://agent.local:8443/base"},
			check: func(t *testing.T, c *Config) {
				if c.UpstreamURL.String() != "https://agent.local:8443/base" {
					t.Errorf("UpstreamURL = %v", c.UpstreamURL)
				}
			},
		},
		{
			name: "BATON_LOG_LEVEL overrides the file",
			in:   minimal + "log_level: warn\n",
			env:  map[string]string{"BATON_LOG_LEVEL": "debug"},
			check: func(t *testing.T, c *Config) {
				if c.LogLevel != "debug" {
					t.Errorf("LogLevel = %q, want debug", c.LogLevel)
				}
			},
		},
		{
			name: "BATON_INTERCEPT_MODE overrides the file",
			in:   minimal + "intercept: {mode: proxy}\n",
			env:  map[string]string{"BATON_INTERCEPT_MODE": "transparent"},
			check: func(t *testing.T, c *Config) {
				if !c.Transparent() {
					t.Errorf("Intercept.Mode = %q, want transparent", c.Intercept.Mode)
				}
			},
		},
		{
			name: "BATON_SHUTDOWN_GRACE overrides the file",
			in:   minimal + "shutdown_grace: 5s\n",
			env:  map[string]string{"BATON_SHUTDOWN_GRACE": "45s"},
			check: func(t *testing.T, c *Config) {
				if c.ShutdownGrace.D() != 45*time.Second {
					t.Errorf("ShutdownGrace = %v, want 45s", c.ShutdownGrace.D())
				}
			},
		},
		{
			name: "BATON_REDIS_PASSWORD overrides the file",
			in:   withRedis,
			env:  map[string]string{"BATON_REDIS_PASSWORD": "fromenv"},
			check: func(t *testing.T, c *Config) {
				if c.Store.Redis.Password != "fromenv" {
					t.Errorf("Password = %q, want fromenv", c.Store.Redis.Password)
				}
			},
		},
		{
			name: "BATON_REDIS_PASSWORD alone does not switch on redis",
			in:   minimal,
			env:  map[string]string{"BATON_REDIS_PASSWORD": "fromenv"},
			check: func(t *testing.T, c *Config) {
				if c.Store.Redis != nil {
					t.Errorf("Store.Redis = %+v, want nil", c.Store.Redis)
				}
			},
		},
		{
			name: "an empty variable counts as unset",
			in:   withRedis,
			env:  map[string]string{"BATON_AGENT": "", "BATON_REDIS_PASSWORD": "", "BATON_SHUTDOWN_GRACE": ""},
			check: func(t *testing.T, c *Config) {
				if c.Agent != "analyst" || c.Store.Redis.Password != "fromfile" || c.ShutdownGrace.D() != DefaultShutdownGrace {
					t.Errorf("Agent, Password, ShutdownGrace = %q, %q, %v", c.Agent, c.Store.Redis.Password, c.ShutdownGrace.D())
				}
			},
		},
		{
			name:    "malformed BATON_SHUTDOWN_GRACE names the variable and its text",
			in:      minimal,
			env:     map[string]string{"BATON_SHUTDOWN_GRACE": "soon"},
			wantErr: []string{`shutdown_grace: must be a duration like 15s or 1m30s (from BATON_SHUTDOWN_GRACE), got "soon"`},
		},
		{
			name: "BATON_PROFILING turns profiling on, and off",
			in:   minimal + "profiling: true\n",
			env:  map[string]string{"BATON_PROFILING": "false"},
			check: func(t *testing.T, c *Config) {
				if c.Profiling {
					t.Error("Profiling = true, want BATON_PROFILING=false to turn it off")
				}
				on, err := Parse(strings.NewReader(minimal), envOf(map[string]string{"BATON_PROFILING": "true"}))
				if err != nil || !on.Profiling {
					t.Errorf("with BATON_PROFILING=true: Profiling = %v (%v)", on != nil && on.Profiling, err)
				}
			},
		},
		{
			name:    "malformed BATON_PROFILING names the variable and its text",
			in:      minimal,
			env:     map[string]string{"BATON_PROFILING": "1"},
			wantErr: []string{`profiling: must be true or false (from BATON_PROFILING), got "1"`},
		},
		{
			name:    "negative BATON_SHUTDOWN_GRACE",
			in:      minimal,
			env:     map[string]string{"BATON_SHUTDOWN_GRACE": "-3s"},
			wantErr: []string{`shutdown_grace: must be a duration >= 0 (from BATON_SHUTDOWN_GRACE), got "-3s"`},
		},
		{
			name: "bad values from the environment say so, next to the file's problems",
			in:   minimal + "edges: [{to: nobody}]\n",
			env: map[string]string{
				"BATON_AGENT": "Bad Name", "BATON_UPSTREAM": "127.0.0.1:9001",
				"BATON_LOG_LEVEL": "INFO", "BATON_SHUTDOWN_GRACE": "1 minute",
			},
			wantErr: []string{
				`shutdown_grace: must be a duration like 15s or 1m30s (from BATON_SHUTDOWN_GRACE), got "1 minute"`,
				`agent: must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit (from BATON_AGENT), got "Bad Name"`,
				`upstream: must be the http(s) URL of the local agent, like http://127.0.0.1:8080 (no http:// or https://) (from BATON_UPSTREAM), got "127.0.0.1:9001"`,
				`log_level: must be one of debug, info, warn, error (from BATON_LOG_LEVEL), got "INFO"`,
				`edges[0].to: must name a peer under peers, got "nobody"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(strings.NewReader(tt.in), envOf(tt.env))
			if tt.wantErr != nil {
				if got := lines(err); !reflect.DeepEqual(got, tt.wantErr) {
					t.Errorf("Parse error lines\n got: %q\nwant: %q", got, tt.wantErr)
				}
				assertFieldErrors(t, err)
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "baton.yaml")
	if err := os.WriteFile(good, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		wantErr error
	}{
		{name: "a good file", path: good},
		{name: "a missing file", path: filepath.Join(dir, "missing.yaml"), wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(tt.path, envOf(nil))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Load error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.Agent != "analyst" {
				t.Errorf("Agent = %q", c.Agent)
			}
		})
	}
}
