// What the demo prints: plain lines, dimmed details and a bold title when stdout is a terminal.
export const say = (msg: string) => process.stdout.write(`${msg}\n`);
export const dim = (s: string) => (process.stdout.isTTY ? `\x1b[2m${s}\x1b[0m` : s);
export const bold = (s: string) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
/** How the demo names a commit. */
export const short = (sha: string) => sha.slice(0, 7);
