// Browser tests of the guided path's step on a model that learned (issue 38, section 3): the
// built-in induction model in the model view and on the path. playwright-core drives Debian's
// chromium against a live attnd on an ephemeral loopback port; every number the page shows is
// checked against the test's own computation from the weights the page received, or against the
// API's answer to the test's own request. It holds whatever induction model attnd has built in:
// the scores and the induction head are read from GET /v1/models or computed here, never assumed.
//
// - The step: its title and text, the sentence on what the model was trained on, the sequence
//   the seed makes (the test makes it again with web/numbers.js) and that it repeats.
// - The model view: one map per layer × head, each labelled with the scores the test computes
//   (previous token and induction, TransformerLens's patterns over the rows with a target), and
//   the model's held-out head_scores when GET /v1/models has them.
// - The induction head: the layer-1 head whose induction score the test finds highest is the one
//   opened and named, its outlined cells one step right of the same word's earlier place.
// - Open and let go: a click opens a map, a click again or Clear lets it go.
// - The predictions on the repeated half, against the API's for the same request.
// - A sequence typed by the student, an unknown word, a new seed, both languages, and every
//   request within 64 KiB sent and 256 KiB received (a typed sequence of 63 words too).
//
// Usage: node tests/web/learned.test.mjs ATTND_BINARY OUTPUT_DIR

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, startAttnd } from './shots.mjs';
import { check, checkLanguage, finish, openAt, openBrowser, stringTable, testArgs } from './helpers.mjs';

const { attndBin, outDir } = testArgs('learned');
const CJK = /[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]/;
const SEND_MAX = 64 * 1024, RECEIVE_MAX = 256 * 1024;
const f2 = (x) => (x === null ? '–' : x.toFixed(2));

// The weights of a reply (base64 float32 (Ls, H, L, L)) as maps[layer][head] Float32Array(L·L).
function mapsOf(w) {
  const b = Buffer.from(w.data, 'base64');
  const all = new Float32Array(b.buffer, b.byteOffset, b.length / 4);
  const [ls, h, L] = w.shape;
  return Array.from({ length: ls }, (_, li) => Array.from({ length: h }, (_, k) => all.subarray((li * h + k) * L * L, (li * h + k + 1) * L * L)));
}

// The test's own scores: previous token a 1 at (i, i − 1); induction a 1 at (i, j) where the
// token before j is the token at i, j ≤ i; head_detector's sum(A ∘ P) / sum(A) over the rows
// with some 1 (null without any).
function score(a, toks, kind) {
  const L = toks.length;
  let hit = 0, all = 0;
  for (let i = 0; i < L; i++) {
    const js = [];
    if (kind === 'prev') { if (i >= 1) js.push(i - 1); } else {
      for (let j = 1; j <= i; j++) if (toks[j - 1] === toks[i] && j - 1 !== i) js.push(j);
    }
    if (!js.length) continue;
    for (const j of js) hit += a[i * L + j];
    for (let j = 0; j < L; j++) all += a[i * L + j];
  }
  return all > 0 ? hit / all : null;
}

