// Installs the shipped notification config (argocd-plugin/notifications) into the real Argo CD the
// way docs/argocd.md says: a merge patch of argocd-notifications-cm with the shipped file, its `url`
// changed to where gitops-reloader listens, and the token as a key of argocd-notifications-secret.
// Argo CD's notifications controller reads both from its own namespace, so they are shared by every
// test that uses them: such tests run one at a time and point the url at their own service.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { repoRoot } from '../cluster/paths.ts';
import { argocdEndpoints } from './argocd.ts';
import type { Kube } from './kube.ts';

const DIR = path.join(repoRoot, 'argocd-plugin', 'notifications');
export const SERVICE_KEY = 'service.webhook.gitops-reloader';
/** The annotation that subscribes one Application (subscriptions-example.yaml, way 1). */
export const SUBSCRIBE = {
  'notifications.argoproj.io/subscribe.on-sync-ended-gitops-reloader.gitops-reloader': '',
};

async function shipped(
  file: string,
): Promise<{ data?: Record<string, string>; stringData?: Record<string, string> }> {
  return parse(await readFile(path.join(DIR, file), 'utf8'));
}

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Merges the shipped config with `url` as the webhook's address and `token` as its bearer token. */
export async function installNotifications(kube: Kube, o: { url: string; token: string }): Promise<void> {
  const namespace = argocdEndpoints().namespace;
  const cm = await shipped('argocd-notifications-cm.yaml');
  const data = { ...cm.data };
  const service = data[SERVICE_KEY];
  if (!service) throw new Error(`argocd-notifications-cm.yaml has no ${SERVICE_KEY}`);
  // The one edit the guide asks for: the url.
  const edited = service.replace(/^url: .*$/m, `url: ${o.url}`);
  if (edited === service) throw new Error(`no url line in ${SERVICE_KEY}`);
  data[SERVICE_KEY] = edited;
  const secret = await shipped('argocd-notifications-secret.yaml');
  const stringData = Object.fromEntries(Object.keys(secret.stringData ?? {}).map((k) => [k, o.token]));
  await kube.core.patchNamespacedSecret(
    { name: 'argocd-notifications-secret', namespace, body: { stringData } },
    merge,
  );
  await kube.core.patchNamespacedConfigMap(
    { name: 'argocd-notifications-cm', namespace, body: { data } },
    merge,
  );
}

/** Removes the keys installNotifications added. */
export async function uninstallNotifications(kube: Kube): Promise<void> {
  const namespace = argocdEndpoints().namespace;
  const cm = await shipped('argocd-notifications-cm.yaml');
  const secret = await shipped('argocd-notifications-secret.yaml');
  const drop = (o: Record<string, string> | undefined) =>
    Object.fromEntries(Object.keys(o ?? {}).map((k) => [k, null]));
  await kube.core.patchNamespacedConfigMap(
    { name: 'argocd-notifications-cm', namespace, body: { data: drop(cm.data) } },
    merge,
  );
  await kube.core.patchNamespacedSecret(
    { name: 'argocd-notifications-secret', namespace, body: { data: drop(secret.stringData) } },
    merge,
  );
}
