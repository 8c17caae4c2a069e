// Package agentenv is the environment Baton gives an agent's process: the
// variables of zero-code OpenTelemetry, that make its runtime forward the
// trace context and baggage its handoffs are tied by, and the variables that
// point its TLS clients at the bundle of intercepted destinations' CA. The
// injector (package inject) sets them in a pod's containers and `baton exec`
// for a process on a host; it imports nothing of Kubernetes, so that the
// sidecar's binary does not carry it.
package agentenv

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Zero-code OpenTelemetry: the environment that makes an agent's runtime load
// OpenTelemetry's auto-instrumentation, so that its HTTP clients forward the
// traceparent and baggage (baton.handling among it) of the request it is
// handling, and its receiving Baton can tie each outbound call to that
// handoff. The injector sets these variables in a pod's app containers, over
// files an init container copies from the OpenTelemetry Operator's
// auto-instrumentation image; `baton exec` sets them for a process on a host.
// Both call LoadEnv and TelemetryEnv, so the two cannot drift apart.

// The languages whose zero-code instrumentation Baton loads
// (baton.dev/instrument, `baton inject --instrument`, `baton exec
// --instrument`).
const (
	LangNodeJS = "nodejs"
	LangPython = "python"
	LangJava   = "java"
	LangDotNet = "dotnet"
)

// Languages returns the accepted languages, in the order messages list them.
func Languages() []string {
	return []string{LangNodeJS, LangPython, LangJava, LangDotNet}
}

// ExpectLanguage is the message for a language Baton does not instrument.
const ExpectLanguage = "must be nodejs, python, java or dotnet"

// CheckLanguage returns an error naming the accepted values unless lang is
// one of Languages.
func CheckLanguage(lang string) error {
	for _, l := range Languages() {
		if lang == l {
			return nil
		}
	}
	return fmt.Errorf("%s, got %q", ExpectLanguage, lang)
}

// NodeRegister is the documented zero-code entry point of
// @opentelemetry/auto-instrumentations-node: `--require` resolves it from the
// node_modules of the process's working directory.
const NodeRegister = "@opentelemetry/auto-instrumentations-node/register"

// The .NET profiler's class ID, the one OpenTelemetry's .NET
// auto-instrumentation registers.
const dotNetProfilerID = "{918728DD-259F-4A6A-AC2B-B85E1B658318}"

// InstrumentationMarker returns the file, relative to an instrumentation
// directory of lang (laid out as the OpenTelemetry Operator's image for
// lang), that shows the directory holds it.
func InstrumentationMarker(lang string) string {
	switch lang {
	case LangNodeJS:
		return "autoinstrumentation.js"
	case LangPython:
		return filepath.Join("opentelemetry", "instrumentation", "auto_instrumentation", "sitecustomize.py")
	case LangJava:
		return "javaagent.jar"
	case LangDotNet:
		return filepath.Join("net", "OpenTelemetry.AutoInstrumentation.StartupHook.dll")
	}
	return ""
}

// EnvVar is one environment variable to set.
type EnvVar struct {
	Name, Value string
}

// EnvLookup reports a variable of the environment being added to, as
// os.LookupEnv does.
type EnvLookup func(name string) (value string, ok bool)

