// Chat alert settings: our flags, Reloader's ALERT_* variables, and errors that never show the
// webhook URL (a secret).
import { describe, expect, it } from 'vitest';
import { parseAlertEndpoint } from './alert-flags.ts';
import { loadConfig } from './config.ts';

const base = ['--release-namespace=gr'];
const load = (argv: string[], env: Record<string, string> = {}) => loadConfig([...base, ...argv], env);
const SECRET_URL = 'https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX';

describe('alert settings', () => {
  it("are off by default, and read Reloader's variables unchanged", () => {
    expect(load([]).alerts).toBeUndefined();
    const c = load([], {
      ALERT_ON_RELOAD: 'true',
      ALERT_WEBHOOK_URL: ` ${SECRET_URL} `,
      ALERT_SINK: ' Slack ',
      ALERT_WEBHOOK_PROXY: 'http://proxy.corp:3128',
      ALERT_ADDITIONAL_INFO: ' cluster prod ',
    }).alerts;
    expect(c).toMatchObject({
      sink: 'slack',
      webhook: {
        secure: true,
        hostname: 'hooks.slack.com',
        port: 443,
        path: '/services/T000/B000/XXXXsecretXXXX',
      },
      proxy: { secure: false, hostname: 'proxy.corp', port: 3128, origin: 'http://proxy.corp:3128' },
      additionalInfo: 'cluster prod',
      onFailure: true,
      timeoutMs: 10_000,
    });
    expect(c?.webhook.origin).toBe('https://hooks.slack.com');
  });

  it('turn on only for ALERT_ON_RELOAD="true", as in Reloader', () => {
    for (const v of ['True', 'yes', '1', 'false', '']) {
      expect(load([], { ALERT_ON_RELOAD: v, ALERT_WEBHOOK_URL: SECRET_URL }).alerts, v).toBeUndefined();
    }
  });

  it('take the flags over the variables', () => {
    const c = load(
      ['--alert-on-reload', '--alert-sink=teams', '--alert-on-failure=false', '--alert-timeout=3s'],
      {
        ALERT_ON_RELOAD: 'false',
        ALERT_SINK: 'gchat',
        ALERT_WEBHOOK_URL: SECRET_URL,
      },
    ).alerts;
    expect(c).toMatchObject({ sink: 'teams', onFailure: false, timeoutMs: 3_000 });
  });

  it('read an empty sink and Reloader\'s "webhook" as raw, and refuse an unknown one', () => {
    const on = { ALERT_ON_RELOAD: 'true', ALERT_WEBHOOK_URL: SECRET_URL };
    expect(load([], { ...on, ALERT_SINK: '' }).alerts?.sink).toBe('raw');
    expect(load([], { ...on, ALERT_SINK: 'webhook' }).alerts?.sink).toBe('raw');
    expect(() => load([], { ...on, ALERT_SINK: 'discord' })).toThrow(
      'invalid value "discord" for --alert-sink (env ALERT_SINK): expected slack, teams, gchat, raw (or webhook, read as raw)',
    );
  });

  it('need a webhook URL when on', () => {
    expect(() => load(['--alert-on-reload'])).toThrow(
      '--alert-on-reload needs a webhook URL: set --alert-webhook-url or ALERT_WEBHOOK_URL',
    );
  });

  it('refuse a URL that is not http(s) without showing it', () => {
    for (const bad of ['hooks.slack.com/services/T/B/XXXXsecretXXXX', 'ftp://x/XXXXsecretXXXX']) {
      let message = '';
      try {
        load(['--alert-on-reload'], { ALERT_WEBHOOK_URL: bad });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toMatch(/^invalid value for --alert-webhook-url \(env ALERT_WEBHOOK_URL\)/);
      expect(message).not.toContain('XXXXsecretXXXX');
    }
    expect(() => load(['--alert-webhook-proxy=socks5://p:1080'])).toThrow(
      'invalid value for --alert-webhook-proxy: expected an http:// or https:// URL, not socks5://',
    );
  });
});

describe('parseAlertEndpoint', () => {
  it('keeps the query with the path, the port, and credentials for Basic auth', () => {
    expect(parseAlertEndpoint('http://u%40x:p%3Aw@[::1]:8080/a/b?token=t', 'w')).toEqual({
      secure: false,
      hostname: '::1',
      port: 8080,
      host: '[::1]:8080',
      path: '/a/b?token=t',
      origin: 'http://[::1]:8080',
      auth: 'u@x:p:w',
    });
  });
});
