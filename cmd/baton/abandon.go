package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/batonproxy/baton/compensation"
)

const abandonUsage = `  baton abandon TRACE_ID [--reason TEXT] [--wait 60s] [--admin HOST:PORT]
                                 give up on a failed trace: every side effect its
                                 handoffs' receivers reported is undone, latest first,
                                 by the Baton that sent that handoff, once
                                 (docs/compensation.md); prints each step: undone,
                                 failed (a dead letter of its own) or standing, and
                                 exits 1 unless all were undone. A trace that was
                                 resumed is refused.
`

// abandonCmd abandons a trace and prints where undoing it stands.
func abandonCmd(args []string, stdout io.Writer, env func(string) string) error {
	fs := flag.NewFlagSet("abandon", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	admin := fs.String("admin", defaultAdmin, "the Baton's admin address host:port")
	reason := fs.String("reason", "", "why the trace is abandoned (kept with it)")
	wait := fs.Duration("wait", 60*time.Second, "how long to wait for every step to settle")
	id, rest := splitFirstArg(args)
	if err := fs.Parse(rest); err != nil {
		return usageError{msg: "abandon: " + err.Error()}
	}
	if id == "" || fs.NArg() > 0 {
		return usageError{msg: "abandon: want one TRACE_ID"}
	}
	body, _ := json.Marshal(map[string]string{"reason": *reason})
	c := newAdminClient(*admin, env)
	c.http.Timeout = *wait + 30*time.Second
	path := "/v1/traces/" + pathEscape(id) + "/abandon?" + url.Values{"wait": {wait.String()}}.Encode()
	var a compensation.Abandonment
	err := c.doWith(http.MethodPost, path, func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, c.url(path), bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	}, &a)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "trace %s abandoned by %s at %s: %s\n", a.TraceID, a.By, a.At.Format("2006-01-02T15:04:05Z"), a.Reason)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tEDGE\tEFFECT\tSTATE\tBY\tCOMPENSATION\tWHY")
	all := true
	for i, st := range a.Steps {
		comp := st.Compensation
		if st.DeadLetter != "" {
			comp = "dead letter " + st.DeadLetter
		}
		fmt.Fprintf(tw, "%d\t%s→%s\t%s\t%s\t%s\t%s\t%s\n", i+1, st.From, st.To, st.Effect, st.State, st.By, comp, st.Why)
		all = all && st.State == "undone"
	}
	tw.Flush()
	switch {
	case !a.Settled:
		return errors.New("not settled yet: a Baton has steps still to run (run baton abandon again to see them)")
	case !all:
		return errors.New("some side effects are still standing")
	}
	return nil
}
