// The ledger as anyone with read access sees it: its shard ConfigMaps, decoded with the service's own
// codec (a test reads what the service wrote, not the service's memory).
import { decodeEntry, type LedgerEntry } from '../../service/core/ledger-entry.ts';
import { LEDGER_LABELS } from '../../service/kube/ledger.ts';
import type { Kube } from './kube.ts';

/** The workload's ledger entry (`id` as Deployment/namespace/name), read from the shards in `namespace`. */
export async function ledgerEntry(
  kube: Kube,
  namespace: string,
  id: string,
): Promise<LedgerEntry | undefined> {
  const selector = Object.entries(LEDGER_LABELS)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  const shards = await kube.core.listNamespacedConfigMap({ namespace, labelSelector: selector });
  for (const cm of shards.items) {
    for (const [key, value] of Object.entries(cm.data ?? {})) {
      const d = decodeEntry(key, value);
      if (d.ok && d.id === id) return d.entry;
    }
  }
  return undefined;
}
