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

{{- define "baton.injectorImage" -}}
{{- printf "%s:%s" .Values.injectorImage.repository (.Values.injectorImage.tag | default .Values.image.tag | default .Chart.AppVersion) -}}
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

{{/* Where an injected sidecar finds the TLS Secret's files (inject.TLSDir). */}}
{{- define "baton.tlsDir" -}}
/var/run/secrets/baton/tls
{{- end -}}

{{/* The TLS Secret an injected pod mounts, "{agent}" standing for the agent's name. */}}
{{- define "baton.tlsSecret" -}}
{{- .Values.tls.secretName | default "baton-tls-{agent}" -}}
{{- end -}}

{{/*
A peer's URL under mutual TLS: http:// becomes https://, a URL without a
scheme gets https://, any other is kept. Call with the URL.
*/}}
{{- define "baton.httpsURL" -}}
{{- if regexMatch "^(?i)http://" . -}}
{{- regexReplaceAll "^(?i)http://" . "https://" -}}
{{- else if not (contains "://" .) -}}
{{- printf "https://%s" . -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/*
baton.yaml for one agent: the configuration with the chart's own keys
(the Redis password and its Secret) taken out, keys with no value left out,
intercept.mode following the injector's default mode unless set, and with
tls.enabled the tls block (config.tls's keys kept over the chart's) and every
peer's URL https (baton.httpsURL).
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
{{- with .root.Values.tls -}}
{{- if .enabled -}}
{{- $dir := include "baton.tlsDir" $.root -}}
{{- $tls := dict "cert_file" (printf "%s/tls.crt" $dir) "key_file" (printf "%s/tls.key" $dir) "ca_file" (printf "%s/ca.crt" $dir) "trust_domain" .trustDomain -}}
{{- $_ := set $c "tls" (merge ($c.tls | default dict) $tls) -}}
{{- range $name, $peer := $c.peers -}}
{{- if and (kindIs "map" $peer) (kindIs "string" $peer.url) -}}
{{- $_ := set $peer "url" (include "baton.httpsURL" $peer.url) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $out := dict -}}
{{- range $k, $v := $c -}}
{{- if not (empty $v) -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
