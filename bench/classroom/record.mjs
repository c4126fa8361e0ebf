// record.mjs - one student walks the guided path in headless chromium and every request the page
// makes to attnd is recorded, with the step it belongs to: the first half of `make
// bench-classroom` (run_classroom.py replays the recording as a class).
//
// The walk is a student's, in one language: the page opened bare, the path's offer accepted,
// then Next through every step, doing on each what the step asks (实验一: a typed guess and
// Compare; 实验二: three numbers edited; generation: every token of the sentence; the 思考题:
// W^Q = W^K switched on after the step's own runs), waiting on each until the page has drawn the step and no request to attnd has been in
// flight for a while. The steps, their keys and titles are read from the page itself
// (web/path.js's STEPS, web/i18n.js's strings), so the recording follows the page as it changes.
//
// Each request carries X-Request-Id: rec-<step> (set per step with extra HTTP headers), so that
// run_classroom.py can match the recording against attnd's access log: a request the browser
// answered from its cache never reached attnd, and one the browser made by itself (the favicon)
// may not be reported here.
//
// Out: a JSON file {lang, base, viewport, started (the ISO time of t = 0), steps: [{n, key,
// title, t0_ms, t1_ms}], calls: [{step, method, path, headers, body_b64, status, req_bytes,
// resp_bytes, t0_ms, t1_ms, failed}]};
// step 0 is the page's load, before the first step. Headers: those that change how attnd reads
// the body or what it sends (Content-Type, Content-Encoding, Accept-Encoding, the conditional
// ones). Exits non-zero when the walk fails (a step not drawn, a request that hangs).
//
// Usage: node bench/classroom/record.mjs BASE_URL OUT_JSON [LANG]

import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';

