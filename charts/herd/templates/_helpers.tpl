{{/*
The prefix of every object's name. 54 characters at most, so that "<fullname>-operator" is a
valid Service name (63).
*/}}
{{- define "herd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 54 | trimSuffix "-" -}}
{{- else if contains "herd" .Release.Name -}}
{{- .Release.Name | trunc 54 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-herd" .Release.Name | trunc 54 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The operator's Deployment, ServiceAccount, Service, Lease and namespaced RBAC. */}}
{{- define "herd.operatorName" -}}
{{- printf "%s-operator" (include "herd.fullname" .) -}}
{{- end -}}

{{/*
Labels of every object. app.kubernetes.io/name is always "herd": the operator finds its own
pods by it (the run API peer in the Run NetworkPolicies).
*/}}
{{- define "herd.labels" -}}
app.kubernetes.io/name: herd
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels of the operator's objects. */}}
{{- define "herd.operatorLabels" -}}
{{ include "herd.labels" . }}
app.kubernetes.io/component: operator
{{- end -}}

{{/*
The operator pods' selector: name and component are what the Run NetworkPolicies select the
run API by (operator/src/controller/run.rs).
*/}}
{{- define "herd.selectorLabels" -}}
app.kubernetes.io/name: herd
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/*
An image reference: repository@digest when a digest pins it, else repository:tag, the tag
defaulting to the chart's appVersion.
*/}}
{{- define "herd.image" -}}
{{- $image := index . 0 -}}
{{- $root := index . 1 -}}
{{- with get $image "digest" -}}
{{- printf "%s@%s" $image.repository . -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The operator's ServiceAccount: made by the chart, or named by serviceAccount.name. */}}
{{- define "herd.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "herd.operatorName" .) -}}
{{- end -}}

{{/* The Service's DNS names, each a name of the run API's certificate. */}}
{{- define "herd.serviceDnsNames" -}}
{{- $service := include "herd.operatorName" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $service (printf "%s.%s" $service $ns) (printf "%s.%s.svc" $service $ns) (printf "%s.%s.svc.%s" $service $ns .Values.clusterDomain) | join "," -}}
{{- end -}}

{{/* The port /metrics is scraped on: the HTTPS one with metrics.secure, else the http one. */}}
{{- define "herd.metricsPort" -}}
{{- if .Values.metrics.secure -}}
{{- .Values.metrics.port -}}
{{- else -}}
{{- .Values.http.port -}}
{{- end -}}
{{- end -}}

{{/* The run API's URL as Run pods reach it. */}}
{{- define "herd.runApiUrl" -}}
{{- if .Values.runApi.url -}}
{{- .Values.runApi.url -}}
{{- else -}}
{{- printf "https://%s.%s.svc:%d" (include "herd.operatorName" .) .Release.Namespace (int .Values.runApi.port) -}}
{{- end -}}
{{- end -}}

{{/*
A quantity as the operator's --runner-resources takes it: YAML numbers arrive as floats, which
would print as 1e+06.
*/}}
{{- define "herd.quantity" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) -}}
{{- int64 . -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/*
runner.resources or sandbox.resources (the dict given) as
`requests.cpu=50m,requests.memory=128Mi,limits.memory=1Gi`.
*/}}
{{- define "herd.resourcePairs" -}}
{{- $resources := . | default dict -}}
{{- $pairs := list -}}
{{- range $kind := list "requests" "limits" -}}
{{- range $name, $quantity := (get $resources $kind | default dict) -}}
{{- $pairs = append $pairs (printf "%s.%s=%s" $kind $name (include "herd.quantity" $quantity)) -}}
{{- end -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* The namespaces holding the operator's Role: the watched ones (the release namespace has
release-role.yaml's Role, and this one too only when it is watched). */}}
{{- define "herd.roleNamespaces" -}}
{{- .Values.watchNamespaces | uniq | join "," -}}
{{- end -}}

{{/*
The operator's flags (operator/src/config.rs), as a YAML list: quoted by toYaml, so that no
value can break the manifest.
*/}}
{{- define "herd.operatorArgs" -}}
{{- $v := .Values -}}
{{- $model := $v.defaultModel -}}
{{- $args := list -}}
{{- with $v.watchNamespaces -}}
{{- $args = append $args (printf "--watch-namespaces=%s" (join "," .)) -}}
{{- end -}}
{{- $args = append $args (printf "--lease-name=%s" (include "herd.operatorName" .)) -}}
{{- $args = append $args (printf "--lease-namespace=%s" .Release.Namespace) -}}
{{- $args = append $args (printf "--http-addr=0.0.0.0:%d" (int $v.http.port)) -}}
{{- if $v.metrics.secure -}}
{{- $args = append $args "--metrics-secure" -}}
{{- $args = append $args (printf "--metrics-addr=0.0.0.0:%d" (int $v.metrics.port)) -}}
{{- end -}}
{{- $args = append $args (printf "--run-api-addr=0.0.0.0:%d" (int $v.runApi.port)) -}}
{{- $args = append $args (printf "--run-api-url=%s" (include "herd.runApiUrl" .)) -}}
{{- $args = append $args (printf "--run-api-port=%d" (int $v.runApi.port)) -}}
{{- $args = append $args (printf "--run-api-dns-names=%s" (include "herd.serviceDnsNames" .)) -}}
{{- $args = append $args (printf "--run-api-tls=%s" (eq $v.runApi.tls.mode "certManager" | ternary "external" "operator")) -}}
{{- $args = append $args (printf "--concurrency=%d" (int $v.concurrency)) -}}
{{- $args = append $args (printf "--max-active=%d" (int $v.maxActive)) -}}
{{- $args = append $args (printf "--max-active-per-namespace=%d" (int $v.maxActivePerNamespace)) -}}
{{- $args = append $args (printf "--pod-start-timeout=%s" $v.podStartTimeout) -}}
{{- $args = append $args (printf "--runner-resources=%s" (include "herd.resourcePairs" $v.runner.resources)) -}}
{{- $args = append $args (printf "--sandbox-resources=%s" (include "herd.resourcePairs" $v.sandbox.resources)) -}}
{{- $args = append $args (printf "--runner-image=%s" (include "herd.image" (list $v.runner.image .))) -}}
{{- $args = append $args (printf "--sandbox-image=%s" (include "herd.image" (list $v.sandbox.image .))) -}}
{{- if $model.name -}}
{{- $args = append $args (printf "--default-model-provider=%s" $model.provider) -}}
{{- $args = append $args (printf "--default-model-name=%s" $model.name) -}}
{{- with $model.baseURL -}}
{{- $args = append $args (printf "--default-model-base-url=%s" .) -}}
{{- end -}}
{{- with $model.apiKeySecretRef.name -}}
{{- $args = append $args (printf "--default-model-secret=%s" .) -}}
{{- $args = append $args (printf "--default-model-secret-key=%s" $model.apiKeySecretRef.key) -}}
{{- end -}}
{{- end -}}
{{- $args = append $args (printf "--log-format=%s" $v.logFormat) -}}
{{- concat $args $v.extraArgs | toYaml -}}
{{- end -}}

{{/* Checks across values, which the schema cannot express. */}}
{{- define "herd.validate" -}}
{{- if eq (int .Values.http.port) (int .Values.runApi.port) -}}
{{- fail (printf "http.port and runApi.port must differ (both are %d)" (int .Values.http.port)) -}}
{{- end -}}
{{- if and .Values.metrics.secure (has (int .Values.metrics.port) (list (int .Values.http.port) (int .Values.runApi.port))) -}}
{{- fail (printf "metrics.port must differ from http.port and runApi.port (it is %d)" (int .Values.metrics.port)) -}}
{{- end -}}
{{- end -}}
