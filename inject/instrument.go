package inject

import (
	"fmt"
	"github.com/batonproxy/baton/inject/agentenv"
	"net/url"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Zero-code OpenTelemetry instrumentation of a pod's app containers, as the
// OpenTelemetry Operator adds it but without the Operator: for a pod
// annotated baton.dev/instrument, an init container (after Baton's sidecar)
// copies the Operator's auto-instrumentation image for the language into an
// emptyDir, which every app container mounts read-only at the Operator's
// path, with the variables of agentenv.LoadEnv and agentenv.TelemetryEnv. A pod that carries
// one of the Operator's own inject annotations is left to the Operator.

// AnnotationInstrument names the language whose zero-code OpenTelemetry
// instrumentation the pod's app containers get: nodejs, python, java or
// dotnet.
const AnnotationInstrument = "baton.dev/instrument"

// OperatorAnnotationPrefix begins the OpenTelemetry Operator's injection
// annotations (instrumentation.opentelemetry.io/inject-java, -nodejs,
// -python, -dotnet, -go, -sdk, ...). A pod that carries one with a value
// other than "false" is instrumented by the Operator, and Baton adds none.
const OperatorAnnotationPrefix = "instrumentation.opentelemetry.io/inject-"

// InstrumentContainerName is the init container that copies the
// instrumentation into the pod.
const InstrumentContainerName = "baton-instrument"

// instrumentVolume is the emptyDir it copies into.
const instrumentVolume = "baton-instrument"

// instrumentVolumeSize bounds the emptyDir, as the Operator's default does.
const instrumentVolumeSize = "200Mi"

// The auto-instrumentation images of the OpenTelemetry Operator 0.158.0,
// pinned: the defaults of InstrumentationImages.
const (
	instrumentationRepository = "ghcr.io/open-telemetry/opentelemetry-operator/autoinstrumentation-"
	DefaultNodeJSImage        = instrumentationRepository + "nodejs:0.78.0"
	DefaultPythonImage        = instrumentationRepository + "python:0.64b0"
	DefaultJavaImage          = instrumentationRepository + "java:2.30.0"
	DefaultDotNetImage        = instrumentationRepository + "dotnet:1.16.0"
)

// Instrumentation configures zero-code OpenTelemetry instrumentation, for
// pods annotated baton.dev/instrument.
type Instrumentation struct {
	// Images are the auto-instrumentation images, one per language.
	Images InstrumentationImages `json:"images,omitempty"`
	// OTLPEndpoint is where instrumented agents export their spans, metrics
	// and logs, over OTLP/HTTP (http://otel-collector.observability:4318).
	// Empty: they export nothing and only propagate trace context.
	OTLPEndpoint string `json:"otlpEndpoint,omitempty"`
	// Resources are the requests and limits of the init container that
	// copies the instrumentation.
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// InstrumentationImages are the images whose files the init container
// copies, laid out as the OpenTelemetry Operator's auto-instrumentation
// images are.
type InstrumentationImages struct {
	NodeJS string `json:"nodejs,omitempty"`
	Python string `json:"python,omitempty"`
	Java   string `json:"java,omitempty"`
	DotNet string `json:"dotnet,omitempty"`
}

// applyDefaults writes the default image of each language left out, so
// that the configuration shows what is used.
func (m *InstrumentationImages) applyDefaults() {
	m.NodeJS, m.Python = m.of(agentenv.LangNodeJS), m.of(agentenv.LangPython)
	m.Java, m.DotNet = m.of(agentenv.LangJava), m.of(agentenv.LangDotNet)
}

func defaultInstrumentationImage(lang string) string {
	switch lang {
	case agentenv.LangNodeJS:
		return DefaultNodeJSImage
	case agentenv.LangPython:
		return DefaultPythonImage
	case agentenv.LangJava:
		return DefaultJavaImage
	case agentenv.LangDotNet:
		return DefaultDotNetImage
	}
	return ""
}

// of returns lang's image, the default when none is configured.
func (m *InstrumentationImages) of(lang string) string {
	img := ""
	switch lang {
	case agentenv.LangNodeJS:
		img = m.NodeJS
	case agentenv.LangPython:
		img = m.Python
	case agentenv.LangJava:
		img = m.Java
	case agentenv.LangDotNet:
		img = m.DotNet
	}
	if img == "" {
		return defaultInstrumentationImage(lang)
	}
	return img
}

// validate reports each problem, naming its field.
func (i *Instrumentation) validate() []error {
	var errs []error
	for _, lang := range agentenv.Languages() {
		if img := i.Images.of(lang); strings.ContainsAny(img, " \t\n") {
			errs = append(errs, fmt.Errorf("inject: config: instrumentation.images.%s: must be an image, like %s, got %q",
				lang, defaultInstrumentationImage(lang), img))
		}
	}
	if e := i.OTLPEndpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("inject: config: instrumentation.otlpEndpoint: must be an http:// or https:// URL "+
				"of an OTLP/HTTP receiver, like http://otel-collector.observability:4318, got %q", e))
		}
	}
	return errs
}

