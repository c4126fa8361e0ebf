// Browser tests of generation on a key/value cache (issue 37, section 5): the guided path's step
// 8 and its control outside the path, in English and in Chinese. playwright-core drives Debian's
// chromium against a live attnd on an ephemeral loopback port. For each language: the step
// opens a decode session of the lesson model and appends the start token; Next token appends
// one token a request, each with expected_length; after every step the test reads the map's
// rows and checks the rows above are the numbers it read at the step before (and the page's
// own check says so), the query's label is the token at t and there are t keys and values so
// labelled; the chart's cache series grows linearly and its recomputing series quadratically;
// every request is within the page's limits; an answer lost on the way and sent again is not
// appended twice; a session deleted behind the page's back is a 404 the page says and starts
// again from; leaving the step deletes the session. Exits non-zero on any failed check.
//
// Usage: node tests/web/gen.test.mjs ATTND_BINARY OUTPUT_DIR

import { check, finish, openAt, openBrowser, stringTable, testArgs } from './helpers.mjs';
import { startAttnd } from './shots.mjs';

const { attndBin } = testArgs('gen');
const STEPS = 6; // tokens generated in each language: the start token and five words
const SEND_MAX = 64 * 1024, RECEIVE_MAX = 256 * 1024;

// The map of the section as the test reads it: per row t, its label and its cells' numbers as
// the page holds them (data-x, the float32 received, as a decimal that reads back to it).
const readMap = (p) => p.$eval('[data-testid=gen-map]', (tbl) => ({
  keys: [...tbl.querySelectorAll('th.gen-key')].map((th) => ({ j: Number(th.dataset.j), text: th.textContent })),
  rows: [...tbl.querySelectorAll('tr[data-t]')].map((tr) => ({
    t: Number(tr.dataset.t), label: tr.querySelector('th').textContent,
    cells: [...tr.querySelectorAll('td')].map((td) => (td.classList.contains('masked') ? 'masked' : td.dataset.x)),
  })),
}));

// A series of the chart: its values as drawn.
const series = (p, key) => p.$eval(`[data-testid=gen-chart] polyline[data-series=${key}]`, (l) => l.dataset.values.split(',').map(Number));
const diffs = (xs) => xs.slice(1).map((x, i) => x - xs[i]);