// playwright-core as tests/web has it (make tests/web/node_modules/playwright-core).
const require = createRequire(new URL('../../tests/web/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const [base, out, lang = 'zh'] = process.argv.slice(2);
if (!base || !out) {
  console.error('usage: record.mjs BASE_URL OUT_JSON [LANG]');
  process.exit(2);
}

const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];
const KEPT = ['content-type', 'content-encoding', 'accept-encoding', 'if-none-match', 'if-modified-since'];
const QUIET_MS = 1500;    // a step is done when no request has been in flight this long
const STEP_MS = 180000;   // and it must be done within this
const origin = new URL(base).origin;
const T0 = Date.now();
const now = () => Date.now() - T0;

let step = 0;
const calls = [];
const live = new Map(); // request -> its entry in calls, while in flight
let lastBusy = now();

function onRequest(req) {
  if (new URL(req.url()).origin !== origin) return;
  const h = req.headers(), u = new URL(req.url());
  const headers = {};
  for (const k of KEPT) if (h[k] !== undefined) headers[k] = h[k];
  const body = req.postDataBuffer();
  const c = {
    step, method: req.method(), path: u.pathname + u.search, headers,
    body_b64: body ? body.toString('base64') : '', req_bytes: body ? body.length : 0,
    status: null, resp_bytes: null, t0_ms: now(), t1_ms: null, failed: null,
  };
  calls.push(c);
  live.set(req, c);
  lastBusy = now();
}

async function onDone(req, failed) {
  const c = live.get(req);
  if (!c) return;
  c.t1_ms = now();
  if (failed) {
    c.failed = req.failure() ? req.failure().errorText : 'failed';
  } else {
    const res = await req.response();
    c.status = res ? res.status() : null;
    try { c.resp_bytes = (await req.sizes()).responseBodySize; } catch { /* page gone */ }
  }
  live.delete(req);
  lastBusy = now();
}

// Waits until the page has made no request to attnd for QUIET_MS (none in flight meanwhile).
async function quiet(what) {
  const start = now();
  for (;;) {
    await new Promise((r) => setTimeout(r, 100));
    if (live.size === 0 && now() - lastBusy >= QUIET_MS) return;
    if (now() - start > STEP_MS) {
      throw new Error(`${what}: requests still in flight after ${STEP_MS} ms: ${[...live.values()].map((c) => `${c.method} ${c.path}`).join(', ')}`);
    }
  }
}

async function visible(page, sel) {
  try { return await page.isVisible(sel); } catch { return false; }
}

async function main() {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
  const steps = [];
  try {
    const viewport = { width: 1280, height: 800 };
    const ctx = await browser.newContext({ viewport, locale: lang === 'zh' ? 'zh-CN' : 'en-US' });
    const page = await ctx.newPage();
    page.on('request', onRequest);
    page.on('requestfinished', (r) => onDone(r, false));
    page.on('requestfailed', (r) => onDone(r, true));
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    const tag = (n) => ctx.setExtraHTTPHeaders({ 'X-Request-Id': `rec-${n}` });
    const ready = () => page.evaluate(() => document.body.dataset.ready || '');
    const drawn = (mark) => page.waitForFunction((m) => document.body.dataset.ready && document.body.dataset.ready !== m,
      mark, { timeout: STEP_MS });

    // Step 0: the page's load, as a student opens the teacher's bare link.
    await tag(0);
    steps.push({ n: 0, key: 'load', title: 'page load', t0_ms: now() });
    await page.goto(new URL(`?lang=${lang}`, base).href);
    await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: STEP_MS });
    await quiet('the page load');
    steps[0].t1_ms = now();

    // The steps as the page has them.
    const meta = await page.evaluate(async (l) => {
      const at = (f) => new URL(f, location.href).href;
      const { STEPS } = await import(at('path.js'));
      let T = null;
      try { T = (await import(at('i18n.js'))).STRINGS[l]; } catch { /* titles stay keys */ }
      return STEPS.map((s) => ({ key: s.key, title: (T && T[`path.${s.key}.title`]) || s.key }));
    }, lang);

    for (let n = 1; n <= meta.length; n++) {
      const m = meta[n - 1];
      const mark = await ready();
      step = n;
      await tag(n);
      steps.push({ n, key: m.key, title: m.title, t0_ms: now() });
      if (n === 1) {
        // The first visit's offer, else the button that starts the path.
        if (await visible(page, '[data-testid=path-yes]')) await page.click('[data-testid=path-yes]');
        else await page.click('[data-testid=path-open]');
      } else {
        await page.click('[data-testid=path-next]');
      }
      await drawn(mark);
      await page.waitForFunction((k) => document.body.dataset.pathStep === String(k), n, { timeout: STEP_MS });
      await quiet(`step ${n} (${m.key})`);
      if (m.key === 'exp1') {
        // A typed guess for the candidates, then Compare.
        const boxes = page.locator('[data-testid=exp1-guess] input');
        const typed = ['1', '6', '1', '0'];
        for (let k = 0; k < Math.min(await boxes.count(), typed.length); k++) await boxes.nth(k).fill(typed[k]);
        if (await visible(page, '[data-testid=exp1-compare]')) await page.click('[data-testid=exp1-compare]');
        await quiet('实验一\'s guess');
      } else if (m.key === 'exp2') {
        // The query moved to people, then the config file's key edited: each edit asks the API.
        const q = page.locator('[data-testid=exp2-query] input');
        if (await q.count() >= 3) {
          await q.nth(0).fill('0');
          await quiet('实验二, an edit');
          await q.nth(2).fill('2');
          await quiet('实验二, an edit');
        }
        const k = page.locator('[data-testid=exp2-docs] tr[data-doc="1"] input');
        if (await k.count() >= 3) {
          await k.nth(2).fill('3');
          await quiet('实验二, an edit');
        }
      } else if (m.key === 'gen') {
        // The step opens a session and appends the start token; the student generates the rest.
        if (await visible(page, '[data-testid=gen-all]')) {
          await page.click('[data-testid=gen-all]');
          await quiet('generation, every token');
        }
      } else if (m.key === 'cost') {
        await page.waitForSelector('[data-testid=cost-result][data-done]', { timeout: STEP_MS }).catch(() => {});
        await quiet('the cost of n²');
      } else if (m.key === 'think') {
        // The step runs its demos by itself; the student then ties W^Q = W^K.
        if (await visible(page, '[data-testid=tied-switch]')) {
          await page.click('[data-testid=tied-switch]');
          await quiet('W^Q = W^K');
        }
      }
      steps[n].t1_ms = now();
      console.log(`step ${n} ${m.key}: ${calls.filter((c) => c.step === n).length} requests`);
    }
    if (errors.length) throw new Error(`the page failed: ${errors.join('; ')}`);
    const hung = calls.filter((c) => c.t1_ms === null);
    if (hung.length) throw new Error(`requests never finished: ${hung.map((c) => c.path).join(', ')}`);
    writeFileSync(out, JSON.stringify({ lang, base, viewport, started: new Date(T0).toISOString(), steps, calls }));
    console.log(`recorded ${calls.length} requests over ${steps.length - 1} steps and the load (${out})`);
  } finally {
    await browser.close();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
