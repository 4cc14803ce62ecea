// Step 6: what a user would check after the story — pods, reloads, the template, the engine's own
// state, the Reloaded Event and the service's metrics.
import type { Clients } from './engine.ts';
import { dim, say, short } from './output.ts';
import { APP_NAMESPACE, type PodLine, pods } from './pods.ts';

export interface SummaryInput {
  clients: Clients;
  /** The engine's name and what one reload was for (`Argo CD sync`). */
  engine: { name: string; oneChange: string };
  /** The engine's state at the end, e.g. `Synced, Healthy`, at `sha`. */
  engineState: string;
  sha: string;
  before: readonly PodLine[];
  generationBefore: number | undefined;
  templateBefore: string;
  metricsUrl: string;
  /** Seconds from the end of the engine's apply until every pod was replaced. */
  tookS: number;
  startedMs: number;
}

export async function summarize(o: SummaryInput): Promise<void> {
  const { core, apps } = o.clients;
  const after = await pods(core);
  const deployment = await apps.readNamespacedDeployment({ name: 'web', namespace: APP_NAMESPACE });
  const generationAfter = deployment.metadata?.generation;
  const templateSame = JSON.stringify(deployment.spec?.template) === o.templateBefore;
  const reloaded = (await core.listNamespacedEvent({ namespace: APP_NAMESPACE })).items.filter(
    (e) => e.reason === 'Reloaded',
  );
  const metrics = await (await fetch(`${o.metricsUrl}/metrics`)).text();
  say(
    `    pods replaced:      ${after.length} of ${o.before.length} (${after.map((p) => p.name).join(', ')})`,
  );
  say(`    reloads:            ${reloaded.length} for one ${o.engine.oneChange} that changed 2 configs`);
  say(
    `    pod template:       ${templateSame ? 'unchanged' : 'CHANGED'} — generation ${o.generationBefore} before, ${generationAfter} after`,
  );
  say(`    ${`${o.engine.name}:`.padEnd(20)}${o.engineState} at ${short(o.sha)}`);
  say(
    `    time after sync:    ${o.tookS.toFixed(1)}s (total demo ${((Date.now() - o.startedMs) / 1000).toFixed(0)}s)`,
  );
  say(`    Event:              ${reloaded[0]?.message ?? '(none)'}`);
  say('    /metrics excerpt:');
  const shown =
    /^(reloader_reload_executed_total|gitops_reloader_reloads_total|gitops_reloader_pods_replaced_total|gitops_reloader_leader)/;
  for (const line of metrics.split('\n')) {
    if (shown.test(line) && !/ 0$/.test(line)) {
      say(dim(`      ${line}`));
    }
  }
}
