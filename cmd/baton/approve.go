package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonproxy/baton/approval"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/trust"
)

const approveUsage = `  baton approvals [ls] [--offset N] [--limit N] [--admin HOST:PORT]
  baton approvals show ID [--admin HOST:PORT]
                                 the handoffs confirmation gates hold for that Baton's
                                 agent, soonest to expire first, or one of them
  baton approve ID [--reason TEXT] [--admin HOST:PORT] [--key FILE --as NAME]
  baton deny ID --reason TEXT [--admin HOST:PORT] [--key FILE --as NAME]
                                 decide a held handoff: approval sends it (with its
                                 original key, trace and hop) and prints the peer's
                                 status; denial answers the agent with the reason.
                                 The approver is BATON_APPROVER_TOKEN (else
                                 BATON_ADMIN_TOKEN) as a bearer token, or with --key a
                                 request signed by approver NAME's key (docs/gates.md)
`

// approvalsCmd lists and shows held handoffs.
func approvalsCmd(args []string, stdout io.Writer, env func(string) string) error {
	sub := "ls"
	if len(args) > 0 && (args[0] == "ls" || args[0] == "show") {
		sub, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("approvals "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	admin := fs.String("admin", defaultAdmin, "the Baton's admin address host:port")
	offset := fs.Int("offset", 0, "ls: skip this many")
	limit := fs.Int("limit", 50, "ls: at most this many")
	id, rest := splitFirstArg(args)
	if err := fs.Parse(rest); err != nil {
		return usageError{msg: "approvals: " + err.Error()}
	}
	c := approverClient(*admin, env)
	if sub == "show" {
		if id == "" {
			return usageError{msg: "approvals show: want an approval ID"}
		}
		var r record.Record
		if err := c.do("GET", "/v1/approvals/"+pathEscape(id), &r); err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	if id != "" {
		return usageError{msg: fmt.Sprintf("approvals: unexpected argument %q", id)}
	}
	q := url.Values{"offset": {strconv.Itoa(*offset)}, "limit": {strconv.Itoa(*limit)}}
	var page approval.PendingPage
	if err := c.do("GET", "/v1/approvals?"+q.Encode(), &page); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APPROVAL\tEDGE\tTARGET\tGATE\tEXPIRES\tTRUST")
	for _, r := range page.Records {
		exp := ""
		if r.Approval != nil {
			exp = time.Until(r.Approval.Expires).Round(time.Second).String()
		}
		gate := ""
		if r.Approval != nil {
			gate = r.Approval.Gate
		}
		labels := strings.Join(r.Trust, ",")
		if labels == "" {
			labels = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\tin %s\t%s\n", r.ID, r.Edge(), r.Method, r.Target, gate, exp, labels)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d of %d pending approval(s)\n", len(page.Records), page.Total)
	return nil
}

// approverClient is an admin client that presents BATON_APPROVER_TOKEN,
// else BATON_ADMIN_TOKEN.
func approverClient(admin string, env func(string) string) *adminClient {
	c := newAdminClient(admin, env)
	if t := env("BATON_APPROVER_TOKEN"); t != "" {
		c.token = t
	}
	return c
}

// decideCmd approves or denies a held handoff.
func decideCmd(approve bool, args []string, stdout io.Writer, env func(string) string) error {
	name := "deny"
	if approve {
		name = "approve"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	admin := fs.String("admin", defaultAdmin, "the Baton's admin address host:port")
	reason := fs.String("reason", "", "why (required to deny: the agent is told it)")
	keyFile := fs.String("key", "", "sign the request with this key (from baton keygen) instead of a token")
	as := fs.String("as", "", "with --key: the approver the key belongs to")
	id, rest := splitFirstArg(args)
	if err := fs.Parse(rest); err != nil {
		return usageError{msg: name + ": " + err.Error()}
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	}
	switch {
	case id == "":
		return usageError{msg: name + ": want an approval ID"}
	case !approve && *reason == "":
		return usageError{msg: "deny: --reason is required: the agent is told it"}
	case (*keyFile == "") != (*as == ""):
		return usageError{msg: name + ": --key and --as go together"}
	}
	body, _ := json.Marshal(approval.DecisionRequest{Reason: *reason})
	c := approverClient(*admin, env)
	var sign func(*http.Request) error
	if *keyFile != "" {
		k, err := trust.LoadKey(*keyFile)
		if err != nil {
			return err
		}
		c.token = "" // the signature is the identity
		sign = func(req *http.Request) error {
			var tp [16]byte
			var sp [8]byte
			_, _ = rand.Read(tp[:])
			_, _ = rand.Read(sp[:])
			req.Header.Set("Baton-Agent", *as)
			req.Header.Set("Baton-Hop", "0")
			req.Header.Set("Traceparent", "00-"+hex.EncodeToString(tp[:])+"-"+hex.EncodeToString(sp[:])+"-01")
			return trust.NewSigner(k).Sign(trust.RequestMessage(req, body), time.Now())
		}
	}
	var res approval.DecisionResult
	if err := c.send("POST", "/v1/approvals/"+pathEscape(id)+"/"+name, body, sign, &res); err != nil {
		return err
	}
	if !approve {
		fmt.Fprintf(stdout, "denied %s: the agent is told %q\n", id, *reason)
		return nil
	}
	if res.Error != "" {
		fmt.Fprintf(stdout, "approved %s; sending it failed: %s (dead letter %s)\n", id, res.Error, id)
		return fmt.Errorf("approve: %s", res.Error)
	}
	fmt.Fprintf(stdout, "approved %s: %s %d\n", id, res.Record.State, res.Status)
	return nil
}

// send is do with a JSON body, and sign (when set) applied last.
func (c *adminClient) send(method, path string, body []byte, sign func(*http.Request) error, v any) error {
	return c.doWith(method, path, func() (*http.Request, error) {
		req, err := http.NewRequest(method, c.url(path), bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if sign != nil {
			if err := sign(req); err != nil {
				return nil, err
			}
		}
		return req, nil
	}, v)
}
