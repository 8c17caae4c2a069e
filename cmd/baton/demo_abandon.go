//go:build !sidecar

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/sidecar"
)

// demoAbandonTrace is the trace of the demo's abandoned trip.
const demoAbandonTrace = "7ab0d1e5c3f24a6b9e8d0c1f2a3b4c5d"

// demoAbandon is the demo's act on compensation: concierge → hotel (books
// a room) → billing (charges the card) → airline, which is down; the
// airline handoff is a dead letter. The trip is abandoned with the CLI:
// hotel's Baton refunds billing's charge, then concierge's Baton cancels
// the room, each once.
func demoAbandon(ctx context.Context, p func(string, ...any), start func(string) (*sidecar.Baton, func(), error), loop string) error {
	var seq atomic.Int64
	var mu sync.Mutex
	var undone []string
	step := func(effect, id, next, nextPath string, egress *string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if r.URL.Path == "/undo" {
				mu.Lock()
				undone = append(undone, fmt.Sprintf("%d. %s undone: %s", seq.Add(1), effect, strings.TrimSpace(string(body))))
				mu.Unlock()
				io.WriteString(w, `{"undone":true}`)
				return
			}
			status := http.StatusOK
			if next != "" {
				resp, err := demoPostKey(ctx, *egress, next, nextPath, r.Header.Get("Traceparent"), `{"amount":420}`, "")
				if err != nil || resp.StatusCode >= 300 {
					status = http.StatusBadGateway
				}
				if resp != nil {
					resp.Body.Close()
				}
			}
			w.Header().Set("Baton-Side-Effects", effect)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"%s_id":"%s"}`, effect, id)
		}
	}
	airline, err := startDemoAgent(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "reservations system down", http.StatusInternalServerError)
	}))
	if err != nil {
		return err
	}
	defer airline.Close()
	var billingEgress, hotelEgress string
	billing, err := startDemoAgent(step("charge", "ch-311", "airline", "/seats", &billingEgress))
	if err != nil {
		return err
	}
	defer billing.Close()
	hotel, err := startDemoAgent(step("booking", "rm-204", "billing", "/charges", &hotelEgress))
	if err != nil {
		return err
	}
	defer hotel.Close()

	alB, stopAl, err := start("agent: airline\nupstream: http://" + airline.Addr + "\n" + loop)
	if err != nil {
		return err
	}
	defer stopAl()
	biB, stopBi, err := start("agent: billing\nupstream: http://" + billing.Addr + "\n" + loop +
		"peers: {airline: {url: http://" + alB.IngressAddr() + "}}\nretry: {attempts: 1}\n")
	if err != nil {
		return err
	}
	defer stopBi()
	billingEgress = biB.EgressAddr()
	hoB, stopHo, err := start("agent: hotel\nupstream: http://" + hotel.Addr + "\n" + loop +
		"peers: {billing: {url: http://" + biB.IngressAddr() + "}}\n" +
		`edges: [{from: concierge}, {to: billing, side_effects: [{name: charge, compensate: {path: /undo, body: '{"refund": {{json .Response.charge_id}}, "amount": {{json .Request.amount}}}'}}]}]` + "\n")
	if err != nil {
		return err
	}
	defer stopHo()
	hotelEgress = hoB.EgressAddr()
	coB, stopCo, err := start("agent: concierge\nupstream: http://127.0.0.1:9\n" + loop +
		"peers: {hotel: {url: http://" + hoB.IngressAddr() + "}}\n" +
		`edges: [{to: hotel, side_effects: [{name: booking, compensate: {path: /undo, body: '{"cancel": {{json .Response.booking_id}}}'}}]}]` + "\n")
	if err != nil {
		return err
	}
	defer stopCo()

	p("\n9. abandoning a failed trip: its side effects undone in reverse (edges[].side_effects, baton abandon).\n")
	resp, err := demoPostKey(ctx, coB.EgressAddr(), "hotel", "/rooms", "00-"+demoAbandonTrace+"-4444444444444444-01", `{"trip":"LIS-NYC"}`, "")
	if err != nil {
		return err
	}
	resp.Body.Close()
	dl := resp.Header.Get(middleware.HeaderDeadLetter)
	p("   concierge → hotel books a room → billing charges the card → airline is down: %d, dead letter %s\n", resp.StatusCode, dl)
	if resp.StatusCode != http.StatusBadGateway || dl == "" {
		return fmt.Errorf("demo: the trip answered %d without a dead letter", resp.StatusCode)
	}
	p("   the trip is given up (baton abandon %s --reason \"flight unavailable\"):\n", demoAbandonTrace)
	var out strings.Builder
	err = abandonCmd([]string{demoAbandonTrace, "--admin", coB.AdminAddr(), "--reason", "flight unavailable", "--wait", "20s"}, &out, func(string) string { return "" })
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		p("     %s\n", line)
	}
	if err != nil {
		return fmt.Errorf("demo: baton abandon: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	p("   what the agents saw, in order:\n")
	for _, u := range undone {
		p("     %s\n", u)
	}
	if len(undone) != 2 || !strings.Contains(undone[0], "charge") {
		return fmt.Errorf("demo: the compensations were %q", undone)
	}
	return nil
}
