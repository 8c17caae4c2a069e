package proxy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/batonproxy/baton/handoff/record"
)

// TestConsoleApprovalsInBrowser: an approver signs in to the console with
// her token, sees the held refunds, approves one (the payments agent gets
// it, once, with its key) and denies the other with a reason (the agent's
// poll is told it); the admin-only pages stay closed to her.
func TestConsoleApprovalsInBrowser(t *testing.T) {
	b := newBrowser(t)
	c := startRefundChain(t, sharedStore(t), "")
	admin := "http://" + c.planner.AdminAddr()
	approve := held(t, c.refund(t, 4800, "console-approve"))
	deny := held(t, c.refund(t, 9100, "console-deny"))

	b.do("opening the console", chromedp.Navigate(admin+"/console/approvals"))
	if st := b.submit("signing in as alice",
		chromedp.SendKeys(chromedp.ID("token"), aliceToken),
		chromedp.Click(chromedp.CSS("form.login button"))); st != 200 {
		t.Fatalf("after signing in: %d", st)
	}
	txt := b.text()
	if !strings.Contains(b.location(), "/console/approvals") || !strings.Contains(txt, "2 of 2 held handoff(s)") ||
		!strings.Contains(txt, "refund over 1000") || !strings.Contains(txt, "planner→payments") {
		t.Fatalf("the approvals page as alice (%s):\n%s", b.location(), txt)
	}
	b.screenshot("approvals", false)

	b.submit("approving", chromedp.Click(chromedp.CSS(`form[action="/console/approvals/`+approve.ID+`/approve"] button`)))
	flash := run(b, "reading the flash", chromedp.Text(chromedp.CSS(".flash")))
	if want := "Approved " + approve.ID + ": delivered, status 200."; flash != want {
		t.Errorf("flash %q, want %q", flash, want)
	}
	if got := c.agent.perKey(); got[`"console-approve"`] != 1 || c.agent.count() != 1 {
		t.Fatalf("payments ran %v, want the approved refund once", got)
	}
	if resp, body := poll(t, approve.Location); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"amount":4800`) {
		t.Fatalf("the agent's poll after approval: %d %s", resp.StatusCode, body)
	}

	// A denial needs its reason: the form asks for it.
	b.submit("denying", chromedp.SendKeys(chromedp.CSS(`form[action="/console/approvals/`+deny.ID+`/deny"] input[name=reason]`),
		"<b>duplicate</b> of A-1042"),
		chromedp.Click(chromedp.CSS(`form[action="/console/approvals/`+deny.ID+`/deny"] button`)))
	flash = run(b, "reading the flash", chromedp.Text(chromedp.CSS(".flash")))
	if !strings.HasPrefix(flash, "Denied "+deny.ID) || !strings.Contains(flash, "<b>duplicate</b> of A-1042") {
		t.Errorf("flash %q", flash)
	}
	p := readProblem(t, mustGet(t, deny.Location))
	if p.Status != http.StatusForbidden || !strings.Contains(p.Detail, "<b>duplicate</b> of A-1042") || !strings.Contains(p.Detail, "alice") {
		t.Fatalf("the agent's poll after denial: %+v", p)
	}
	if !strings.Contains(b.text(), "No handoff is waiting for a decision.") {
		t.Errorf("the list after both decisions:\n%s", b.text())
	}
	if c.agent.count() != 1 {
		t.Fatalf("payments ran %d times: a denied refund went through", c.agent.count())
	}

	// The record page shows who decided; alice may not open the admin's pages.
	if rec := getRecord(t, c.planner.AdminAddr(), deny.ID); rec.State != record.Denied || rec.Approval.By != "alice" {
		t.Fatalf("denied record %+v", rec)
	}
	b.do("opening the dead letters as alice", chromedp.Navigate(admin+"/console/deadletters"))
	if !strings.Contains(b.text(), "Forbidden") {
		t.Errorf("alice opened the dead letters:\n%s", b.text())
	}
}
