// The console's pages: a small single-page app over /api (server.hpp lists
// the routes). Every value from the services is put on the page with
// textContent (never parsed as HTML); every POST carries the session's CSRF
// token; live pages follow /api/events (server-sent events).
'use strict';
(function () {
  const $ = id => document.getElementById(id);
  let session = null;
  let stream = null, streamKey = '';
  let jobView = null;  // {id, series: []} while a job page is shown

  // ---- helpers -------------------------------------------------------
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
      else if (k.startsWith('data-')) e.dataset[k.slice(5).replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = v;
      else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
    return e;
  }
  const num = v => (v === undefined || v === null || v === '') ? 0 : Number(v);
  function when(ns) {
    const n = num(ns);
    if (!n) return '-';
    return new Date(n / 1e6).toLocaleString();
  }
  function stateCell(s) { return h('td', { class: 'state-' + s }, s || '-'); }
  function table(headers, rows, attrs) {
    return h('div', { class: 'table-wrap' }, h('table', attrs || {},
      h('thead', {}, h('tr', {}, headers.map(x => h('th', {}, x)))),
      h('tbody', {}, rows)));
  }
  function notice(text, bad) {
    const n = $('notice');
    n.textContent = text;
    n.className = bad ? 'bad' : '';
    n.hidden = !text;
  }

  async function api(method, path, body) {
    const opts = { method, headers: {}, credentials: 'same-origin' };
    if (method !== 'GET') {
      opts.headers['Content-Type'] = 'application/json';
      if (session) opts.headers['X-CSRF-Token'] = session.csrf;
      opts.body = JSON.stringify(body || {});
    }
    const r = await fetch(path, opts);
    let data = {};
    try { data = await r.json(); } catch (e) { data = {}; }
    if (r.status === 401 && path !== '/api/login') { showLogin('Your session ended: log in again.'); }
    if (!r.ok) {
      const msg = (data.error && data.error.message) || ('HTTP ' + r.status);
      const err = new Error(msg);
      err.status = r.status;
      throw err;
    }
    return data;
  }
  // Runs a state-changing action and reports its outcome in the notice bar.
  async function act(label, fn) {
    try {
      await fn();
      notice(label + ': done');
      route();
    } catch (e) {
      notice(label + ' refused: ' + e.message, true);
    }
  }

  // ---- session -------------------------------------------------------
  function showLogin(msg) {
    session = null;
    closeStream();
    $('login').hidden = false;
    $('page').replaceChildren();
    $('nav').hidden = true;
    $('logout').hidden = true;
    $('who').textContent = '';
    $('login-error').textContent = msg || '';
  }
  function loggedIn(s) {
    session = s;
    $('login').hidden = true;
    $('nav').hidden = false;
    $('logout').hidden = false;
    $('who').textContent = `${s.principal} · ${s.role} · tenant ${s.tenant}`;
    if (!location.hash || location.hash === '#/' || location.hash === '#') location.hash = '#/overview';
    else route();
  }
  $('login').addEventListener('submit', async ev => {
    ev.preventDefault();
    try {
      loggedIn(await api('POST', '/api/login', { token: $('token').value.trim() }));
      $('token').value = '';
    } catch (e) {
      $('login-error').textContent = e.message;
    }
  });
  $('logout').addEventListener('click', async () => {
    try { await api('POST', '/api/logout'); } catch (e) { /* ended anyway */ }
    showLogin('Logged out.');
  });

  // ---- live stream ---------------------------------------------------
  function closeStream() {
    if (stream) stream.close();
    stream = null;
    streamKey = '';
  }
  function openStream(job) {
    const key = job || '-';
    if (stream && streamKey === key) return;
    closeStream();
    streamKey = key;
    stream = new EventSource('/api/events' + (job ? '?job=' + encodeURIComponent(job) : ''));
    stream.addEventListener('topology', ev => { const p = page(); if (p === 'topology') drawTopology(JSON.parse(ev.data)); });
    stream.addEventListener('overview', ev => { if (page() === 'overview') drawOverview(JSON.parse(ev.data)); });
    stream.addEventListener('job', ev => { if (jobView) jobUpdate(JSON.parse(ev.data)); });
    stream.addEventListener('error', ev => {
      if (ev.data) {
        const e = JSON.parse(ev.data);
        if (e.error && e.error.code === 'unauthenticated') showLogin(e.error.message);
      }
    });
  }

  // ---- pages ---------------------------------------------------------
  function page() { return (location.hash.replace(/^#\//, '').split('/')[0]) || 'overview'; }
  function mount(...kids) { $('page').replaceChildren(...kids); }

  function drawOverview(o) {
    const root = $('overview');
    if (!root) return;
    const stat = (label, value, test) => h('div', { class: 'card', 'data-test': test }, h('div', { class: 'muted' }, label),
      h('div', { class: 'stat' }, value));
    root.replaceChildren(
      h('div', { class: 'grid' },
        stat('Trainers', `${o.busy_trainers} busy of ${o.trainers}`, 'trainers'),
        stat('Utilisation', Math.round(100 * o.utilisation) + '%', 'utilisation'),
        stat('Queue', o.queue, 'queue'),
        stat('Running jobs', (o.running || []).length, 'running')),
      h('div', { class: 'card' }, h('h2', {}, 'Running'),
        table(['job', 'stage', 'step', 'loss', 'tokens/s'], (o.running || []).flatMap(j => j.stages.map(s =>
          h('tr', {}, h('td', {}, h('a', { href: '#/job/' + j.id }, j.id + ' ' + j.name)), h('td', {}, s.name),
            h('td', {}, `${s.step}/${s.total_steps}`), h('td', {}, num(s.loss).toFixed(4)),
            h('td', {}, Math.round(num(s.tokens_per_s)))))))),
      h('div', { class: 'card', 'data-test': 'alerts' }, h('h2', {}, 'Alerts'),
        (o.alerts || []).length === 0 ? h('p', { class: 'muted' }, 'none firing')
          : table(['severity', 'what', 'detail'], o.alerts.map(a =>
            h('tr', {}, h('td', { class: a.severity === 'critical' ? 'state-down' : 'state-degraded' }, a.severity),
              h('td', {}, a.what), h('td', {}, a.detail)))))); 
  }
  async function overviewPage() {
    mount(h('h1', {}, 'Overview'), h('div', { id: 'overview' }, 'loading…'));
    drawOverview(await api('GET', '/api/overview'));
    openStream('');
  }

  function drawTopology(t) {
    const svg = $('topology-svg');
    if (!svg) return;
    window.LoomTopology.draw(svg, t);
    $('topology-table').replaceChildren(table(['site', 'state', 'link', 'RTT', 'bandwidth', 'last round', 'trainers', 'last contact'],
      (t.sites || []).map(s => h('tr', { 'data-site': s.name },
        h('td', {}, s.name), stateCell(s.state), stateCell(s.link_state),
        h('td', {}, s.rtt_ms ? num(s.rtt_ms).toFixed(1) + ' ms' : '-'),
        h('td', {}, s.bandwidth_bytes_per_s ? (num(s.bandwidth_bytes_per_s) / 1e6).toFixed(2) + ' MB/s' : '-'),
        h('td', {}, s.last_round ? `${s.last_round.round} (${s.last_round.job})` : '-'),
        h('td', {}, (s.trainers || []).map(x => `${x.node} ${x.state}`).join(', ') || '-'),
        h('td', {}, when(s.last_contact_unix_ns))))));
  }
  async function topologyPage() {
    mount(h('h1', {}, 'Topology'),
      h('div', { class: 'card' },
        h('p', { class: 'legend muted' }, h('span', { class: 'state-up' }, '● up'), h('span', { class: 'state-degraded' }, '● degraded'),
          h('span', { class: 'state-down' }, '● down')),
        document.createElementNS('http://www.w3.org/2000/svg', 'svg')),
      h('div', { class: 'card', id: 'topology-table' }));
    $('page').querySelector('svg').id = 'topology-svg';
    drawTopology(await api('GET', '/api/topology'));
    openStream('');
  }

  async function jobsPage() {
    const filter = h('select', { id: 'job-filter' }, ['', 'queued', 'running', 'succeeded', 'failed', 'cancelled']
      .map(s => h('option', { value: s }, s || 'every state')));
    const list = h('div', { id: 'job-list' });
    const tmpl = h('select', { id: 'submit-template' });
    const overrides = h('textarea', { id: 'submit-overrides', rows: 3, placeholder: 'one key=value per line, e.g. steps=20' });
    const form = h('form', { class: 'card', id: 'submit-form' }, h('h2', {}, 'Submit from a template'),
      h('label', {}, 'Template ', tmpl), h('label', {}, 'Overrides ', overrides),
      h('button', { type: 'submit', id: 'submit-button' }, 'Submit'));
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      act('submit', async () => {
        const r = await api('POST', '/api/jobs', { template: tmpl.value,
          overrides: overrides.value.split('\n').map(x => x.trim()).filter(Boolean) });
        location.hash = '#/job/' + r.job.id;
      });
    });
    async function load() {
      const r = await api('GET', '/api/jobs' + (filter.value ? '?state=' + filter.value : ''));
      list.replaceChildren(table(['job', 'name', 'state', 'tenant', 'stages', 'submitted by', ''],
        (r.jobs || []).map(j => h('tr', { 'data-job': j.id },
          h('td', {}, h('a', { href: '#/job/' + j.id }, j.id)), h('td', {}, j.name), stateCell(j.state), h('td', {}, j.tenant || ''),
          h('td', {}, (j.stages || []).map(s => `${s.name}:${s.state} ${s.step}/${s.total_steps}`).join(', ')),
          h('td', {}, j.principal),
          h('td', {}, ['succeeded', 'failed', 'cancelled'].includes(j.state) ? '' :
            h('button', { class: 'danger', 'data-cancel': j.id, on: { click: () => act('cancel ' + j.id, () => api('POST', `/api/jobs/${j.id}/cancel`)) } }, 'Cancel'))))));
    }
    filter.addEventListener('change', load);
    mount(h('h1', {}, 'Jobs'), form, h('div', { class: 'card' }, h('label', {}, 'Show ', filter), list));
    const t = await api('GET', '/api/templates');
    tmpl.replaceChildren(...(t.templates || []).map(x => h('option', { value: x.name }, x.name + (x.about ? ' — ' + x.about : ''))));
    await load();
  }

  function jobUpdate(r) {
    if (!jobView || !r.job || r.job.id !== jobView.id) return;
    jobView.series.push(...(r.series || []));
    const j = r.job;
    $('job-state').textContent = j.state;
    $('job-state').className = 'state-' + j.state;
    $('job-message').textContent = j.message || '';
    $('job-stages').replaceChildren(table(['stage', 'state', 'step', 'loss', 'tokens/s', 'precision', 'trainer', 'attempts', 'waiting'],
      (j.stages || []).map(s => h('tr', {}, h('td', {}, s.name), stateCell(s.state), h('td', {}, `${s.step}/${s.total_steps}`),
        h('td', {}, num(s.loss).toFixed(4)), h('td', {}, Math.round(num(s.tokens_per_s))), h('td', {}, s.precision || '-'),
        h('td', {}, s.node || '-'), h('td', {}, s.attempts), h('td', {}, s.waiting || '')))));
    const sites = (j.stages || []).flatMap(s => (s.sites || []).map(x => h('tr', {}, h('td', {}, s.name), h('td', {}, x.site),
      h('td', {}, x.step), h('td', {}, num(x.loss).toFixed(4)), h('td', {}, x.round), h('td', {}, num(x.bytes_sent)),
      h('td', {}, num(x.stall_s).toFixed(2)))));
    $('job-sites').replaceChildren(sites.length ? table(['stage', 'site', 'step', 'loss', 'round', 'bytes sent', 'stall s'], sites) : '');
    const hpo = (j.stages || []).filter(s => s.hpo_best && s.hpo_best.trial);
    $('job-hpo').replaceChildren(hpo.length ? table(['stage', 'best trial', 'values', 'validation loss'], hpo.map(s =>
      h('tr', {}, h('td', {}, s.name), h('td', {}, s.hpo_best.trial), h('td', {}, JSON.stringify(s.hpo_best.values || [])),
        h('td', {}, num(s.hpo_best.validation_loss).toFixed(4))))) : '');
    const byStage = {};
    for (const p of jobView.series) (byStage[p.stage] = byStage[p.stage] || []).push(p);
    const names = Object.keys(byStage);
    window.LoomCharts.line($('chart-loss'), names.map(n => ({ name: n, points: byStage[n].map(p => [num(p.step), num(p.loss)]) })),
      { title: 'loss', xLabel: 'step' });
    window.LoomCharts.line($('chart-tps'), names.map(n => ({ name: n, points: byStage[n].map(p => [num(p.step), num(p.tokens_per_s)]) })),
      { title: 'tokens/s', xLabel: 'step' });
    if (r.events) $('job-events').replaceChildren(table(['time', 'stage', 'event', 'text'], r.events.map(e =>
      h('tr', {}, h('td', {}, when(e.unix_ns)), h('td', {}, e.stage || '-'), h('td', {}, e.kind), h('td', {}, e.text)))));
  }
  async function jobPage(id) {
    const loss = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    loss.id = 'chart-loss';
    loss.dataset.test = 'loss-chart';
    const tps = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    tps.id = 'chart-tps';
    mount(h('h1', {}, 'Job ', id, ' ', h('span', { id: 'job-state' })),
      h('p', { id: 'job-message', class: 'muted' }),
      h('button', { class: 'danger', id: 'job-cancel', on: { click: () => act('cancel ' + id, () => api('POST', `/api/jobs/${id}/cancel`)) } }, 'Cancel'),
      h('div', { class: 'card' }, h('h2', {}, 'Stages'), h('div', { id: 'job-stages' }), h('div', { id: 'job-sites' }), h('div', { id: 'job-hpo' })),
      h('div', { class: 'card grid' }, loss, tps),
      h('div', { class: 'card' }, h('h2', {}, 'Events'), h('div', { id: 'job-events' })),
      h('div', { class: 'card' }, h('h2', {}, 'Audit trail'), h('div', { id: 'job-audit' })));
    jobView = { id, series: [] };
    const r = await api('GET', '/api/jobs/' + encodeURIComponent(id));
    jobUpdate(r);
    jobView.series = r.series || [];
    jobUpdate({ job: r.job, series: [] });
    openStream(id);
    try {
      const a = await api('GET', '/api/audit?job=' + encodeURIComponent(id));
      $('job-audit').replaceChildren(auditTable(a.events || []));
    } catch (e) {
      $('job-audit').replaceChildren(h('p', { class: 'muted' }, 'audit: ' + e.message));
    }
  }

  function auditTable(events) {
    return table(['seq', 'time', 'principal', 'action', 'decision', 'service', 'reason'], events.map(e =>
      h('tr', {}, h('td', {}, e.seq), h('td', {}, when(e.unix_ns)), h('td', {}, e.principal), h('td', {}, e.action),
        h('td', { class: /DENY/.test(e.decision) ? 'state-down' : '' }, String(e.decision).replace('DECISION_', '').toLowerCase()),
        h('td', {}, e.service), h('td', {}, e.reason))));
  }

  // An ingest task (import, verify) followed until it ends, in `cell`.
  async function pollTask(id, cell) {
    for (let i = 0; i < 1200; i++) {
      const t = (await api('GET', '/api/tasks/' + encodeURIComponent(id))).task;
      cell.textContent = `${t.id} ${t.kind}: ${t.state} ${t.phase || ''} — ${t.documents} documents, ${t.kept} kept, ` +
        `${t.rejected} rejected, ${t.duplicates} duplicates` + (t.message ? ' — ' + t.message : '');
      cell.className = 'state-' + t.state;
      cell.dataset.task = t.state;
      if (['succeeded', 'failed', 'cancelled'].includes(t.state)) return t;
      await new Promise(res => setTimeout(res, 500));
    }
  }

  async function datasetDetail(d, detail) {
    const [s, r] = await Promise.all([api('GET', '/api/datasets/' + encodeURIComponent(d.name)),
      api('GET', '/api/datasets/' + encodeURIComponent(d.name) + '/rejects?limit=100').catch(e => ({ error: e.message }))]);
    const task = h('p', { class: 'muted' });
    detail.replaceChildren(h('div', { class: 'card' }, h('h2', {}, d.name + ' — shards and placement'),
      h('button', { class: 'secondary', on: { click: () => act('verify ' + d.name, async () => {
        const v = await api('POST', `/api/datasets/${encodeURIComponent(d.name)}/verify`);
        await pollTask(v.task.id, task);
      }) } }, 'Verify every shard'), task,
      table(['shard', 'node', 'bytes', 'tokens', 'problem'], (s.shards || []).map(x => h('tr', {}, h('td', {}, x.name),
        h('td', {}, x.node), h('td', {}, x.bytes), h('td', {}, x.tokens), h('td', { class: x.problem ? 'state-down' : '' }, x.problem || 'ok')))),
      s.last_task ? h('p', { class: 'muted' }, `last task ${s.last_task.id}: ${s.last_task.state}, ${s.last_task.kept} kept, ` +
        `${s.last_task.rejected} rejected, ${s.last_task.duplicates} duplicates`) : ''),
      h('div', { class: 'card' }, h('h2', {}, 'Rejects of the latest import'),
        r.error ? h('p', { class: 'muted' }, r.error)
          : [h('p', { class: 'muted' }, `${r.total} in all, ${r.stored} kept in the catalogue`),
             table(['file', 'line', 'rule', 'stage', 'detail'], (r.rejects || []).map(x => h('tr', {}, h('td', {}, x.file),
               h('td', {}, x.line), h('td', {}, x.rule), h('td', {}, x.stage), h('td', {}, x.detail))))]));
  }

  async function datasetsPage() {
    const detail = h('div', { id: 'dataset-detail' });
    const path = h('input', { id: 'import-path', placeholder: 'a file or directory under an import root of the ingest host' });
    const name = h('input', { id: 'import-dataset', placeholder: 'dataset name' });
    const progress = h('p', { id: 'import-task', class: 'muted' });
    const form = h('form', { class: 'card' }, h('h2', {}, 'Import'), h('label', {}, 'Path ', path), h('label', {}, 'Dataset ', name),
      h('button', { type: 'submit', id: 'import-button' }, 'Import'), progress);
    async function load() {
      const r = await api('GET', '/api/datasets');
      $('dataset-list').replaceChildren(table(['dataset', 'version', 'documents', 'tokens', 'shards', 'bytes', 'import'],
        (r.datasets || []).map(d => h('tr', { 'data-dataset': d.name }, h('td', {}, h('a', { href: '#', on: { click: ev => {
          ev.preventDefault();
          datasetDetail(d, detail).catch(e => notice(e.message, true));
        } } }, d.name)), h('td', {}, d.version), h('td', {}, d.documents), h('td', {}, d.tokens), h('td', {}, d.shards),
          h('td', {}, d.bytes), h('td', {}, d.import_id)))));
    }
    // The task's progress stays on the page; the list is read again when it ends.
    form.addEventListener('submit', async ev => {
      ev.preventDefault();
      try {
        const r = await api('POST', '/api/datasets', { path: path.value.trim(), dataset: name.value.trim() });
        await pollTask(r.task.id, progress);
        await load();
      } catch (e) {
        notice('import refused: ' + e.message, true);
      }
    });
    mount(h('h1', {}, 'Datasets'), form, h('div', { class: 'card', id: 'dataset-list' }, 'loading…'), detail);
    await load();
  }

  async function sitesPage() {
    const site = h('input', { id: 'enrol-site', placeholder: 'site name (a-z, 0-9, -)' });
    const out = h('pre', { id: 'enrol-token' });
    const form = h('form', { class: 'card' }, h('h2', {}, 'Enrol a site'), h('label', {}, 'Site ', site),
      h('button', { type: 'submit', id: 'enrol-button' }, 'Issue an enrolment token'), out);
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      act('enrolment token', async () => {
        const r = await api('POST', '/api/sites/token', { site: site.value.trim() });
        out.textContent = `loom up --site ${r.site} --cloud ${r.scheduler_endpoint} --enrol-token ${r.token}`;
      });
    });
    mount(h('h1', {}, 'Sites and nodes'), form, h('div', { class: 'card', id: 'site-list' }), h('div', { class: 'card', id: 'node-list' }));
    const [s, n] = await Promise.all([api('GET', '/api/sites'), api('GET', '/api/nodes')]);
    $('site-list').replaceChildren(h('h2', {}, 'Sites'), table(['site', 'state', 'enrolled', 'last contact', 'trainers', 'datasets', ''],
      (s.sites || []).map(x => h('tr', { 'data-site': x.name }, h('td', {}, x.name), stateCell(x.state), h('td', {}, when(x.enrolled_unix_ns)),
        h('td', {}, when(x.last_contact_unix_ns)), h('td', {}, (x.trainers || []).map(t => `${t.node} ${t.state}`).join(', ')),
        h('td', {}, (x.datasets || []).map(d => d.name).join(', ')),
        h('td', {}, x.state === 'revoked' ? '' : h('button', { class: 'danger', on: { click: () => act('revoke ' + x.name,
          () => api('POST', `/api/sites/${encodeURIComponent(x.name)}/revoke`)) } }, 'Revoke'))))));
    $('node-list').replaceChildren(h('h2', {}, 'Nodes'), table(['node', 'service', 'zone', 'state', 'last heartbeat', 'version', ''],
      (n.nodes || []).map(x => h('tr', { 'data-node': x.node.value }, h('td', {}, x.node.value), h('td', {}, x.service), h('td', {}, x.zone),
        stateCell(x.state), h('td', {}, when(x.last_seen_unix_ns)), h('td', {}, x.version),
        h('td', {}, x.service !== 'trainer' ? '' : [
          h('button', { class: 'secondary', 'data-drain': x.node.value, on: { click: () => act('drain ' + x.node.value,
            () => api('POST', `/api/nodes/${encodeURIComponent(x.node.value)}/drain`)) } }, 'Drain'), ' ',
          h('button', { class: 'secondary', on: { click: () => act('undrain ' + x.node.value,
            () => api('POST', `/api/nodes/${encodeURIComponent(x.node.value)}/undrain`)) } }, 'Undrain')])))));
  }

  async function pollExport(id, cell) {
    for (let i = 0; i < 600; i++) {
      const r = await api('GET', '/api/exports/' + encodeURIComponent(id));
      const x = r.info;
      cell.textContent = `${x.state} ${x.phase || ''}`;
      if (x.state === 'done' || x.state === 'failed' || x.state === 'cancelled') {
        cell.replaceChildren(h('span', { class: 'state-' + (x.passed ? 'succeeded' : 'failed'), 'data-export': x.state }, x.state +
          (x.passed ? ' (checks passed)' : ' (checks failed)')), ' ',
          ...(x.files || []).map(f => h('a', { href: `/api/exports/${encodeURIComponent(id)}/files/${encodeURIComponent(f.name)}`,
            download: f.name, 'data-file': f.name }, f.name + ' ')),
          h('ul', { class: 'checks' }, (x.checks || []).map(c => h('li', { class: c.status === 'fail' ? 'state-failed' : '' },
            `${c.name}: ${c.status}${c.detail ? ' — ' + c.detail : ''}`))));
        return;
      }
      await new Promise(res => setTimeout(res, 500));
    }
  }

  async function modelsPage() {
    mount(h('h1', {}, 'Models'), h('div', { class: 'card', id: 'model-list' }, 'loading…'));
    const r = await api('GET', '/api/models');
    $('model-list').replaceChildren(table(['version', 'model', 'job', 'stage', 'step', 'checkpoint', 'export'],
      (r.versions || []).map(v => {
        const cell = h('td', {});
        cell.append(h('button', { 'data-export-version': v.version, on: { click: async () => {
          try {
            const s = await api('POST', `/api/models/${encodeURIComponent(v.version)}/export`, { format: 'hf' });
            pollExport(s.info.id, cell).catch(e => notice('export: ' + e.message, true));
          } catch (e) { notice('export refused: ' + e.message, true); }
        } } }, 'Export (HF)'));
        return h('tr', { 'data-version': v.version }, h('td', {}, v.version), h('td', {}, v.model), h('td', {}, h('a', { href: '#/job/' + v.job_id }, v.job_id)),
          h('td', {}, v.stage), h('td', {}, v.step), h('td', { class: 'muted' }, v.checkpoint), cell);
      })));
  }

  async function auditPage() {
    const job = h('input', { id: 'audit-job', placeholder: 'job id (optional)' });
    const list = h('div', { id: 'audit-list' });
    const form = h('form', { class: 'card' }, h('label', {}, 'Job ', job), h('button', { type: 'submit' }, 'Search'));
    async function load() {
      const r = await api('GET', '/api/audit?limit=200' + (job.value ? '&job=' + encodeURIComponent(job.value.trim()) : ''));
      list.replaceChildren(h('p', { class: 'muted' }, `${r.total} records; anchored up to ${r.anchored_seq}`), auditTable(r.events || []));
    }
    form.addEventListener('submit', ev => { ev.preventDefault(); load().catch(e => notice(e.message, true)); });
    mount(h('h1', {}, 'Audit'), form, h('div', { class: 'card' }, list));
    await load();
  }

  const pages = { overview: overviewPage, topology: topologyPage, jobs: jobsPage, datasets: datasetsPage,
                  sites: sitesPage, models: modelsPage, audit: auditPage };
  async function route() {
    if (!session) return;
    const [name, arg] = location.hash.replace(/^#\//, '').split('/');
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.getAttribute('href') === '#/' + (name === 'job' ? 'jobs' : name));
    jobView = null;
    notice('');
    try {
      if (name === 'job' && arg) await jobPage(decodeURIComponent(arg));
      else await (pages[name] || overviewPage)();
      if (name !== 'job' && name !== 'overview' && name !== 'topology') closeStream();
    } catch (e) {
      if (e.status !== 401) mount(h('p', { class: 'error' }, e.message));
    }
  }
  window.addEventListener('hashchange', route);

  api('GET', '/api/session').then(s => s.logged_in ? loggedIn(s) : showLogin('')).catch(() => showLogin(''));
})();