// LoadEnv returns the variables that make a process of lang load
// OpenTelemetry's zero-code instrumentation from dir, a directory laid out
// as the OpenTelemetry Operator's auto-instrumentation image for lang (what
// the injector's init container copies out of it). For nodejs, an empty dir
// loads NodeRegister from the process's own node_modules instead; every
// other language needs dir.
//
// A variable env holds already is kept, except the ones that are lists:
// NODE_OPTIONS and JAVA_TOOL_OPTIONS get the preload appended, PYTHONPATH
// the instrumentation's sitecustomize directory prepended and dir appended
// (so that the process's own entries win over the instrumentation's copies
// of shared packages, as the Operator orders them), and .NET's
// DOTNET_STARTUP_HOOKS, DOTNET_ADDITIONAL_DEPS and DOTNET_SHARED_STORE get
// theirs appended. For those the value returned is the whole new value; a
// list that already holds the entry is left as it is. A .NET process that
// sets OTEL_DOTNET_AUTO_HOME carries its own instrumentation and gets
// nothing.
func LoadEnv(lang, dir string, env EnvLookup) ([]EnvVar, error) {
	if err := CheckLanguage(lang); err != nil {
		return nil, err
	}
	if dir == "" && lang != LangNodeJS {
		return nil, fmt.Errorf("%s instrumentation needs its directory (the OpenTelemetry Operator's image layout)", lang)
	}
	var out []EnvVar
	// add appends entry to the list variable name, joined by sep, or sets
	// it to entry when unset or empty.
	add := func(name, sep, entry string) {
		switch old, _ := env(name); {
		case old == "":
			out = append(out, EnvVar{name, entry})
		case !hasEntry(old, sep, entry):
			out = append(out, EnvVar{name, old + sep + entry})
		}
	}
	// set sets name unless env has it.
	set := func(name, value string) {
		if _, ok := env(name); !ok {
			out = append(out, EnvVar{name, value})
		}
	}
	switch lang {
	case LangNodeJS:
		mod := NodeRegister
		if dir != "" {
			mod = dir + "/autoinstrumentation.js"
		}
		add("NODE_OPTIONS", " ", "--require "+mod)
	case LangPython:
		// sitecustomize in front, so that it runs; the packages behind the
		// process's own entries.
		auto := dir + "/opentelemetry/instrumentation/auto_instrumentation"
		old, _ := env("PYTHONPATH")
		v := auto + ":" + dir
		if old != "" {
			v = old
			if !hasEntry(v, ":", auto) {
				v = auto + ":" + v
			}
			if !hasEntry(v, ":", dir) {
				v += ":" + dir
			}
		}
		if v != old {
			out = append(out, EnvVar{"PYTHONPATH", v})
		}
	case LangJava:
		add("JAVA_TOOL_OPTIONS", " ", "-javaagent:"+dir+"/javaagent.jar")
	case LangDotNet:
		if _, ok := env("OTEL_DOTNET_AUTO_HOME"); ok {
			return nil, nil
		}
		set("CORECLR_ENABLE_PROFILING", "1")
		set("CORECLR_PROFILER", dotNetProfilerID)
		set("CORECLR_PROFILER_PATH", dir+"/linux/OpenTelemetry.AutoInstrumentation.Native.so")
		add("DOTNET_STARTUP_HOOKS", ":", dir+"/net/OpenTelemetry.AutoInstrumentation.StartupHook.dll")
		add("DOTNET_ADDITIONAL_DEPS", ":", dir+"/AdditionalDeps")
		set("OTEL_DOTNET_AUTO_HOME", dir)
		add("DOTNET_SHARED_STORE", ":", dir+"/store")
	}
	return out, nil
}

// hasEntry tells whether the list s, separated by sep, holds entry. For
// option strings (sep " ") the entry may span several words.
func hasEntry(s, sep, entry string) bool {
	if sep == " " {
		return strings.Contains(" "+s+" ", " "+entry+" ")
	}
	for _, e := range strings.Split(s, sep) {
		if e == entry {
			return true
		}
	}
	return false
}

// PropagatorsValue is what OTEL_PROPAGATORS is set to: W3C Trace Context
// and W3C Baggage, the two headers Baton correlates handoffs by.
const PropagatorsValue = "tracecontext,baggage"

// TelemetryEnv returns the variables that tell an instrumented process what
// to propagate, what to export and as whom, each only when env lacks it:
// OTEL_PROPAGATORS=tracecontext,baggage; OTEL_TRACES_EXPORTER,
// OTEL_METRICS_EXPORTER and OTEL_LOGS_EXPORTER none, or otlp when endpoint
// is set or env names an OTLP endpoint for that signal (then with endpoint
// as OTEL_EXPORTER_OTLP_ENDPOINT, over http/protobuf); and
// OTEL_SERVICE_NAME=service when service is not empty.
func TelemetryEnv(service, endpoint string, env EnvLookup) []EnvVar {
	var out []EnvVar
	set := func(name, value string) {
		if _, ok := env(name); !ok {
			out = append(out, EnvVar{name, value})
		}
	}
	set("OTEL_PROPAGATORS", PropagatorsValue)
	_, ownEndpoint := env("OTEL_EXPORTER_OTLP_ENDPOINT")
	for _, signal := range []string{"TRACES", "METRICS", "LOGS"} {
		_, signalEndpoint := env("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT")
		exporter := "none"
		if endpoint != "" || ownEndpoint || signalEndpoint {
			exporter = "otlp"
		}
		set("OTEL_"+signal+"_EXPORTER", exporter)
	}
	if endpoint != "" && !ownEndpoint {
		out = append(out, EnvVar{"OTEL_EXPORTER_OTLP_ENDPOINT", endpoint})
		// The Operator's Python image carries the HTTP exporter only, and
		// every other SDK speaks it too.
		set("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	}
	if service != "" {
		set("OTEL_SERVICE_NAME", service)
	}
	return out
}

// TrustBundleVars are the variables that point runtimes at a CA bundle
// file: OpenSSL, Go and Ruby (SSL_CERT_FILE), Python's requests
// (REQUESTS_CA_BUNDLE), Node.js (NODE_EXTRA_CA_CERTS, added to its own
// roots) and curl (CURL_CA_BUNDLE).
var TrustBundleVars = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE"}
