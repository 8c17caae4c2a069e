{{/* The release's base name, cut to fit a DNS label with a suffix. */}}
{{- define "baton.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 54 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 54 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "baton.injector" -}}
{{- printf "%s-injector" (include "baton.fullname" .) -}}
{{- end -}}

{{- define "baton.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "baton.injectorSelector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: injector
{{- end -}}

{{- define "baton.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "baton.initImage" -}}
{{- printf "%s:%s" .Values.initImage.repository (.Values.initImage.tag | default .Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The namespaces that get Baton's ConfigMaps and Secrets. */}}
{{- define "baton.namespaces" -}}
{{- prepend .Values.namespaces .Release.Namespace | uniq | toJson -}}
{{- end -}}

{{/* The Secret and key holding the Redis password, as JSON, or "{}". */}}
{{- define "baton.redisSecret" -}}
{{- $redis := dig "store" "redis" dict .Values.config -}}
{{- if $redis.existingSecret -}}
{{- dict "name" $redis.existingSecret "key" ($redis.existingSecretKey | default "password") | toJson -}}
{{- else if $redis.password -}}
{{- dict "name" (printf "%s-redis" (include "baton.fullname" .)) "key" "password" | toJson -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/*
baton.yaml for one agent: the configuration with the chart's own keys
(the Redis password and its Secret) taken out, keys with no value left out,
and intercept.mode following the injector's default mode unless set.
Call with (dict "config" $cfg "root" $).
*/}}
{{- define "baton.batonYAML" -}}
{{- $c := deepCopy .config -}}
{{- $redis := dig "store" "redis" dict $c -}}
{{- if $redis -}}
{{- $_ := set $c.store "redis" (omit $redis "existingSecret" "existingSecretKey" "password") -}}
{{- end -}}
{{- if and (eq .root.Values.injector.intercept "transparent") (not (dig "intercept" "mode" "" $c)) -}}
{{- $_ := set $c "intercept" (merge (dict "mode" "transparent") ($c.intercept | default dict)) -}}
{{- end -}}
{{- $out := dict -}}
{{- range $k, $v := $c -}}
{{- if not (empty $v) -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
