package sidecar

import (
	"github.com/go-chi/chi/v5"

	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/records"
)

// adminRoutes lists every route of the admin listener beside what the
// request path serves itself (GET /healthz, GET /readyz and GET /metrics,
// in package proxy), with the package that serves it. The admin token, when
// set, guards the first group; the approvals and the console authenticate
// on their own (approvers, and a console session).
func (b *Baton) adminRoutes(adminToken, agent string, profiling bool) func(chi.Router) {
	return func(r chi.Router) {
		r.Group(func(r chi.Router) {
			if adminToken != "" {
				r.Use(records.AdminToken(adminToken))
			}
			if profiling {
				proxy.ProfilingRoutes(r) // proxy: /debug/pprof/
			}
			r.Get("/v1/traces/{trace_id}", b.Records.Trace)                    // records
			r.Get("/v1/records/{id}", b.Records.Record)                        // records
			r.Get("/v1/deadletters", b.DeadLetters.List)                       // deadletter
			r.Get("/v1/deadletters/{id}", b.DeadLetters.Get)                   // deadletter
			r.Post("/v1/deadletters/{id}/replay", b.DeadLetters.ReplayHTTP)    // deadletter
			r.Delete("/v1/deadletters/{id}", b.DeadLetters.DropHTTP)           // deadletter
			r.Post("/v1/traces/{trace_id}/abandon", b.Compensator.PostAbandon) // compensation
			r.Get("/v1/traces/{trace_id}/abandon", b.Compensator.GetAbandon)   // compensation
			r.Get("/v1/chains/{chain}/spend", b.ModelCalls.GetSpend)           // modelcall
			r.Get("/v1/spend/costly", b.ModelCalls.GetCostly)                  // modelcall
		})
		r.Post("/v1/chains/{chain}/budget", b.ModelCalls.RaiseBudget(b.Approvals.ApproverOf, agent)) // modelcall: an approver identity
		r.Get("/v1/approvals", b.Approvals.List)                                                     // approval: admin or approver tokens
		r.Get("/v1/approvals/{id}", b.Approvals.Get)                                                 // approval
		r.Post("/v1/approvals/{id}/approve", b.Approvals.Approve)                                    // approval: an approver identity
		r.Post("/v1/approvals/{id}/deny", b.Approvals.Deny)                                          // approval
		r.Mount("/console", b.Console.Handler())                                                     // console: the admin token, then a session
	}
}
