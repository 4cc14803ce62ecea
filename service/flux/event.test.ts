// parseFluxEvent over the bodies notification-controller v1.9.0 really forwarded (testdata, captured
// from its own event server: internal/server/event_server.go and event_handlers.go, which strip the
// "<group>/" metadata prefixes), events shaped as kustomize-controller v1.9.0 apply()/prune() and
// helm-controller v1.6.0 eventMeta emit them, with messages in ssa v0.76.0 ChangeSetEntry.String()
// form; the prefixed metadata of providers.md's example; and hostile input.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CHANGE_ACTIONS,
  type FluxEvent,
  InvalidFluxEvent,
  MAX_CHANGES,
  MAX_MESSAGE_CHARS,
  parseFluxEvent,
  UNKNOWN_GROUP,
} from './event.ts';
import { capturedNames, forwarded } from './testdata/forwarded.ts';

const body = (name: string) => JSON.parse(forwarded(name).body) as Record<string, unknown>;

function accepted(v: unknown): FluxEvent {
  const r = parseFluxEvent(v);
  if ('ignored' in r) throw new Error(`ignored: ${r.ignored}`);
  return r;
}

const REVISION = 'main@sha1:3c1f0e2d9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d';

/** A forwarded Kustomization event to mutate. */
const base = () => body('kustomization-apply');
const withField = (patch: Record<string, unknown>) => ({ ...base(), ...patch });
const withObject = (patch: Record<string, unknown>) => {
  const b = base();
  return { ...b, involvedObject: { ...(b.involvedObject as object), ...patch } };
};
const withMessage = (message: string) => withField({ message });

describe('parseFluxEvent on what notification-controller v1.9.0 forwards', () => {
  it('has every captured delivery to read', () => {
    expect(capturedNames).toEqual([
      'kustomization-apply',
      'kustomization-prune',
      'kustomization-failed',
      'kustomization-finished',
      'helmrelease-upgrade',
      'gitrepository-stored',
    ]);
  });

  it('reads an apply event: the Kustomization, its revisions, and one change per changed object', () => {
    expect(accepted(body('kustomization-apply'))).toEqual({
      object: { kind: 'Kustomization', namespace: 'flux-system', name: 'apps' },
      severity: 'info',
      reason: 'Progressing',
      message: [
        'ConfigMap/apps/web-config configured',
        'ConfigMap/apps/worker-config configured',
        'Secret/apps/db-credentials configured',
        'Namespace/team-b created',
        'ClusterRole/system:reloader-view created',
        'Deployment/apps/web configured',
      ].join('\n'),
      revision: REVISION,
      originRevision: 'v1.4.2@sha1:9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d',
      timestamp: '2026-12-04T22:41:07Z',
      changes: [
        { kind: 'ConfigMap', group: '', namespace: 'apps', name: 'web-config', action: 'configured' },
        { kind: 'ConfigMap', group: '', namespace: 'apps', name: 'worker-config', action: 'configured' },
        { kind: 'Secret', group: '', namespace: 'apps', name: 'db-credentials', action: 'configured' },
        // Cluster-scoped: "Kind/name".
        { kind: 'Namespace', group: '', namespace: '', name: 'team-b', action: 'created' },
        // ClusterRole/system:reloader-view is no DNS name: nothing we could reload.
        { kind: 'Deployment', group: 'apps', namespace: 'apps', name: 'web', action: 'configured' },
      ],
    });
  });

  it('reads a prune event as deleted objects', () => {
    const e = accepted(body('kustomization-prune'));
    expect(e.changes).toEqual([
      { kind: 'ConfigMap', group: '', namespace: 'apps', name: 'old-config', action: 'deleted' },
      { kind: 'Secret', group: '', namespace: 'apps', name: 'old-token', action: 'deleted' },
    ]);
    expect(e.revision).toBe(REVISION);
    expect(e.originRevision).toBeUndefined();
  });

  it('reads a failed apply: severity error, and the objects applied before the failure', () => {
    const e = accepted(body('kustomization-failed'));
    expect(e.severity).toBe('error');
    expect(e.reason).toBe('ReconciliationFailed');
    // Go escapes <, > and & as \u003c, \u003e, \u0026; JSON.parse gives them back.
    expect(e.message).toContain('<nil> & more');
    expect(e.changes).toEqual([
      { kind: 'ConfigMap', group: '', namespace: 'apps', name: 'web-config', action: 'configured' },
    ]);
  });

  it('reads the end of a reconciliation as an event without changes', () => {
    const e = accepted(body('kustomization-finished'));
    expect(e.reason).toBe('ReconciliationSucceeded');
    expect(e.changes).toEqual([]);
    expect(e.revision).toBe(REVISION);
  });

  it('reads a HelmRelease upgrade: its chart version is the revision, and it lists no objects', () => {
    expect(accepted(body('helmrelease-upgrade'))).toEqual({
      object: { kind: 'HelmRelease', namespace: 'team-a', name: 'web' },
      severity: 'info',
      reason: 'UpgradeSucceeded',
      message: 'Helm upgrade succeeded for release team-a/web.v4 with chart web@1.7.0',
      revision: '1.7.0',
      timestamp: '2026-12-04T22:41:07Z',
      changes: [],
    });
  });

  it('ignores a valid event about a GitRepository', () => {
    expect(parseFluxEvent(body('gitrepository-stored'))).toEqual({
      ignored: 'a GitRepository is not a Kustomization or HelmRelease',
    });
  });

  it('returns a frozen event', () => {
    const e = accepted(body('kustomization-apply'));
    expect(Object.isFrozen(e)).toBe(true);
    expect(Object.isFrozen(e.object)).toBe(true);
    expect(Object.isFrozen(e.changes)).toBe(true);
    expect(e.changes.every((c) => Object.isFrozen(c))).toBe(true);
    expect(() => {
      (e.changes as FluxEvent['changes']).push(e.changes[0] as FluxEvent['changes'][number]);
    }).toThrow(TypeError);
    expect(() => {
      (e.object as { name: string }).name = 'other';
    }).toThrow(TypeError);
  });
});

