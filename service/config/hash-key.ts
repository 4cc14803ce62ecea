// Reads the HMAC key that config digests are keyed with, from a file (a mounted Secret). serve and
// the offline checksum command must read it the same way, or their values would not match.
import { readFileSync } from 'node:fs';
import { MIN_HMAC_KEY_BYTES } from '../core/config-hash.ts';

/**
 * The key in `file`: trailing whitespace (a newline from echo) is not part of it, and it must be at
 * least MIN_HMAC_KEY_BYTES long. Errors name `flag` and the file, never the key.
 */
export function readKeyFile(file: string, flag: string): Buffer {
  let raw: Buffer;
  try {
    raw = readFileSync(file);
  } catch (err) {
    throw new Error(
      `cannot read ${flag} ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  const key = Buffer.from(raw.toString('utf8').replace(/\s+$/, ''), 'utf8');
  if (key.length < MIN_HMAC_KEY_BYTES) {
    throw new Error(`${flag} ${file} holds ${key.length} bytes; at least ${MIN_HMAC_KEY_BYTES} are needed`);
  }
  return key;
}
