// The requests notification-controller v1.9.0 really forwarded (captured by capture/capture.sh from
// the controller's own event server and Forwarder): exact body bytes and headers, for the tests.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export type ProviderPath = '/hmac' | '/hmac-nl' | '/bearer';

export interface Forwarded {
  name: string;
  /** /hmac: generic-hmac, Secret token FIXTURE_TOKEN; /hmac-nl: the same token plus "\n";
   * /bearer: generic, Secret headers "Authorization: Bearer FIXTURE_TOKEN". */
  path: ProviderPath;
  method: string;
  headers: Record<string, string>;
  body: string;
}

export const FIXTURE_TOKEN = '6f1d2c3b4a59687766554433221100ff';

const all: Forwarded[] = JSON.parse(
  readFileSync(join(import.meta.dirname, 'notification-controller-v1.9.0.json'), 'utf8'),
);

/** One captured delivery; throws if the fixture has no such one (a test cannot pass on nothing). */
export function forwarded(name: string, path: ProviderPath = '/hmac'): Forwarded {
  const f = all.find((x) => x.name === name && x.path === path);
  if (!f) throw new Error(`no captured delivery ${name} ${path}`);
  return f;
}

export const capturedNames = [...new Set(all.map((x) => x.name))];