describe('parseFluxEvent on other shapes Flux can send', () => {
  it('reads the prefixed metadata keys of the provider docs and of older notification-controllers', () => {
    const e = accepted(
      withField({
        metadata: {
          'kustomize.toolkit.fluxcd.io/revision': 'main/731f7eaddfb6af01cb2173e18f0f75b0ba780ef1',
          'kustomize.toolkit.fluxcd.io/originRevision': 'v1@sha1:abc',
        },
      }),
    );
    expect(e.revision).toBe('main/731f7eaddfb6af01cb2173e18f0f75b0ba780ef1');
    expect(e.originRevision).toBe('v1@sha1:abc');
  });

  it('prefers the bare key, and never reads another group prefix', () => {
    expect(
      accepted(
        withField({ metadata: { revision: 'bare', 'kustomize.toolkit.fluxcd.io/revision': 'prefixed' } }),
      ).revision,
    ).toBe('bare');
    expect(
      accepted(withField({ metadata: { 'helm.toolkit.fluxcd.io/revision': '1.0.0' } })).revision,
    ).toBeUndefined();
  });

  it('has no revision without metadata, with null metadata, or with an empty revision', () => {
    const { metadata: _, ...noMetadata } = base();
    expect(accepted(noMetadata).revision).toBeUndefined();
    expect(accepted(withField({ metadata: null })).revision).toBeUndefined();
    expect(accepted(withField({ metadata: { revision: '' } })).revision).toBeUndefined();
    expect(accepted(withField({ metadata: { toString: 'x', constructor: 'y' } })).revision).toBeUndefined();
  });

  it('accepts an involvedObject without apiVersion, fractions and offsets in the timestamp', () => {
    const { apiVersion: _, ...ref } = base().involvedObject as Record<string, unknown>;
    expect(accepted(withField({ involvedObject: ref })).object.kind).toBe('Kustomization');
    expect(accepted(withField({ timestamp: '2026-12-04T23:41:07.123+01:00' })).timestamp).toBe(
      '2026-12-04T23:41:07.123+01:00',
    );
  });

  it('ignores a Kustomization of another group, and trace events', () => {
    expect(parseFluxEvent(withObject({ apiVersion: 'kustomize.config.k8s.io/v1beta1' }))).toEqual({
      ignored: 'a Kustomization of kustomize.config.k8s.io/v1beta1, not of kustomize.toolkit.fluxcd.io',
    });
    expect(parseFluxEvent(withObject({ kind: 'HelmRelease' }))).toMatchObject({
      ignored: expect.stringContaining('not of helm.toolkit.fluxcd.io'),
    });
    expect(parseFluxEvent(withField({ severity: 'trace' }))).toEqual({ ignored: 'a trace event' });
  });

  it('still validates an event it ignores', () => {
    expect(() =>
      parseFluxEvent({
        ...body('gitrepository-stored'),
        involvedObject: { kind: 'GitRepository', name: 'x' },
      }),
    ).toThrow(expect.objectContaining({ field: 'involvedObject.namespace' }));
  });

  it('truncates a long message on a code point boundary, but reads changes from all of it', () => {
    const lines = Array.from({ length: 300 }, (_, i) => `ConfigMap/apps/config-${i} configured`);
    const e = accepted(withMessage(lines.join('\n')));
    expect(e.changes).toHaveLength(300);
    expect(e.changes.at(-1)?.name).toBe('config-299');
    expect(e.message.length).toBeLessThanOrEqual(MAX_MESSAGE_CHARS);
    expect(e.message.endsWith('…')).toBe(true);
    const emoji = accepted(withMessage('😀'.repeat(MAX_MESSAGE_CHARS))).message;
    expect(emoji.length).toBeLessThanOrEqual(MAX_MESSAGE_CHARS);
    expect(emoji).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
    const short = 'x'.repeat(MAX_MESSAGE_CHARS);
    expect(accepted(withMessage(short)).message).toBe(short);
  });

  it(`reads ${MAX_CHANGES} changes, and refuses more`, () => {
    const many = (n: number) =>
      withMessage(Array.from({ length: n }, (_, i) => `Secret/apps/s-${i} configured`).join('\n'));
    expect(accepted(many(MAX_CHANGES)).changes).toHaveLength(MAX_CHANGES);
    expect(() => parseFluxEvent(many(MAX_CHANGES + 1))).toThrow(
      expect.objectContaining({ field: 'message' }),
    );
  });

  it('resolves the group of well-known kinds only: the message names no group', () => {
    const e = accepted(
      withMessage(
        [
          'CronJob/apps/nightly configured',
          'Rollout/apps/canary configured',
          'HelmRelease/apps/redis created',
          'Certificate/apps/tls created',
          'Widget/w1 created',
        ].join('\n'),
      ),
    );
    expect(e.changes.map((c) => [c.kind, c.group])).toEqual([
      ['CronJob', 'batch'],
      ['Rollout', 'argoproj.io'],
      ['HelmRelease', 'helm.toolkit.fluxcd.io'],
      ['Certificate', UNKNOWN_GROUP],
      ['Widget', UNKNOWN_GROUP],
    ]);
  });
});

