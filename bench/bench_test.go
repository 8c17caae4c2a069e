package main

import (
	"io"
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
	parse := func(t *testing.T, s batonSpec) *config.Config {
		t.Helper()
		c, err := config.Parse(strings.NewReader(s.yaml()), func(string) string { return "" })
		if err != nil {
			t.Fatalf("config.Parse:\n%s\nerror: %v", s.yaml(), err)
		}
		return c
	}

	t.Run("1hop", func(t *testing.T) {
		t.Parallel()
		s := batonSpec{
			agent: "bench-a", upstream: "http://127.0.0.1:9000",
			egress: "127.0.0.1:9001", ingress: "127.0.0.1:9002", admin: "127.0.0.1:9003",
			peers: map[string]string{"bench-b": "http://127.0.0.1:9000"}, edgesTo: []string{"bench-b"},
		}
		c := parse(t, s)
		if !c.RecordsOn() || c.Store.Redis != nil {
			t.Errorf("records on %v, store.redis %+v: want Baton's defaults\n%s", c.RecordsOn(), c.Store.Redis, s.yaml())
		}
	})

	// What each 2hop row means, written out rather than derived from twoHops.
	type want struct {
		dedupeB, records, redisA, redisB, mcp, mtls, onePrefix bool
	}
	wants := map[string]want{
		rowBaton2:                   {dedupeB: true, records: true},
		rowBaton2NoDedupe:           {records: true},
		rowBaton2NoRecords:          {dedupeB: true},
		rowBaton2Redis:              {dedupeB: true, records: true, redisB: true},
		rowBaton2RedisNoDedupe:      {records: true, redisB: true},
		rowBaton2RedisNoRecords:     {dedupeB: true, redisB: true},
		rowBaton2RedisBoth:          {dedupeB: true, records: true, redisA: true, redisB: true},
		rowBaton2RedisBothNoRecords: {dedupeB: true, redisA: true, redisB: true},
		rowBaton2RedisMesh:          {dedupeB: true, records: true, redisA: true, redisB: true, onePrefix: true},
		rowBaton2MCP:                {dedupeB: true, records: true, mcp: true},
		rowBaton2MTLS:               {dedupeB: true, records: true, mtls: true},
	}
	if len(wants) != len(twoHops) {
		t.Errorf("twoHops has %d rows, the test expects %d", len(twoHops), len(wants))
	}
	for name, w := range wants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v, ok := twoHops[name]
			if !ok {
				t.Fatalf("no twoHops entry for %s", name)
			}
			v.row = name
			a, b := v.specs("http://127.0.0.1:9000", "", &benchRedis{})
			// startBaton2 fills these in.
			a.egress, a.ingress, a.admin = "127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"
			b.egress, b.ingress, b.admin = "127.0.0.1:9011", "127.0.0.1:9012", "127.0.0.1:9013"
			a.peers = map[string]string{"bench-b": "http://" + b.ingress}
			if v.mtls {
				h := &harness{dir: t.TempDir()}
				var err error
				if a.tls, b.tls, err = h.certificates(name, a.agent, b.agent); err != nil {
					t.Fatal(err)
				}
				a.peers["bench-b"] = "https://" + b.ingress
			}
			ca, cb := parse(t, a), parse(t, b)
			if (ca.TLS != nil && cb.TLS != nil && ca.PeerTLS("bench-b")) != w.mtls {
				t.Errorf("mutual TLS: A %v, B %v, A to B %v; want %v\n%s", ca.TLS != nil, cb.TLS != nil, ca.PeerTLS("bench-b"), w.mtls, a.yaml())
			}

			if got := *cb.DedupeFor("bench-a").Enabled; got != w.dedupeB {
				t.Errorf("B: dedupe enabled for bench-a: got %v, want %v\n%s", got, w.dedupeB, b.yaml())
			}
			if got := *ca.DedupeFor("bench-b").Enabled; !got {
				t.Errorf("A: dedupe off, want Baton's default\n%s", a.yaml())
			}
			for _, x := range []struct {
				side      string
				c         *config.Config
				s         batonSpec
				wantRedis bool
			}{{"A", ca, a, w.redisA}, {"B", cb, b, w.redisB}} {
				if got := x.c.RecordsOn(); got != w.records {
					t.Errorf("%s: RecordsOn: got %v, want %v\n%s", x.side, got, w.records, x.s.yaml())
				}
				switch r := x.c.Store.Redis; {
				case !x.wantRedis && r != nil:
					t.Errorf("%s: store.redis set, want the memory store\n%s", x.side, x.s.yaml())
				case x.wantRedis && (r == nil || r.URL != benchRedisURL || !strings.HasPrefix(r.Prefix, "bench:")):
					t.Errorf("%s: store.redis: got %+v, want url %s and a bench: prefix\n%s", x.side, r, benchRedisURL, x.s.yaml())
				}
			}
			if w.redisA && w.redisB && (ca.Store.Redis.Prefix == cb.Store.Redis.Prefix) != w.onePrefix {
				t.Errorf("Redis prefixes: A %q, B %q; want one for both %v", ca.Store.Redis.Prefix, cb.Store.Redis.Prefix, w.onePrefix)
			}
			outA, _ := ca.OutEdge("bench-b")
			inB, _ := cb.InEdge("bench-a")
			if (outA.MCP != nil) != w.mcp || (inB.MCP != nil) != w.mcp {
				t.Errorf("edges MCP: A %v, B %v; want %v", outA.MCP != nil, inB.MCP != nil, w.mcp)
			}
			if ca.Agent != "bench-a" || cb.Agent != "bench-b" {
				t.Errorf("agents %q, %q; want bench-a, bench-b", ca.Agent, cb.Agent)
			}
		})
	}
}

