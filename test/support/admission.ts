// Real API refusals on demand: a ValidatingAdmissionPolicy (CEL, enforced by the API server itself)
// that denies chosen writes in one namespace, for tests of how the service lives with a refused write.
import { AdmissionregistrationV1Api, type V1RuleWithOperations } from '@kubernetes/client-node';
import type { Kube } from './kube.ts';
import { pending, waitFor } from './wait-for.ts';

export interface Refusal {
  /** A short name for the policy (made unique per namespace). */
  name: string;
  rules: V1RuleWithOperations[];
  /** CEL: the write is allowed when it holds. */
  allowWhen: string;
  message: string;
  /** A write that the policy must refuse: called until it throws, so the policy is known in force. */
  probe: () => Promise<unknown>;
}

/** Makes the API server refuse the writes `r` names in `namespace`; returns the lifting of it. */
export async function refuse(kube: Kube, namespace: string, r: Refusal): Promise<() => Promise<void>> {
  const adm = kube.kc.makeApiClient(AdmissionregistrationV1Api);
  const policy = `gr-${r.name}-${namespace}`;
  await adm.createValidatingAdmissionPolicy({
    body: {
      metadata: { name: policy },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: { resourceRules: r.rules },
        validations: [{ expression: r.allowWhen, message: r.message }],
      },
    },
  });
  await adm.createValidatingAdmissionPolicyBinding({
    body: {
      metadata: { name: policy },
      spec: {
        policyName: policy,
        validationActions: ['Deny'],
        matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } },
      },
    },
  });
  // Policies take effect asynchronously: wait until a real write is refused.
  await waitFor(
    async () => {
      try {
        await r.probe();
        return pending('the write is still allowed');
      } catch {
        return true;
      }
    },
    { describe: `the ${r.name} policy in force`, timeout: 30_000 },
  );
  return async () => {
    await adm.deleteValidatingAdmissionPolicyBinding({ name: policy });
    await adm.deleteValidatingAdmissionPolicy({ name: policy });
  };
}
