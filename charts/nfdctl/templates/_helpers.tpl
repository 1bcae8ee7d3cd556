{{/* vim: set filetype=mustache: */}}

{{/* The chart name, or nameOverride. */}}
{{- define "nfdctl.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object name: fullnameOverride, else the release name when it contains the chart name,
else <release>-<chart>. Components append -gc, -agent, -plugins, so it stays 10 characters short of 63.
*/}}
{{- define "nfdctl.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 53 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 53 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 53 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The namespace of the namespaced objects. */}}
{{- define "nfdctl.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "nfdctl.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "gc"). Never change them: selectors are immutable. */}}
{{- define "nfdctl.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nfdctl.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{/* Labels of every object: (dict "ctx" $ "component" "gc"); component may be empty. */}}
{{- define "nfdctl.labels" -}}
helm.sh/chart: {{ include "nfdctl.chart" .ctx }}
{{ include "nfdctl.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- end -}}

{{/* The image of every container: repository@digest when a digest is given, else repository:tag (appVersion). */}}
{{- define "nfdctl.image" -}}
{{- if .Values.image.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" .Values.image.digest) -}}
{{- fail (printf "image.digest %q is not a digest: give sha256: and 64 hex digits, or leave it empty to use image.tag" .Values.image.digest) -}}
{{- end -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The service account of one component: (dict "ctx" $ "component" "gc"). */}}
{{- define "nfdctl.serviceAccountName" -}}
{{- $values := index .ctx.Values .component -}}
{{- if $values.serviceAccount.create -}}
{{- default (printf "%s-%s" (include "nfdctl.fullname" .ctx) .component) $values.serviceAccount.name -}}
{{- else -}}
{{- default "default" $values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The pod-spec fields every component takes from its values: (dict "ctx" $ "component" "gc"). */}}
{{- define "nfdctl.podPlacement" -}}
{{- $values := index .ctx.Values .component -}}
{{- with $values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with include "nfdctl.affinity" . | fromYaml }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The affinity of one component's pods: its values' affinity, and for the gc Deployment (dict … "spread" true)
with gc.spreadReplicas a preferred term that puts the replicas on different nodes: the standby is worth most
where the leader is not.
*/}}
{{- define "nfdctl.affinity" -}}
{{- $affinity := deepCopy ((index .ctx.Values .component).affinity | default dict) -}}
{{- if and .spread .ctx.Values.gc.spreadReplicas -}}
{{- $anti := get $affinity "podAntiAffinity" | default dict -}}
{{- $preferred := get $anti "preferredDuringSchedulingIgnoredDuringExecution" | default list -}}
{{- $selector := dict "matchLabels" (include "nfdctl.selectorLabels" (dict "ctx" .ctx "component" "gc") | fromYaml) -}}
{{- $term := dict "weight" 100 "podAffinityTerm" (dict "topologyKey" "kubernetes.io/hostname" "labelSelector" $selector) -}}
{{- $_ := set $anti "preferredDuringSchedulingIgnoredDuringExecution" (append $preferred $term) -}}
{{- $_ := set $affinity "podAntiAffinity" $anti -}}
{{- end -}}
{{- toYaml $affinity -}}
{{- end -}}

{{/*
Pod template metadata of one component: (dict "ctx" $ "component" "gc" "metrics" true). Pods that serve
metrics (on the port the templates set) say so for annotation-based scraping.
*/}}
{{- define "nfdctl.podMetadata" -}}
{{- $values := index .ctx.Values .component -}}
{{- $annotations := dict -}}
{{- if .metrics -}}
{{- $_ := set $annotations "prometheus.io/scrape" "true" -}}
{{- $_ := set $annotations "prometheus.io/port" "8080" -}}
{{- end -}}
{{- $annotations = merge (deepCopy ($values.podAnnotations | default dict)) $annotations -}}
labels:
  {{- include "nfdctl.selectorLabels" . | nindent 2 }}
  {{- with $values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A PodDisruptionBudget bound as a string; "" when unset (null, absent or empty). */}}
{{- define "nfdctl.pdbValue" -}}
{{- if not (kindIs "invalid" .) -}}{{- toString . -}}{{- end -}}
{{- end -}}

{{/*
Settings that cannot work together fail the render with one line saying what to change.
*/}}
{{- define "nfdctl.validate" -}}
{{- if and .Values.agent.enable .Values.plugins.enable -}}
{{- fail "agent.enable and plugins.enable are both true: the agent serves the classes' device plugins itself, so choose one (--set plugins.enable=false, or --set agent.enable=false)" -}}
{{- end -}}
{{- if and .Values.gc.enable (not .Values.gc.cronJob.enable) -}}
{{- if and (gt (int .Values.gc.replicaCount) 1) (not .Values.gc.leaderElect) -}}
{{- fail (printf "gc.replicaCount is %d but gc.leaderElect is false: several collectors would all delete; set gc.leaderElect=true or gc.replicaCount=1" (int .Values.gc.replicaCount)) -}}
{{- end -}}
{{- if .Values.gc.pdb.enable -}}
{{- $min := include "nfdctl.pdbValue" .Values.gc.pdb.minAvailable -}}
{{- $max := include "nfdctl.pdbValue" .Values.gc.pdb.maxUnavailable -}}
{{- if and (ne $min "") (ne $max "") -}}
{{- fail "gc.pdb.minAvailable and gc.pdb.maxUnavailable are both set: a PodDisruptionBudget takes one; empty the other (--set gc.pdb.minAvailable=null)" -}}
{{- end -}}
{{- if and (eq $min "") (eq $max "") -}}
{{- fail "gc.pdb.enable is true but neither gc.pdb.minAvailable nor gc.pdb.maxUnavailable is set: set one, or gc.pdb.enable=false" -}}
{{- end -}}
{{- if and (regexMatch "^[0-9]+$" $min) (ge (atoi $min) (int .Values.gc.replicaCount)) -}}
{{- fail (printf "gc.pdb.minAvailable (%s) is not below gc.replicaCount (%d): no collector could ever be evicted, which blocks node drains; raise gc.replicaCount or set gc.pdb.enable=false" $min (int .Values.gc.replicaCount)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