describe('parseFluxEvent on hostile input', () => {
  const cases: Array<[string, unknown, string]> = [
    ['JSON null', null, '(body)'],
    ['an array', [base()], '(body)'],
    ['a string', 'Kustomization/apps', '(body)'],
    ['a number', 42, '(body)'],
    ['no involvedObject', withField({ involvedObject: undefined }), 'involvedObject'],
    ['involvedObject as a string', withField({ involvedObject: 'flux-system/apps' }), 'involvedObject'],
    ['involvedObject as an array', withField({ involvedObject: [] }), 'involvedObject'],
    ['no kind', withObject({ kind: undefined }), 'involvedObject.kind'],
    ['an empty kind', withObject({ kind: '' }), 'involvedObject.kind'],
    ['a numeric kind', withObject({ kind: 7 }), 'involvedObject.kind'],
    ['a kind with a slash', withObject({ kind: 'Kustomization/x' }), 'involvedObject.kind'],
    ['a kind with a newline', withObject({ kind: 'Kustomization\n' }), 'involvedObject.kind'],
    ['a numeric apiVersion', withObject({ apiVersion: 1 }), 'involvedObject.apiVersion'],
    ['an apiVersion with a path', withObject({ apiVersion: '../v1' }), 'involvedObject.apiVersion'],
    ['an apiVersion of three parts', withObject({ apiVersion: 'a/b/v1' }), 'involvedObject.apiVersion'],
    ['no name', withObject({ name: undefined }), 'involvedObject.name'],
    ['an empty name', withObject({ name: '' }), 'involvedObject.name'],
    ['an upper-case name', withObject({ name: 'Apps' }), 'involvedObject.name'],
    ['a name with a slash', withObject({ name: 'a/b' }), 'involvedObject.name'],
    ['the name ..', withObject({ name: '..' }), 'involvedObject.name'],
    ['a name with an empty label', withObject({ name: 'a..b' }), 'involvedObject.name'],
    ['a name starting with a dash', withObject({ name: '-apps' }), 'involvedObject.name'],
    ['a name with an underscore', withObject({ name: 'a_b' }), 'involvedObject.name'],
    ['a percent-encoded name', withObject({ name: 'a%2fb' }), 'involvedObject.name'],
    ['a backslash in the name', withObject({ name: 'a\\b' }), 'involvedObject.name'],
    ['a unicode name', withObject({ name: 'äpps' }), 'involvedObject.name'],
    ['a name with NUL', withObject({ name: 'apps\u0000' }), 'involvedObject.name'],
    ['a name of 254 characters', withObject({ name: 'a'.repeat(254) }), 'involvedObject.name'],
    ['a numeric name', withObject({ name: 5 }), 'involvedObject.name'],
    ['no namespace', withObject({ namespace: undefined }), 'involvedObject.namespace'],
    ['a namespace with a dot', withObject({ namespace: 'a.b' }), 'involvedObject.namespace'],
    ['a namespace of 64 characters', withObject({ namespace: 'a'.repeat(64) }), 'involvedObject.namespace'],
    ['an object namespace', withObject({ namespace: {} }), 'involvedObject.namespace'],
    ['no severity', withField({ severity: undefined }), 'severity'],
    ['an unknown severity', withField({ severity: 'warning' }), 'severity'],
    ['an upper-case severity', withField({ severity: 'INFO' }), 'severity'],
    ['a numeric severity', withField({ severity: 1 }), 'severity'],
    ['no timestamp', withField({ timestamp: undefined }), 'timestamp'],
    ['a null timestamp (a zero metav1.Time)', withField({ timestamp: null }), 'timestamp'],
    ['a timestamp that is not a time', withField({ timestamp: 'yesterday' }), 'timestamp'],
    ['a timestamp without a zone', withField({ timestamp: '2026-12-04T22:41:07' }), 'timestamp'],
    ['an impossible timestamp', withField({ timestamp: '2026-13-45T22:41:07Z' }), 'timestamp'],
    ['a numeric timestamp', withField({ timestamp: 1764888067 }), 'timestamp'],
    ['no reason', withField({ reason: undefined }), 'reason'],
    ['an empty reason', withField({ reason: '' }), 'reason'],
    ['a numeric reason', withField({ reason: 7 }), 'reason'],
    ['a reason with a newline', withField({ reason: 'a\nb' }), 'reason'],
    ['a reason of 300 characters', withField({ reason: 'R'.repeat(300) }), 'reason'],
    ['no message', withField({ message: undefined }), 'message'],
    ['a null message', withField({ message: null }), 'message'],
    ['a numeric message', withField({ message: 42 }), 'message'],
    ['metadata as a string', withField({ metadata: 'revision=x' }), 'metadata'],
    ['metadata as an array', withField({ metadata: ['x'] }), 'metadata'],
    ['a numeric revision', withField({ metadata: { revision: 5 } }), 'metadata["revision"]'],
    ['an object in metadata', withField({ metadata: { summary: {} } }), 'metadata["summary"]'],
    [
      'a __proto__ key in metadata of a valid event',
      { ...base(), metadata: JSON.parse('{"__proto__":{"revision":"x"}}') },
      'metadata["__proto__"]',
    ],
    [
      'a revision of 1025 characters',
      withField({ metadata: { revision: 'r'.repeat(1025) } }),
      'metadata["revision"]',
    ],
    ['a revision with a newline', withField({ metadata: { revision: 'main\nx' } }), 'metadata["revision"]'],
    [
      'a bad prefixed revision',
      withField({ metadata: { 'kustomize.toolkit.fluxcd.io/revision': 1 } }),
      'metadata["kustomize.toolkit.fluxcd.io/revision"]',
    ],
    [
      '257 metadata keys',
      withField({ metadata: Object.fromEntries(Array.from({ length: 257 }, (_, i) => [`k${i}`, 'v'])) }),
      'metadata',
    ],
    ['a numeric reportingController', withField({ reportingController: 5 }), 'reportingController'],
  ];

  it.each(cases)('refuses %s, naming the field', (_what, input, fieldName) => {
    let err: unknown;
    try {
      parseFluxEvent(input);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidFluxEvent);
    expect((err as InvalidFluxEvent).field).toBe(fieldName);
    expect((err as InvalidFluxEvent).message.startsWith(`${fieldName}: `)).toBe(true);
  });

  it.each([
    ['a parent-directory namespace', 'ConfigMap/../web configured'],
    ['a parent-directory name', 'ConfigMap/apps/.. configured'],
    ['a path in the name', 'ConfigMap/apps/web/extra configured'],
    ['a percent-encoded slash', 'ConfigMap/apps/web%2fconfig configured'],
    ['a backslash', 'ConfigMap/apps\\web configured'],
    ['an upper-case namespace', 'ConfigMap/Apps/web configured'],
    ['an upper-case name', 'ConfigMap/apps/Web configured'],
    ['a unicode name', 'ConfigMap/apps/wéb configured'],
    ['a right-to-left override', '\u202eConfigMap/apps/web configured'],
    ['an unknown action', 'ConfigMap/apps/web updated'],
    ['a trailing space', 'ConfigMap/apps/web configured '],
    ['a carriage return', 'ConfigMap/apps/web configured\r'],
    ['two spaces', 'ConfigMap/apps/web  configured'],
    ['a leading space', ' ConfigMap/apps/web configured'],
    ['a group-qualified kind', 'ConfigMap.v1./apps/web configured'],
    ['an empty kind', '/apps/web configured'],
    ['a kind with a digit first', '9Map/apps/web configured'],
    ['an empty name', 'ConfigMap/apps/ configured'],
    ['a name of 254 characters', `ConfigMap/apps/${'a'.repeat(254)} configured`],
    ['a namespace of 64 characters', `ConfigMap/${'a'.repeat(64)}/web configured`],
    ['a very long line', `ConfigMap/apps/web configured${' '.repeat(100_000)}`],
    ['no action', 'ConfigMap/apps/web'],
  ])('does not read a change from a line with %s', (_what, line) => {
    const e = accepted(withMessage(`${line}\nSecret/apps/real configured`));
    expect(e.changes).toEqual([
      { kind: 'Secret', group: '', namespace: 'apps', name: 'real', action: 'configured' },
    ]);
  });

  it('only reads changes of a Kustomization: a HelmRelease message is free text', () => {
    const hr = body('helmrelease-upgrade');
    expect(accepted({ ...hr, message: 'ConfigMap/team-a/web configured' }).changes).toEqual([]);
  });

  it('throws only InvalidFluxEvent, whatever the JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        try {
          parseFluxEvent(v);
        } catch (e) {
          if (!(e instanceof InvalidFluxEvent)) throw e;
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('throws only InvalidFluxEvent when any field of a real event is replaced by any JSON', () => {
    const keys = [
      'involvedObject',
      'severity',
      'timestamp',
      'message',
      'reason',
      'metadata',
      'reportingController',
    ];
    const refKeys = ['kind', 'namespace', 'name', 'apiVersion'];
    fc.assert(
      fc.property(
        fc.constantFrom(...keys, ...refKeys.map((k) => `involvedObject.${k}`)),
        fc.jsonValue(),
        (key, value) => {
          const input = key.startsWith('involvedObject.')
            ? withObject({ [key.slice('involvedObject.'.length)]: value })
            : withField({ [key]: value });
          try {
            const r = parseFluxEvent(input);
            if (!('ignored' in r)) expect(Object.isFrozen(r)).toBe(true);
          } catch (e) {
            if (!(e instanceof InvalidFluxEvent)) throw e;
            expect(e.field.startsWith(key)).toBe(true);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('reads back every change line kustomize-controller can write for a DNS-named object', () => {
    const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
    const subdomain = fc
      .array(label, { minLength: 1, maxLength: 4 })
      .map((l) => l.join('.'))
      .filter((s) => s.length <= 253);
    const entry = fc.record({
      kind: fc.stringMatching(/^[A-Z][A-Za-z0-9]{0,40}$/),
      namespace: fc.option(label, { nil: '' }),
      name: subdomain,
      action: fc.constantFrom(...CHANGE_ACTIONS),
    });
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 20 }), (entries) => {
        const message = entries
          .map((c) => `${c.kind}/${c.namespace ? `${c.namespace}/` : ''}${c.name} ${c.action}`)
          .join('\n');
        const e = accepted(withMessage(message));
        expect(e.changes.map(({ group: _, ...c }) => c)).toEqual(entries);
      }),
      { numRuns: 500 },
    );
  });
});
