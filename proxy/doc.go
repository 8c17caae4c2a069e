// Package proxy holds Baton's listeners, destination resolution, the reverse
// proxy for egress and ingress, the shared transport, and the one place that
// maps errors to statuses.
package proxy