async function main() {
  const { proc, base } = await startAttnd(attndBin);
  const { browser, newContext, consoleErrors, foreign } = await openBrowser(base);
  const lesson = await (await fetch(new URL('v1/models/lesson', base))).json();
  try {
    for (const lang of ['en', 'zh']) {
      const ctx = await newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
      const page = await ctx.newPage();
      const table = await (async () => { await openAt(page, base, `?lang=${lang}&p=a`); return stringTable(page); })();
      const tr = (key, params = {}) => table.STRINGS[lang][key].replace(/\{(\w+)\}/g, (m, n) => (n in params ? String(params[n]) : m));
      // The session's requests: method, path, body, and the sizes sent and received.
      const calls = [];
      page.on('response', async (res) => {
        const r = res.request();
        if (!new URL(r.url()).pathname.startsWith('/v1/sessions')) return;
        const c = { method: r.method(), path: new URL(r.url()).pathname, sent: (r.postDataBuffer() || Buffer.alloc(0)).length, status: res.status() };
        try { c.body = r.postData() ? JSON.parse(r.postData()) : null; } catch { c.body = null; }
        calls.push(c);
        c.received = 0; // a 204 has no body to read
        if (c.status !== 204) c.received = (await res.body().catch(() => Buffer.alloc(0))).length;
      });

      // ---- The path's step 8: a session opened, the start token appended --------------------
      await openAt(page, base, `?lang=${lang}&step=8`);
      await page.waitForSelector('[data-testid=gen][data-t="1"]', { timeout: 20000 });
      check((await page.textContent('[data-testid=path-title]')) === tr('path.gen.title')
        && (await page.textContent('[data-testid=path-count]')) === tr('path.count', { n: 8, m: 12 }),
      `${lang}: step 8 of 12 is generation (${await page.textContent('[data-testid=path-title]')})`);
      // The tokens sent, and their labels (the start token as the page writes it).
      const [tokens, labels] = await page.evaluate(async () => {
        const v = (await import(new URL('state.js', location.href).href)).view;
        return [v.tokens, v.qTokens];
      });
      check(tokens[0] === lesson.start_token && tokens.length > STEPS, `${lang}: the sentence of the step has ${tokens.length} tokens, the start token first`);
      let prev = null;
      for (let t = 1; t <= STEPS; t++) {
        if (t > 1) {
          await page.click('[data-testid=gen-next]');
          await page.waitForSelector(`[data-testid=gen][data-t="${t}"][data-busy="0"]`, { timeout: 20000 });
        }
        const m = await readMap(page);
        const last = m.rows[m.rows.length - 1];
        // Labels: the query of step t is token t; t keys and values, k_j v_j over token j.
        const keysOk = m.keys.length === t && m.keys.every((k, j) => k.j === j + 1 && k.text === `${labels[j]}k_${j + 1} v_${j + 1}`);
        check(m.rows.length === t && last.t === t && last.label === tr('gen.row', { t, w: labels[t - 1] }) && keysOk
          && (await page.textContent('[data-testid=gen-now]')) === tr('gen.now', { t, n: tokens.length, w: labels[t - 1] }),
        `${lang}, step ${t}: the query is labelled q_${t} · ${labels[t - 1]}, and there are ${m.keys.length} keys and values k_j v_j over tokens 1 … ${t}`);
        // The new row: t weights over the keys so far, summing to 1; the rows masked after the diagonal.
        const w = last.cells.map(Number), sum = w.reduce((a, b) => a + b, 0);
        const masksOk = m.rows.every((r, i) => r.cells.every((c, j) => (j > i) === (c === 'masked')));
        check(last.cells.every((c) => c !== 'masked') && Math.abs(sum - 1) < 1e-5 && masksOk,
          `${lang}, step ${t}: the new row holds ${t} weights summing to ${sum.toFixed(6)}, every row masked after its own token`);
        if (prev) {
          // The rows above: the same numbers as at step t − 1 (the test's comparison), and the
          // new key masked for each of them; the page's own check says so.
          const same = prev.rows.every((r, i) => r.cells.every((c, j) => m.rows[i].cells[j] === c) && m.rows[i].cells[t - 1] === 'masked');
          const verdict = await page.textContent('[data-testid=gen-check]');
          check(same && (await page.getAttribute('[data-testid=gen]', 'data-check')) === 'same'
            && verdict === tr('gen.check.same', { r: t - 1, p: t - 1, h: lesson.num_heads }),
          `${lang}, step ${t}: the ${t - 1} rows above are those read at step ${t - 1}, number for number, and the page says so ("${verdict.slice(0, 60)}…")`);
        } else {
          check((await page.textContent('[data-testid=gen-check]')) === tr('gen.check.first'), `${lang}, step 1: the page says there is no row above yet`);
        }
        prev = m;
      }
      // The chart: the cache's bytes linear in t, recomputing's operations quadratic, the cached
      // step's linear; the bytes are the session's (bytes ÷ max_length a row).
      const cache = await series(page, 'cache'), rec = await series(page, 'recompute'), step = await series(page, 'step');
      const row = 2 * lesson.embed_dim * 4; // a key and a value of E float32 numbers
      const d1 = diffs(cache), r1 = diffs(rec), r2 = diffs(r1), s1 = diffs(step);
      check(cache.length === STEPS && cache[0] === row && d1.every((d) => d === row),
        `${lang}: the cache's series grows by the same ${row} B a step, linearly (${cache.join(' ')})`);
      check(rec.length === STEPS && r1.every((d, i) => i === 0 || d > r1[i - 1]) && r2.every((d) => d === r2[0] && d > 0)
        && rec.every((x, i) => x === 2 * lesson.embed_dim * (i + 1) * (i + 2)),
      `${lang}: recomputing's series grows quadratically: its second differences are all ${r2[0]} (${rec.join(' ')})`);
      check(step.length === STEPS && s1.every((d) => d === s1[0] && d > 0), `${lang}: the cached step's series grows linearly (${step.join(' ')})`);
      const sessionLine = await page.textContent('[data-testid=gen-session]');
      check(sessionLine.includes(`${STEPS}`) && sessionLine.includes(`${tokens.length}`), `${lang}: the session's line gives its length and maximum (${sessionLine.slice(0, 80)}…)`);

      // ---- The requests: an open, one append a token with expected_length, within the limits -
      await page.waitForTimeout(100);
      const opens = calls.filter((c) => c.method === 'POST' && c.path === '/v1/sessions');
      const appends = calls.filter((c) => c.method === 'POST' && c.path.startsWith('/v1/sessions/'));
      check(opens.length === 1 && opens[0].status === 201 && opens[0].body.model === 'lesson' && opens[0].body.max_length === tokens.length,
        `${lang}: one session opened on the lesson model for the sentence's ${tokens.length} tokens`);
      check(appends.length === STEPS && appends.every((c, i) => c.status === 200 && c.body.expected_length === i
        && c.body.tokens.length === 1 && c.body.tokens[0] === tokens[i]),
      `${lang}: ${appends.length} appends, the i-th with expected_length i and token i alone (${appends.map((c) => c.body.expected_length).join(' ')})`);
      check(calls.every((c) => c.sent <= SEND_MAX && c.received <= RECEIVE_MAX),
        `${lang}: every session request within 64 KiB sent and 256 KiB received (largest ${Math.max(...calls.map((c) => c.sent))} B sent, ${Math.max(...calls.map((c) => c.received))} B received)`);
      const id = appends[0].path.split('/').pop();

      // ---- An answer lost: the append went through, the page never saw it; sent again, it is
      // refused (409), not appended twice.
      await page.route('**/v1/sessions/*', async (route) => {
        if (route.request().method() !== 'POST') return route.continue();
        await route.fetch(); // attnd appends
        await route.abort('connectionreset'); // the answer never reaches the page
      });
      await page.click('[data-testid=gen-next]');
      await page.waitForSelector('[data-testid=gen-error]:not([hidden])', { timeout: 20000 });
      await page.unroute('**/v1/sessions/*');
      await page.click('[data-testid=gen-next]'); // the student tries again
      await page.waitForSelector('[data-testid=gen][data-busy="0"]');
      await page.waitForFunction((x) => document.querySelector('[data-testid=gen-error] .lead').textContent.startsWith(x),
        tr('gen.mismatch').split('{msg}')[0], { timeout: 20000 });
      const held = await (await fetch(new URL(`v1/sessions/${id}`, base))).json();
      check(held.length === STEPS + 1 && (await page.getAttribute('[data-testid=gen]', 'data-t')) === String(STEPS)
        && await page.isDisabled('[data-testid=gen-next]'),
      `${lang}: an append whose answer was lost, sent again, is refused (409 length_mismatch): the session holds ${held.length} tokens, not ${STEPS + 2}, and the page says so`);

      // ---- The session gone: a 404 said, and Start again opens a new one -----------------------
      await page.click('[data-testid=gen-start]');
      await page.waitForSelector('[data-testid=gen][data-t="1"][data-busy="0"]', { timeout: 20000 });
      await page.waitForTimeout(100);
      const id2 = calls.filter((c) => c.method === 'POST' && c.path.startsWith('/v1/sessions/')).pop().path.split('/').pop();
      const oldGone = (await fetch(new URL(`v1/sessions/${id}`, base))).status;
      check(id2 !== id && oldGone === 404, `${lang}: Start again deletes the old session (GET: ${oldGone}) and opens another`);
      const del = await fetch(new URL(`v1/sessions/${id2}`, base), { method: 'DELETE' }); // behind the page's back
      await page.click('[data-testid=gen-next]');
      await page.waitForSelector('[data-testid=gen-error]:not([hidden])', { timeout: 20000 });
      const lead = await page.textContent('[data-testid=gen-error] .lead');
      check(del.status === 204 && lead.startsWith(tr('gen.gone').split('{msg}')[0]) && lead.includes('404')
        && (await page.textContent('[data-testid=gen-start]')) === tr('gen.restart') && await page.isDisabled('[data-testid=gen-next]'),
      `${lang}: a session deleted behind the page's back is a 404 the page says, offering to start again ("${lead.slice(0, 70)}…")`);
      await page.click('[data-testid=gen-start]');
      await page.waitForSelector('[data-testid=gen][data-t="1"][data-busy="0"]', { timeout: 20000 });
      await page.click('[data-testid=gen-next]');
      await page.waitForSelector('[data-testid=gen][data-t="2"][data-busy="0"]', { timeout: 20000 });
      check(await page.isHidden('[data-testid=gen-error]'), `${lang}: started again, the page generates again, the error gone`);

      // ---- Leaving the step deletes the session --------------------------------------------------
      await page.waitForTimeout(100);
      const id3 = calls.filter((c) => c.method === 'POST' && c.path.startsWith('/v1/sessions/')).pop().path.split('/').pop();
      await page.click('[data-testid=path-next]');
      await page.waitForFunction(() => document.body.dataset.pathStep === '9', null, { timeout: 20000 });
      await page.waitForTimeout(300);
      const left = (await fetch(new URL(`v1/sessions/${id3}`, base))).status;
      check(left === 404 && calls.some((c) => c.method === 'DELETE' && c.path.endsWith(id3) && c.status === 204),
        `${lang}: leaving step 8 deletes its session (DELETE 204; GET then ${left})`);

      // ---- The control outside the path: any sentence of the lesson model -------------------
      await openAt(page, base, `?lang=${lang}&p=c5`);
      await page.waitForSelector('[data-testid=gen]:not([hidden])');
      check(await page.isHidden('[data-testid=path-body]') && (await page.getAttribute('[data-testid=gen]', 'data-t')) === '0',
        `${lang}: off the path, generation waits for Start under a sentence of the lesson model`);
      await page.click('[data-testid=gen-start]');
      await page.waitForSelector('[data-testid=gen][data-t="1"][data-busy="0"]', { timeout: 20000 });
      await page.click('[data-testid=gen-all]');
      await page.waitForSelector('[data-testid=gen-done]', { timeout: 30000 });
      const m = await readMap(page), n = await page.evaluate(async () => (await import(new URL('state.js', location.href).href)).view.tokens.length);
      check(m.rows.length === n && (await page.getAttribute('[data-testid=gen]', 'data-check')) === 'same',
        `${lang}: "to the end" generates the whole sentence, ${m.rows.length} of ${n} tokens, the rows above unchanged at every step`);
      // Another input (the seed example, no sentence): the section goes, and its session ends.
      await page.waitForTimeout(100);
      const id4 = calls.filter((c) => c.method === 'POST' && c.path.startsWith('/v1/sessions/')).pop().path.split('/').pop();
      const mark = await page.evaluate(() => document.body.dataset.ready);
      await page.selectOption('[data-testid=preset]', 'a');
      await page.waitForFunction((x) => document.body.dataset.ready !== x, mark, { timeout: 20000 });
      await page.waitForTimeout(300);
      const after = (await fetch(new URL(`v1/sessions/${id4}`, base))).status;
      check(await page.isHidden('[data-testid=gen]') && after === 404, `${lang}: another input hides the section and deletes its session (GET then ${after})`);
      await ctx.close();
    }
    check(foreign.length === 0, `the page fetched nothing but attnd (${foreign.join(', ') || 'none'})`);
    // The test's own failures: the lost answer (reset), the 404 and the 409 it made on purpose.
    const unexpected = consoleErrors.filter((x) => !/status of (404|409)|ERR_CONNECTION_RESET|Failed to fetch/.test(x));
    check(unexpected.length === 0, `no console errors (${unexpected.join('; ') || 'none'})`);
  } finally {
    await browser.close();
    proc.kill('SIGTERM');
  }
  finish('gen');
}

main().catch((e) => { console.error(e); process.exit(1); });
