// The console in a real browser (issue 29): Debian's chromium, headless,
// driven over the DevTools protocol by puppeteer-core, against a real cloud
// (`loom up`) and a real edge site. No mock back end. Run by
// browser.test.cpp, which starts the cloud and passes everything in the
// environment:
//   CONSOLE_URL CONSOLE_CERT LOOM TOKEN CLOUD_DIR SITE_DIR CORPUS SHOTS CHROMIUM
// Prints one key=value line per measurement and exits 0 when every step
// passed; any failure (or any console error in the page) exits 1 naming it.
'use strict';
const puppeteer = require('puppeteer-core');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { execFile, execFileSync } = require('child_process');

const env = k => {
  if (!process.env[k]) throw new Error(`${k} is not set`);
  return process.env[k];
};
const URL_ = env('CONSOLE_URL'), LOOM = env('LOOM'), CLOUD = env('CLOUD_DIR'), SITE = env('SITE_DIR');
const SHOTS = env('SHOTS');
const sleep = ms => new Promise(r => setTimeout(r, ms));
const step = what => console.log(`# ${new Date().toISOString()} ${what}`);

// The SPKI hash chromium is told to trust: exactly the console's own key.
function spki(certPath) {
  const cert = new crypto.X509Certificate(fs.readFileSync(certPath));
  const der = cert.publicKey.export({ type: 'spki', format: 'der' });
  return crypto.createHash('sha256').update(der).digest('base64');
}

function loom(args, opts) {
  return execFileSync(LOOM, args, { encoding: 'utf8', timeout: 120000, ...(opts || {}) });
}

async function waitFor(what, fn, timeoutMs, everyMs) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs || 50);
  }
}