// InstrumentDir is where lang's instrumentation is mounted in the app
// containers: the OpenTelemetry Operator's path.
func InstrumentDir(lang string) string {
	return "/otel-auto-instrumentation-" + lang
}

// instrumentOptions reads baton.dev/instrument and the Operator's
// annotations: the language asked for, and the Operator annotation that
// takes precedence ("" when none does).
func instrumentOptions(a map[string]string) (lang, operator string, err error) {
	v, ok := a[AnnotationInstrument]
	if !ok {
		return "", "", nil
	}
	if agentenv.CheckLanguage(v) != nil {
		return "", "", &AnnotationError{AnnotationInstrument, v, agentenv.ExpectLanguage}
	}
	var found []string
	for k, val := range a {
		if strings.HasPrefix(k, OperatorAnnotationPrefix) && !strings.EqualFold(strings.TrimSpace(val), "false") {
			found = append(found, k)
		}
	}
	sort.Strings(found)
	if len(found) > 0 {
		operator = found[0]
	}
	return v, operator, nil
}

// instruments tells whether Baton adds instrumentation to the pod.
func (o Options) instruments() bool {
	return o.Instrument != "" && o.OperatorAnnotation == ""
}

// InstrumentNote says what became of the instrumentation the pod asked
// for: "" when it asked for none.
func (o Options) InstrumentNote() string {
	switch {
	case o.Instrument == "":
		return ""
	case o.OperatorAnnotation != "":
		return o.Instrument + " instrumentation left to the OpenTelemetry Operator (" + o.OperatorAnnotation + ")"
	case len(o.Uninstrumented) > 0:
		return "with " + o.Instrument + " instrumentation, except in container " + strings.Join(o.Uninstrumented, ", ")
	}
	return "with " + o.Instrument + " instrumentation"
}

// instrumentContainer copies o.Instrument's files into the shared volume.
func (in *Injector) instrumentContainer(o Options) corev1.Container {
	dir := InstrumentDir(o.Instrument)
	cmd := []string{"cp", "-r", "/autoinstrumentation/.", dir}
	if o.Instrument == agentenv.LangJava {
		cmd = []string{"cp", "/javaagent.jar", dir + "/javaagent.jar"}
	}
	return corev1.Container{
		Name:                     InstrumentContainerName,
		Image:                    in.cfg.Instrumentation.Images.of(o.Instrument),
		Command:                  cmd,
		Resources:                in.cfg.Instrumentation.Resources,
		VolumeMounts:             []corev1.VolumeMount{{Name: instrumentVolume, MountPath: dir}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		// The copies are owned by Baton's UID and readable by everyone
		// (the images make them so); nothing else is needed.
		SecurityContext: securityContext(ProxyUID, true, nil),
	}
}

// instrument adds the volume, and the mount and variables to every app
// container. It returns the containers left without the loading variables,
// each with why: one whose variable to add to comes from valueFrom, whose
// value Baton cannot know, is not half instrumented (the Operator skips it
// too). The init container is placed by the caller.
func (in *Injector) instrument(spec *corev1.PodSpec, o Options) ([]string, error) {
	size := resource.MustParse(instrumentVolumeSize)
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name:         instrumentVolume,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}},
	})
	dir := InstrumentDir(o.Instrument)
	var skipped []string
	for i := range spec.Containers {
		c := &spec.Containers[i]
		env := containerEnv(c)
		load, err := agentenv.LoadEnv(o.Instrument, dir, env)
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", c.Name, err)
		}
		for _, v := range load {
			if j := envIndex(c, v.Name); j >= 0 && c.Env[j].ValueFrom != nil {
				skipped = append(skipped, c.Name+" ("+v.Name+" comes from valueFrom)")
				load = nil
				break
			}
		}
		setEnv(c, append(load, agentenv.TelemetryEnv(o.Agent, in.cfg.Instrumentation.OTLPEndpoint, env)...))
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: instrumentVolume, MountPath: dir, ReadOnly: true})
	}
	return skipped, nil
}

// containerEnv looks up c's env. A variable from valueFrom counts as set,
// with a value that cannot be added to: setEnv leaves it alone.
func containerEnv(c *corev1.Container) agentenv.EnvLookup {
	return func(name string) (string, bool) {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value, true
			}
		}
		return "", false
	}
}

// setEnv sets vars in c: a variable c has is given the new value in place
// (one agentenv.LoadEnv added to), unless it comes from valueFrom, which is left
// alone; others are appended.
func setEnv(c *corev1.Container, vars []agentenv.EnvVar) {
	for _, v := range vars {
		i := envIndex(c, v.Name)
		switch {
		case i < 0:
			c.Env = append(c.Env, corev1.EnvVar{Name: v.Name, Value: v.Value})
		case c.Env[i].ValueFrom == nil:
			c.Env[i].Value = v.Value
		}
	}
}

func envIndex(c *corev1.Container, name string) int {
	for i, e := range c.Env {
		if e.Name == name {
			return i
		}
	}
	return -1
}
