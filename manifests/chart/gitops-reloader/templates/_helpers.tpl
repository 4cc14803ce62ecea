{{/* The chart name, for the app.kubernetes.io/name label. */}}
{{- define "gitops-reloader.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object, and the service's --release-name: the ledger ConfigMaps are
<fullname>-ledger-<n>, the Lease <fullname>-leader, the hash-key Secret <fullname>-hash-key.
It must be a DNS label.
*/}}
{{- define "gitops-reloader.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gitops-reloader.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gitops-reloader.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "gitops-reloader.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gitops-reloader.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gitops-reloader
{{- end }}

{{- define "gitops-reloader.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gitops-reloader.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gitops-reloader.hashKeySecret" -}}
{{- default (printf "%s-hash-key" (include "gitops-reloader.fullname" .)) .Values.hashKey.existingSecret }}
{{- end }}

{{- define "gitops-reloader.leaseName" -}}
{{- printf "%s-leader" (include "gitops-reloader.fullname" .) }}
{{- end }}

{{- define "gitops-reloader.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Fails the render on values that would install something that cannot work. */}}
{{- define "gitops-reloader.validate" -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" (include "gitops-reloader.fullname" .)) }}
{{- fail (printf "the fullname %q must be a DNS label: set fullnameOverride" (include "gitops-reloader.fullname" .)) }}
{{- end }}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicas > 1 needs leaderElection.enabled=true: without it every replica would reload" }}
{{- end }}
{{- if and (eq .Values.reload.defaultStrategy "annotate") (not .Values.rbac.annotate) }}
{{- fail "reload.defaultStrategy=annotate needs rbac.annotate=true (patch on workloads)" }}
{{- end }}
{{- if and (eq .Values.reload.defaultStrategy "restart") (not .Values.rbac.restart) }}
{{- fail "reload.defaultStrategy=restart needs rbac.restart=true (pods and evictions)" }}
{{- end }}
{{- if and (eq .Values.reload.defaultStrategy "git") (not .Values.git.enabled) }}
{{- fail "reload.defaultStrategy=git needs git.enabled=true" }}
{{- end }}
{{- if and .Values.webhook.enabled (not .Values.webhook.tokenSecret.name) }}
{{- fail "webhook.enabled needs webhook.tokenSecret.name: an existing Secret with the bearer token" }}
{{- end }}
{{- if and .Values.git.enabled (not .Values.git.credentialsSecret.name) (not .Values.git.useArgoCDRepoCredentials) }}
{{- fail "git.enabled needs git.credentialsSecret.name or git.useArgoCDRepoCredentials=true" }}
{{- end }}
{{- if and .Values.git.enabled .Values.git.credentialsSecret.name (not .Values.git.credentialsURLs) }}
{{- fail "git.credentialsSecret needs git.credentialsURLs: the repositories (URL prefixes or hosts) its credentials may be sent to" }}
{{- end }}
{{- end }}

{{/*
The rules the service needs in every namespace it reloads in: in a ClusterRole by default, or in a
Role per namespace when reload.namespaces lists them.
*/}}
{{- define "gitops-reloader.namespacedRules" -}}
# Configs: watched; every value is hashed the moment it is read.
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [get, list, watch]
# Workloads: watched for references and annotations.
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [get, list, watch]
- apiGroups: [batch]
  resources: [cronjobs, jobs]
  verbs: [get, list, watch]
# Events on the workloads it reloads (Reloaded, ReloadStalled, ReloadFailed, ...): created, never patched.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- if .Values.rbac.restart }}
# Restart strategy: old pods are evicted (PDBs hold); temporary surge pods are created within the
# Deployment's maxSurge, and deleted, or patched to hand them to the ReplicaSet in place of an old
# pod, which is patched with the lowest pod-deletion-cost (docs/adr/0019). The current ReplicaSet
# tells old pods from new. rbac.surgePodPolicy confines create, delete and patch to exactly that.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete, patch]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
- apiGroups: [apps]
  resources: [replicasets]
  verbs: [get, list]
# A CronJob reload creates one Job from its jobTemplate (Replace deletes the running one); a Job
# reload deletes the Job and creates it again. CronJobs and Job templates are never written.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create, delete]
{{- end }}
{{- if .Values.rbac.annotate }}
# Annotate strategy (opt-in, causes drift): writes gitops-reloader.io/config-hash into pod templates.
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [patch]
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [patch]
{{- end }}
{{- if .Values.argoRollouts.enabled }}
# Argo Rollouts: watched, and restarted drift-free with spec.restartAt.
- apiGroups: [argoproj.io]
  resources: [rollouts]
  verbs: [get, list, watch, patch]
{{- end }}
{{- if .Values.csiIntegration.enabled }}
# Secrets Store CSI driver: mounted object versions (per pod) and the classes' annotations. Read only.
- apiGroups: [secrets-store.csi.x-k8s.io]
  resources: [secretproviderclasses, secretproviderclasspodstatuses]
  verbs: [get, list, watch]
{{- end }}
{{- end }}

{{/* The rules in Argo CD's namespaces: Applications; for git mode their AppProjects and repository Secrets. */}}
{{- define "gitops-reloader.argocdRules" -}}
# Argo CD: sync operations, to hold changes until a sync ends; git mode reads the Application that
# manages a workload.
- apiGroups: [argoproj.io]
  resources: [applications]
  verbs: [get, list, watch]
{{- if .Values.git.enabled }}
# Git mode: the Application's AppProject, to check that it allows the workload's namespace and the
# repository (docs/security.md).
- apiGroups: [argoproj.io]
  resources: [appprojects]
  verbs: [get]
{{- end }}
{{- end }}

{{/* Argo CD's namespaces, as the service reads --argocd-namespaces (default: argocd). */}}
{{- define "gitops-reloader.argocdNamespaces" -}}
{{- join "," (default (list "argocd") .Values.argocd.namespaces) }}
{{- end }}

{{/* The rules in Flux's namespaces: read-only on what tells whether a revision is being applied. */}}
{{- define "gitops-reloader.fluxRules" -}}
# Flux: Kustomizations and HelmReleases (their status and inventory) and their sources' artifact
# revisions, to hold changes until a revision is applied. Read only.
- apiGroups: [kustomize.toolkit.fluxcd.io]
  resources: [kustomizations]
  verbs: [get, list, watch]
- apiGroups: [helm.toolkit.fluxcd.io]
  resources: [helmreleases]
  verbs: [get, list, watch]
- apiGroups: [source.toolkit.fluxcd.io]
  resources: [gitrepositories, ocirepositories, buckets]
  verbs: [get, list, watch]
{{- end }}

{{/* Flux's namespaces, as the service reads --flux-namespaces (default: flux-system). */}}
{{- define "gitops-reloader.fluxNamespaces" -}}
{{- join "," (default (list "flux-system") .Values.flux.namespaces) }}
{{- end }}
