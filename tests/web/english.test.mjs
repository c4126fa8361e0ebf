// Browser tests of the lesson in both languages (issue 35, part 1): the guided path walked in
// English and in Chinese, every step checked as a student sees it. playwright-core drives
// Debian's chromium against a live attnd on an ephemeral loopback port. Exits non-zero on any
// failed check.
//
// - In English no Chinese character is shown, outside a chapter's title given with its
//   translation beside it (思考题 (questions to think about)) and the language switch's 中文:
//   visible text, every option of every select, placeholders, aria-labels, titles, and the text
//   drawn on the canvases; and every step's sentence is the English twin of the chapter's.
// - In Chinese every text is a value of the Chinese table (checkLanguage) and every step's
//   sentence is the chapter's Chinese one.
// - The sentences of the page are the twins of api/lesson/twins.json; the gloss line shows the
//   other language's; the word list in English offers the English words; 实验一's candidates
//   and 实验三's twin in English, with the leak measured against the API's outputs.
// - The twelfth step: 本章小结 and the six 自测题, each linking to its step, the answer opening
//   only once something is written; Next is not greyed out at step 11.
//
// Usage: node tests/web/english.test.mjs ATTND_BINARY OUTPUT_DIR

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, startAttnd } from './shots.mjs';
import {
  check, checkLanguage, finish, openAt, openBrowser, readyMark, stringTable, testArgs, waitReady,
} from './helpers.mjs';

const { attndBin } = testArgs('english');

// A Chinese character: Han, CJK punctuation (，。「」〈〉) or a full-width form.
const CJK = /[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]/;
// A chapter's title with its translation beside it: the one way Chinese may stand in English.
const TITLE = /(实验[一二三]|思考题|自测题|本章小结) \([A-Za-z][^()]*\)/g;
const HAN = /\p{Script=Han}/u;

const STEP_PRESETS = ['a', 'c1', 'c3', 'c4', 'c3', 'c1', 'c5', 'c1', 'b', 'c1', 'c1', 'c1'];
// What each step waits for before it is read: its demo done.
const STEP_DONE = {
  2: '[data-testid=recv-nearest][data-word]',
  4: '[data-testid=exp1-keys] button',
  5: '[data-testid=learned-result]:not([hidden])',
  6: '[data-testid=exp2-result]:not([hidden])',
  7: '[data-testid=exp3-verdict-off]:not([hidden])',
  8: '[data-testid=gen][data-t="1"]',
  10: '[data-testid=cost-result][data-done]',
  11: '[data-testid=multi-result]:not([hidden])',
  12: '[data-testid=quiz] li',
};

// Every text a student can see, data included: visible text nodes, every option of every
// select, placeholders, aria-labels and titles of visible elements, the document's title, and
// the text drawn on the canvases on the page since recordCanvasText's list was last emptied.
const shownTexts = (page) => page.evaluate(() => {
  const out = [];
  const where = (el) => { const h = el.closest('[id]'); return h ? `#${h.id}` : el.tagName.toLowerCase(); };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement, text = n.textContent.replace(/\s+/g, ' ').trim();
    // The language switch names each language in itself (中文 / English), on both pages.
    if (text && !el.closest('script, style, [data-testid=lang-switch]') && el.checkVisibility()) out.push({ text, where: where(el) });
  }
  for (const s of document.querySelectorAll('select')) {
    if (!s.checkVisibility()) continue;
    for (const o of s.options) out.push({ text: o.textContent.trim(), where: `option of ${where(s)}` });
  }
  for (const el of document.querySelectorAll('[placeholder], [aria-label], [title]')) {
    if (!el.checkVisibility()) continue;
    for (const a of ['placeholder', 'aria-label', 'title']) if (el.getAttribute(a)) out.push({ text: el.getAttribute(a), where: `${a} of ${where(el)}` });
  }
  out.push({ text: document.title, where: 'title' });
  const canvases = new Set([...document.querySelectorAll('canvas')].filter((c) => c.checkVisibility()));
  for (const r of window.__text || []) if (canvases.has(r.el)) out.push({ text: r.text, where: `canvas ${r.canvas || r.el.parentElement.id}` });
  return out.filter((x) => x.text);
});

// The texts that hold a Chinese character outside a chapter's title with its translation.
const chineseIn = (texts) => texts.filter((x) => CJK.test(x.text.replace(TITLE, '')));

// Records every fillText before the page's scripts run, with the canvas itself (helpers.mjs's
// recordCanvasText keeps its id alone), so that canvases without an id (实验三's maps) count.
function recordCanvasEls() {
  window.__text = [];
  const fill = CanvasRenderingContext2D.prototype.fillText;
  CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
    window.__text.push({ el: this.canvas, canvas: this.canvas.id, text: String(text) });
    return fill.call(this, text, ...rest);
  };
}

