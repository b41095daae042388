{{- define "enginewright.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "enginewright.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "enginewright.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "enginewright.serviceAccountName" -}}
{{- default (include "enginewright.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The rules on namespaced objects: a ClusterRole's with watchNamespaces empty, else one Role per
     namespace. Every verb is one the operator calls; the reason is beside it. */}}
{{- define "enginewright.namespacedRules" -}}
- apiGroups: [tuning.enginewright.io]
  resources: [tuningruns]
  # list + watch: kopf's watch stream of runs; patch: kopf's finalizer and its progress annotations;
  # create: a TuningPolicy starts a run in its own namespace; get: on a 409, read the run of that name
  # and adopt it only when it carries the policy's owner reference
  verbs: [list, watch, patch, create, get]
- apiGroups: [tuning.enginewright.io]
  resources: [tuningruns/finalizers, tuningpolicies/finalizers]
  # update (no object is read or written through it): a run's Jobs and ConfigMaps, and a policy's
  # runs, carry a controlling ownerReference with blockOwnerDeletion, which a cluster running the
  # OwnerReferencesPermissionEnforcement admission plugin (OpenShift, hardened clusters) allows
  # only to who may update the owner's finalizers
  verbs: [update]
- apiGroups: [tuning.enginewright.io]
  resources: [tuningruns/status]
  # patch: each reconcile pass writes phase, conditions, progress and per-target results
  verbs: [patch]
- apiGroups: [tuning.enginewright.io]
  resources: [tuningpolicies]
  # list + watch: kopf's watch stream of policies; patch: kopf's finalizer (its timer stops before
  # a policy is deleted)
  verbs: [list, watch, patch]
- apiGroups: [tuning.enginewright.io]
  resources: [tuningpolicies/status]
  # patch: each check writes the stack seen per target, the runs started and the conditions
  verbs: [patch]
- apiGroups: [batch]
  resources: [jobs]
  # create: probe, batch and confirmation Jobs; list: a run's Jobs by label each pass;
  # watch: kopf's watch of the worker Jobs, so a Job that changes wakes its run's reconcile;
  # get: read the existing Job on a 409 to adopt it only when it is this run's;
  # delete: stop Jobs at the deadline and when the run is deleted;
  # patch: give a finished run's Jobs ttlSecondsAfterFinished (workerJobs.ttlSecondsAfterFinished)
  verbs: [create, list, watch, get, delete, patch]
- apiGroups: [""]
  resources: [configmaps]
  # list: a run's cache shards by label; create + update: move new store entries into the shards
  # and write the dry-run plan; get: on a 409, read the ConfigMap of that name and adopt it only
  # when it carries the run's owner reference and labels (a user's ConfigMap is left alone)
  verbs: [list, get, create, update]
- apiGroups: [""]
  resources: [pods]
  # list (read only): a probe Job that failed without a result: its pod's terminated message (the worker's
  # error line, e.g. S3's refusal with its code) goes into the run's status instead of "see its pod's log";
  # and a running target's worker pods by label, to report the scheduler's message of a pod that cannot
  # be placed (Unschedulable) and give up after the configured wait
  verbs: [list]
- apiGroups: [""]
  resources: [secrets]
  # get, of this one name only: the pre-flight check that the worker store Secret exists and has
  # both keys (the operator never reads any other Secret, and never lists them)
  resourceNames: [{{ .Values.store.workerSecret | quote }}]
  verbs: [get]
- apiGroups: [""]
  resources: [events]
  # create: StageProbing, Published, Succeeded and every Warning on the run
  verbs: [create]
{{- end -}}