async function main() {
  fs.mkdirSync(SHOTS, { recursive: true });
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
           `--ignore-certificate-errors-spki-list=${spki(env('CONSOLE_CERT'))}`,
           `--user-data-dir=${path.join(SHOTS, '.profile')}`],
  });
  const errors = [];
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    page.on('console', m => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
    page.on('pageerror', e => errors.push('page error: ' + e.message));
    page.on('requestfailed', r => {
      // A closed live stream on navigation is not an error.
      if (!r.url().includes('/api/events')) errors.push('request failed: ' + r.url() + ' ' + (r.failure() || {}).errorText);
    });
    const shot = async name => page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: true });
    const $text = async sel => page.$eval(sel, e => e.textContent).catch(() => null);

    step('log in');
    await page.goto(URL_ + '/', { waitUntil: 'networkidle0' });
    await page.waitForSelector('#login:not([hidden])');
    await shot('login');
    await page.type('#token', env('TOKEN'));
    await page.click('#login-button');
    await page.waitForSelector('#nav:not([hidden])');
    await page.waitForSelector('[data-test=utilisation]');
    await shot('overview');

    step('submit pipeline-test from the jobs page');
    await page.goto(URL_ + '/#/jobs');
    await page.waitForSelector('#submit-template option[value="pipeline-test"]');
    await page.select('#submit-template', 'pipeline-test');
    // The export later checks the held-out loss: a 30-step model passes a bound of 10.
    await page.type('#submit-overrides', 'text=' + env('CORPUS') + '\nexport.max_loss=10.0');
    await page.click('#submit-button');
    await page.waitForFunction(() => location.hash.startsWith('#/job/'));
    const job = await page.evaluate(() => decodeURIComponent(location.hash.split('/')[2]));
    step('job ' + job + ': watch the loss curve grow');
    const points = () => page.$eval('#chart-loss', e => Number(e.dataset.points || 0)).catch(() => 0);
    const first = await waitFor('the first loss point', async () => (await points()) > 0 ? await points() : 0, 60000);
    const more = await waitFor('more loss points', async () => (await points()) > first ? await points() : 0, 60000);
    console.log(`case=loss_curve first_points=${first} later_points=${more}`);
    await waitFor('the job to succeed', async () => {
      const s = await $text('#job-state');
      if (s === 'failed' || s === 'cancelled') throw new Error('job ' + job + ' ended ' + s + ': ' + await $text('#job-message'));
      return s === 'succeeded';
    }, 180000, 200);
    const final = await points();
    if (final < 2) throw new Error('the loss curve has ' + final + ' points after the job succeeded');
    await shot('job');

    step('topology: a second site appears');
    await page.goto(URL_ + '/#/topology');
    await page.waitForSelector('#topology-svg g[data-cloud]');
    const tok = JSON.parse(loom(['site', 'token', '--site', 'north', '--json', '--data-dir', CLOUD]));
    const tIssued = Date.now();
    await page.waitForSelector('#topology-svg g[data-site="north"]', { timeout: 5000 });
    const appearMs = Date.now() - tIssued;
    console.log(`case=topology_site_appears update_ms=${appearMs}`);
    if (appearMs > 1000) throw new Error(`the new site took ${appearMs} ms to appear (bound 1000)`);
    step('enrol the site (loom up --site north)');
    await new Promise((resolve, reject) => execFile(LOOM, ['up', '--site', 'north', '--cloud', tok.cloud,
      '--enrol-token', tok.token, '--data-dir', SITE], { timeout: 120000 }, (err, out, errOut) =>
      err ? reject(new Error('loom up --site: ' + err.message + '\n' + out + errOut)) : resolve()));
    const tUp = Date.now();
    await page.waitForSelector('#topology-svg g[data-site="north"][data-state="enrolled"][data-link="up"]', { timeout: 15000 });
    console.log(`case=topology_site_up update_ms=${Date.now() - tUp}`);
    await shot('topology');

    step("stop the site's trainer: its link turns red");
    const eps = JSON.parse(fs.readFileSync(path.join(SITE, 'endpoints.json'), 'utf8'));
    const pid = eps.services.trainer.pid;
    if (!pid) throw new Error('the site has no trainer pid in endpoints.json');
    // SIGSTOP: the trainer hangs (a killed one is restarted by the site's
    // watcher within a second, before the roster could call it dead).
    process.kill(pid, 'SIGSTOP');
    const tStop = Date.now();
    try {
      // Suspect after one missed heartbeat (amber), dead after three (red).
      await page.waitForSelector('#topology-svg g[data-site="north"][data-link="degraded"]', { timeout: 10000 });
      const degradedMs = Date.now() - tStop;
      await page.waitForSelector('#topology-svg g[data-site="north"][data-link="down"]', { timeout: 10000 });
      const downMs = Date.now() - tStop;
      console.log(`case=topology_link_down degraded_ms=${degradedMs} update_ms=${downMs} roster_dead_ms=3000`);
      if (downMs > 4500) throw new Error(`the link turned red after ${downMs} ms (roster dead time 3 s + 1.5 s)`);
      if (downMs < 2000) throw new Error(`the link turned red after ${downMs} ms, before the roster could call the trainer dead`);
      await shot('topology-down');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const tCont = Date.now();
    await page.waitForSelector('#topology-svg g[data-site="north"][data-link="up"]', { timeout: 10000 });
    console.log(`case=topology_link_back update_ms=${Date.now() - tCont}`);

    step('export a model from the models page');
    await page.goto(URL_ + '/#/models');
    await page.waitForSelector('button[data-export-version]');
    await page.click('button[data-export-version]');
    await page.waitForSelector('[data-export="done"]', { timeout: 120000 });
    const files = await page.$$eval('a[data-file]', as => as.map(a => a.getAttribute('href')));
    if (!files.some(f => f.endsWith('model.safetensors'))) throw new Error('the export offers no model.safetensors: ' + files);
    const size = await page.evaluate(async href => (await (await fetch(href)).arrayBuffer()).byteLength,
      files.find(f => f.endsWith('model.safetensors')));
    console.log(`case=export bytes=${size}`);
    if (size < 1000) throw new Error('the exported model.safetensors has ' + size + ' bytes');
    await shot('models');

    step('import a dataset from the datasets page');
    await page.goto(URL_ + '/#/datasets');
    await page.waitForSelector('#import-button');
    await page.type('#import-path', env('CORPUS'));
    await page.type('#import-dataset', 'licence-text');
    await page.click('#import-button');
    await page.waitForSelector('#import-task[data-task="succeeded"]', { timeout: 60000 });
    await page.waitForSelector('tr[data-dataset="licence-text"] a', { timeout: 10000 });
    await page.click('tr[data-dataset="licence-text"] a');
    await page.waitForFunction(() => document.querySelector('#dataset-detail').textContent.includes('Rejects of the latest import'));
    await shot('datasets');

    step('every other page');
    for (const p of ['jobs', 'sites', 'audit', 'overview']) {
      await page.goto(URL_ + '/#/' + p);
      await page.waitForFunction(() => !document.querySelector('#page').textContent.includes('loading…'), { timeout: 10000 });
      await sleep(300);
      await shot(p);
    }
    const shown = await page.$$eval('#page p.error', ps => ps.map(p => p.textContent));
    if (shown.length) throw new Error('a page showed an error: ' + shown.join('; '));

    step('a phone: the pages fit a 390 px screen (wide tables scroll inside their card)');
    await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true });
    for (const p of ['overview', 'topology', 'jobs']) {
      await page.goto(URL_ + '/#/' + p);
      await page.waitForFunction(() => !document.querySelector('#page').textContent.includes('loading…'), { timeout: 10000 });
      await sleep(300);
      const wide = await page.evaluate(() => document.documentElement.scrollWidth);
      if (wide > 400) throw new Error(`the ${p} page is ${wide} px wide on a 390 px phone`);
      await shot('phone-' + p);
    }
  } finally {
    await browser.close();
  }
  if (errors.length) throw new Error('the browser reported:\n  ' + errors.join('\n  '));
  console.log('case=browser ok=1');
}

main().then(() => process.exit(0), e => { console.error('FAILED: ' + e.message); process.exit(1); });
