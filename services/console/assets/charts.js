// Line charts in SVG, drawn by our own code (no library): one chart per
// metric, one polyline per series. Used by the job page (loss, throughput).
'use strict';
(function () {
  const NS = 'http://www.w3.org/2000/svg';
  const COLORS = ['#1d4e89', '#d64545', '#1f9d55', '#d69e2e', '#6b46c1', '#2c7a7b'];

  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (parent) parent.appendChild(e);
    return e;
  }

  function fmt(v) {
    if (!isFinite(v)) return '-';
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(1) + 'M';
    if (a >= 1e3) return (v / 1e3).toFixed(1) + 'k';
    if (a >= 10) return v.toFixed(1);
    return v.toFixed(3);
  }

  // series: [{name, points: [[x, y], ...]}]; opts: {title, xLabel}.
  function line(svg, series, opts) {
    opts = opts || {};
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const W = 600, H = 220, L = 48, R = 10, T = 22, B = 26;
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    svg.setAttribute('class', 'chart');
    const all = series.flatMap(s => s.points).filter(p => isFinite(p[0]) && isFinite(p[1]));
    svg.dataset.points = String(all.length);
    el('text', { x: L, y: 14 }, svg).textContent = opts.title || '';
    if (all.length === 0) {
      el('text', { x: W / 2 - 40, y: H / 2 }, svg).textContent = 'no points yet';
      return;
    }
    let x0 = Math.min(...all.map(p => p[0])), x1 = Math.max(...all.map(p => p[0]));
    let y0 = Math.min(...all.map(p => p[1])), y1 = Math.max(...all.map(p => p[1]));
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) { y1 += Math.abs(y1) * 0.05 || 1; y0 -= Math.abs(y0) * 0.05 || 1; }
    const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
    const sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
    el('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }, svg);
    el('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }, svg);
    el('text', { x: 2, y: T + 8 }, svg).textContent = fmt(y1);
    el('text', { x: 2, y: H - B }, svg).textContent = fmt(y0);
    el('text', { x: L, y: H - 8 }, svg).textContent = fmt(x0);
    el('text', { x: W - R - 40, y: H - 8 }, svg).textContent = fmt(x1) + (opts.xLabel ? ' ' + opts.xLabel : '');
    series.forEach((s, i) => {
      const pts = s.points.filter(p => isFinite(p[0]) && isFinite(p[1]));
      if (pts.length === 0) return;
      const color = COLORS[i % COLORS.length];
      el('polyline', { points: pts.map(p => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(' '),
                       fill: 'none', stroke: color, 'stroke-width': 1.8 }, svg);
      if (pts.length === 1) el('circle', { cx: sx(pts[0][0]), cy: sy(pts[0][1]), r: 3, fill: color }, svg);
      el('text', { x: L + 8 + i * 110, y: T + 10, fill: color }, svg).textContent = s.name;
    });
  }

  window.LoomCharts = { line };
})();
