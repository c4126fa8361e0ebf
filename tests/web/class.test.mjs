// Browser tests of the page for a class on one server (issue 34, section 1): small jobs and a
// busy server. playwright-core drives Debian's chromium against a live attnd on an ephemeral
// loopback port.
//
// - Small jobs: the guided path and every experiment on it, walked in Chinese and English (the
//   row's value vectors read, 实验一 compared, 实验二 edited, 实验三 on and off, the n² jobs, both
//   思考题 demos and W^Q = W^K switched on, the vocabulary opened); every request the page makes
//   is recorded with the bytes it sent and received (page.on('request'), page.on('response')),
//   and none may send more than 64 KiB or receive more than 256 KiB. The largest of each is
//   printed.
// - A busy server: a small proxy in front of attnd answers 503 with Retry-After: 1 as a scenario
//   says, then passes requests through. Twice: the page shows the translated line, waits about a
//   second (at most 30% more) each time, and ends with the right result. Always: the page gives
//   up after 3 retries (4 requests) and shows the translated failure, the API's message folded
//   away under it; for an experiment, in the experiment's own box.
//
// Usage: node tests/web/class.test.mjs ATTND_BINARY OUTPUT_DIR

import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS, startAttnd } from './shots.mjs';

const [attndBin, outDir] = process.argv.slice(2);
if (!attndBin || !outDir) {
  console.error('usage: class.test.mjs ATTND_BINARY OUTPUT_DIR');
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });

let failures = 0, checks = 0;
function check(ok, what) {
  checks++;
  if (!ok) { failures++; console.error(`FAIL: ${what}`); } else console.log(`ok: ${what}`);
}

const SEND_MAX = 64 * 1024, RECEIVE_MAX = 256 * 1024;
const C4 = '张工把配置文件发给测试同学，因为它包含新的开关。';

// A proxy on 127.0.0.1:0 in front of target: a request for which refuse(method, path) is true is
// answered 503 with Retry-After: 1 and the API's error body; every other one passes through. Each
// request is logged as {at, method, path, status}. Resolves with {server, base, log}.
function startProxy(target, refuse) {
  const log = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks), entry = { at: Date.now(), method: req.method, path: req.url.split('?')[0] };
      log.push(entry);
      if (refuse(req.method, entry.path, entry)) {
        entry.status = 503;
        const e = JSON.stringify({ error: { code: 'queue_full', message: 'the queue is full (--queue-depth); retry shortly' } });
        res.writeHead(503, { 'Content-Type': 'application/json', 'Retry-After': '1', 'Content-Length': Buffer.byteLength(e) });
        res.end(e);
        return;
      }
      const up = new URL(target);
      const fwd = httpRequest({ host: up.hostname, port: up.port, method: req.method, path: req.url,
        headers: { ...req.headers, host: up.host } }, (r) => {
        entry.status = r.statusCode;
        res.writeHead(r.statusCode, r.headers);
        r.pipe(res);
      });
      fwd.on('error', () => { res.writeHead(502); res.end(); });
      fwd.end(body);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, base: `http://127.0.0.1:${server.address().port}/`, log })));
}

