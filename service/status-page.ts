// The status page: a small read-only HTML view of GET /status (engine/status.ts), served on the
// status listener (loopback, reached by port-forward). Its script reads the JSON and writes every
// name with textContent, never as HTML: a workload, config or pod name never becomes markup. The
// Content-Security-Policy allows only this page's own script and requests.

export const STATUS_PAGE_CSP =
  "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

export const STATUS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>gitops-reloader status</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; } td, th { text-align: left; padding: .2em .8em .2em 0; vertical-align: top; }
th { border-bottom: 1px solid #999; } .brake-on { color: #b00; font-weight: bold; } .halt { color: #b00; }
</style>
</head>
<body>
<h1>gitops-reloader</h1>
<p id="summary">loading…</p>
<h2>Halted changes</h2><table id="halted"><thead><tr><th>config</th><th>wave</th><th>workload</th><th>why</th><th>since</th><th>pods that failed</th></tr></thead><tbody></tbody></table>
<h2>Running</h2><table id="running"><thead><tr><th>workload</th><th>configs</th><th>since</th></tr></thead><tbody></tbody></table>
<h2>Waiting</h2><table id="waiting"><thead><tr><th>workload</th><th>why</th><th>configs</th><th>since</th><th>Argo CD app</th></tr></thead><tbody></tbody></table>
<h2>Excused (reloaded, not judged: not the change's fault)</h2><table id="excused"><thead><tr><th>workload</th><th>config</th><th>why</th><th>since</th></tr></thead><tbody></tbody></table>
<h2>Done</h2><table id="done"><thead><tr><th>at</th><th>workload</th><th>outcome</th><th>configs (keys changed)</th><th>Argo CD app</th><th>revision</th></tr></thead><tbody></tbody></table>
<script src="status.js"></script>
</body>
</html>
`;

export const STATUS_JS = `'use strict';
function fill(id, rows) {
  var body = document.querySelector('#' + id + ' tbody');
  body.textContent = '';
  rows.forEach(function (cells) {
    var tr = document.createElement('tr');
    cells.forEach(function (c) {
      var td = document.createElement('td');
      td.textContent = String(c);
      tr.appendChild(td);
    });
    body.appendChild(tr);
  });
}
function hub(h) {
  // Hub mode: one engine per cluster, each led here or by another replica (clusters keyed by id).
  var ids = Object.keys(h.clusters).sort(function (a, b) {
    var x = h.clusters[a], y = h.clusters[b];
    return x.name < y.name ? -1 : x.name > y.name ? 1 : a < b ? -1 : a > b ? 1 : 0;
  });
  var merged = { leader: true, brake: false, halted: [], running: [], waiting: [], excused: [], done: [] };
  var lines = ids.map(function (id) {
    var c = h.clusters[id];
    var label = (c.name || c.server) + ' (' + c.server + ')';
    if (c.starting) return label + ': ' + (c.held ? 'held, its credentials are refused' : 'starting');
    if (!c.leader) return label + ': led by another replica';
    var tag = function (x) { var y = Object.assign({}, x); y.workload = (c.name || c.server) + ': ' + x.workload; return y; };
    merged.brake = merged.brake || c.brake;
    ['halted', 'running', 'waiting', 'excused', 'done'].forEach(function (k) { merged[k] = merged[k].concat((c[k] || []).map(tag)); });
    return label + ': led here';
  });
  return { merged: merged, text: ids.length ? 'hub mode · ' + lines.join(' · ') : 'hub mode: no cluster served' };
}
function show(s) {
  var summary = document.getElementById('summary');
  if (s.hub) {
    var h = hub(s);
    show(h.merged);
    summary.textContent = h.text + ' · ' + summary.textContent;
    return;
  }
  if (!s.leader) {
    summary.textContent = 'This replica is not the leader: port-forward to the one that holds the Lease.';
    return;
  }
  summary.textContent = 'brake: ' + (s.brake ? 'ON, no reload starts' : 'off') + ' · ' + s.halted.length +
    ' halted · ' + s.running.length + ' running · ' + s.waiting.length + ' waiting · ' +
    (s.excused || []).length + ' excused';
  summary.className = s.brake ? 'brake-on' : '';
  fill('halted', s.halted.map(function (h) {
    return [h.config, h.wave, h.workload, h.why, h.since, h.pods.length ? h.pods.join(', ') : '(not kept across a restart)'];
  }));
  fill('running', s.running.map(function (r) { return [r.workload, r.configs.join(', '), r.since]; }));
  fill('waiting', s.waiting.map(function (w) {
    return [w.workload, w.why, w.configs.join(', '), w.since || '', w.app || ''];
  }));
  fill('excused', (s.excused || []).map(function (e) { return [e.workload, e.config, e.why, e.since]; }));
  fill('done', s.done.map(function (d) {
    var configs = d.configs.map(function (c) {
      return d.keys && d.keys[c] ? c + ' [' + d.keys[c].join(', ') + ']' : c;
    });
    return [d.at, d.workload, d.outcome, configs.join(', '), d.via ? d.via.app : '', d.via && d.via.revision ? d.via.revision : ''];
  }));
  document.body.setAttribute('data-loaded', 'true');
}
function load() {
  fetch('status', { cache: 'no-store' })
    .then(function (r) { if (!r.ok) throw new Error('HTTP ' + r.status); return r.json(); })
    .then(show)
    .catch(function (e) { document.getElementById('summary').textContent = 'could not read the status: ' + e.message; });
}
load();
setInterval(load, 5000);
`;
