// ConfigMaps in memory, answering the calls the ledger makes (list, read, create, merge patch) as the
// real API server does, for the ledger's unit tests (service/kube/ledger-*.test.ts); the real-server
// behaviour is in test/ledger/. `faults` makes a patch apply and then fail (a lost response), or a
// read fail.
import type { CoreApi } from '../../service/kube/api.ts';

type StoredConfigMap = { metadata: Record<string, unknown>; data: Record<string, string> };

export function memoryConfigMaps() {
  const cms = new Map<string, StoredConfigMap>();
  const faults = { timeoutAfterApply: false, readFails: false };
  const copy = <T>(x: T) => structuredClone(x);
  const core = {
    async listNamespacedConfigMap() {
      return { items: [...cms.values()].map(copy), metadata: {} };
    },
    async readNamespacedConfigMap({ name }: { name: string }) {
      if (faults.readFails) throw new Error('the request timed out');
      const cm = cms.get(name);
      if (!cm) throw Object.assign(new Error('not found'), { code: 404 });
      return copy(cm);
    },
    async createNamespacedConfigMap({
      body,
    }: {
      body: { metadata: { name: string }; data?: Record<string, string> };
    }) {
      if (cms.has(body.metadata.name)) throw Object.assign(new Error('exists'), { code: 409 });
      cms.set(body.metadata.name, copy({ ...body, data: body.data ?? {} }));
      return copy(body);
    },
    async patchNamespacedConfigMap({
      name,
      body,
    }: {
      name: string;
      body: { data?: Record<string, string | null> };
    }) {
      const cm = cms.get(name);
      if (!cm) throw Object.assign(new Error('not found'), { code: 404 });
      for (const [k, v] of Object.entries(body.data ?? {})) {
        if (v === null) delete cm.data[k];
        else cm.data[k] = v;
      }
      if (faults.timeoutAfterApply) throw new Error('the request timed out');
      return copy(cm);
    },
  } as unknown as CoreApi;
  return { core, cms, faults };
}