async function main() {
  const { proc, base } = await startAttnd(attndBin);
  const models = (await (await fetch(new URL('v1/models', base))).json()).models;
  const model = models.find((m) => m.name === 'induction');
  const info = await (await fetch(new URL('v1/models/induction', base))).json();
  const numbers = await import(pathToFileURL(join(ROOT, 'web', 'numbers.js')).href);
  const post = async (body) => (await fetch(new URL('v1/attention', base), { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })).json();
  let browser;
  try {
    const b = await openBrowser(base);
    browser = b.browser;
    check(!!model && model.num_layers >= 2 && model.unembedding, `attnd has the induction model, ${model && model.num_layers} layers of ${model && model.num_heads} heads with an unembedding`);
    const page = await (await b.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' })).newPage();
    // Every request of the page, its bytes both ways; the induction model's answers kept.
    const calls = [], answers = [];
    page.on('requestfinished', async (r) => {
      const res = await r.response();
      const body = res ? await res.body().catch(() => Buffer.alloc(0)) : Buffer.alloc(0);
      calls.push({ url: r.url(), sent: (r.postDataBuffer() || Buffer.alloc(0)).length, received: body.length });
      const sent = r.postData() ? JSON.parse(r.postData()) : null;
      if (sent && sent.model === 'induction') answers.push({ body: sent, status: res.status(), json: JSON.parse(body.toString()) });
    });
    const resultN = () => page.getAttribute('[data-testid=learned-result]', 'data-n');
    const waitResult = async (before) => {
      const had = answers.length;
      await page.waitForFunction((x) => { const r = document.querySelector('[data-testid=learned-result]'); return !r.hidden && r.dataset.n !== x; }, before, { timeout: 30000 });
      for (let k = 0; k < 50 && answers.length === had; k++) await page.waitForTimeout(100); // its answer read
    };
    await openAt(page, base, '?lang=en&step=5');
    await waitResult(null);
    const table = await stringTable(page);
    const tr = (lang, key, p = {}) => table.STRINGS[lang][key].replace(/\{(\w+)\}/g, (m, n) => (n in p ? String(p[n]) : m));

    // ---- 1. The step, its sentences and its sequence ------------------------------------------
    check(await page.textContent('[data-testid=path-title]') === tr('en', 'path.learned.title')
      && await page.textContent('[data-testid=path-text]') === tr('en', 'path.learned.text'),
    'step 5 is "a model that learned", with its text');
    check(await page.textContent('[data-testid=learned-trained]') === tr('en', 'learned.trained')
      && /train_induction\.py/.test(tr('en', 'learned.trained')) && /copying, not meaning/.test(tr('en', 'learned.trained')),
    'one sentence says what the model was trained on, how long, and that it learned copying, not meaning');
    const seedOf = () => Number(new URL(page.url()).searchParams.get('ls'));
    const sequence = (lang, s) => {
      const words = info.vocab.filter((w) => w !== info.start_token && (lang === 'zh') === CJK.test(w));
      const half = numbers.shuffled(words.length, s).slice(0, 10).map((k) => words[k]);
      return half.concat(half);
    };
    let a = answers.at(-1);
    const words = a.body.text.split(' ');
    check(seedOf() === 1 && a.body.text === sequence('en', 1).join(' ') && await page.inputValue('[data-testid=learned-text]') === a.body.text,
      `the URL's seed (ls=${seedOf()}) makes the sequence the page sent and shows: ${a.body.text}`);
    check(words.length === 20 && words.slice(0, 10).join() === words.slice(10).join() && new Set(words).size === 10 && !CJK.test(a.body.text),
      'the sequence is 10 different English words of the model, then the same 10 again');
    check(await page.textContent('[data-testid=learned-seq]') === tr('en', 'learned.seq', { n: 10 }), 'the page says the sequence repeats');

    // ---- 2. The model view: every layer × head, labelled with its scores ------------------------
    const checkView = async (ans, lang, what) => {
      const toks = ans.json.tokens, maps = mapsOf(ans.json.weights);
      const mine = maps.map((l) => l.map((m) => ({ p: score(m, toks, 'prev'), i: score(m, toks, 'ind') })));
      const tiles = await page.$$eval('[data-testid=learned-grid] .lm-tile', (bs) => bs.map((x) => ({
        layer: Number(x.dataset.layer), head: Number(x.dataset.head), scores: x.querySelector('[data-testid=lm-scores]').textContent,
        held: (x.querySelector('[data-testid=lm-held]') || {}).textContent || null, maps: x.querySelectorAll('canvas').length,
      })));
      const want = [];
      maps.forEach((l, li) => l.forEach((_, h) => want.push({ layer: ans.json.layers[li], head: h })));
      check(tiles.length === model.num_layers * model.num_heads && tiles.every((x, k) => x.layer === want[k].layer && x.head === want[k].head && x.maps === 1),
        `${what}: one small map per layer × head (${tiles.length} = ${model.num_layers} × ${model.num_heads})`);
      const bad = tiles.filter((x, k) => x.scores !== tr(lang, 'learned.scores', { p: f2(mine[Math.floor(k / model.num_heads)][x.head].p), i: f2(mine[Math.floor(k / model.num_heads)][x.head].i) }));
      check(bad.length === 0, `${what}: each map's label is its previous-token and induction score as the test computes them from the weights received (${tiles.map((x) => `L${x.layer}H${x.head} ${x.scores}`).join('; ')})`);
      const held = model.head_scores;
      const heldOk = held ? tiles.every((x) => x.held === tr(lang, 'learned.held', { p: f2(held[x.layer][x.head].previous_token), i: f2(held[x.layer][x.head].induction) }))
        : tiles.every((x) => x.held === null);
      const src = await page.textContent('[data-testid=learned-source]');
      check(heldOk && src === tr(lang, held ? 'learned.source.both' : 'learned.source.page'),
        `${what}: ${held ? 'the held-out head_scores of GET /v1/models under each map, and the page says which is which' : 'GET /v1/models has no head_scores: the page says its scores are its own'}`);
      // The induction head: the layer-1 head with the highest induction score, as the test finds it.
      const last = maps.length - 1;
      let ih = 0;
      mine[last].forEach((s, h) => { if (s.i > mine[last][ih].i) ih = h; });
      const shown = await page.evaluate(() => {
        const o = document.querySelector('[data-testid=learned-open]'), cv = document.querySelector('[data-testid=learned-open-map]');
        return { hidden: o.hidden, layer: o.dataset.layer, head: o.dataset.head, ind: document.querySelector('[data-testid=learned-result]').dataset.ind,
          same: cv.dataset.same ? JSON.parse(cv.dataset.same) : [], stripe: cv.dataset.stripe ? JSON.parse(cv.dataset.stripe) : [],
          sentence: document.querySelector('[data-testid=learned-stripe]').hidden ? null : document.querySelector('[data-testid=learned-stripe]').textContent };
      });
      // (a head the page chose is as good: sums in another order may part two heads that tie)
      const pageHead = Number(shown.head);
      if (Math.abs(mine[last][pageHead].i - mine[last][ih].i) < 1e-9) ih = pageHead;
      check(shown.ind === `${ans.json.layers[last]},${ih}` && !shown.hidden && shown.layer === String(ans.json.layers[last]) && shown.head === String(ih),
        `${what}: the head opened is layer ${ans.json.layers[last]}'s head ${ih}, the highest induction score the test computes (${mine[last].map((s) => f2(s.i)).join(' ')})`);
      return { toks, maps, mine, ih, last, shown };
    };
    let v = await checkView(a, 'en', 'en, seed 1');
    const n = 10;
    const stripeWant = Array.from({ length: n }, (_, k) => [n + 1 + k, k + 2]);
    const sameWant = Array.from({ length: n }, (_, k) => [n + 1 + k, k + 1]);
    check(JSON.stringify(v.shown.same) === JSON.stringify(sameWant) && JSON.stringify(v.shown.stripe) === JSON.stringify(stripeWant),
      'on the induction head the page outlines the same word\'s earlier place (i, i − 10) and, one step right of it, (i, i − 9): the stripe');
    const strong = v.mine[v.last][v.ih].i >= 0.5; // the page claims the stripe from 0.5, else says it is missing
    check(v.shown.sentence === tr('en', strong ? 'learned.stripe' : 'learned.stripe.weak', { l: 1, h: v.ih, i: f2(v.mine[v.last][v.ih].i) }),
      `a sentence points at the stripe, one step right of the copy of the diagonal, ${strong ? 'where the head looks' : 'where this model\'s best head does not look'} (${(v.shown.sentence || '').slice(0, 80)}…)`);
    const indW = v.maps[v.last][v.ih], L = v.toks.length;
    const onStripe = stripeWant.reduce((s, [i, j]) => s + indW[i * L + j], 0) / n;
    const trained = model.head_scores && Math.max(...model.head_scores[1].map((s) => s.induction)) >= 0.8;
    if (trained) {
      check(onStripe >= 0.5 && v.mine[v.last][v.ih].i >= 0.5,
        `a trained model (held-out induction ≥ 0.8): on this sequence its induction head puts ${onStripe.toFixed(2)} of a repeated row's weight on the stripe`);
    } else console.log(`note: the built-in model reports no induction head of 0.8 (untrained); its best head puts ${onStripe.toFixed(2)} on the stripe`);

    // ---- 3. The predictions on the repeated half ----------------------------------------------
    const checkPreds = async (ans, lang, what) => {
      const ref = await post(ans.body), k = ref.predictions.tokens[0].length;
      const rows = await page.$$eval('[data-testid=learned-preds] tr[data-i]', (trs) => trs.map((x) => ({
        i: Number(x.dataset.i), pred: x.dataset.pred, copy: x.dataset.copy === '1', hit: x.dataset.hit === '1', text: x.children[1].textContent,
      })));
      const probs = Buffer.from(ref.predictions.probs.data, 'base64');
      const p0 = (i) => new Float32Array(probs.buffer, probs.byteOffset, probs.length / 4)[i * k];
      const toks = ref.tokens, seen = new Set();
      let ok = rows.length === toks.length, hc = 0, nc = 0, ho = 0, no = 0;
      rows.forEach((r, i) => {
        const copy = i > 0 && seen.has(toks[i]);
        seen.add(toks[i]);
        const pred = ref.predictions.tokens[i][0], hit = i + 1 < toks.length && pred === toks[i + 1];
        const word = lang === 'en' && CJK.test(pred) ? tr('en', 'learned.pred.zh') : pred;
        if (r.i !== i || r.pred !== pred || r.copy !== copy || r.hit !== hit || r.text !== `${word} ${p0(i).toFixed(2)}`) ok = false;
        if (i > 0 && i + 1 < toks.length) { if (copy) { nc++; hc += hit; } else { no++; ho += hit; } }
      });
      const acc = await page.textContent('[data-testid=learned-acc]');
      check(ok && acc === tr(lang, nc ? 'learned.acc' : 'learned.acc.none', { a: hc, b: nc, c: ho, d: no }),
        `${what}: every word's predicted next word is the API's top-1 for the same request, the words seen before marked, and the count (${acc})`);
      return { rows, hc, nc };
    };
    const pr = await checkPreds(a, 'en', 'en, seed 1');
    check(pr.rows.filter((r) => r.copy).map((r) => r.i).join() === Array.from({ length: n }, (_, k) => n + 1 + k).join(),
      'the predictions\' rows of the repeated half (words 11 to 20) are the ones marked as copies');
    if (trained) check(pr.hc >= 0.8 * (pr.nc - 1), `a trained model predicts the repeated half: ${pr.hc} of ${pr.nc} right`);
    await page.locator('#learned').screenshot({ path: join(outDir, 'learned-en.png') });

    // ---- 4. Open and let go ---------------------------------------------------------------------
    const openNow = () => page.evaluate(() => {
      const o = document.querySelector('[data-testid=learned-open]');
      return { hidden: o.hidden, at: o.hidden ? null : `${o.dataset.layer},${o.dataset.head}`,
        pressed: [...document.querySelectorAll('.lm-tile[aria-pressed=true]')].map((x) => `${x.dataset.layer},${x.dataset.head}`) };
    });
    const prevHead = Number((await page.getAttribute('[data-testid=learned-result]', 'data-prev')).split(',')[1]);
    let ph = 0;
    v.mine[0].forEach((s, h) => { if (s.p > v.mine[0][ph].p) ph = h; });
    if (Math.abs(v.mine[0][prevHead].p - v.mine[0][ph].p) < 1e-9) ph = prevHead;
    check(prevHead === ph, `the previous-token head the page names in layer 0 is head ${prevHead}, the test's (${v.mine[0].map((s) => f2(s.p)).join(' ')})`);
    await page.click(`[data-testid=lm-tile-0-${ph}]`);
    let o = await openNow();
    check(!o.hidden && o.at === `0,${ph}` && o.pressed.join() === `0,${ph}` && await page.isHidden('[data-testid=learned-stripe]'),
      `a click opens layer 0's head ${ph} large, its map alone pressed (${JSON.stringify(o)})`);
    await page.click(`[data-testid=lm-tile-0-${ph}]`);
    o = await openNow();
    check(o.hidden && o.pressed.length === 0, 'a click on it again lets it go');
    await page.click(`[data-testid=lm-tile-1-${v.ih}]`);
    o = await openNow();
    check(!o.hidden && o.at === `1,${v.ih}`, 'a click opens the induction head again');
    await page.click('[data-testid=learned-clear]');
    o = await openNow();
    check(o.hidden && o.pressed.length === 0, 'Clear lets it go');
    await page.click(`[data-testid=lm-tile-1-${v.ih}]`);
    await page.click('[data-testid=learned-open-map]');
    check((await openNow()).hidden, 'a click on the large map lets it go too');
    await checkLanguage(page, table, 'en', 'en, the step on a model that learned');
    const cjkShown = await page.evaluate((re) => document.querySelector('#learned').innerText.match(new RegExp(re, 'g')), CJK.source);
    check(!cjkShown, `no Chinese character in the English section (${(cjkShown || []).join('')})`);

    // ---- 5. A sequence of one's own, an unknown word, a new seed --------------------------------
    let before = await resultN();
    await page.fill('[data-testid=learned-text]', 'server cache log email server cache log email');
    await page.press('[data-testid=learned-text]', 'Enter');
    await waitResult(before);
    a = answers.at(-1);
    check(a.body.text === 'server cache log email server cache log email' && await page.textContent('[data-testid=learned-seq]') === tr('en', 'learned.seq.own', { n: 8 }),
      'a typed sequence is sent as typed and counted');
    v = await checkView(a, 'en', 'en, a typed sequence');
    await checkPreds(a, 'en', 'en, a typed sequence');
    await page.fill('[data-testid=learned-text]', 'server banana cache');
    await page.click('[data-testid=learned-try]');
    await page.waitForSelector('[data-testid=learned-error]:not([hidden])');
    for (let k = 0; k < 50 && answers.at(-1).status !== 400; k++) await page.waitForTimeout(100); // its answer read
    const err = await page.textContent('[data-testid=learned-error] .lead');
    check(answers.at(-1).status === 400 && err.startsWith(tr('en', 'learned.error', { msg: '' }).trim()) && await page.isHidden('[data-testid=learned-result]'),
      `an unknown word is refused and said so in the page's language (${err})`);
    // The longest sequence the model takes (63 words and 〈s〉): its reply within the page's limits.
    const long = Array.from({ length: 63 }, (_, k) => sequence('en', 5)[k % 20]).join(' ');
    await page.fill('[data-testid=learned-text]', long);
    before = await resultN();
    await page.click('[data-testid=learned-try]');
    await waitResult(before);
    check(answers.at(-1).json.tokens.length === 64, 'a typed sequence of 63 words is drawn (64 tokens)');
    before = await resultN();
    await page.click('[data-testid=learned-new]');
    await waitResult(before);
    a = answers.at(-1);
    check(seedOf() === 2 && a.body.text === sequence('en', 2).join(' '), `New random sequence: the next seed (ls=${seedOf()}) and its sequence`);
    await checkView(a, 'en', 'en, seed 2');

    // ---- 6. In Chinese --------------------------------------------------------------------------
    const zh = await (await b.newContext({ viewport: { width: 1280, height: 800 }, locale: 'zh-CN' })).newPage();
    const zhAnswers = [];
    zh.on('requestfinished', async (r) => {
      const res = await r.response(), body = await res.body().catch(() => Buffer.alloc(0));
      calls.push({ url: r.url(), sent: (r.postDataBuffer() || Buffer.alloc(0)).length, received: body.length });
      const sent = r.postData() ? JSON.parse(r.postData()) : null;
      if (sent && sent.model === 'induction') zhAnswers.push({ body: sent, status: res.status(), json: JSON.parse(body.toString()) });
    });
    await openAt(zh, base, '?lang=zh&step=5&ls=3');
    await zh.waitForSelector('[data-testid=learned-result]:not([hidden])', { timeout: 30000 });
    await zh.waitForTimeout(200);
    const za = zhAnswers.at(-1), zw = za.body.text.split(' ');
    check(za.body.text === sequence('zh', 3).join(' ') && zw.every((w) => CJK.test(w)) && zw.slice(0, 10).join() === zw.slice(10).join(),
      `zh: a link's seed (ls=3) makes 10 Chinese words, then the same again: ${za.body.text}`);
    check(await zh.textContent('[data-testid=path-text]') === tr('zh', 'path.learned.text') && await zh.textContent('[data-testid=learned-trained]') === tr('zh', 'learned.trained')
      && await zh.textContent('[data-testid=learned-stripe]') !== '', 'zh: the step\'s text, the sentence on the training and the stripe\'s sentence in Chinese');
    await checkLanguage(zh, table, 'zh', 'zh, the step on a model that learned');
    // The view and the predictions in Chinese, read from the Chinese page.
    const zhTiles = await zh.$$eval('.lm-tile [data-testid=lm-scores]', (xs) => xs.map((x) => x.textContent));
    const zmaps = mapsOf(za.json.weights);
    const zwant = zmaps.flatMap((l) => l.map((m) => tr('zh', 'learned.scores', { p: f2(score(m, za.json.tokens, 'prev')), i: f2(score(m, za.json.tokens, 'ind')) })));
    check(zhTiles.join('|') === zwant.join('|'), `zh: each map's label, in Chinese, is the test's scores (${zhTiles.slice(0, 2).join('; ')} …)`);
    // The language switched on the page: the English sequence of the same seed.
    before = await zh.getAttribute('[data-testid=learned-result]', 'data-n');
    await zh.click('[data-testid=lang-en]');
    await zh.waitForFunction((x) => { const r = document.querySelector('[data-testid=learned-result]'); return !r.hidden && r.dataset.n !== x; }, before, { timeout: 30000 });
    for (let k = 0; k < 50 && CJK.test(zhAnswers.at(-1).body.text); k++) await zh.waitForTimeout(100); // its answer read
    check(zhAnswers.at(-1).body.text === sequence('en', 3).join(' ') && await zh.inputValue('[data-testid=learned-text]') === sequence('en', 3).join(' '),
      'switching to English sends the English sequence of the same seed');

    // ---- 7. Limits and errors --------------------------------------------------------------------
    const api = calls.filter((c) => new URL(c.url).pathname.startsWith('/v1/'));
    const big = [...api].sort((x, y) => y.received - x.received)[0];
    check(api.every((c) => c.sent <= SEND_MAX && c.received <= RECEIVE_MAX),
      `every request within 64 KiB sent and 256 KiB received (${api.length} requests; the largest reply ${big.received} B, ${big.url})`);
    check(b.foreign.length === 0, `the page fetched nothing but attnd (${b.foreign.join(', ') || 'none'})`);
    const unexpected = b.consoleErrors.filter((m) => !/status of 400/.test(m));
    check(unexpected.length === 0, `no console errors but the deliberate 400 of the unknown word (${unexpected.join('; ') || 'none'})`);
  } finally {
    if (browser) await browser.close();
    proc.kill('SIGTERM');
  }
  finish('learned');
}

main().catch((e) => { console.error(e); process.exit(1); });