// TestRowOrder checks that every 2hop row is a known row, and that the rows
// of each on ÷ off ratio run back to back.
func TestRowOrder(t *testing.T) {
	t.Parallel()
	at := map[string]int{}
	for i, n := range rowNames {
		at[n] = i
	}
	for name := range twoHops {
		if _, ok := at[name]; !ok {
			t.Errorf("%s is in twoHops but not in rowNames", name)
		}
	}
	for _, n := range rowNames {
		if _, ok := twoHops[n]; strings.HasPrefix(n, "baton-2hop") && !ok {
			t.Errorf("%s is in rowNames but has no twoHops entry", n)
		}
	}
	for _, p := range [][2]string{
		{rowBaton2, rowBaton2NoDedupe}, {rowBaton2Redis, rowBaton2RedisNoDedupe},
		{rowBaton2, rowBaton2NoRecords}, {rowBaton2Redis, rowBaton2RedisNoRecords},
		{rowBaton2RedisBoth, rowBaton2RedisBothNoRecords},
	} {
		if d := at[p[0]] - at[p[1]]; d != 1 && d != -1 {
			t.Errorf("%s and %s do not run back to back: %v", p[0], p[1], rowNames)
		}
	}
}

func TestRedisPrefixes(t *testing.T) {
	t.Parallel()
	r := &benchRedis{}
	p1, p2 := r.newPrefix(), r.newPrefix()
	if p1 == p2 || len(r.prefixes) != 2 || !strings.HasPrefix(p1, "bench:") || !strings.HasSuffix(p1, ":") || len(p1) != len("bench:0123456789ab:") {
		t.Errorf("newPrefix: got %q, %q (kept %q); want two distinct bench:<12 hex>: prefixes, both kept", p1, p2, r.prefixes)
	}
}

