//go:build !sidecar

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batonproxy/baton/approval"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/sidecar"
)

// demoGateToken is the treasurer Baton's admin token in the demo: the
// operator who approves presents it.
const demoGateToken = "demo-operator-token-2026"

// demoGate is the demo's last act: treasurer's refunds over 1000 need a
// person. A small refund goes through; a large one is held (202 and a
// Location), the operator lists and approves it with the CLI, payments
// refunds once, and treasurer's poll gets payments' answer.
func demoGate(ctx context.Context, p func(string, ...any), start func(string) (*sidecar.Baton, func(), error), loop string) error {
	var refunds atomic.Int64
	payments, err := startDemoAgent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n := refunds.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"refund":%d,"request":%s}`, n, bytes.TrimSpace(body))
	}))
	if err != nil {
		return err
	}
	defer payments.Close()
	pB, stopP, err := start("agent: payments\nupstream: http://" + payments.Addr + "\n" + loop + "edges: [{from: treasurer}]\n")
	if err != nil {
		return fmt.Errorf("demo: payments' Baton: %w", err)
	}
	defer stopP()
	tB, stopT, err := start("agent: treasurer\nupstream: http://127.0.0.1:9\n" + loop + "admin_token: " + demoGateToken + "\n" +
		"peers: {payments: {url: http://" + pB.IngressAddr() + "}}\n" +
		"edges: [{to: payments, confirm: {when: [{name: refund over 1000, methods: [POST], field: /amount, over: 1000}]}}]\n")
	if err != nil {
		return fmt.Errorf("demo: treasurer's Baton: %w", err)
	}
	defer stopT()

	p("\n8. a confirmation gate: treasurer's refunds over 1000 need a person (edges[].confirm).\n")
	refund := func(amount int, key string) (*http.Response, []byte, error) {
		resp, err := demoPostKey(ctx, tB.EgressAddr(), "payments", "/refunds", "00-"+demoGateTrace+"-3333333333333333-01",
			fmt.Sprintf(`{"order":"A-1042","amount":%d}`, amount), key)
		if err != nil {
			return nil, nil, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b, nil
	}
	resp, body, err := refund(250, `"refund-small"`)
	if err != nil {
		return err
	}
	p("   a refund of 250 goes straight through: %d %s\n", resp.StatusCode, bytes.TrimSpace(body))
	resp, body, err = refund(4800, `"refund-large"`)
	if err != nil {
		return err
	}
	var view approval.ApprovalView
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &view) != nil {
		return fmt.Errorf("demo: the large refund answered %d: %s", resp.StatusCode, body)
	}
	p("   a refund of 4800 is held: %d Accepted, Location: %s\n", resp.StatusCode, resp.Header.Get("Location"))
	p("   payments has refunded %d time(s); the operator lists what waits (baton approvals):\n", refunds.Load())
	env := func(k string) string {
		if k == "BATON_ADMIN_TOKEN" {
			return demoGateToken
		}
		return ""
	}
	var out strings.Builder
	if err := approvalsCmd([]string{"ls", "--admin", tB.AdminAddr()}, &out, env); err != nil {
		return fmt.Errorf("demo: baton approvals: %w", err)
	}
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		p("     %s\n", line)
	}
	p("   treasurer itself cannot approve it (POST Location/approve on its own Baton):\n")
	self, err := http.Post(view.Location+"/approve", "application/json", strings.NewReader(`{}`))
	if err != nil {
		return err
	}
	var refusal struct{ Status int }
	_ = json.NewDecoder(self.Body).Decode(&refusal)
	self.Body.Close()
	p("     %d self-approval\n", refusal.Status)
	p("   the operator approves it (baton approve %s --reason ...):\n", view.ID)
	out.Reset()
	if err := decideCmd(true, []string{view.ID, "--admin", tB.AdminAddr(), "--reason", "order A-1042 checked"}, &out, env); err != nil {
		return fmt.Errorf("demo: baton approve: %w", err)
	}
	p("     %s", out.String())
	poll, err := http.Get(view.Location)
	if err != nil {
		return err
	}
	body, _ = io.ReadAll(poll.Body)
	poll.Body.Close()
	p("   treasurer polls the Location and gets payments' answer: %d %s\n", poll.StatusCode, bytes.TrimSpace(body))
	if refunds.Load() != 2 || poll.StatusCode != http.StatusOK {
		return fmt.Errorf("demo: payments refunded %d times; the poll answered %d", refunds.Load(), poll.StatusCode)
	}
	p("   payments refunded %d times in all: once for each refund, the large one after approval\n", refunds.Load())
	p("   the refunds' trace (baton trace %s):\n", demoGateTrace)
	admin := newAdminClient(tB.AdminAddr(), env)
	var tv records.TraceView
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		tv = records.TraceView{} // decoding into the last one would keep its records' fields
		if err := admin.do("GET", "/v1/traces/"+demoGateTrace, &tv); err != nil {
			return err
		}
		if demoGateSettled(tv, view.ID) || time.Now().After(deadline) {
			break
		}
	}
	var tree strings.Builder
	printTree(&tree, demoGateTrace, tv.Records)
	for _, line := range strings.Split(strings.TrimRight(tree.String(), "\n"), "\n") {
		p("     %s\n", line)
	}
	return nil
}

// demoGateSettled reports that the approved refund's record is written
// delivered (its last write goes off the request path).
func demoGateSettled(tv records.TraceView, id string) bool {
	for _, r := range tv.Records {
		if r.ID == id && r.State == record.Delivered {
			return true
		}
	}
	return false
}

// demoGateTrace is the trace of the demo's gated refunds.
const demoGateTrace = "5c0a1e95b0d2f6e04a7d3c9b8e2f1a60"
