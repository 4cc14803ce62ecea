// Chat alerts (Stakater Reloader's ALERT_* settings): the text of an alert about one reload, and the
// request body each sink expects. Pure: the adapter (service/alerts/) posts what this builds.
//
// The texts and bodies are Reloader v1.4's (internal/pkg/alerts, internal/pkg/handler/upgrade.go), so
// a chat channel, or a filter on it, sees the same words after a migration: slack gets one attachment
// (color, author "Reloader", the text), teams and gchat `{"text": …}`, raw the text as text/plain
// with Reloader's `*` markers removed. ALERT_ADDITIONAL_INFO goes before the text, then " : ".

import { REQUEST } from './plan.ts';

export const ALERT_SINKS = ['slack', 'teams', 'gchat', 'raw'] as const;
export type AlertSink = (typeof ALERT_SINKS)[number];

/** One reload, as an alert tells it. */
export interface ReloadAlert {
  /** reloaded: the reload completed; failed: an attempt failed (it is retried). */
  outcome: 'reloaded' | 'failed';
  workload: { kind: string; namespace: string; name: string };
  /** The changes that caused it: config ids ("ConfigMap/ns/name") or the reload-request marker. */
  changed: readonly string[];
  /** Why the attempt failed (failed only). */
  error?: string;
}

export interface AlertRequest {
  contentType: string;
  body: string;
}

/** Reloader's type names for a config kind (its constants: CONFIGMAP, SECRET, SECRETPROVIDERCLASS). */
const TYPE: Record<string, string> = {
  ConfigMap: 'CONFIGMAP',
  Secret: 'SECRET',
  SecretProviderClass: 'SECRETPROVIDERCLASS',
};

/** "*app* of type *CONFIGMAP*" for "ConfigMap/ns/app"; a reload request names the annotation. */
function changeText(id: string): string {
  if (id === REQUEST) return '*a reload request* of type *ANNOTATION*';
  const [kind = '', , ...name] = id.split('/');
  return `*${name.join('/')}* of type *${TYPE[kind] ?? kind.toUpperCase()}*`;
}

function joined(parts: readonly string[]): string {
  if (parts.length <= 1) return parts.join('');
  return `${parts.slice(0, -1).join(', ')} and ${parts[parts.length - 1]}`;
}

/**
 * The alert's text. A completed reload of one config reads exactly as Reloader's; a batch of several
 * configs (one reload here, one per config in Reloader) names them all in one sentence.
 */
export function alertText(a: ReloadAlert, additionalInfo?: string): string {
  const w = a.workload;
  const detected = `Reloader detected changes in ${joined(a.changed.map(changeText))} in namespace *${w.namespace}*.`;
  const target = `*${w.name}* of type *${w.kind}* in namespace *${w.namespace}*`;
  const text =
    a.outcome === 'reloaded'
      ? `${detected} Hence reloaded ${target}`
      : `${detected} Reloading ${target} failed: ${a.error ?? 'unknown error'}`;
  const info = additionalInfo?.trim();
  return info ? `${info} : ${text}` : text;
}

/** The request body `sink` expects for this text. */
export function alertRequest(sink: AlertSink, text: string, outcome: ReloadAlert['outcome']): AlertRequest {
  const json = (v: unknown): AlertRequest => ({ contentType: 'application/json', body: JSON.stringify(v) });
  switch (sink) {
    case 'slack':
      // Reloader's attachment; a failure is red ("danger") where Reloader (which never alerts on one) has only "good".
      return json({
        attachments: [{ color: outcome === 'reloaded' ? 'good' : 'danger', author_name: 'Reloader', text }],
      });
    case 'teams':
    case 'gchat':
      return json({ text });
    case 'raw':
      return { contentType: 'text/plain', body: text.replaceAll('*', '') };
  }
}

/**
 * Whether the receiver took the alert. Reloader's rules: slack and raw fail on any status from 400
 * (and on a redirect, which it refuses to follow), teams and gchat on anything but 200.
 */
export function alertAccepted(sink: AlertSink, status: number): boolean {
  return sink === 'teams' || sink === 'gchat' ? status === 200 : status >= 200 && status < 300;
}
