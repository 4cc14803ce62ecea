// The HTTP status of a failed Kubernetes API call, in a module without vitest, so the bench (a plain
// node program) can share it with the tests' helpers.

export function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}
