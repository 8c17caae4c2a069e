package inject

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		nsEnabled   bool
		want        bool
		err         bool
	}{
		{"no annotation", nil, false, false, false},
		{"namespace opted in", nil, true, true, false},
		{"pod opts in", map[string]string{AnnotationInject: "true"}, false, true, false},
		{"pod opts out of its namespace", map[string]string{AnnotationInject: "false"}, true, false, false},
		{"already injected", map[string]string{AnnotationInject: "true", AnnotationStatus: StatusInjected}, true, false, false},
		{"bad value", map[string]string{AnnotationInject: "yes"}, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Wants(&metav1.ObjectMeta{Annotations: tc.annotations}, tc.nsEnabled)
			if got != tc.want || (err != nil) != tc.err {
				t.Errorf("Wants = %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestAgentName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		meta     metav1.ObjectMeta
		fallback string
		want     string
	}{
		{"annotation first", metav1.ObjectMeta{Annotations: map[string]string{AnnotationAgent: "planner"}, Labels: map[string]string{"app": "x"}}, "", "planner"},
		{"app label", metav1.ObjectMeta{Labels: map[string]string{"app": "analyst", "app.kubernetes.io/name": "y"}, Name: "z"}, "", "analyst"},
		{"app.kubernetes.io/name", metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "memory"}}, "", "memory"},
		{"pod name", metav1.ObjectMeta{Name: "scratchpad"}, "", "scratchpad"},
		{"generateName", metav1.ObjectMeta{GenerateName: "summarizer-"}, "", "summarizer"},
		{"workload name", metav1.ObjectMeta{}, "digest", "digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := testConfig().options(&tc.meta, tc.fallback)
			if err != nil || o.Agent != tc.want {
				t.Errorf("agent %q (%v), want %q", o.Agent, err, tc.want)
			}
		})
	}
}

func TestOptionsReportEveryBadAnnotation(t *testing.T) {
	t.Parallel()
	_, err := testConfig().options(&metav1.ObjectMeta{Name: "p", Annotations: map[string]string{
		AnnotationAgentPort:            "0",
		AnnotationIntercept:            "sideways",
		AnnotationConfigMap:            "Bad Name",
		AnnotationKeySecret:            "-",
		AnnotationNoProxy:              "a,,b",
		AnnotationExcludeOutboundPorts: "22,http",
		AnnotationExcludeInboundPorts:  "70000",
		AnnotationExcludeOutboundCIDRs: "10.0.0.0/33",
	}}, "")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, a := range []string{AnnotationAgentPort, AnnotationIntercept, AnnotationConfigMap, AnnotationKeySecret, AnnotationNoProxy,
		AnnotationExcludeOutboundPorts, AnnotationExcludeInboundPorts, AnnotationExcludeOutboundCIDRs} {
		if !strings.Contains(err.Error(), "annotation "+a+":") {
			t.Errorf("%v\ndoes not name %s", err, a)
		}
	}
}
