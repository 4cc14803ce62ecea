// Chat alerts on reloads (docs/alerts.md): our flags, and Stakater Reloader's environment variables
// (ALERT_ON_RELOAD, ALERT_WEBHOOK_URL, ALERT_SINK, ALERT_WEBHOOK_PROXY, ALERT_ADDITIONAL_INFO) read
// when the flag is not given, so a Reloader Deployment's env works unchanged. The webhook URL is a
// secret (a Slack or Teams URL's path is its token): it is parsed here, once, into the parts the
// sender uses, and no message shows more of it than scheme and host.

import { ALERT_SINKS, type AlertSink } from '../core/alert-message.ts';
import { FlagError, type FlagSpec, type FlagValue } from './flags.ts';

/** A parsed http(s) endpoint: the webhook, or the proxy it is reached through. */
export interface AlertEndpoint {
  secure: boolean;
  hostname: string;
  port: number;
  /** Path and query, as sent in the request line (the secret part of a webhook URL). */
  path: string;
  /** host[:port], as the Host header names it. */
  host: string;
  /** scheme://host[:port]: all that logs and errors show. */
  origin: string;
  /** "user:password" from the URL, sent as Basic credentials. */
  auth?: string;
}

export interface AlertConfig {
  sink: AlertSink;
  webhook: AlertEndpoint;
  proxy?: AlertEndpoint;
  additionalInfo?: string;
  /** Alert on a failed reload attempt too (the first of a run of failures), not only a completed one. */
  onFailure: boolean;
  timeoutMs: number;
}

/** Our flag → Reloader's environment variable for the same setting. */
const RELOADER_ENV: Readonly<Record<string, string>> = {
  'alert-on-reload': 'ALERT_ON_RELOAD',
  'alert-webhook-url': 'ALERT_WEBHOOK_URL',
  'alert-sink': 'ALERT_SINK',
  'alert-webhook-proxy': 'ALERT_WEBHOOK_PROXY',
  'alert-additional-info': 'ALERT_ADDITIONAL_INFO',
};

export const alertFlags: readonly FlagSpec[] = [
  {
    name: 'alert-on-reload',
    type: 'bool',
    help: 'Send a chat alert for every completed reload (and, with --alert-on-failure, every failed one) to --alert-webhook-url. Unset: Reloader\'s ALERT_ON_RELOAD ("true" turns it on).',
    default: 'false',
  },
  {
    name: 'alert-on-failure',
    type: 'bool',
    help: 'With --alert-on-reload: also alert when a reload attempt fails (once per run of failures, until a reload completes). Reloader alerts on completed reloads only: set false for its behaviour.',
    default: 'true',
  },
  {
    name: 'alert-webhook-url',
    type: 'string',
    help: "The http(s) URL alerts are POSTed to. A secret: prefer Reloader's ALERT_WEBHOOK_URL from a Secret (the chart's alerts.webhookUrlSecret); logs show only its scheme and host.",
  },
  {
    name: 'alert-sink',
    type: 'string',
    help: "The body the receiver expects: slack, teams, gchat, or raw (the text as text/plain; Reloader's webhook is the same). Unset: Reloader's ALERT_SINK, else raw.",
  },
  {
    name: 'alert-webhook-proxy',
    type: 'string',
    help: "An http(s) proxy URL alerts go through (CONNECT for an https webhook). Unset: Reloader's ALERT_WEBHOOK_PROXY, else none (HTTPS_PROXY is not read).",
  },
  {
    name: 'alert-additional-info',
    type: 'string',
    help: 'Text put before every alert, then " : ", e.g. the cluster\'s name. Unset: Reloader\'s ALERT_ADDITIONAL_INFO.',
  },
  {
    name: 'alert-timeout',
    type: 'duration',
    help: 'Time one alert POST may take before it counts as failed (it is not retried). A reload never waits for an alert.',
    default: '10s',
    min: 100,
  },
];

/**
 * Parses an operator-set http(s) URL into the parts the sender uses. The error never shows the value:
 * `what` names the flag (and the variable it came from).
 */
export function parseAlertEndpoint(raw: string, what: string): AlertEndpoint {
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    throw new FlagError(
      `invalid value for ${what}: not a URL (the value is not shown: it may hold a secret)`,
    );
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new FlagError(
      `invalid value for ${what}: expected an http:// or https:// URL, not ${u.protocol}//`,
    );
  }
  const secure = u.protocol === 'https:';
  const auth =
    u.username !== '' ? `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}` : undefined;
  return {
    secure,
    hostname: u.hostname.replace(/^\[|\]$/g, ''),
    port: u.port === '' ? (secure ? 443 : 80) : Number(u.port),
    path: `${u.pathname}${u.search}`,
    host: u.host,
    origin: `${u.protocol}//${u.host}`,
    ...(auth !== undefined ? { auth } : {}),
  };
}

/** The alert settings from our flags, else Reloader's variables; undefined when alerts are off. */
export function alertConfig(
  values: Readonly<Record<string, FlagValue>>,
  explicit: ReadonlySet<string>,
  env: Readonly<Record<string, string | undefined>>,
): AlertConfig | undefined {
  /** The flag's value when given, else Reloader's variable (raw), else undefined. */
  const given = (flag: string): { value: FlagValue; source: string } | undefined => {
    if (explicit.has(flag)) return { value: values[flag], source: `--${flag}` };
    const name = RELOADER_ENV[flag] as string;
    const v = env[name];
    return v === undefined ? undefined : { value: v, source: `--${flag} (env ${name})` };
  };
  const on = given('alert-on-reload');
  // Reloader alerts only when ALERT_ON_RELOAD is exactly "true".
  const enabled = on === undefined ? false : typeof on.value === 'boolean' ? on.value : on.value === 'true';
  const sinkGiven = given('alert-sink');
  const sinkRaw = String(sinkGiven?.value ?? '')
    .trim()
    .toLowerCase();
  // Reloader's README calls the raw sink "webhook", its default.
  const sink = sinkRaw === '' || sinkRaw === 'webhook' ? 'raw' : sinkRaw;
  if (!(ALERT_SINKS as readonly string[]).includes(sink)) {
    throw new FlagError(
      `invalid value ${JSON.stringify(sinkRaw)} for ${sinkGiven?.source}: expected ${ALERT_SINKS.join(', ')} (or webhook, read as raw)`,
    );
  }
  const urlGiven = given('alert-webhook-url');
  const urlRaw = String(urlGiven?.value ?? '').trim();
  const proxyGiven = given('alert-webhook-proxy');
  const proxyRaw = String(proxyGiven?.value ?? '').trim();
  // Checked whether or not alerts are on, so a bad value is found before it is needed.
  const webhook = urlRaw === '' ? undefined : parseAlertEndpoint(urlRaw, urlGiven?.source as string);
  const proxy = proxyRaw === '' ? undefined : parseAlertEndpoint(proxyRaw, proxyGiven?.source as string);
  if (!enabled) return undefined;
  if (webhook === undefined) {
    throw new FlagError(`${on?.source} needs a webhook URL: set --alert-webhook-url or ALERT_WEBHOOK_URL`);
  }
  const info = String(given('alert-additional-info')?.value ?? '').trim();
  return {
    sink: sink as AlertSink,
    webhook,
    ...(proxy ? { proxy } : {}),
    ...(info !== '' ? { additionalInfo: info } : {}),
    onFailure: values['alert-on-failure'] !== false,
    timeoutMs: values['alert-timeout'] as number,
  };
}
