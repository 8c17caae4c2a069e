// Package inject adds Baton to Kubernetes pods: a native sidecar (an init
// container with restartPolicy Always, started and ready before the agent),
// its configuration and secrets, and either HTTP_PROXY in the agent's
// containers (proxy mode) or an init container that installs iptables
// redirects (transparent mode). A pod annotated baton.dev/instrument also
// gets zero-code OpenTelemetry instrumentation, as the OpenTelemetry Operator
// adds it, so that its agent forwards the trace context and baggage its
// handoffs are tied by (instrument.go; the variables, shared with `baton
// exec`, in otelenv.go).
//
// The same transformation runs in two places: the mutating admission
// webhook (`baton inject-webhook`), which answers AdmissionReviews with a
// JSONPatch, and offline (`baton inject`), which rewrites the pod templates
// of manifests. Both compute the injected pod with Injector.Pod and express
// the change as an RFC 6902 patch, so what the webhook would do and what the
// offline command prints cannot drift apart.
//
// Opting in is per pod, by the annotation baton.dev/inject: "true", or per
// namespace, when the webhook is reached on its namespace path (the chart
// routes namespaces labelled baton.dev/inject=enabled there); a pod that says
// "false" is never injected. Annotations are listed in docs/kubernetes.md.
package inject
