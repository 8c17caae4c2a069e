package inject

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/batonproxy/baton/problem"
)

// Paths the webhook serves. The chart points namespaces labelled
// baton.dev/inject=enabled at PathMutateNamespace (there a pod is injected
// unless it says "false") and every other selected namespace at PathMutate
// (there only pods annotated baton.dev/inject: "true" are), so the webhook
// knows a namespace's choice without reading the namespace.
const (
	PathMutate          = "/mutate"
	PathMutateNamespace = "/mutate/namespace"
)

// MaxReviewBytes bounds an AdmissionReview body. The API server caps an
// object well below this (about 3 MiB); anything larger is not from it.
const MaxReviewBytes = 4 << 20

// Webhook serves the mutating admission webhook: POST PathMutate and
// PathMutateNamespace take an admission.k8s.io/v1 AdmissionReview and
// answer one, with a JSONPatch when the pod is injected; GET /healthz and
// /readyz serve the probes.
//
// A body that is not an admission.k8s.io/v1 AdmissionReview gets a 400
// problem+json (bad-request), one over MaxReviewBytes a 413
// (body-too-large): neither came from the API server. A review the injector
// cannot act on (not a pod, an undecodable pod) is allowed unchanged with a
// warning, so that Baton never blocks a workload it was not asked to touch.
// A pod that asks for injection with annotations the injector cannot use is
// denied, with every bad annotation named, so the mistake shows where the
// pod is created instead of the pod silently running without Baton.
type Webhook struct {
	in    *Injector
	log   *slog.Logger
	ready func() error
}

// NewWebhook returns the webhook's handler. ready, when not nil, is asked
// by /readyz (the serving certificate is loaded and valid).
func NewWebhook(in *Injector, log *slog.Logger, ready func() error) *Webhook {
	return &Webhook{in: in, log: log, ready: ready}
}

// ServeHTTP routes the webhook's paths.
func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case PathMutate, PathMutateNamespace:
		if r.Method != http.MethodPost {
			problem.Write(w, r, problem.BadRequest, "POST an admission.k8s.io/v1 AdmissionReview to "+r.URL.Path)
			return
		}
		h.mutate(w, r, r.URL.Path == PathMutateNamespace)
	case "/healthz":
		writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
	case "/readyz":
		if h.ready != nil {
			if err := h.ready(); err != nil {
				problem.Write(w, r, problem.NotReady, err.Error())
				return
			}
		}
		writeJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
	default:
		problem.Write(w, r, problem.NotFound, "no endpoint "+r.URL.Path)
	}
}

func (h *Webhook) mutate(w http.ResponseWriter, r *http.Request, nsEnabled bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxReviewBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			problem.New(r, problem.BodyTooLarge, fmt.Sprintf("an AdmissionReview is at most %d bytes", MaxReviewBytes)).
				With("limit_bytes", MaxReviewBytes).Write(w)
			return
		}
		problem.Write(w, r, problem.BadRequest, "reading the body: "+err.Error())
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		problem.Write(w, r, problem.BadRequest, "the body is not an AdmissionReview: "+err.Error())
		return
	}
	if gv := admissionv1.SchemeGroupVersion.String(); review.APIVersion != gv || review.Kind != "AdmissionReview" || review.Request == nil {
		problem.Write(w, r, problem.BadRequest, fmt.Sprintf(
			"want an AdmissionReview of apiVersion %s with a request, got kind %q of apiVersion %q", gv, review.Kind, review.APIVersion))
		return
	}
	resp := h.Review(review.Request, nsEnabled)
	writeJSON(w, r, http.StatusOK, admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	})
}

// Review answers one admission request. nsEnabled says the pod's namespace
// opted in.
func (h *Webhook) Review(req *admissionv1.AdmissionRequest, nsEnabled bool) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	warn := func(format string, args ...any) *admissionv1.AdmissionResponse {
		resp.Warnings = append(resp.Warnings, "baton injector: "+fmt.Sprintf(format, args...))
		return resp
	}
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" {
		return warn("only pods are injected, got %s; nothing changed", req.Kind.String())
	}
	if req.Operation != admissionv1.Create {
		return resp
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return warn("the pod could not be decoded (%v); Baton not injected", err)
	}
	log := h.log.With("namespace", req.Namespace, "pod", podName(&pod))
	if Injected(&pod.ObjectMeta, &pod.Spec) {
		return resp
	}
	want, err := Wants(&pod.ObjectMeta, nsEnabled)
	if err == nil && !want {
		return resp
	}
	if err == nil && pod.Spec.HostNetwork && pod.Annotations[AnnotationInject] != "true" {
		// Opted in by its namespace only: leave it be rather than refuse it.
		return warn("the pod uses hostNetwork; Baton not injected")
	}
	orig := pod.DeepCopy()
	var o Options
	if err == nil {
		o, err = h.in.Pod(&pod.ObjectMeta, &pod.Spec, "")
	}
	if err != nil {
		log.Warn("injection refused", "error", err.Error())
		return deny(resp, err)
	}
	ops, err := diff("", orig, &pod)
	if err == nil {
		resp.Patch, err = json.Marshal(ops)
	}
	if err != nil {
		log.Error("injection failed", "error", err.Error())
		return warn("the patch could not be built (%v); Baton not injected", err)
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.PatchType = &pt
	attrs := []any{"agent", o.Agent, "intercept", o.Intercept, "config_map", o.ConfigMap, "dry_run", req.DryRun != nil && *req.DryRun}
	if note := o.InstrumentNote(); note != "" {
		attrs = append(attrs, "instrument", note)
	}
	if o.Instrument != "" && o.OperatorAnnotation != "" {
		warn("%s: %s not applied: the pod carries %s, so the OpenTelemetry Operator instruments it",
			AnnotationInstrument, o.Instrument, o.OperatorAnnotation)
	}
	for _, c := range o.Uninstrumented {
		warn("%s: %s not loaded in container %s", AnnotationInstrument, o.Instrument, c)
	}
	log.Info("injected", attrs...)
	return resp
}

func deny(resp *admissionv1.AdmissionResponse, err error) *admissionv1.AdmissionResponse {
	resp.Allowed = false
	resp.Result = &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusBadRequest,
		Reason:  metav1.StatusReasonBadRequest,
		Message: "baton injector: " + flatten(err),
	}
	return resp
}

// flatten joins errors.Join's lines into one message.
func flatten(err error) string {
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		msg := ""
		for i, e := range joined.Unwrap() {
			if i > 0 {
				msg += "; "
			}
			msg += e.Error()
		}
		return msg
	}
	return err.Error()
}

func podName(p *corev1.Pod) string {
	if p.Name != "" {
		return p.Name
	}
	return p.GenerateName
}

func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		problem.Write(w, r, problem.Internal, "encoding the response")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
