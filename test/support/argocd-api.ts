// argocd-server's REST API (its grpc-gateway), called as the CLI and the UI call it. The test
// cluster runs argocd-server on loopback with auth disabled, so requests carry no token. The routes
// and bodies are those of Argo CD v3.6's server/application/application.proto.
import { argocdEndpoints } from './argocd.ts';

export class ArgoCdApiError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

async function call<T>(method: string, route: string, body?: unknown): Promise<T> {
  const url = `${argocdEndpoints().apiServer}${route}`;
  const res = await fetch(url, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok)
    throw new ArgoCdApiError(res.status, `${method} ${route}: ${res.status} ${text.slice(0, 500)}`);
  return (text ? JSON.parse(text) : {}) as T;
}

/** POST /api/v1/applications/{name}/sync: an operation, as `argocd app sync` or the UI's Sync starts it. */
export async function syncApplication(
  name: string,
  body: { revision?: string; prune?: boolean; appNamespace?: string } = {},
): Promise<unknown> {
  return call('POST', `/api/v1/applications/${encodeURIComponent(name)}/sync`, { name, ...body });
}

/** A live resource of an Application, as the resource action routes name it. */
export interface ResourceRef {
  group: string;
  version: string;
  kind: string;
  namespace: string;
  name: string;
}

function resourceQuery(r: ResourceRef): Record<string, string> {
  return { namespace: r.namespace, resourceName: r.name, version: r.version, group: r.group, kind: r.kind };
}

/** GET /api/v1/applications/{name}/resource/actions: the actions Argo CD offers on a resource. */
export async function listResourceActions(
  app: string,
  r: ResourceRef,
): Promise<Array<{ name: string; displayName?: string; disabled?: boolean }>> {
  const q = new URLSearchParams(resourceQuery(r)).toString();
  const out = await call<{ actions?: Array<{ name: string; displayName?: string; disabled?: boolean }> }>(
    'GET',
    `/api/v1/applications/${encodeURIComponent(app)}/resource/actions?${q}`,
  );
  return out.actions ?? [];
}

/** POST /api/v1/applications/{name}/resource/actions/v2: runs a resource action (the UI's Actions menu). */
export async function runResourceAction(app: string, r: ResourceRef, action: string): Promise<void> {
  await call('POST', `/api/v1/applications/${encodeURIComponent(app)}/resource/actions/v2`, {
    name: app,
    appNamespace: argocdEndpoints().namespace,
    ...resourceQuery(r),
    action,
  });
}
