// The HMAC key for config digests, from the Secret <release-name>-hash-key in the release namespace
// (docs/adr/0014). When the Secret is missing the service creates it with a random key, so the chart
// renders no key at all: `helm template` (Argo CD) cannot rotate a key it never renders. Two replicas
// starting together both try; the API server lets one create win (409 for the other, which reads it).
import { randomBytes } from 'node:crypto';
import { MIN_HMAC_KEY_BYTES } from '../core/config-hash.ts';
import type { CoreApi } from './api.ts';

/** Random bytes in a created key (more than the minimum, like the chart's former 48 characters). */
const CREATED_KEY_BYTES = 48;

export interface HashKeySecretOptions {
  core: CoreApi;
  namespace: string;
  name: string;
  /** Create the Secret when it does not exist. */
  create: boolean;
  log(msg: string, fields: Record<string, unknown>): void;
}

export class HashKeyError extends Error {
  override name = 'HashKeyError';
}

const codeOf = (err: unknown) => (err as { code?: number } | null)?.code;

export async function readOrCreateHashKey(o: HashKeySecretOptions): Promise<Buffer> {
  const where = `Secret ${o.namespace}/${o.name}`;
  for (let attempt = 0; attempt < 2; attempt++) {
    let data: string | undefined;
    try {
      data = (await o.core.readNamespacedSecret({ name: o.name, namespace: o.namespace })).data?.key;
    } catch (err) {
      if (codeOf(err) !== 404) {
        throw new HashKeyError(
          `the ${where} holding the hash key could not be read (${codeOf(err) ?? (err as Error).message})`,
        );
      }
      if (!o.create) {
        throw new HashKeyError(
          `the ${where} holding the hash key does not exist; create it with a random "key" of at least ${MIN_HMAC_KEY_BYTES} bytes, or pass --create-hash-key=true`,
        );
      }
      try {
        await o.core.createNamespacedSecret({
          namespace: o.namespace,
          body: {
            metadata: {
              name: o.name,
              labels: {
                'app.kubernetes.io/name': 'gitops-reloader',
                'app.kubernetes.io/component': 'hash-key',
              },
            },
            type: 'Opaque',
            data: { key: randomBytes(CREATED_KEY_BYTES).toString('base64') },
          },
        });
        o.log('created the hash-key Secret with a random key', { secret: `${o.namespace}/${o.name}` });
      } catch (e) {
        // 409: another replica created it first; read theirs.
        if (codeOf(e) !== 409) {
          throw new HashKeyError(`the ${where} could not be created (${codeOf(e) ?? (e as Error).message})`);
        }
      }
      continue;
    }
    const key = Buffer.from(data ?? '', 'base64');
    if (key.length < MIN_HMAC_KEY_BYTES) {
      throw new HashKeyError(
        `${where} key "key" holds ${key.length} bytes; at least ${MIN_HMAC_KEY_BYTES} are needed`,
      );
    }
    return key;
  }
  throw new HashKeyError(`the ${where} was created but could not be read back`);
}
