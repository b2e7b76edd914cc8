// `loom report`'s page in Debian's headless chromium (puppeteer-core): opened
// from the file, with the network refused, it must render without a console
// error or a failed request; a full-page screenshot is taken; each curve's
// series and the points it holds (data attributes) and draws (polyline) are
// printed as one JSON line "curves=[...]" for report.test.cpp to compare with
// the job's metrics log. Environment: REPORT (the .html), SHOT (the .png), CHROMIUM.
'use strict';
const puppeteer = require('puppeteer-core');
const path = require('path');

async function main() {
  const report = process.env.REPORT, shot = process.env.SHOT;
  if (!report || !shot) throw new Error('REPORT and SHOT must be set');
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
           `--user-data-dir=${path.join(path.dirname(shot), '.report-profile')}`],
  });
  const errors = [], requests = [];
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1100, height: 900 });
    page.on('console', m => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
    page.on('pageerror', e => errors.push('page error: ' + e.message));
    await page.setRequestInterception(true);
    page.on('request', r => {  // the page itself only: anything else would be fetched
      if (r.url() === 'file://' + report) return r.continue();
      requests.push(r.url());
      r.abort();
    });
    await page.goto('file://' + report, { waitUntil: 'load' });
    const curves = await page.$$eval('svg.curve', svgs => svgs.map(s => ({
      series: s.dataset.series,
      steps: s.dataset.steps.split(' ').map(Number),
      values: s.dataset.values.split(' ').map(Number),
      drawn: (s.querySelector('polyline') ? s.querySelector('polyline').getAttribute('points').trim().split(/\s+/).length : 0),
      width: s.getBoundingClientRect().width,
    })));
    const sections = await page.$$eval('h2', hs => hs.map(h => h.textContent));
    await page.screenshot({ path: shot, fullPage: true });
    console.log('curves=' + JSON.stringify(curves));
    console.log('sections=' + JSON.stringify(sections));
    console.log(`case=report_browser errors=${errors.length} requests=${requests.length} curves=${curves.length}`);
    for (const e of errors) console.log('error: ' + e);
    for (const r of requests) console.log('request: ' + r);
  } finally {
    await browser.close();
  }
  process.exit(errors.length || requests.length ? 1 : 0);
}

main().catch(e => { console.error(e.stack || String(e)); process.exit(1); });
