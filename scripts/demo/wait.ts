// Waiting for a condition the demo shows, with a deadline: a failed check counts as "not yet".
export const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until<T>(
  what: string,
  f: () => Promise<T | undefined>,
  timeoutMs = 90_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await pause(200);
  }
}
