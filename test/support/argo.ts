// Creates and updates Argo CD Applications and Argo Rollouts the way tests need them, checking
// every object against the upstream schema first (see upstream-schema.ts).
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { type ArgoObject, validateAgainstUpstream } from './upstream-schema.ts';

const plurals: Record<string, string> = { Application: 'applications', Rollout: 'rollouts' };

function coordinates(obj: ArgoObject) {
  const [group, version] = obj.apiVersion.split('/');
  const plural = plurals[obj.kind];
  const namespace = obj.metadata.namespace;
  if (!group || !version || !plural || !namespace) {
    throw new Error(`cannot address ${obj.kind} ${obj.apiVersion} ${namespace}/${obj.metadata.name}`);
  }
  return { group, version, plural, namespace };
}

export async function createArgoObject<T extends ArgoObject>(custom: CustomObjectsApi, obj: T): Promise<T> {
  await validateAgainstUpstream(custom, obj);
  return (await custom.createNamespacedCustomObject({ ...coordinates(obj), body: obj })) as T;
}

/** Full update (Argo CD writes Application status this way: the CRD has no status subresource). */
export async function replaceArgoObject<T extends ArgoObject>(custom: CustomObjectsApi, obj: T): Promise<T> {
  await validateAgainstUpstream(custom, obj);
  const name = obj.metadata.name;
  if (!name) throw new Error(`${obj.kind} without a name`);
  return (await custom.replaceNamespacedCustomObject({ ...coordinates(obj), name, body: obj })) as T;
}

export async function readArgoObject<T extends ArgoObject>(
  custom: CustomObjectsApi,
  kind: 'Application' | 'Rollout',
  namespace: string,
  name: string,
): Promise<T> {
  const plural = plurals[kind] as string;
  return (await custom.getNamespacedCustomObject({
    group: 'argoproj.io',
    version: 'v1alpha1',
    namespace,
    plural,
    name,
  })) as T;
}
