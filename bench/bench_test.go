package main

import (
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
)

const wrkSample = `Running 1s test @ http://127.0.0.1:18080/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.50ms    2.00ms  20.03ms   87.20%
    Req/Sec    33.48k     7.18k   57.44k    80.95%
  Latency Distribution
     50%  735.00us
     75%    2.10ms
     90%    4.00ms
     99%    1.20s
  70150 requests in 1.10s, 10.10MB read
  Socket errors: connect 0, read 12, write 1, timeout 3
  Non-2xx or 3xx responses: 42
Requests/sec:  63804.75
Transfer/sec:      9.19MB
`

func TestParseWrk(t *testing.T) {
	t.Parallel()
	r, err := parseWrk(wrkSample)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{
		Requests: 70150, Elapsed: 1100 * time.Millisecond, RPS: 63804.75,
		P50: 735 * time.Microsecond, P75: 2100 * time.Microsecond, P90: 4 * time.Millisecond, P99: 1200 * time.Millisecond,
		Non2xx: 42, SocketErrors: 16, Timeouts: 3,
	}
	if r != want {
		t.Errorf("parseWrk:\n got %+v\nwant %+v", r, want)
	}
}

func TestParseWrkErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, out, want string
	}{
		{name: "empty", out: "", want: "requests in"},
		{name: "no latency flag", out: strings.Replace(wrkSample, "     50%  735.00us\n", "", 1), want: "--latency"},
		{name: "no rps", out: strings.Replace(wrkSample, "Requests/sec:", "Reqs:", 1), want: "Requests/sec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := parseWrk(tt.out); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseWrk: got %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	line := "4242 (we (ird) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 9 0 1000 1000000 500\n"
	u, s, pp, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if u != 250 || s != 37 || pp != 17 {
		t.Errorf("parseStat: got utime %d stime %d ppid %d, want 250 37 17", u, s, pp)
	}
}

func TestRequestBody(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 10, 512, 4096} {
		b := requestBody(n)
		if n >= 30 && len(b) != n {
			t.Errorf("requestBody(%d): got %d bytes", n, len(b))
		}
		if !strings.HasPrefix(string(b), "{") || !strings.HasSuffix(string(b), "}") {
			t.Errorf("requestBody(%d): not a JSON object: %s", n, b)
		}
	}
}

// TestBatonConfigs checks that the configs the harness generates pass
// Baton's own strict decoding and validation, and say what each row means.
func TestBatonConfigs(t *testing.T) {
	t.Parallel()
	receiver := batonSpec{
		agent: "bench-b", upstream: "http://127.0.0.1:9000",
		egress: "127.0.0.1:9011", ingress: "127.0.0.1:9012", admin: "127.0.0.1:9013",
		edgeFrom: []string{"bench-a"},
	}
	with := func(f func(*batonSpec)) batonSpec { s := receiver; f(&s); return s }
	const prefix = "bench:0123456789ab:"
	tests := []struct {
		name      string
		spec      batonSpec
		dedupe    bool
		redisPref string // "" for the memory store
	}{
		{name: "1hop", dedupe: true, spec: batonSpec{
			agent: "bench-a", upstream: "http://127.0.0.1:9000",
			egress: "127.0.0.1:9001", ingress: "127.0.0.1:9002", admin: "127.0.0.1:9003",
			peers: map[string]string{"bench-b": "http://127.0.0.1:9000"}, edgesTo: []string{"bench-b"},
		}},
		{name: "2hop receiver", dedupe: true, spec: receiver},
		{name: "2hop receiver nodedupe", spec: with(func(s *batonSpec) { s.noDedupe = true })},
		{name: "2hop receiver redis", dedupe: true, redisPref: prefix, spec: with(func(s *batonSpec) {
			s.redisURL, s.redisPrefix = benchRedisURL, prefix
		})},
		{name: "2hop receiver redis nodedupe", redisPref: prefix, spec: with(func(s *batonSpec) {
			s.redisURL, s.redisPrefix, s.noDedupe = benchRedisURL, prefix, true
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Parse(strings.NewReader(tt.spec.yaml()), func(string) string { return "" })
			if err != nil {
				t.Fatalf("config.Parse:\n%s\nerror: %v", tt.spec.yaml(), err)
			}
			if got := *c.DedupeFor("bench-a").Enabled; got != tt.dedupe {
				t.Errorf("dedupe enabled for bench-a: got %v, want %v\n%s", got, tt.dedupe, tt.spec.yaml())
			}
			switch r := c.Store.Redis; {
			case tt.redisPref == "" && r != nil:
				t.Errorf("store.redis set, want the memory store\n%s", tt.spec.yaml())
			case tt.redisPref != "" && (r == nil || r.URL != benchRedisURL || r.Prefix != tt.redisPref):
				t.Errorf("store.redis: got %+v, want url %s prefix %q\n%s", r, benchRedisURL, tt.redisPref, tt.spec.yaml())
			}
		})
	}
}

func TestDedupeFindings(t *testing.T) {
	t.Parallel()
	cpu := func(v float64) *float64 { return &v }
	ok := func(name string, rps, us float64) Row {
		return Row{Name: name, Status: statusOK, RPS: rps, ProxyCPUUsPerReq: cpu(us)}
	}
	tests := []struct {
		name string
		rows []Row
		want []string
		not  []string
	}{
		{
			name: "both met and missed",
			rows: []Row{
				ok(rowBaton2, 900, 110), ok(rowBaton2NoDedupe, 1000, 100),
				ok(rowBaton2Redis, 500, 150), ok(rowBaton2RedisNoDedupe, 1000, 100),
			},
			want: []string{
				"dedupe on ÷ off throughput (memory) = 0.90 (target ≥ 0.85: met); proxy CPU/req on ÷ off = 1.10",
				"dedupe on ÷ off throughput (redis) = 0.50 (target ≥ 0.85: MISSED); proxy CPU/req on ÷ off = 1.50",
			},
		},
		{
			name: "redis skipped",
			rows: []Row{
				ok(rowBaton2, 900, 110), ok(rowBaton2NoDedupe, 1000, 100),
				{Name: rowBaton2Redis, Status: statusSkipped, Note: "no Redis"},
			},
			want: []string{"dedupe on ÷ off throughput (redis) = n/a (needs baton-2hop-redis and baton-2hop-redis-nodedupe to succeed)"},
		},
		{
			name: "rows not selected",
			rows: []Row{ok(rowBaton1, 900, 110)},
			not:  []string{"dedupe on"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := &results{Rows: tt.rows}
			res.derive()
			all := strings.Join(res.findings(), "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("findings lack %q:\n%s", w, all)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(all, n) {
					t.Errorf("findings have %q:\n%s", n, all)
				}
			}
		})
	}
}

func TestParseRedisInfo(t *testing.T) {
	t.Parallel()
	// A pid above the kernel's limit (2^22) cannot be a process to count.
	v, pid := parseRedisInfo("# Server\r\nredis_version:7.0.15\r\nprocess_id:1\r\n")
	if v != "7.0.15" || pid != 0 {
		t.Errorf("parseRedisInfo: got %q, %d; want 7.0.15, 0", v, pid)
	}
}

func TestNginxConf(t *testing.T) {
	t.Parallel()
	c := nginxConf("/tmp/x", "127.0.0.1:1", "127.0.0.1:2", 64)
	for _, want := range []string{
		"daemon off;", "worker_processes 1;", "keepalive 64;", "proxy_http_version 1.1;",
		`proxy_set_header Connection "";`, "listen 127.0.0.1:1;", "server 127.0.0.1:2;",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
}
