import { describe, expect, it } from 'vitest';
import { alertAccepted, alertRequest, alertText, type ReloadAlert } from './alert-message.ts';
import { REQUEST } from './plan.ts';

const reloaded: ReloadAlert = {
  outcome: 'reloaded',
  workload: { kind: 'Deployment', namespace: 'shop', name: 'web' },
  changed: ['ConfigMap/shop/app'],
};
// Reloader v1.4.21's text for the same reload (internal/pkg/handler/upgrade.go).
const RELOADER_TEXT =
  'Reloader detected changes in *app* of type *CONFIGMAP* in namespace *shop*. Hence reloaded *web* of type *Deployment* in namespace *shop*';

describe('alertText', () => {
  it("reads as Reloader's for a completed reload of one config", () => {
    expect(alertText(reloaded)).toBe(RELOADER_TEXT);
  });

  it('puts the additional info first, trimmed, as Reloader does', () => {
    expect(alertText(reloaded, '  cluster prod-eu ')).toBe(`cluster prod-eu : ${RELOADER_TEXT}`);
    expect(alertText(reloaded, '   ')).toBe(RELOADER_TEXT);
  });

  it('names every config of a batch, with its type, in one sentence', () => {
    const text = alertText({
      ...reloaded,
      changed: ['ConfigMap/shop/app', 'Secret/shop/db', 'SecretProviderClass/shop/vault'],
    });
    expect(text).toContain(
      'changes in *app* of type *CONFIGMAP*, *db* of type *SECRET* and *vault* of type *SECRETPROVIDERCLASS* in namespace *shop*.',
    );
  });

  it('says a reload request was the change', () => {
    expect(alertText({ ...reloaded, changed: [REQUEST] })).toContain('*a reload request*');
  });

  it('says a failed attempt failed, and why', () => {
    expect(alertText({ ...reloaded, outcome: 'failed', error: 'deployments "web" is forbidden' })).toBe(
      'Reloader detected changes in *app* of type *CONFIGMAP* in namespace *shop*. Reloading *web* of type *Deployment* in namespace *shop* failed: deployments "web" is forbidden',
    );
  });
});

describe('alertRequest', () => {
  it('slack: one attachment, green for a reload and red for a failure, by "Reloader"', () => {
    const r = alertRequest('slack', 'hi *x*', 'reloaded');
    expect(r.contentType).toBe('application/json');
    expect(JSON.parse(r.body)).toEqual({
      attachments: [{ color: 'good', author_name: 'Reloader', text: 'hi *x*' }],
    });
    expect(JSON.parse(alertRequest('slack', 't', 'failed').body).attachments[0].color).toBe('danger');
  });

  it('teams and gchat: {"text": …}', () => {
    for (const sink of ['teams', 'gchat'] as const) {
      const r = alertRequest(sink, 'hi *x*', 'reloaded');
      expect(r).toEqual({ contentType: 'application/json', body: '{"text":"hi *x*"}' });
    }
  });

  it("raw: the text as text/plain without Reloader's * markers", () => {
    expect(alertRequest('raw', alertText(reloaded, 'prod *eu*'), 'reloaded')).toEqual({
      contentType: 'text/plain',
      body: 'prod eu : Reloader detected changes in app of type CONFIGMAP in namespace shop. Hence reloaded web of type Deployment in namespace shop',
    });
  });

  it('escapes what the text holds: a hostile name stays a JSON string', () => {
    const text = alertText({ ...reloaded, workload: { ...reloaded.workload, name: 'a"},{"x":"y' } });
    expect(JSON.parse(alertRequest('gchat', text, 'reloaded').body)).toEqual({ text });
  });
});

describe('alertAccepted', () => {
  it("takes Reloader's rules: slack and raw any 2xx, teams and gchat only 200, never a redirect", () => {
    expect(alertAccepted('slack', 204)).toBe(true);
    expect(alertAccepted('raw', 201)).toBe(true);
    expect(alertAccepted('teams', 202)).toBe(false);
    expect(alertAccepted('gchat', 200)).toBe(true);
    for (const sink of ['slack', 'teams', 'gchat', 'raw'] as const) {
      expect(alertAccepted(sink, 302)).toBe(false);
      expect(alertAccepted(sink, 500)).toBe(false);
    }
  });
});
