package inject

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/batonproxy/baton/inject/agentenv"
	"io"
	"strconv"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Overrides are `baton inject`'s flags. Each one set is written on the pod
// template as its annotation before injection, so the manifest says how it
// was injected and the webhook, seeing the status annotation, leaves it be.
type Overrides struct {
	Intercept string
	Agent     string
	AgentPort int32
	ConfigMap string
	// Instrument is baton.dev/instrument: nodejs, python, java or dotnet.
	Instrument string
}

// Validate checks the flags, naming each.
func (ov Overrides) Validate() error {
	var errs []error
	if ov.Intercept != "" && ov.Intercept != ModeProxy && ov.Intercept != ModeTransparent {
		errs = append(errs, fmt.Errorf("--intercept: must be proxy or transparent, got %q", ov.Intercept))
	}
	if ov.Agent != "" && !agentName.MatchString(ov.Agent) {
		errs = append(errs, fmt.Errorf("--agent: must be %s, got %q", expectAgent, ov.Agent))
	}
	if ov.AgentPort != 0 {
		if err := checkAgentPort(ov.AgentPort); err != nil {
			errs = append(errs, fmt.Errorf("--agent-port: %w", err))
		}
	}
	if ov.ConfigMap != "" && !dnsName.MatchString(ov.ConfigMap) {
		errs = append(errs, fmt.Errorf("--config-map: must be a ConfigMap name, got %q", ov.ConfigMap))
	}
	if ov.Instrument != "" {
		if err := agentenv.CheckLanguage(ov.Instrument); err != nil {
			errs = append(errs, fmt.Errorf("--instrument: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (ov Overrides) annotations() map[string]string {
	a := map[string]string{AnnotationInject: "true"}
	set := func(k, v string) {
		if v != "" {
			a[k] = v
		}
	}
	set(AnnotationIntercept, ov.Intercept)
	set(AnnotationAgent, ov.Agent)
	if ov.AgentPort != 0 {
		a[AnnotationAgentPort] = strconv.Itoa(int(ov.AgentPort))
	}
	set(AnnotationConfigMap, ov.ConfigMap)
	set(AnnotationInstrument, ov.Instrument)
	return a
}

// Result is what happened to one workload of a manifest.
type Result struct {
	Kind, Name string
	// Injected is false when the workload was left as it was; Reason says
	// why.
	Injected bool
	Reason   string
	// Note says what became of the instrumentation the workload asked
	// for (Options.InstrumentNote).
	Note string
}

func (r Result) String() string {
	s := strings.ToLower(r.Kind) + "/" + r.Name
	if r.Injected && r.Note != "" {
		return s + " injected, " + r.Note
	}
	if r.Injected {
		return s + " injected"
	}
	return s + " skipped: " + r.Reason
}

// templatePaths maps an API group and kind to the JSON Pointer of its pod
// template ("" for a Pod, which is its own template).
var templatePaths = map[string]string{
	"/Pod":                   "",
	"/ReplicationController": "/spec/template",
	"apps/Deployment":        "/spec/template",
	"apps/StatefulSet":       "/spec/template",
	"apps/DaemonSet":         "/spec/template",
	"apps/ReplicaSet":        "/spec/template",
	"batch/Job":              "/spec/template",
	"batch/CronJob":          "/spec/jobTemplate/spec/template",
}

// Manifests reads YAML documents (a multi-document stream; List kinds are
// entered) from r and writes them to w, with Baton injected into every
// workload's pod template. A document with no workload in it is written as
// it was read, byte for byte; an injected one is written again from its
// JSON form, keys sorted, so the output is the same on every run. A
// workload that opts out (baton.dev/inject: "false") or is injected already
// is left as it was. Any document that cannot be read or injected fails the
// whole run: nothing half-injected is printed.
func (in *Injector) Manifests(r io.Reader, w io.Writer, ov Overrides) ([]Result, error) {
	if err := ov.Validate(); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	var results []Result
	docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for n := 1; ; n++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if isBlank(doc) {
			continue
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		patched, res, err := in.document(js, ov)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		results = append(results, res...)
		if out.Len() > 0 {
			out.WriteString("---\n")
		}
		if patched == nil {
			out.Write(doc)
			if !bytes.HasSuffix(doc, []byte("\n")) {
				out.WriteByte('\n')
			}
			continue
		}
		y, err := yaml.JSONToYAML(patched)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		out.Write(y)
	}
	_, err := w.Write(out.Bytes())
	return results, err
}

// isBlank tells a document of only comments and blank lines.
func isBlank(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

// document injects one document given as JSON: the patched JSON, or nil
// when nothing in it changed.
func (in *Injector) document(js []byte, ov Overrides) ([]byte, []Result, error) {
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, nil, nil // a scalar or a list at the top: not an object, pass it through
	}
	ops, results, err := in.object(obj, "", ov)
	if err != nil || len(ops) == 0 {
		return nil, results, err
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, nil, err
	}
	patch, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, nil, err
	}
	patched, err := patch.Apply(js)
	if err != nil {
		return nil, nil, fmt.Errorf("applying the patch: %w", err)
	}
	return patched, results, nil
}

// object returns the patch that injects obj (at pointer prefix), entering
// List items.
func (in *Injector) object(obj map[string]any, prefix string, ov Overrides) ([]Op, []Result, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if items, ok := obj["items"].([]any); ok && strings.HasSuffix(kind, "List") {
		var ops []Op
		var results []Result
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			o, r, err := in.object(m, prefix+"/items/"+strconv.Itoa(i), ov)
			if err != nil {
				return nil, nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			ops, results = append(ops, o...), append(results, r...)
		}
		return ops, results, nil
	}
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.Contains(apiVersion, "/") {
		group = ""
	}
	tpath, ok := templatePaths[group+"/"+kind]
	if !ok {
		return nil, nil, nil
	}
	name := ""
	if md, ok := obj["metadata"].(map[string]any); ok {
		name, _ = md["name"].(string)
	}
	res := Result{Kind: kind, Name: name}
	tmpl, ok := lookup(obj, tpath)
	if !ok {
		return nil, nil, fmt.Errorf("%s %q has no pod template at %s", kind, name, tpath)
	}
	raw, err := json.Marshal(tmpl)
	if err != nil {
		return nil, nil, err
	}
	var pt corev1.PodTemplateSpec
	if err := json.Unmarshal(raw, &pt); err != nil {
		return nil, nil, fmt.Errorf("%s %q: the pod template does not decode: %w", kind, name, err)
	}
	if Injected(&pt.ObjectMeta, &pt.Spec) {
		res.Reason = "already injected"
		return nil, []Result{res}, nil
	}
	if pt.Annotations[AnnotationInject] == "false" {
		res.Reason = `it says ` + AnnotationInject + `: "false"`
		return nil, []Result{res}, nil
	}
	before := pt.DeepCopy()
	if pt.Annotations == nil {
		pt.Annotations = map[string]string{}
	}
	for k, v := range ov.annotations() {
		pt.Annotations[k] = v
	}
	o, err := in.Pod(&pt.ObjectMeta, &pt.Spec, name)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %q: %w", kind, name, err)
	}
	res.Note = o.InstrumentNote()
	ops, err := diff(prefix+tpath, before, &pt)
	if err != nil {
		return nil, nil, err
	}
	if _, ok := tmpl["metadata"]; !ok {
		// A template may leave out metadata; the patch adds under it.
		ops = append([]Op{{Op: "add", Path: prefix + tpath + "/metadata", Value: map[string]any{}}}, ops...)
	}
	res.Injected = true
	return ops, []Result{res}, nil
}

// lookup follows a JSON Pointer of object members.
func lookup(obj map[string]any, pointer string) (map[string]any, bool) {
	cur := obj
	if pointer == "" {
		return cur, true
	}
	for _, k := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}