func TestOnOffFindings(t *testing.T) {
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
			not: []string{"records on"},
		},
		{
			name: "records",
			rows: []Row{
				ok(rowBaton2NoDedupe, 1000, 100), ok(rowBaton2, 900, 110), ok(rowBaton2NoRecords, 1000, 100),
				ok(rowBaton2RedisNoDedupe, 1000, 100), ok(rowBaton2Redis, 800, 130), ok(rowBaton2RedisNoRecords, 1000, 100),
				ok(rowBaton2RedisBoth, 600, 160), ok(rowBaton2RedisBothNoRecords, 1000, 100),
			},
			want: []string{
				"dedupe on ÷ off throughput (memory) = 0.90 (target ≥ 0.85: met); proxy CPU/req on ÷ off = 1.10",
				"records on ÷ off throughput (memory) = 0.90 (target ≥ 0.85: met); proxy CPU/req on ÷ off = 1.10",
				"records on ÷ off throughput (redis) = 0.80 (target ≥ 0.85: MISSED); proxy CPU/req on ÷ off = 1.30",
				"records on ÷ off throughput (redis-both) = 0.60 (target ≥ 0.85: MISSED); proxy CPU/req on ÷ off = 1.60",
			},
		},
		{
			name: "records off row failed",
			rows: []Row{
				ok(rowBaton2, 900, 110), {Name: rowBaton2NoRecords, Status: statusFailed, Note: "probe"},
				{Name: rowBaton2RedisBoth, Status: statusSkipped, Note: "no Redis"},
			},
			want: []string{
				"records on ÷ off throughput (memory) = n/a (needs baton-2hop and baton-2hop-norecords to succeed)",
				"records on ÷ off throughput (redis-both) = n/a (needs baton-2hop-redis-both and baton-2hop-redis-both-norecords to succeed)",
			},
			not: []string{"records on ÷ off throughput (redis)", "dedupe on"},
		},
		{
			name: "warning on a measured row",
			rows: []Row{{Name: rowBaton2, Status: statusOK, RPS: 900, ProxyCPUUsPerReq: cpu(110), Warnings: []string{"it broke"}}},
			want: []string{"baton-2hop: WARNING: it broke"},
		},
		{
			// baton-2hop is the on row of two pairs: -rows for one pair
			// says nothing about the other.
			name: "one pair of baton-2hop selected",
			rows: []Row{ok(rowBaton2NoDedupe, 1000, 100), ok(rowBaton2, 900, 110)},
			want: []string{"dedupe on ÷ off throughput (memory) = 0.90"},
			not:  []string{"records on"},
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
			not:  []string{"dedupe on", "records on"},
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

func TestRowLabel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		row  Row
		want string
	}{
		{inRound(0, rowBaton2, 900, 110), "baton-2hop"},
		{inRound(2, rowBaton2, 900, 110), "baton-2hop #2"},
		{Row{Name: rowNginx, Round: 3, Status: statusSkipped}, "nginx #3"},
	}
	for _, tt := range tests {
		if got := tt.row.cells()[0]; got != tt.want {
			t.Errorf("cells()[0] of %s round %d: got %q, want %q", tt.row.Name, tt.row.Round, got, tt.want)
		}
	}
}

func TestParseFlagsRepeat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		want    int
		wantErr string
	}{
		{args: nil, want: 1},
		{args: []string{"-repeat", "3"}, want: 3},
		{args: []string{"-repeat", "0"}, wantErr: "-repeat: must be >= 1, got 0"},
		{args: []string{"-repeat", "-2"}, wantErr: "-repeat: must be >= 1, got -2"},
	}
	for _, tt := range tests {
		o, err := parseFlags(tt.args, io.Discard)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseFlags(%q): got error %v, want %q", tt.args, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("parseFlags(%q): %v", tt.args, err)
		case o.repeat != tt.want:
			t.Errorf("parseFlags(%q): repeat %d, want %d", tt.args, o.repeat, tt.want)
		}
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

func TestHAProxyConf(t *testing.T) {
	t.Parallel()
	c := haproxyConf("127.0.0.1:1", "127.0.0.1:2", 64)
	for _, want := range []string{
		"nbthread 1", "mode http", "option http-keep-alive", "http-reuse always", "bind 127.0.0.1:1", "server agent 127.0.0.1:2",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("haproxy.cfg lacks %q", want)
		}
	}
	if v := haproxyVersion("/bin/false"); v != "" {
		t.Errorf("haproxyVersion of a binary that prints nothing = %q", v)
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
