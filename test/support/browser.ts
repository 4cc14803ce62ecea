// A real headless browser for the tests that render a page (the status page): Chromium, run as
// `chromium --headless --dump-dom`, which loads the page, runs its scripts (virtual time lets its
// requests finish) and prints the DOM. ensureBrowser() is called by the test setup: it finds
// Chromium, or installs it with apt-get when it can (root on Debian), as the README's test command
// installs what it needs; otherwise it fails, naming the fix.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { onPath } from '../cluster/prerequisites.ts';

const run = promisify(execFile);
const NAMES = ['chromium', 'chromium-browser', 'google-chrome'];

async function find(): Promise<string | undefined> {
  for (const n of NAMES) {
    const p = await onPath(n);
    if (p) return p;
  }
  return undefined;
}

/** The browser's path; installs Chromium with apt-get if it is missing and this is root on Debian. */
export async function ensureBrowser(say: (msg: string) => void): Promise<string> {
  const found = await find();
  if (found) return found;
  const apt = await onPath('apt-get');
  if (!apt || process.getuid?.() !== 0) {
    throw new Error(
      'a headless browser is needed for the status page test: install Chromium (Debian: apt-get install chromium)',
    );
  }
  say('installing Chromium with apt-get (the status page test renders in it)');
  const started = Date.now();
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  await run(apt, ['update'], { env, timeout: 300_000 });
  await run(apt, ['install', '-y', '--no-install-recommends', 'chromium'], { env, timeout: 600_000 });
  const installed = await find();
  if (!installed) throw new Error('apt-get installed chromium, but it is not on PATH');
  say(`Chromium installed in ${((Date.now() - started) / 1000).toFixed(0)}s`);
  return installed;
}

/** The DOM of `url` after its scripts ran, as Chromium renders it. */
export async function renderedDom(url: string): Promise<string> {
  const browser = await find();
  if (!browser) throw new Error('no headless browser: the test setup installs one (test/support/browser.ts)');
  const { stdout } = await run(
    browser,
    [
      '--headless',
      '--no-sandbox', // as root, in a container without user namespaces
      '--disable-gpu',
      '--no-first-run',
      '--disable-dev-shm-usage',
      '--virtual-time-budget=10000',
      '--dump-dom',
      url,
    ],
    { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
  );
  return stdout;
}