async function main() {
  const { proc, base } = await startAttnd(attndBin);
  let browser;
  const proxies = [];
  try {
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
    const consoleErrors = [];
    const newPage = async (opts = {}) => {
      const c = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US', ...opts });
      const p = await c.newPage();
      p.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(`${m.text()} (${m.location().url})`); });
      p.on('pageerror', (e) => consoleErrors.push(String(e)));
      return p;
    };
    const ready = (p) => p.evaluate(() => document.body.dataset.ready || '');
    const waitNext = (p, m) => p.waitForFunction((x) => document.body.dataset.ready && document.body.dataset.ready !== x, m, { timeout: 30000 });

    // ---- 1. Small jobs: the path and its experiments, every request measured -----------------
    const calls = []; // {lang, step, method, path, sent, received}
    for (const lang of ['zh', 'en']) {
      const p = await newPage();
      let step = 0;
      const pending = new Set();
      p.on('request', (r) => {
        const c = { lang, step, method: r.method(), path: new URL(r.url()).pathname, sent: (r.postDataBuffer() || Buffer.alloc(0)).length, received: null };
        calls.push(c);
        pending.add(r);
        r.__call = c;
      });
      p.on('response', async (r) => {
        const req = r.request();
        if (r.status() === 204) { // no body (a session's DELETE), which body() would wait for in vain
          Object.assign(req.__call, { received: 0, status: 204 });
          pending.delete(req);
          return;
        }
        try { req.__call.received = (await r.body()).length; } catch { req.__call.received = Number(r.headers()['content-length'] || 0); }
        req.__call.status = r.status();
        pending.delete(req);
      });
      // chromium reports a 204 as failed once its (empty) body is cancelled: it was answered.
      p.on('requestfailed', (r) => { pending.delete(r); if (r.__call.status !== 204) r.__call.failed = true; });
      const settle = async () => { for (let i = 0; i < 200 && pending.size; i++) await p.waitForTimeout(50); };
      await p.goto(new URL(`?lang=${lang}`, base).href);
      await p.waitForFunction(() => document.body.dataset.ready, null, { timeout: 20000 });
      let m = await ready(p);
      step = 1; // from here on, a request counts for the step the page goes to
      await p.click('[data-testid=path-yes]');
      await waitNext(p, m);
      for (let n = 1; n <= 11; n++) {
        step = n;
        await p.waitForFunction((k) => document.body.dataset.pathStep === String(k), n, { timeout: 30000 });
        if (n === 2) await p.waitForSelector('[data-testid=recv-nearest][data-word]', { timeout: 30000 });
        if (n === 4) { // a guess, compared (the page needs no request for it)
          const cand = await p.$$eval('[data-testid=exp1-guess] input', (is) => is.map((i) => i.dataset.testid));
          for (const [k, id] of cand.entries()) await p.fill(`[data-testid=${id}]`, String([1, 6, 1, 0][k] ?? 0));
          await p.click('[data-testid=exp1-compare]');
          await p.waitForSelector('[data-testid=exp1-pics] figure');
        }
        if (n === 5) { // a model that learned: its sequence, then a new one
          await p.waitForSelector('[data-testid=learned-result]:not([hidden])', { timeout: 30000 });
          const before = await p.getAttribute('[data-testid=learned-result]', 'data-n');
          await p.click('[data-testid=learned-new]');
          await p.waitForFunction((x) => { const r = document.querySelector('[data-testid=learned-result]'); return !r.hidden && r.dataset.n !== x; }, before, { timeout: 30000 });
        }
        if (n === 6) { // the query changed: the search again
          await p.waitForSelector('[data-testid=exp2-result]:not([hidden])');
          const before = await p.getAttribute('[data-testid=exp2-result]', 'data-n');
          await p.locator('[data-testid=exp2-query] input').nth(2).fill('2');
          await p.waitForFunction((x) => { const r = document.querySelector('[data-testid=exp2-result]'); return r.dataset.n !== x && !r.dataset.busy; }, before);
        }
        if (n === 7) await p.waitForSelector('[data-testid=exp3-verdict-off]:not([hidden])', { timeout: 30000 });
        if (n === 8) { // generation: three more tokens on the session, one request each
          await p.waitForSelector('[data-testid=gen][data-t="1"]', { timeout: 30000 });
          for (const k of [2, 3, 4]) {
            await p.click('[data-testid=gen-next]');
            await p.waitForSelector(`[data-testid=gen][data-t="${k}"]`, { timeout: 30000 });
          }
        }
        if (n === 10) await p.waitForSelector('[data-testid=cost-result][data-done]', { timeout: 60000 });
        if (n === 11) {
          await p.waitForSelector('[data-testid=tied-result]:not([hidden])', { timeout: 30000 });
          await p.waitForSelector('[data-testid=multi-result]:not([hidden])', { timeout: 30000 });
          const before = await p.getAttribute('[data-testid=tied-result]', 'data-n');
          await p.click('[data-testid=tied-switch]');
          await p.waitForFunction((x) => document.querySelector('[data-testid=tied-result]').dataset.n !== x, before);
          await settle();
          m = await ready(p);
          step = 12; // the ending: 本章小结 and the 自测题
          await p.click('[data-testid=path-next]');
          await waitNext(p, m);
          await p.waitForFunction(() => document.body.dataset.pathStep === '12', null, { timeout: 30000 });
          await settle();
          m = await ready(p);
          step = 10;
          await p.click('[data-testid=path-dots] button:nth-child(10)'); // back to step 10: the n² jobs again
          await waitNext(p, m);
          await p.waitForFunction(() => !document.querySelector('[data-testid=cost-result]').dataset.busy, null, { timeout: 60000 });
          // The vocabulary, from a sentence's box (the controls open).
          await p.click('[data-testid=controls-toggle]');
          await p.click('[data-testid=vocab-open]');
          await p.waitForSelector('[data-testid=vocab-words] button');
          await settle();
          break;
        }
        await settle();
        m = await ready(p);
        step = n + 1;
        await p.click('[data-testid=path-next]');
        await waitNext(p, m);
      }
      await settle();
      const mine = calls.filter((c) => c.lang === lang);
      check(mine.every((c) => c.received !== null && !c.failed),
        `${lang}: every request of the path had its answer (${mine.length} requests; ${mine.filter((c) => c.received === null || c.failed).map((c) => c.path).join(' ') || 'none missing'})`);
      await p.context().close();
    }
    const api = calls.filter((c) => c.path.startsWith('/v1/'));
    const bySent = [...calls].sort((a, b) => b.sent - a.sent), byReceived = [...calls].sort((a, b) => b.received - a.received);
    const line = (c) => `${c.method} ${c.path} (${c.lang}, step ${c.step}): sent ${c.sent} B, received ${c.received} B`;
    console.log(`requests: ${calls.length} (${api.length} to the API), ${calls.reduce((s, c) => s + c.sent, 0)} B sent, ${calls.reduce((s, c) => s + c.received, 0)} B received`);
    console.log(`largest sent:     ${line(bySent[0])}`);
    console.log(`largest received: ${line(byReceived[0])}`);
    for (let n = 1; n <= 12; n++) {
      const s = api.filter((c) => c.step === n);
      console.log(`  step ${n}: ${s.length} API requests, largest sent ${Math.max(0, ...s.map((c) => c.sent))} B, received ${Math.max(0, ...s.map((c) => c.received))} B`);
    }
    const overSent = calls.filter((c) => c.sent > SEND_MAX), overReceived = calls.filter((c) => c.received > RECEIVE_MAX);
    check(overSent.length === 0, `no request sends more than 64 KiB (largest ${bySent[0].sent} B: ${line(bySent[0])}${overSent.length ? `; over: ${overSent.map(line).join('; ')}` : ''})`);
    check(overReceived.length === 0, `no request receives more than 256 KiB (largest ${byReceived[0].received} B: ${line(byReceived[0])}${overReceived.length ? `; over: ${overReceived.map(line).join('; ')}` : ''})`);
    const cost = api.filter((c) => c.step === 10 && c.path === '/v1/sdpa');
    check(cost.length >= 4 && cost.every((c) => c.sent < 1024 && c.received < 4096),
      `step 10's n² jobs are small: ${cost.length} requests, at most ${Math.max(...cost.map((c) => c.sent))} B sent and ${Math.max(...cost.map((c) => c.received))} B received`);
    const gen = api.filter((c) => c.step === 8 && c.path.startsWith('/v1/sessions'));
    check(gen.length >= 2 * 5 && gen.every((c) => c.sent < 1024 && c.received < 4096),
      `step 8's session requests are small: ${gen.length} requests (an open and four appends in each language), at most ${Math.max(...gen.map((c) => c.sent))} B sent and ${Math.max(...gen.map((c) => c.received))} B received`);
    writeFileSync(join(outDir, 'class-requests.json'), `${JSON.stringify(calls, null, 1)}\n`);

    // Off the path, preset (d), 512 tokens and 12 heads: its embeddings go as the seeded tensor
    // they are (numbers.js makes the same values as the API), its replies carry the weights alone
    // and per head as many of each row's largest as fit.
    {
      const p = await newPage();
      const mine = [];
      p.on('request', (r) => { if (r.method() === 'POST') mine.push({ body: r.postData(), r }); });
      await p.goto(new URL('?lang=en&p=d&params=init:random&h=12&seed=7', base).href);
      await p.waitForFunction(() => document.body.dataset.ready, null, { timeout: 30000 });
      const sizes = [];
      for (const x of mine) sizes.push({ sent: x.body.length, received: (await (await x.r.response()).body()).length });
      const body = JSON.parse(mine[0].body);
      const { randomMatrix } = await import(new URL('../../web/numbers.js', import.meta.url).href);
      const x = randomMatrix(512, body.query.shape[1], body.query.seed);
      const asData = { ...body, query: x, encoding: 'base64' };
      const post = async (b) => (await fetch(new URL('v1/attention', base), { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(b) })).json();
      const [a, d] = [await post(body), await post(asData)];
      check(body.query.init === 'uniform' && body.query.seed === 512 && a.weights.values.data === d.weights.values.data && a.weights.indices.data === d.weights.indices.data,
        `preset (d) sends its embeddings as the seeded tensor they are: the API's weights are those of the same values sent as data (${body.query.shape.join(' x ')}, seed ${body.query.seed})`);
      check(sizes.length >= 2 && sizes.every((z) => z.sent <= SEND_MAX && z.received <= RECEIVE_MAX) && (await p.getAttribute('[data-testid=status]', 'data-kind')) === 'ok',
        `preset (d)'s requests are within 64 KiB sent and 256 KiB received (${sizes.map((z) => `${z.sent} B / ${z.received} B`).join(', ')}; per head the top ${body.weights_top_k} of each row)`);
      await p.context().close();
    }

    // ---- 2. A busy server ------------------------------------------------------------------
    const T = await (async () => {
      const p = await newPage();
      await p.goto(new URL('?lang=en&p=a', base).href);
      await p.waitForFunction(() => document.body.dataset.ready);
      const s = await p.evaluate(async () => (await import(new URL('i18n.js', location.href).href)).STRINGS);
      await p.context().close();
      return s;
    })();
    const tr = (lang, key, params = {}) => T[lang][key].replace(/\{(\w+)\}/g, (x, n) => (n in params ? String(params[n]) : x));
    const pattern = (lang, key) => new RegExp(`^${T[lang][key].replace(/[.*+?^$()[\]\\|]/g, '\\$&').replace(/\\?\{(\w+)\\?\}/g, '(\\d+)')}$`);

    // Twice: the first two POSTs are refused, then everything passes.
    let refused = 0;
    const twice = await startProxy(base, (method) => method === 'POST' && refused++ < 2);
    proxies.push(twice);
    {
      const p = await newPage();
      const lines = [];
      await p.exposeFunction('__busy', (text, hidden) => lines.push({ text, hidden, at: Date.now() }));
      await p.addInitScript(() => {
        new MutationObserver(() => {
          const el = document.querySelector('[data-testid=busy]');
          if (el) window.__busy(el.textContent, el.hidden);
        }).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
      });
      await p.goto(new URL('?lang=zh&p=a', twice.base).href);
      await p.waitForFunction(() => document.body.dataset.ready, null, { timeout: 20000 });
      const posts = twice.log.filter((e) => e.method === 'POST');
      const shown = lines.filter((x) => !x.hidden).map((x) => x.text);
      const waits = posts.slice(1, 3).map((e, k) => e.at - posts[k].at);
      const row = await p.$$eval('[data-testid=table-softmax] td[data-i="0"]', (tds) => tds.map((td) => td.textContent).join(' '));
      check(posts.length >= 4 && posts.slice(0, 2).every((e) => e.status === 503) && posts.slice(2).every((e) => e.status === 200),
        `a server busy twice: the page sent the request again after each 503 (${posts.map((e) => e.status).join(', ')})`);
      check(waits.length === 2 && waits.every((w) => w >= 1000 && w <= 1300 + 250),
        `it waited Retry-After (1 s) and at most 30% more before each retry (${waits.join(' ms, ')} ms)`);
      check(shown.length > 0 && shown.every((x) => pattern('zh', 'busy.retry').test(x)) && shown.includes(tr('zh', 'busy.retry', { s: 1, n: 1, m: 3 }))
        && shown.includes(tr('zh', 'busy.retry', { s: 1, n: 2, m: 3 })),
      `meanwhile it said so in Chinese, per attempt (${[...new Set(shown)].join(' | ')})`);
      check((await p.getAttribute('[data-testid=status]', 'data-kind')) === 'ok' && row === '0.40 0.20 0.20 0.20' && !(await p.isVisible('[data-testid=busy]'))
        && !(await p.isVisible('[data-testid=error]')),
      `and it ended with the right result and no line left (row 0: ${row})`);
      await p.context().close();
    }

    // Always, for a run: 4 requests (the first and 3 retries), then the failure in the page's
    // language, the API's message folded away.
    const always = await startProxy(base, (method) => method === 'POST');
    proxies.push(always);
    for (const lang of ['zh', 'en']) {
      const p = await newPage();
      const t0 = always.log.length;
      await p.goto(new URL(`?lang=${lang}&p=a`, always.base).href);
      await p.waitForFunction(() => document.body.dataset.ready, null, { timeout: 30000 });
      const posts = always.log.slice(t0).filter((e) => e.method === 'POST');
      const lead = await p.textContent('[data-testid=error-lead]');
      const folded = !(await p.isVisible('[data-testid=error-api]')) && (await p.isVisible('[data-testid=error-details] summary'));
      await p.click('[data-testid=error-details] summary');
      const api = await p.textContent('[data-testid=error-api]');
      check(posts.length === 4 && posts.every((e) => e.status === 503) && posts[3].at - posts[0].at >= 3000,
        `${lang}: a server that stays busy gets the request 4 times (the first and 3 retries), over ${posts.length ? posts[posts.length - 1].at - posts[0].at : 0} ms`);
      check(lead === tr(lang, 'err.busy', { n: 3 }) && folded && (await p.isVisible('[data-testid=error-api]')) && api.startsWith('503 queue_full: the queue is full')
        && (await p.textContent('[data-testid=error-details] summary')) === tr(lang, 'err.details') && (await p.getAttribute('[data-testid=status]', 'data-kind')) === 'error'
        && !(await p.isVisible('[data-testid=busy]')),
      `${lang}: then the page says so in its language (${lead}), with the API's message folded away for the teacher (${api})`);
      await p.screenshot({ path: join(outDir, `busy-failed-${lang}.png`) });
      await p.context().close();
    }

    // Always, for an experiment: 实验二's search on POST /v1/sdpa, refused; the sentence's run on
    // /v1/attention passes.
    const sdpa = await startProxy(base, (method, path) => method === 'POST' && path === '/v1/sdpa');
    proxies.push(sdpa);
    {
      const p = await newPage();
      await p.goto(new URL(`?lang=zh&p=c4&text=${encodeURIComponent(C4)}`, sdpa.base).href);
      await p.waitForFunction(() => document.body.dataset.ready, null, { timeout: 30000 });
      await p.waitForSelector('[data-testid=exp2-error]:not([hidden])', { timeout: 30000 });
      const lead = await p.textContent('[data-testid=exp2-error] .lead');
      check(lead === tr('zh', 'exp2.error', { msg: tr('zh', 'err.busy', { n: 3 }) }) && !(await p.isVisible('[data-testid=exp2-error] .api'))
        && (await p.getAttribute('[data-testid=status]', 'data-kind')) === 'ok',
      `实验二 on a busy server: its own box says so in Chinese after the retries (${lead}), the API's message folded away`);
      await p.click('[data-testid=lang-en]');
      const leadEn = await p.textContent('[data-testid=exp2-error] .lead');
      check(leadEn === tr('en', 'exp2.error', { msg: tr('en', 'err.busy', { n: 3 }) }), `and in English after the switch (${leadEn})`);
      await p.context().close();
    }

    // The failures above are deliberate (503s, and step 10's 413): nothing else may be logged.
    const unexpected = consoleErrors.filter((m) => !/status of 503/.test(m) && !/status of 413 .*\/v1\/sdpa\)$/.test(m));
    check(unexpected.length === 0, `no console errors but the deliberate 503s and 413 (${unexpected.join('; ') || 'none'})`);
  } finally {
    if (browser) await browser.close();
    for (const x of proxies) x.server.close();
    proc.kill('SIGTERM');
  }
  console.log(`class: ${checks} checks, ${failures} failed`);
  writeFileSync(join(outDir, 'class-result.txt'), `${checks} checks, ${failures} failed\n`);
  process.exit(failures ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
