// Reading a request body as JSON, with the limits a public endpoint needs: a size limit checked
// before and while reading, no content encodings, UTF-8 only. Errors are HttpErrors carrying the
// status to answer; the rest of a refused body is read off first, so the client (which may still
// be sending) gets the answer instead of a reset connection.
import type { IncomingMessage } from 'node:http';

/** An error whose status and message are meant for the client (4xx), with optional extra fields. */
export class HttpError extends Error {
  readonly status: number;
  readonly extra: Record<string, unknown>;

  constructor(status: number, message: string, extra: Record<string, unknown> = {}) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.extra = extra;
  }
}

/** The media type of a Content-Type header, lower-cased and without parameters; '' when absent. */
export function mediaType(header: string | undefined): string {
  return (header ?? '').split(';', 1)[0]?.trim().toLowerCase() ?? '';
}

/** The charset parameter of a Content-Type header, lower-cased; undefined when absent. */
export function charsetOf(header: string | undefined): string | undefined {
  const m = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(header ?? '');
  return m?.[1]?.toLowerCase();
}

/** Reads the rest of a request and discards it; resolves when it ended or broke. */
function drain(req: IncomingMessage): Promise<void> {
  if (req.readableEnded || req.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    req.once('end', resolve);
    req.once('close', resolve);
    req.once('error', () => resolve());
    req.resume();
  });
}

/**
 * Reads the body (at most `limit` bytes) and parses it as JSON. An empty body is `{}`, as the body
 * parsers of most frameworks make it. Throws HttpError 413 (too large), 415 (encoded, or a charset
 * other than UTF-8) or 400 (not JSON, or the client went away).
 */
export async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding !== 'identity') {
    await drain(req);
    throw new HttpError(415, `unsupported content encoding "${encoding}"`);
  }
  const charset = charsetOf(req.headers['content-type']);
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    await drain(req);
    throw new HttpError(415, `unsupported charset "${charset}"`);
  }
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    await drain(req);
    throw new HttpError(413, `the body is larger than ${limit} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const body = await new Promise<Buffer>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        chunks.length = 0;
        void drain(req).then(() => reject(new HttpError(413, `the body is larger than ${limit} bytes`)));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onClose = () => {
      cleanup();
      reject(new HttpError(400, 'the request body is incomplete', { field: '(body)' }));
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      req.off('error', onClose);
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onClose);
    req.once('error', onClose);
  });
  if (body.length === 0) return {};
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new HttpError(400, `the body is not valid JSON: ${(err as Error).message}`, { field: '(body)' });
  }
}