async function main() {
  const { proc, base } = await startAttnd(attndBin);
  const twinsFile = JSON.parse(readFileSync(join(ROOT, 'api/lesson/twins.json'), 'utf8'));
  const web = await import(pathToFileURL(join(ROOT, 'web/twins.js')).href);
  const post = async (body) => (await fetch(new URL('v1/attention', base), {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  })).json();
  let browser;
  try {
    const b = await openBrowser(base);
    browser = b.browser;
    const { newContext, consoleErrors, foreign } = b;
    const newPage = async (opts = {}) => {
      const c = await newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US', ...opts });
      await c.addInitScript(recordCanvasEls);
      return c.newPage();
    };
    const S0 = (await (await fetch(new URL('v1/models/lesson', base))).json()).start_token ? 1 : 0;

    // ---- 1. The page's sentences are the twins of api/lesson/twins.json ----------------------
    const pairs = twinsFile.sentences.map((x) => `${x.preset}: ${x.zh} / ${x.en}`);
    const mine = Object.entries(web.TWINS).map(([p, x]) => `${p}: ${x.zh} / ${x.en}`);
    check(pairs.join('\n') === mine.join('\n'), `web/twins.js holds the sentence pairs of api/lesson/twins.json (${mine.length})`);
    check(JSON.stringify(web.EXP1_CANDIDATES) === JSON.stringify(twinsFile.exp1.candidates)
      && ['zh', 'en'].every((l) => web.EXP3_WORDS[l].word === twinsFile.exp3[l].word && web.EXP3_WORDS[l].replacement === twinsFile.exp3[l].replacement),
    '实验一\'s candidates and 实验三\'s words are twins.json\'s, in both languages');

    // ---- 2. The path in English: no Chinese, the English sentences --------------------------
    let page = await newPage();
    const table = await (async () => { await openAt(page, base, '?lang=en&p=a'); return stringTable(page); })();
    const walk = async (lang) => {
      page = await newPage();
      await openAt(page, base, `?lang=${lang}&step=1`);
      for (let n = 1; n <= 12; n++) {
        if (n > 1) {
          await page.evaluate(() => { window.__text = []; });
          const m = await readyMark(page);
          const next = await page.isDisabled('[data-testid=path-next]');
          check(!next, `${lang}, step ${n - 1}: Next is not greyed out`);
          await page.click('[data-testid=path-next]');
          await waitReady(page, m, 30000);
        }
        await page.waitForFunction((k) => document.body.dataset.pathStep === String(k), n, { timeout: 30000 });
        if (STEP_DONE[n]) await page.waitForSelector(STEP_DONE[n], { timeout: 60000 });
        if (n === 11) await page.waitForSelector('[data-testid=tied-result]:not([hidden])', { timeout: 30000 });
        await page.waitForTimeout(200); // a head's or a row's views drawn after the frame
        const req = JSON.parse((await page.textContent('[data-testid=request-json]')).split('\n').slice(1).join('\n'));
        const p = STEP_PRESETS[n - 1];
        if (lang === 'en') {
          const bad = chineseIn(await shownTexts(page));
          check(bad.length === 0, `en, step ${n}: no Chinese character is shown outside a chapter's title with its translation (${bad.slice(0, 6).map((x) => `${x.where}: "${x.text.slice(0, 60)}"`).join('; ') || 'none'})`);
        } else {
          await checkLanguage(page, table, 'zh', `zh, step ${n}`);
        }
        if (web.TWINS[p]) {
          const want = web.TWINS[p][lang];
          const ok = req.text === want && (lang === 'en' ? !CJK.test(req.text) : HAN.test(req.text));
          check(ok, `${lang}, step ${n}: the sentence is the ${lang === 'en' ? 'English twin' : 'chapter\'s Chinese sentence'} of ${p} (${req.text})`);
        } else {
          check(req.q && !('text' in req), `${lang}, step ${n}: the seed's example, no sentence (${Object.keys(req).join(' ')})`);
        }
      }
      return page;
    };
    await walk('en');
    // The twelfth step, in English: its title and the offer say 自测题 / 思考题 with a translation.
    const title12 = await page.textContent('[data-testid=path-title]');
    check(title12 === table.STRINGS.en['path.recap.title'] && /\(summary\)/.test(title12) && /\(self-test\)/.test(title12),
      `step 12's title gives each chapter title with its translation (${title12})`);
    await page.context().close();
    await walk('zh');
    await page.context().close();

    // The first visit's offer and step 11's title in English: the titles translated beside them.
    page = await newPage();
    await openAt(page, base, '?lang=en');
    const offer = await page.textContent('[data-testid=path-offer]');
    check(await page.isVisible('[data-testid=path-offer]') && chineseIn([{ text: offer }]).length === 0 && offer.includes('思考题 (questions to think about)'),
      `the first visit's offer keeps 思考题 only with its translation (${offer.trim()})`);
    await page.context().close();

    // ---- 3. The gloss line, the word list, 实验一 and 实验三 in English -----------------------
    page = await newPage();
    await openAt(page, base, '?lang=en&p=c1');
    check(!(await page.isVisible('[data-testid=gloss-line]')), 'the gloss line is off by default');
    await page.check('[data-testid=gloss]');
    check(await page.isVisible('[data-testid=gloss-line]') && (await page.textContent('[data-testid=gloss-text]')) === web.TWINS.c1.zh
      && new URL(page.url()).searchParams.get('gl') === '1',
    `the gloss line shows the Chinese twin under the English sentence (${await page.textContent('[data-testid=gloss-text]')})`);
    let m = await readyMark(page);
    await page.click('[data-testid=lang-zh]');
    await waitReady(page, m);
    check((await page.inputValue('[data-testid=text]')) === web.TWINS.c1.zh && (await page.textContent('[data-testid=gloss-text]')) === web.TWINS.c1.en,
      'in Chinese the sentence is the Chinese one and the gloss the English twin');
    m = await readyMark(page);
    await page.click('[data-testid=lang-en]');
    await waitReady(page, m);
    await page.click('[data-testid=vocab-open]');
    await page.waitForSelector('[data-testid=vocab-words] button');
    const words = await page.$$eval('[data-testid=vocab-words] button', (bs) => bs.map((x) => x.dataset.word));
    const vocab = (await (await fetch(new URL('v1/models/lesson', base))).json()).vocab;
    const english = vocab.filter((w) => !CJK.test(w));
    check(words.length > 150 && words.every((w) => !CJK.test(w)) && words.length === english.length
      && (await page.textContent('[data-testid=vocab-title]')).includes(`${words.length} English words`),
    `in English the word list offers the ${words.length} words without a Chinese character (${words.slice(0, 6).join(', ')} …)`);
    await page.click('[data-testid=vocab-close]');

    // 实验一: the chapter's four candidates in English, and the guess all on "config file".
    await openAt(page, base, '?lang=en&p=c4');
    const tok4 = (await post({ model: 'lesson', text: web.TWINS.c4.en, need_weights: 'per_head' }));
    const cand = web.EXP1_CANDIDATES.en.map((w) => tok4.tokens.indexOf(w));
    const pressed = await page.$$eval('[data-testid=exp1-keys] button', (bs) => bs.filter((x) => x.getAttribute('aria-pressed') === 'true').map((x) => Number(x.dataset.j)));
    check(cand.every((j) => j > 0) && pressed.join() === cand.join() && (await page.inputValue('[data-testid=exp1-query]')) === String(tok4.tokens.indexOf('it')),
      `实验一 in English: query "it", candidates ${web.EXP1_CANDIDATES.en.join(', ')} (${pressed.join()})`);
    for (const [k, j] of cand.entries()) await page.fill(`[data-testid=exp1-weight-${j}]`, k === 1 ? '1' : '0');
    await page.click('[data-testid=exp1-compare]');
    const closest = Number(await page.getAttribute('[data-testid=exp1-result]', 'data-closest'));
    check(tok4.head_names[closest] === 'coreference', `a guess all on "config file" is closest to coreference (${tok4.head_names[closest]})`);

    // 实验三's twin: database → cache; the mask keeps the rows before it bit for bit, without
    // it the row of in-memory moves by at least 10% of its length.
    await openAt(page, base, '?lang=en&p=c5');
    const t5 = ['Redis', 'is', 'an', 'in-memory', 'database', '.'].indexOf('database') + S0;
    check((await page.inputValue('[data-testid=exp3-pos]')) === String(t5) && (await page.inputValue('[data-testid=exp3-word]')) === 'cache',
      `实验三 in English replaces "database" (word ${t5}) by "cache"`);
    const runs = () => page.evaluate(() => Number(document.querySelector('[data-testid=exp3-result]').dataset.runs || 0));
    for (const id of ['exp3-run', 'exp3-off']) {
      const n = await runs();
      await page.click(`[data-testid=${id}]`);
      await page.waitForFunction((k) => Number(document.querySelector('[data-testid=exp3-result]').dataset.runs || 0) > k, n, { timeout: 15000 });
    }
    const rows = (which) => page.$$eval(`[data-testid=exp3-table] td.delta.${which}`, (tds) => tds.map((td) => ({ same: td.dataset.same === '1', rel: Number(td.dataset.rel || 0) })));
    const on = await rows('on'), off = await rows('off');
    const outs = await Promise.all(['database', 'cache'].map((w) => post({ model: 'lesson', tokens: ['Redis', 'is', 'an', 'in-memory', w, '.'], need_weights: false })));
    const mem = t5 - 1, d = outs[0].output[mem].map((x, c) => x - outs[1].output[mem][c]);
    const norm = (x) => Math.sqrt(x.reduce((s, y) => s + y * y, 0));
    const want = norm(d) / norm(outs[0].output[mem]);
    const verdict = await page.textContent('[data-testid=exp3-verdict-off]');
    check(on.slice(0, t5).every((r) => r.same) && Math.abs(off[mem].rel - want) < 1e-4 && want >= 0.1
      && verdict.includes(`in-memory, by ${Math.round(want * 100)}%`),
    `实验三's twin: with the mask the ${t5} rows before "database" are the same bit for bit; without it "in-memory" moves by ${(want * 100).toFixed(1)}% (${verdict})`);
    await page.context().close();

    // ---- 4. The twelfth step: 本章小结 and the six 自测题 --------------------------------------
    page = await newPage();
    await openAt(page, base, '?lang=zh&step=12');
    await page.waitForSelector('[data-testid=quiz] li');
    const items = await page.$$eval('[data-testid=quiz] li', (ls) => ls.map((l) => ({
      q: l.querySelector('.quiz-q').textContent, step: Number(l.querySelector('.quiz-go').dataset.step),
      locked: l.querySelector('.quiz-show').disabled, hidden: l.querySelector('.quiz-a').hidden,
    })));
    const STEPS_OF = [6, 2, 1, 3, 7, 3];
    check(items.length === 6 && items.every((x, k) => x.q === table.STRINGS.zh[`quiz.q${k + 1}`] && x.step === STEPS_OF[k] && x.locked && x.hidden)
      && (await page.textContent('[data-testid=recap-summary]')) === table.STRINGS.zh['recap.summary'],
    `step 12: 本章小结 and the six 自测题, each linking to its step (${items.map((x) => x.step).join(' ')}), the answers closed and locked`);
    check(items[1].q === '为什么 Attention 的输出是 Value 的加权和，而不是 Key 的加权和？' && items[1].step === 2,
      'the question on Value and Key links to the step tables (step 2)');
    // The answer opens only once something is written.
    await page.fill('[data-testid=quiz-answer-2]', '值');
    check(await page.isDisabled('[data-testid=quiz-show-2]'), 'one character is not yet an answer: the answer stays locked');
    await page.fill('[data-testid=quiz-answer-2]', '键负责匹配，值被取走');
    await page.click('[data-testid=quiz-show-2]');
    check(await page.isVisible('[data-testid=quiz-a-2]') && (await page.textContent('[data-testid=quiz-a-2]')) === table.STRINGS.zh['quiz.a2']
      && !(await page.isVisible('[data-testid=quiz-a-3]')),
    'once written, its answer opens (and only its own)');
    // Each link goes to its step, and back at step 12 the answer written is still there.
    for (const [k, s] of STEPS_OF.entries()) {
      m = await readyMark(page);
      await page.click(`[data-testid=quiz-go-${k + 1}]`);
      await waitReady(page, m, 30000);
      const at = Number(new URL(page.url()).searchParams.get('step'));
      check(at === s && (await page.textContent('[data-testid=path-title]')) === table.STRINGS.zh[`path.${['formula', 'row', 'heads', 'exp1', 'learned', 'exp2', 'exp3', 'gen', 'padding', 'cost', 'think', 'recap'][s - 1]}.title`],
        `自测题 ${k + 1} links to step ${s} (${at})`);
      m = await readyMark(page);
      await page.click('[data-testid=path-dots] button:nth-child(12)');
      await waitReady(page, m, 30000);
      await page.waitForSelector('[data-testid=quiz] li');
    }
    check((await page.inputValue('[data-testid=quiz-answer-2]')) === '键负责匹配，值被取走' && await page.isVisible('[data-testid=quiz-a-2]'),
      'what was written stays while the page is open');
    await page.context().close();

    check(foreign.length === 0, `the page fetched nothing but attnd (${foreign.join(', ') || 'none'})`);
    // Step 10 asks for the weights at n = 8k on purpose, and attnd refuses with a 413.
    const unexpected = consoleErrors.filter((x) => !/status of 413/.test(x));
    check(unexpected.length === 0, `no console errors (${unexpected.join('; ') || 'none'})`);
  } finally {
    if (browser) await browser.close();
    proc.kill('SIGTERM');
  }
  finish('english');
}

main().catch((e) => { console.error(e); process.exit(1); });
