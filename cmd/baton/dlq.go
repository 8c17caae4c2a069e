package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"

	"github.com/batonproxy/baton/deadletter"
	"github.com/batonproxy/baton/handoff/record"
)

// dlqCmd lists, shows, replays and drops the dead letters of a Baton's
// agent, on its admin listener. Another agent's dead letter is refused by
// that Baton, naming the owner.
func dlqCmd(args []string, stdout io.Writer, env func(string) string) error {
	if len(args) == 0 {
		return usageError{msg: "dlq: want ls, show ID, replay ID or drop ID"}
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("dlq "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	admin := fs.String("admin", defaultAdmin, "the Baton's admin address host:port")
	edge := fs.String("edge", "", "ls: only this edge, from→to")
	offset := fs.Int("offset", 0, "ls: skip this many")
	limit := fs.Int("limit", 50, "ls: at most this many")
	id, rest := splitFirstArg(rest)
	if err := fs.Parse(rest); err != nil {
		return usageError{msg: "dlq: " + err.Error()}
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	}
	c := newAdminClient(*admin, env)
	switch sub {
	case "ls":
		q := url.Values{"offset": {strconv.Itoa(*offset)}, "limit": {strconv.Itoa(*limit)}}
		if *edge != "" {
			q.Set("edge", *edge)
		}
		var page deadletter.Page
		if err := c.do("GET", "/v1/deadletters?"+q.Encode(), &page); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RECORD\tEDGE\tTARGET\tKEY\tATTEMPTS\tSTATUS\tERROR\tREPLAYABLE")
		for _, r := range page.Records {
			fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%d\t%d\t%s\t%v\n", r.ID, r.Edge(), r.Method, r.Target, keyLabel(r),
				r.Attempts, r.Status, r.Error, r.Replayable)
		}
		tw.Flush()
		fmt.Fprintf(stdout, "%d of %d dead letter(s)\n", len(page.Records), page.Total)
		return nil
	case "show", "replay", "drop":
		if id == "" {
			return usageError{msg: "dlq " + sub + ": want a record ID"}
		}
	default:
		return usageError{msg: fmt.Sprintf("dlq: unknown subcommand %q", sub)}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	switch sub {
	case "show":
		var r record.Record
		if err := c.do("GET", "/v1/deadletters/"+pathEscape(id), &r); err != nil {
			return err
		}
		return enc.Encode(r)
	case "replay":
		var res deadletter.ReplayResult
		if err := c.do("POST", "/v1/deadletters/"+pathEscape(id)+"/replay", &res); err != nil {
			return err
		}
		if res.Error != "" {
			fmt.Fprintf(stdout, "replay of %s failed again: %s (dead-lettered again)\n", id, res.Error)
			return fmt.Errorf("dlq replay: %s", res.Error)
		}
		fmt.Fprintf(stdout, "replayed %s: %s %d", id, res.Record.State, res.Status)
		if res.Record.StoppedAt != "" {
			fmt.Fprintf(stdout, " (the chain below stopped again, at dead letter %s)", res.Record.StoppedAt)
		}
		fmt.Fprintln(stdout)
		return nil
	default: // drop
		if err := c.do("DELETE", "/v1/deadletters/"+pathEscape(id), nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "dropped %s\n", id)
		return nil
	}
}

// keyLabel says where a dead letter's key came from: "position 2" when
// from its place in its agent's work, else the source.
func keyLabel(r record.Record) string {
	switch {
	case r.KeySource == record.KeyFromPosition:
		return "position " + strconv.Itoa(r.Position)
	case r.KeySource != "":
		return r.KeySource
	}
	return "-"
}
