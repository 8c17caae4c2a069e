package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonproxy/baton/edgehealth"
)

const topUsage = `  baton top [--admin URL]... [--interval 2s] [--once]
                                 per-edge request rate, latency p50/p95/p99, error %,
                                 retries, breaker state and dead letters, and per
                                 model tokens/s, cost/h and error %, from the
                                 /metrics of one or more Batons, refreshed in place
                                 (--once: one plain snapshot since each Baton started)
`

// topCmd shows handoff health per edge from Batons' /metrics (the series
// package edgehealth reads). The first frame covers each Baton's life so
// far (rates averaged over its uptime); each later one the time since the
// frame before.
func topCmd(ctx context.Context, args []string, stdout io.Writer, env func(string) string) error {
	fs := flag.NewFlagSet("top", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var admins multiFlag
	fs.Var(&admins, "admin", "a Baton's admin listener (repeatable)")
	interval := fs.Duration("interval", 2*time.Second, "refresh interval")
	once := fs.Bool("once", false, "print one snapshot without terminal control codes and exit")
	if err := fs.Parse(args); err != nil {
		return usageError{msg: "top: " + err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{msg: fmt.Sprintf("top: unexpected argument %q", fs.Arg(0))}
	}
	if *interval <= 0 {
		return usageError{msg: "top: --interval must be positive"}
	}
	if len(admins) == 0 {
		admins = multiFlag{"http://" + defaultAdmin}
	}
	clients := make([]*adminClient, len(admins))
	for i, a := range admins {
		clients[i] = newAdminClient(a, env)
		clients[i].http.Timeout = max(*interval, time.Second)
	}
	prev := make([]*edgehealth.Snapshot, len(clients))
	for {
		var frame bytes.Buffer
		var errs []error
		for i, c := range clients {
			cur, err := c.snapshot(ctx)
			if err != nil {
				errs = append(errs, err)
				fmt.Fprintf(&frame, "%s: %v\n\n", c.addr, err)
				continue
			}
			renderTop(&frame, c.addr, prev[i], cur)
			prev[i] = cur
		}
		if *once {
			_, err := stdout.Write(frame.Bytes())
			return errors.Join(append(errs, err)...)
		}
		// Home, clear, then the frame: the view refreshes in place.
		if _, err := io.WriteString(stdout, "\x1b[H\x1b[2J"+frame.String()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*interval):
		}
	}
}

// snapshot scrapes the Baton's /metrics.
func (c *adminClient) snapshot(ctx context.Context) (*edgehealth.Snapshot, error) {
	u := "http://" + c.addr + "/metrics"
	if strings.Contains(c.addr, "://") {
		u = strings.TrimSuffix(c.addr, "/") + "/metrics"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin %s: %w", c.addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("admin %s: GET /metrics: %s", c.addr, resp.Status)
	}
	s, err := edgehealth.Read(io.LimitReader(resp.Body, 64<<20), time.Now())
	if err != nil {
		return nil, fmt.Errorf("admin %s: %w", c.addr, err)
	}
	return s, nil
}

// renderTop writes one Baton's table: the window is since prev, or since
// the Baton started when prev is nil.
func renderTop(w io.Writer, addr string, prev, cur *edgehealth.Snapshot) {
	rows, window := edgehealth.Rows(prev, cur)
	head := addr
	if cur.Agent != "" {
		head = cur.Agent + " @ " + addr
	}
	if !cur.Started.IsZero() {
		head += "  up " + cur.At.Sub(cur.Started).Round(time.Second).String()
	}
	if prev != nil {
		head += "  last " + window.Round(time.Millisecond).String()
	} else {
		head += "  since start"
	}
	fmt.Fprintln(w, head)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "EDGE\tSIDE\tTOTAL\tREQ/S\tERR%\tP50\tP95\tP99\tRETRIES\tTIED\tBREAKER\tDLQ\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t\n", r.Name(), r.Side, r.Total, r.Rate, r.ErrPct,
			r.P50, r.P95, r.P99, r.Retries, r.Tied, r.Breaker, r.DeadLetters)
	}
	tw.Flush()
	if models := edgehealth.ModelRows(prev, cur); len(models) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "MODEL API\tMODEL\tTOKENS\tTOKENS/S\tCOST/H\tCALLS\tERR%\t")
		for _, r := range models {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%.0f\t%s\t\n", r.API, r.Name, r.Total, r.TokensPerSec, r.CostPerHour, r.Calls, r.Err)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
}
