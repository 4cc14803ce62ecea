// Repositories the git write-back tests start from: plain, Kustomize and Helm layouts, written the
// way people write them (comments, odd key order, mixed quoting) so that any reformatting shows.

export const HASH_KEY = 'gitops-reloader.io/config-hash';

export const PLAIN_DEPLOYMENT = `# Web front end. Replicas follow the HPA; do not set them here.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web            # the Service selects on this
  namespace: shop
  labels: {app: web, "tier": 'front'}
spec:
  template:
    metadata:
      labels:
        app: web
      annotations:
        prometheus.io/scrape: 'true'   # scraped by the shared Prometheus
    spec:
      containers:
        - name: web
          image: "ghcr.io/acme/web:1.4.2"
          args: ["--port", '8080']
          envFrom:
            - configMapRef: {name: web-config}
  selector:               # after template on purpose: key order must survive
    matchLabels:
      app: web
`;

export const PLAIN_WORKERS = `---
# Background jobs
apiVersion: batch/v1
kind: CronJob
metadata:
  name: report
spec:
  schedule: "0 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - {name: report, image: busybox, envFrom: [{configMapRef: {name: web-config}}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: queue
spec:
    serviceName: queue
    template:
        metadata:
            labels: {app: queue}
        spec:
            containers: [{name: q, image: redis}]
`;

export const PLAIN_REPO: Record<string, string> = {
  'README.md': '# shop manifests\n',
  'apps/shop/deployment.yaml': PLAIN_DEPLOYMENT,
  'apps/shop/jobs/workers.yaml': PLAIN_WORKERS,
  'apps/shop/config.yaml':
    'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  LOG_LEVEL: info\n',
  'apps/other/deployment.yaml': PLAIN_DEPLOYMENT.replace('name: web ', 'name: web2'),
};

export const KUSTOMIZE_REPO: Record<string, string> = {
  'base/kustomization.yaml': '# Shared by every overlay.\nresources:\n  - deployment.yaml\n',
  'base/deployment.yaml': PLAIN_DEPLOYMENT.replace('  namespace: shop\n', ''),
  'overlays/prod/kustomization.yaml': `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: shop-prod
namePrefix: prod-
resources:
  - ../../base
  - cron.yaml   # prod only
images:
  - name: ghcr.io/acme/web
    newTag: "1.4.2"
`,
  'overlays/prod/cron.yaml': PLAIN_WORKERS.split('---\n')[1] as string,
  'overlays/staging/kustomization.yaml': 'namespace: shop-staging\nresources:\n  - ../../base\n',
};

export const HELM_VALUES = `# Default values for web.
replicaCount: 2

image:
  repository: ghcr.io/acme/web
  # Overridden per environment by CI.
  tag: "1.4.2"

podAnnotations: {}

worker:
  enabled: true
  podAnnotations:
    team: 'payments'   # cost allocation
`;

export const HELM_REPO: Record<string, string> = {
  'charts/web/Chart.yaml': 'apiVersion: v2\nname: web\nversion: 0.3.0\n',
  'charts/web/values.yaml': HELM_VALUES,
  'charts/web/templates/deployment.yaml': `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    metadata:
      annotations:
        {{- toYaml .Values.podAnnotations | nindent 8 }}
`,
};

/** Lines a unified diff (`git show --unified=0`) adds and removes, without file headers. */
export function diffLines(diff: string): { added: string[]; removed: string[]; files: string[] } {
  const lines = diff.split('\n');
  return {
    added: lines.filter((l) => l.startsWith('+') && !l.startsWith('+++')).map((l) => l.slice(1)),
    removed: lines.filter((l) => l.startsWith('-') && !l.startsWith('---')).map((l) => l.slice(1)),
    files: lines.filter((l) => l.startsWith('+++ b/')).map((l) => l.slice(6)),
  };
}

/** A 32-hex-digit value like a config hash, distinct per seed. */
export const fakeHash = (seed: string | number) =>
  Buffer.from(String(seed).padEnd(16, '.')).toString('hex').slice(0, 32);
