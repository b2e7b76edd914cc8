// The topology graph in SVG, drawn by our own code: the cloud (its trainers
// and the aggregator) in the middle, each edge site on a circle around it
// with its trainers, and one link per site coloured by its live state
// (up, degraded, down) and labelled with RTT, bandwidth and last round.
'use strict';
(function () {
  const NS = 'http://www.w3.org/2000/svg';
  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (parent) parent.appendChild(e);
    return e;
  }
  const STATE_FILL = { up: '#1f9d55', degraded: '#d69e2e', down: '#d64545' };

  function bw(b) {
    if (!b) return '';
    if (b >= 1e6) return (b / 1e6).toFixed(1) + ' MB/s';
    return (b / 1e3).toFixed(0) + ' kB/s';
  }

  function trainerDots(svg, x, y, trainers, radius) {
    trainers.forEach((t, i) => {
      const a = (i / Math.max(trainers.length, 1)) * 2 * Math.PI - Math.PI / 2;
      const c = el('circle', { cx: x + Math.cos(a) * radius, cy: y + Math.sin(a) * radius, r: 5,
                               fill: STATE_FILL[t.state === 'alive' || t.state === 'draining' ? 'up'
                                     : t.state === 'suspect' ? 'degraded' : 'down'] }, svg);
      c.dataset.trainer = t.node;
      c.dataset.state = t.state;
      el('title', {}, c).textContent = `${t.node}: ${t.state}`;
    });
  }

  // topo: GET /api/topology's JSON.
  function draw(svg, topo) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const W = 800, H = 480, cx = W / 2, cy = H / 2;
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    svg.setAttribute('class', 'topology');
    const sites = topo.sites || [];
    const R = Math.min(W, H) / 2 - 70;
    const links = el('g', {}, svg), nodes = el('g', {}, svg);
    sites.forEach((s, i) => {
      const a = (i / Math.max(sites.length, 1)) * 2 * Math.PI - Math.PI / 2;
      const x = cx + Math.cos(a) * R, y = cy + Math.sin(a) * R;
      const state = s.link_state || 'pending';
      const line = el('line', { x1: cx, y1: cy, x2: x, y2: y, 'stroke-width': 3, class: 'link-' + state }, links);
      line.dataset.site = s.name;
      line.dataset.link = state;
      const mx = (cx + x) / 2, my = (cy + y) / 2;
      const parts = [];
      if (s.rtt_ms) parts.push(s.rtt_ms.toFixed(1) + ' ms');
      if (s.bandwidth_bytes_per_s) parts.push(bw(s.bandwidth_bytes_per_s));
      if (s.last_round) parts.push('round ' + s.last_round.round);
      el('text', { x: mx + 4, y: my - 4 }, links).textContent = parts.join(' · ');
      const g = el('g', {}, nodes);
      g.dataset.site = s.name;
      g.dataset.link = state;
      g.dataset.state = s.state;
      el('circle', { cx: x, cy: y, r: 26, fill: '#fff', stroke: STATE_FILL[state] || '#999', 'stroke-width': 3 }, g);
      el('text', { x: x - 24, y: y + 4 }, g).textContent = s.name.slice(0, 10);
      el('text', { x: x - 24, y: y + 44 }, g).textContent = `${state} · ${s.state}`;
      trainerDots(g, x, y, s.trainers || [], 34);
    });
    const cloud = el('g', {}, nodes);
    cloud.dataset.cloud = topo.cloud ? topo.cloud.zone : '';
    el('circle', { cx, cy, r: 36, fill: '#1d4e89' }, cloud);
    el('text', { x: cx - 18, y: cy + 4, class: 'cloud-label' }, cloud).textContent = 'cloud';
    el('text', { x: cx - 40, y: cy + 54 }, cloud).textContent =
      (topo.cloud && topo.cloud.aggregator ? 'aggregator · ' : '') + ((topo.cloud && topo.cloud.trainers) || []).length + ' trainers';
    trainerDots(cloud, cx, cy, (topo.cloud && topo.cloud.trainers) || [], 44);
  }

  window.LoomTopology = { draw };
})();
