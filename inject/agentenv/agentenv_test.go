package agentenv

import (
	"maps"
	"strings"
	"testing"
)

func lookupIn(env map[string]string) EnvLookup {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

func asMap(vars []EnvVar) map[string]string {
	m := map[string]string{}
	for _, v := range vars {
		if _, dup := m[v.Name]; dup {
			m[v.Name] = "<set twice>"
			continue
		}
		m[v.Name] = v.Value
	}
	return m
}

func TestLoadEnv(t *testing.T) {
	t.Parallel()
	const py = "/otel/opentelemetry/instrumentation/auto_instrumentation"
	for _, tc := range []struct {
		name, lang, dir string
		env, want       map[string]string
	}{
		{"nodejs from the app's node_modules", LangNodeJS, "", nil,
			map[string]string{"NODE_OPTIONS": "--require @opentelemetry/auto-instrumentations-node/register"}},
		{"nodejs appended", LangNodeJS, "/otel", map[string]string{"NODE_OPTIONS": "--enable-source-maps"},
			map[string]string{"NODE_OPTIONS": "--enable-source-maps --require /otel/autoinstrumentation.js"}},
		{"nodejs already there", LangNodeJS, "/otel", map[string]string{"NODE_OPTIONS": "--require /otel/autoinstrumentation.js --x"},
			map[string]string{}},
		{"nodejs empty", LangNodeJS, "/otel", map[string]string{"NODE_OPTIONS": ""},
			map[string]string{"NODE_OPTIONS": "--require /otel/autoinstrumentation.js"}},
		{"python", LangPython, "/otel", nil, map[string]string{"PYTHONPATH": py + ":/otel"}},
		{"python around the process's own", LangPython, "/otel", map[string]string{"PYTHONPATH": "/app/lib"},
			map[string]string{"PYTHONPATH": py + ":/app/lib:/otel"}},
		{"python already there", LangPython, "/otel", map[string]string{"PYTHONPATH": py + ":/app:/otel"}, map[string]string{}},
		{"java appended", LangJava, "/otel", map[string]string{"JAVA_TOOL_OPTIONS": "-Xmx1g"},
			map[string]string{"JAVA_TOOL_OPTIONS": "-Xmx1g -javaagent:/otel/javaagent.jar"}},
		{"dotnet kept and appended", LangDotNet, "/otel",
			map[string]string{"CORECLR_ENABLE_PROFILING": "0", "DOTNET_STARTUP_HOOKS": "/app/Hook.dll"},
			map[string]string{
				"CORECLR_PROFILER":       "{918728DD-259F-4A6A-AC2B-B85E1B658318}",
				"CORECLR_PROFILER_PATH":  "/otel/linux/OpenTelemetry.AutoInstrumentation.Native.so",
				"DOTNET_STARTUP_HOOKS":   "/app/Hook.dll:/otel/net/OpenTelemetry.AutoInstrumentation.StartupHook.dll",
				"DOTNET_ADDITIONAL_DEPS": "/otel/AdditionalDeps",
				"DOTNET_SHARED_STORE":    "/otel/store",
				"OTEL_DOTNET_AUTO_HOME":  "/otel",
			}},
		{"dotnet with its own instrumentation", LangDotNet, "/otel", map[string]string{"OTEL_DOTNET_AUTO_HOME": "/app/otel"}, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vars, err := LoadEnv(tc.lang, tc.dir, lookupIn(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if got := asMap(vars); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	for lang, want := range map[string]string{"ruby": `must be nodejs, python, java or dotnet, got "ruby"`, LangPython: "needs its directory"} {
		if _, err := LoadEnv(lang, "", lookupIn(nil)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s without a directory: %v, want %q", lang, err, want)
		}
	}
}

func TestTelemetryEnv(t *testing.T) {
	t.Parallel()
	off := map[string]string{"OTEL_PROPAGATORS": "tracecontext,baggage", "OTEL_TRACES_EXPORTER": "none",
		"OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none", "OTEL_SERVICE_NAME": "analyst"}
	for _, tc := range []struct {
		name, endpoint string
		env, want      map[string]string
	}{
		{"export off", "", nil, off},
		{"the process's own kept", "", map[string]string{"OTEL_PROPAGATORS": "b3", "OTEL_SERVICE_NAME": "x", "OTEL_LOGS_EXPORTER": "console"},
			map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}},
		{"its own endpoint exports", "", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
			map[string]string{"OTEL_PROPAGATORS": "tracecontext,baggage", "OTEL_TRACES_EXPORTER": "otlp",
				"OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp", "OTEL_SERVICE_NAME": "analyst"}},
		{"the configured endpoint", "http://collector:4318", nil,
			map[string]string{"OTEL_PROPAGATORS": "tracecontext,baggage", "OTEL_TRACES_EXPORTER": "otlp",
				"OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp", "OTEL_SERVICE_NAME": "analyst",
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}},
		{"the configured endpoint under the process's own", "http://collector:4318",
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://mine:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			map[string]string{"OTEL_PROPAGATORS": "tracecontext,baggage", "OTEL_TRACES_EXPORTER": "otlp",
				"OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp", "OTEL_SERVICE_NAME": "analyst"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := asMap(TelemetryEnv("analyst", tc.endpoint, lookupIn(tc.env))); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := asMap(TelemetryEnv("", "", lookupIn(nil))); got["OTEL_SERVICE_NAME"] != "" {
		t.Errorf("OTEL_SERVICE_NAME %q without a service", got["OTEL_SERVICE_NAME"])
	}
}
