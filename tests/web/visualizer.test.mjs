// Browser tests of the attnd visualizer: playwright-core drives Debian's chromium (headless)
// against a live attnd on an ephemeral loopback port. Exits non-zero on any failed check. This
// suite: the page's modules, the seed presets, masks, the tooltip, the heads, links, an API
// error, the 512-token preset, the two languages, large font on a projector, and the README's
// screenshots; lesson.test.mjs has the lesson model's sentences and the trace's step tables.
//
// Usage: node tests/web/visualizer.test.mjs ATTND_BINARY OUTPUT_DIR

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  DEVICE_SCALE_FACTOR, ROOT, SHOTS, WEB_FILES, compareImages, inputsHash, launchShotBrowser, renderShot, sha256,
  startAttnd,
} from './shots.mjs';
import {
  cellMean, cellPixel, check, checkLanguage, contrast, drawnLabels, englishWords, finish, openBrowser,
  placeholders, readyMark, recordCanvasText, shot, sixteenTokens, stringTable, tableRow, testArgs, waitReady,
} from './helpers.mjs';

const { attndBin, outDir } = testArgs('visualizer');

// ---- Modules --------------------------------------------------------------------------------

// The page's modules (STYLE.md, "The page"): index.html loads one entry module, app.js, and the
// page then loads every module of web/ and no other script, each served by attnd as the file is;
// each module is at most 500 lines and opens with a comment, and no modules import each other in
// a circle.
async function checkModules(page, base) {
  const files = WEB_FILES.filter((f) => f.endsWith('.js')).map((f) => f.slice('web/'.length));
  const scripts = await page.$$eval('script', (ss) => ss.map((s) => `${s.type} ${s.getAttribute('src')}`));
  check(scripts.join() === 'module app.js', `index.html loads one entry module, app.js (${scripts.join(', ')})`);
  const loaded = await page.evaluate(() => performance.getEntriesByType('resource')
    .map((e) => new URL(e.name).pathname).filter((p) => p.endsWith('.js')).map((p) => p.slice(1)).sort());
  check(loaded.join() === files.join(), `the page loads the ${files.length} modules of web/ and no other script (${loaded.join(' ')})`);
  const bad = [];
  for (const f of files) {
    const r = await fetch(new URL(f, base));
    const body = Buffer.from(await r.arrayBuffer());
    const type = r.headers.get('content-type') || '';
    if (!r.ok || !type.startsWith('text/javascript') || !body.equals(readFileSync(join(ROOT, 'web', f)))) bad.push(`${f}: ${r.status} ${type}`);
  }
  check(bad.length === 0, `attnd serves each module as the file is, as text/javascript (${bad.join('; ') || 'it does'})`);
  const src = Object.fromEntries(files.map((f) => [f, readFileSync(join(ROOT, 'web', f), 'utf8')]));
  const over = files.map((f) => [f, (src[f].match(/\n/g) || []).length]).filter(([f, n]) => n > 500 || !/^\/\/ \S/.test(src[f]));
  check(over.length === 0, `each module is at most 500 lines and opens with a comment (${over.map(([f, n]) => `${f}: ${n} lines`).join(', ') || 'each does'})`);
  const deps = Object.fromEntries(files.map((f) => [f, [...src[f].matchAll(/^import\b[^;]*?from '\.\/([\w.-]+)';/gm)].map((m) => m[1])]));
  const state = new Map(), cycle = []; // state: 1 while its imports are visited, 2 once done
  const visit = (f, path) => {
    if (cycle.length || state.get(f) === 2) return;
    if (state.get(f) === 1) { cycle.push(...path.slice(path.indexOf(f)), f); return; }
    state.set(f, 1);
    for (const d of deps[f] || []) visit(d, [...path, f]);
    state.set(f, 2);
  };
  files.forEach((f) => visit(f, []));
  check(cycle.length === 0, `no modules of web/ import each other in a circle (${cycle.join(' -> ') || 'none do'})`);
}

async function main() {
  const { proc, base } = await startAttnd(attndBin);
  let browser;
  try {
    const b = await openBrowser(base);
    browser = b.browser;
    const { newContext, consoleErrors, foreign } = b;
    const ctx = await newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
    const page = await ctx.newPage();
    // The lesson model's start token (issue 25), first among a sentence's words: every word of a
    // sentence is S0 further on, and the page labels it 〈始〉 / <s> (web/i18n.js tok.start).
    const lessonInfo = await (await fetch(new URL('v1/models/lesson', base))).json();
    const S0 = lessonInfo.start_token ? 1 : 0;
    const START = { zh: '〈始〉', en: '<s>' };
    const withStart = (lang, tokens) => (S0 ? [START[lang]] : []).concat(tokens);

    // 1. Preset (a): the seed's numbers. (The page in Chinese: the sentence presets below are
    // the chapter's Chinese sentences.)
    await page.goto(new URL('?lang=zh', base).href);
    await page.waitForFunction(() => document.body.dataset.ready);
    await checkModules(page, base);
    let mark = await readyMark(page);
    await page.selectOption('[data-testid=preset]', 'c1');
    await waitReady(page, mark);
    mark = await readyMark(page);
    await page.selectOption('[data-testid=preset]', 'a');
    await waitReady(page, mark);
    const w0 = await tableRow(page, 'table-softmax', 0);
    check(w0.join(' ') === '0.40 0.20 0.20 0.20', `preset (a) row-0 weights read 0.40 0.20 0.20 0.20 (got ${w0.join(' ')})`);
    const o0 = await tableRow(page, 'table-output', 0);
    check(o0.join(' ') === '0.70 0.50', `preset (a) output row 0 reads 0.70 0.50 (got ${o0.join(' ')})`);
    await shot(page, 'preset-a');

    // 2. Causal on, on a sentence preset (the lesson model, whose weights the page cannot
    // regenerate: it shows attnd's weights without the other step tables): upper triangle
    // masked; numbers equal the API's.
    mark = await readyMark(page);
    await page.selectOption('[data-testid=preset]', 'c1');
    await waitReady(page, mark);
    mark = await readyMark(page);
    await page.selectOption('[data-testid=causal]', 'top_left');
    const st = await waitReady(page, mark);
    check(st.startsWith('完成'), `causal run succeeds (${st})`);
    const L = 11 + S0;
    let maskedOk = true, openOk = true;
    for (let i = 0; i < L; i++) {
      const cls = await page.$$eval(`[data-testid=table-softmax] td[data-i="${i}"]`, (tds) => tds.map((td) => td.className));
      cls.forEach((c, j) => { if (j > i && c !== 'masked') maskedOk = false; if (j <= i && c === 'masked') openOk = false; });
    }
    check(maskedOk && openOk, 'the softmax table marks exactly the upper triangle as masked');
    // Head 0 (adjacent) puts its weight on the word before: (5, 4) and (9, 8).
    const px = [await cellPixel(page, S0, 5 + S0), await cellPixel(page, 2 + S0, 9 + S0), await cellPixel(page, 5 + S0, 4 + S0), await cellPixel(page, 9 + S0, 8 + S0)];
    check(px[0].grey && px[1].grey, 'upper-triangle cells of the heatmap are drawn hatched grey');
    check(!px[2].grey || !px[3].grey, 'lower-triangle cells of the heatmap carry heat colours');
    const req = JSON.parse((await page.textContent('[data-testid=request-json]')).split('\n').slice(1).join('\n'));
    check(req.causal === 'top_left', 'the request the page sent is causal top-left');
    const api = await (await fetch(new URL('v1/attention', base), {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(req),
    })).json();
    let same = true;
    for (let i = 0; i < L; i++) {
      // Masked cells read "0"; compare as numbers at the two decimals the page shows.
      const shown = (await tableRow(page, 'table-softmax', i)).map(Number);
      const want = api.weights[0][i].map((x) => Number(x.toFixed(2)));
      if (shown.join(' ') !== want.join(' ')) { same = false; console.error(`row ${i}: shown ${shown} api ${want}`); }
      const out = await tableRow(page, 'table-output', i);
      const wantOut = api.output[i].slice(0, out.length).map((x) => x.toFixed(2));
      if (out.join(' ') !== wantOut.join(' ')) { same = false; console.error(`output row ${i}: shown ${out} api ${wantOut}`); }
    }
    check(same, 'the displayed weights and outputs equal what /v1/attention returns for the same request');
    await shot(page, 'causal-heatmap', '[data-testid=large-canvas]');

    // 3. Hover a cell: the tooltip names the query, the key and the weight.
    const geom = await page.evaluate(() => JSON.parse(document.querySelector('[data-testid=large-canvas]').dataset.geom));
    const box = await page.locator('[data-testid=large-canvas]').boundingBox();
    const scale = box.width / geom.width;
    await page.mouse.move(box.x + (geom.labW + (1.5 + S0) * geom.cell) * scale, box.y + (geom.labH + (7.5 + S0) * geom.cell) * scale);
    await page.waitForSelector('[data-testid=tooltip]:not([hidden])', { timeout: 3000 });
    const tip = await page.textContent('[data-testid=tooltip]');
    const want7 = (await tableRow(page, 'table-softmax', 7 + S0))[1 + S0];
    check(tip.includes('它') && tip.includes('把') && tip.includes(Number(api.weights[0][7 + S0][1 + S0]).toFixed(4)),
      `hovering (7, 1) (after the start token) shows query 它, key 把 and the weight ${want7} (tooltip: ${tip})`);
    await shot(page, 'tooltip');

    // 4. Switch heads.
    const before = await tableRow(page, 'table-softmax', 10 + S0);
    await page.click('[data-testid=head-2]');
    await page.waitForFunction(() => document.getElementById('large-title').textContent.startsWith('structure'));
    // The heatmap first; the step tables follow once it is on the screen.
    await page.waitForSelector('[data-testid=row-steps][data-head="2"]');
    const after = await tableRow(page, 'table-softmax', 10 + S0);
    const want2 = api.weights[2][10 + S0].map((x) => x.toFixed(2));
    check(after.join(' ') === want2.join(' ') && after.join(' ') !== before.join(' '),
      `head 2 shows its own weights (${after.join(' ')})`);
    check(new URL(page.url()).searchParams.get('head') === '2', 'the URL records the selected head');
    await shot(page, 'head-grid', '[data-testid=head-grid]');

    // 5. A shared link reproduces the view.
    const link = page.url();
    const page2 = await ctx.newPage();
    await page2.goto(link);
    await page2.waitForFunction(() => document.body.dataset.ready);
    const again = await tableRow(page2, 'table-softmax', 10 + S0);
    check(again.join(' ') === after.join(' '), 'opening the page URL reproduces the same view');
    await page2.close();

    // 6. An API error is shown with its message: 16-wide embeddings cannot split into 3 heads.
    await page.goto(new URL('?lang=en&p=random&L=8&E=16&rseed=1&params=init:identity&h=4', base).href);
    await page.waitForFunction(() => document.body.dataset.ready);
    mark = await readyMark(page);
    await page.fill('[data-testid=num-heads]', '3');
    await page.dispatchEvent('[data-testid=num-heads]', 'change');
    await waitReady(page, mark);
    // The line is the page's; the API's own message is folded away under it, for the teacher.
    const err = await page.textContent('[data-testid=error-api]');
    const apiLead = await page.textContent('[data-testid=error-lead]');
    check(await page.isVisible('[data-testid=error-lead]') && /^The API refused this request \(HTTP 400, \w+\)\.$/.test(apiLead)
      && !(await page.isVisible('[data-testid=error-api]')) && await page.isVisible('[data-testid=error-details] summary'),
    `an API error shows a line in the page's language, the API's message folded away (${apiLead})`);
    // (Leaving the heads' box fires its change, which runs the page again: the same error.)
    mark = await readyMark(page);
    await page.evaluate(() => document.activeElement.blur());
    await waitReady(page, mark);
    await page.click('[data-testid=error-details] summary');
    check(await page.isVisible('[data-testid=error-api]') && err.startsWith('400') && /3/.test(err),
      `unfolded, the API's own message, with its status (${err})`);
    check((await page.getAttribute('[data-testid=status]', 'data-kind')) === 'error'
      && (await page.textContent('[data-testid=status]')) === 'error', 'the status shows the error state');
    await shot(page, 'api-error');
    // In Chinese the API's message stays as the API wrote it, under a Chinese line.
    await page.click('[data-testid=lang-zh]');
    const lead = await page.textContent('[data-testid=error-lead]');
    check(await page.isVisible('[data-testid=error-lead]') && /[\u4e00-\u9fff]/.test(lead) && lead.includes('400')
      && (await page.textContent('[data-testid=error-api]')) === err,
      `in Chinese a Chinese line stands above the API's unchanged message (${lead})`);
    await checkLanguage(page, await stringTable(page), 'zh', 'an API error in Chinese');
    await shot(page, 'api-error-zh');
    await page.click('[data-testid=lang-en]');
    mark = await readyMark(page);
    await page.fill('[data-testid=num-heads]', '4');
    await page.dispatchEvent('[data-testid=num-heads]', 'change');
    await waitReady(page, mark);
    check(!(await page.isVisible('[data-testid=error]')), 'the error clears on the next good run');

    // 7. The scale preset: L = 512, H = 12, within the time bound.
    mark = await readyMark(page);
    const t0 = Date.now();
    await page.selectOption('[data-testid=preset]', 'd');
    const st512 = await waitReady(page, mark, 20000);
    const took = Date.now() - t0;
    check(st512.startsWith('ok') && took < 10000, `preset (d) L = 512 renders in ${took} ms (bound 10000)`);
    const heads = await page.$$eval('[data-testid=head-grid] canvas', (cs) => cs.length);
    check(heads === 13, `preset (d) draws 12 heads and the mean (${heads})`);
    await shot(page, 'preset-d');
    await shot(page, 'preset-d-heatmap', '[data-testid=large-canvas]');

    // 8. Two languages. The table: the same keys and placeholders in both; no English word in
    // the Chinese strings beyond the chapters' own terms.
    const table = await stringTable(page);
    check(!table.error && Object.keys(table.STRINGS.en).length > 0, `the page serves its string table, i18n.js (${table.error || 'it does'})`);
    const enKeys = Object.keys(table.STRINGS.en).sort(), zhKeys = Object.keys(table.STRINGS.zh).sort();
    check(enKeys.join() === zhKeys.join(), `the table has the same ${enKeys.length} keys in English and Chinese`
      + ` (only en: ${enKeys.filter((k) => !zhKeys.includes(k)).join(' ') || '-'}; only zh: ${zhKeys.filter((k) => !enKeys.includes(k)).join(' ') || '-'})`);
    const badPh = enKeys.filter((k) => k in table.STRINGS.zh && table.STRINGS.zh[k] && table.STRINGS.en[k]
      && placeholders(table.STRINGS.en[k]) !== placeholders(table.STRINGS.zh[k]));
    check(badPh.length === 0, `each key has the same placeholders in both languages (${badPh.join(' ') || 'all do'})`);
    const zhEnglish = zhKeys.map((k) => [k, englishWords(table.STRINGS.zh[k])]).filter(([, w]) => w.length);
    check(zhEnglish.length === 0, `no Chinese string keeps an English word (${zhEnglish.map(([k, w]) => `${k}: ${w.join(' ')}`).join('; ') || 'none does'})`);

    // The browser's language decides, unless the URL names one; the URL then records it.
    const langOf = async (locale, query) => {
      const c = await newContext({ viewport: { width: 1280, height: 800 }, locale });
      const p = await c.newPage();
      await p.goto(new URL(query, base).href);
      await p.waitForFunction(() => document.body.dataset.ready);
      const r = {
        html: await p.evaluate(() => document.documentElement.lang), url: new URL(p.url()).searchParams.get('lang'),
        run: (await p.textContent('[data-testid=run]')).trim(),
      };
      await c.close();
      return r;
    };
    let l = await langOf('zh-CN', '');
    check(l.html === 'zh-CN' && l.url === 'zh' && l.run === '运行', `a browser in zh-CN gets the page in Chinese, lang=zh in the URL (${JSON.stringify(l)})`);
    l = await langOf('en-US', '');
    check(l.html === 'en' && l.url === 'en' && l.run === 'Run', `a browser in en-US gets it in English (${JSON.stringify(l)})`);
    l = await langOf('zh-CN', '?lang=en');
    check(l.html === 'en' && l.url === 'en', `lang=en in the URL wins over a zh-CN browser (${JSON.stringify(l)})`);
    l = await langOf('fr-FR', '');
    check(l.html === 'en', `a browser in neither language gets English (${JSON.stringify(l)})`);

    // With ?lang=zh no English is left: every text of the page is a Chinese value of the table
    // (or a number, a symbol, token text); for the seed preset with its step tables, a sentence
    // preset with masks, filter and heads, preset (b), and each choice of the selects. In English
    // likewise every text is an English value: the page has no string outside the table.
    mark = await readyMark(page);
    await page.goto(new URL('?lang=zh&p=a', base).href);
    await page.waitForFunction(() => document.body.dataset.ready);
    check(await page.isVisible('[data-testid=table-softmax]'), 'preset (a) in Chinese shows its step tables');
    await checkLanguage(page, table, 'zh', 'preset (a) in Chinese');
    await shot(page, 'zh-preset-a');
    await page.goto(new URL('?lang=zh&p=c1&causal=top_left&klen=8&f=threshold&fv=0.1', base).href);
    await page.waitForFunction(() => document.body.dataset.ready);
    await checkLanguage(page, table, 'zh', 'preset (c) with masks and a filter in Chinese');
    await page.goto(new URL('?lang=en&p=c1&causal=top_left&klen=8&f=threshold&fv=0.1', base).href);
    await page.waitForFunction(() => document.body.dataset.ready);
    await checkLanguage(page, table, 'en', 'preset (c) with masks and a filter in English');
    await page.goto(new URL('?lang=en&p=a', base).href);
    await page.waitForFunction(() => document.body.dataset.ready);
    await checkLanguage(page, table, 'en', 'preset (a) in English');

    // The switch: from preset (b) in Chinese (its query is 查询, its keys 键 0, 键 1) to English
    // and back; the URL follows, the rest of the state stays.
    await page.goto(new URL('?lang=zh&p=b&klen=2', base).href);
    await page.waitForFunction(() => document.body.dataset.ready);
    const rowLabel = () => page.textContent('[data-testid=table-softmax] tr:nth-of-type(2) th');
    const colLabel = () => page.textContent('[data-testid=table-softmax] tr:first-of-type th:nth-of-type(2)');
    check((await rowLabel()) === '查询' && (await colLabel()) === '键 0', `preset (b) in Chinese names its tokens 查询 and 键 0 (${await rowLabel()}, ${await colLabel()})`);
    check(await page.isVisible('[data-testid=lang-switch]') && (await page.textContent('[data-testid=lang-switch]')).replace(/\s+/g, '') === '中文English',
      'the switch shows 中文 and English');
    mark = await readyMark(page);
    await page.click('[data-testid=lang-en]');
    await waitReady(page, mark);
    let u = new URL(page.url()).searchParams;
    check(u.get('lang') === 'en' && u.get('p') === 'b' && u.get('klen') === '2', `the switch to English puts lang=en in the URL and keeps the state (${u})`);
    check((await page.textContent('[data-testid=run]')) === 'Run' && (await rowLabel()) === 'query'
      && await page.evaluate(() => document.documentElement.lang) === 'en'
      && (await page.getAttribute('[data-testid=lang-en]', 'aria-pressed')) === 'true',
      `after the switch the page is in English (${await page.textContent('[data-testid=run]')}, ${await rowLabel()})`);
    await checkLanguage(page, table, 'en', 'preset (b) after switching to English');
    mark = await readyMark(page);
    await page.click('[data-testid=lang-zh]');
    await waitReady(page, mark);
    u = new URL(page.url()).searchParams;
    check(u.get('lang') === 'zh' && (await page.textContent('[data-testid=run]')) === '运行' && (await rowLabel()) === '查询',
      `and back to Chinese, lang=zh in the URL (${u})`);
    // On a sentence preset the switch runs the sentence's twin in the other language
    // (twins.js): the selected head stays.
    await page.goto(new URL('?lang=zh&p=c1&head=2', base).href);
    await page.waitForFunction(() => document.body.dataset.ready);
    const zhTitle = await page.textContent('[data-testid=large-title]');
    mark = await readyMark(page);
    await page.click('[data-testid=lang-en]');
    await waitReady(page, mark);
    const enTitle = await page.textContent('[data-testid=large-title]');
    check(zhTitle.startsWith('structure 结构 · 最大值') && enTitle.startsWith('structure · max') && new URL(page.url()).searchParams.get('head') === '2'
      && (await page.inputValue('[data-testid=text]')).startsWith('The programmer sent'),
    `the selected head's title follows the language, and the sentence is its English twin (${zhTitle} / ${enTitle})`);

    // 9. Large font on a 1024x768 projector. The labels are read from what the page drew
    // (recordCanvasText), the box from the layout.
    const proj = await newContext({ viewport: { width: 1024, height: 768 }, locale: 'zh-CN', deviceScaleFactor: 1 });
    await proj.addInitScript(recordCanvasText);
    const pp = await proj.newPage();
    const c1 = ['程序员', '把', '服务器日志', '发给', '同事', '，', '因为', '它', '记录了', '错误原因', '。'];
    const c3 = ['小王', '昨天', '提交了', '补丁', '，', '因为', '他', '发现', '缓存模块', '在', '高并发', '下', '会', '返回', '旧数据', '。'];
    const cases = [
      { what: 'preset (c), L = 10, zh', url: '?lang=zh&p=c1&causal=top_left&f=topk&fv=2&large=1', tokens: withStart('zh', c1), c1: true, normal: '?lang=zh&p=c1&causal=top_left&f=topk&fv=2&large=0' },
      { what: 'the 小王 sentence, L = 16, zh', ...sixteenTokens('zh', true), normal: sixteenTokens('zh', false).url },
      { what: 'the 小王 sentence, L = 16, en', ...sixteenTokens('en', true) },
      // The lesson model's named heads take a second line under their tiles (the gloss).
      { what: 'the lesson model\'s 小王 preset, L = 16, zh', url: '?lang=zh&p=c3&large=1&head=3', tokens: withStart('zh', c3) },
      { what: 'the lesson model\'s 小王 preset with both experiments run, L = 16, zh', url: '?lang=zh&p=c3&large=1&head=3&e1=1&e3=2', tokens: withStart('zh', c3) },
    ];
    for (const cs of cases) {
      await pp.goto(new URL(cs.url, base).href);
      await pp.waitForFunction(() => document.body.dataset.ready);
      const st = await pp.getAttribute('[data-testid=status]', 'data-kind');
      const geom = JSON.parse(await pp.getAttribute('[data-testid=large-canvas]', 'data-geom'));
      const bb = await pp.locator('[data-testid=large-canvas]').boundingBox();
      const scrollY = await pp.evaluate(() => window.scrollY);
      check(st === 'ok' && scrollY === 0 && bb.x >= 0 && bb.y >= 0 && bb.x + bb.width <= 1024 && bb.y + bb.height <= 768,
        `${cs.what}: the heatmap with its labels lies within the first screen of 1024x768 (box ${Math.round(bb.x)},${Math.round(bb.y)} to ${Math.round(bb.x + bb.width)},${Math.round(bb.y + bb.height)})`);
      const all = await drawnLabels(pp, 'large');
      const { cssW, cssH } = all.pop();
      const left = all.filter((x) => x.x1 <= geom.labW + 0.5).sort((a, b) => a.y0 - b.y0);
      const top = all.filter((x) => x.x1 > geom.labW + 0.5).sort((a, b) => a.x0 - b.x0);
      check(left.map((x) => x.text).join('|') === cs.tokens.join('|') && left.every((x) => x.angle === 0),
        `${cs.what}: every query token is drawn on the left axis, horizontal (${left.map((x) => `${x.text}@${x.angle}°`).join(' ')})`);
      check(top.map((x) => x.text).join('|') === cs.tokens.join('|'),
        `${cs.what}: every key token is drawn on the top axis (${top.map((x) => `${x.text}@${x.angle}°`).join(' ')})`);
      const small = all.filter((x) => x.size < 14);
      check(all.length && !small.length, `${cs.what}: every label on the heatmap is >= 14 CSS px (${Math.min(...all.map((x) => x.size)).toFixed(1)} px at least${small.length ? `; ${small.map((x) => x.text).join(' ')} smaller` : ''})`);
      const out = all.filter((x) => x.x0 < -0.5 || x.y0 < -0.5 || x.x1 > cssW + 0.5 || x.y1 > cssH + 0.5);
      check(!out.length, `${cs.what}: no label is clipped: each lies inside the ${Math.round(cssW)}x${Math.round(cssH)} canvas (${out.map((x) => x.text).join(' ') || 'all do'})`);
      const lines = await drawnLabels(pp, 'lines');
      lines.pop();
      check(lines.length >= 2 * cs.tokens.length && lines.every((x) => x.size >= 14),
        `${cs.what}: the line view's labels are >= 14 CSS px too (${Math.min(...lines.map((x) => x.size)).toFixed(1)} px)`);
      if (cs.normal) { // the same labels without large font: the canvases' text scales with the font
        await pp.goto(new URL(cs.normal, base).href);
        await pp.waitForFunction(() => document.body.dataset.ready);
        const normal = (await drawnLabels(pp, 'large')).slice(0, -1);
        // Label by label: a punctuation token is drawn larger than a word at either size.
        const grow = normal.map((x) => [x, all.find((y) => y.text === x.text)]).filter(([, y]) => y);
        const k = grow.length ? Math.min(...grow.map(([x, y]) => y.size / x.size)) : 0;
        const n = Math.max(...normal.map((x) => x.size)), lg = Math.min(...all.map((x) => x.size));
        check(grow.length === normal.length && k >= 1.3, `${cs.what}: large font enlarges each of the heatmap's labels, by ${k.toFixed(2)} at least (${n.toFixed(1)} px at most -> ${lg.toFixed(1)} px at least)`);
      }
      if (cs.c1) {
        await pp.goto(new URL(cs.url, base).href);
        await pp.waitForFunction(() => document.body.dataset.ready);
        // Masked cells against weight 0 (the scale's first colour), on a projector: contrast >= 2.
        const masked = await cellMean(pp, 0, 9);
        const zero = await pp.evaluate(() => Array.from(document.querySelector('[data-testid=scale] canvas').getContext('2d').getImageData(0, 0, 1, 1).data.slice(0, 3)));
        const cr = contrast(masked, zero);
        check(cr >= 2, `a masked cell (mean rgb ${masked.map(Math.round).join(',')}) stands apart from weight 0 (rgb ${zero.join(',')}): contrast ${cr.toFixed(2)} >= 2`);
        // The tooltip and the heads' names follow the font as well.
        const g2 = JSON.parse(await pp.getAttribute('[data-testid=large-canvas]', 'data-geom'));
        const b2 = await pp.locator('[data-testid=large-canvas]').boundingBox();
        await pp.mouse.move(b2.x + g2.labW + (1.5 + S0) * g2.cell, b2.y + g2.labH + (7.5 + S0) * g2.cell);
        await pp.waitForSelector('[data-testid=tooltip]:not([hidden])', { timeout: 3000 });
        const tipFont = await pp.evaluate(() => parseFloat(getComputedStyle(document.querySelector('[data-testid=tooltip]')).fontSize));
        const tipText = await pp.textContent('[data-testid=tooltip]');
        const tb = await pp.locator('[data-testid=tooltip]').boundingBox();
        check(tipFont >= 14 && tipText.startsWith('查询「它」→ 键「把」：权重') && tb.x + tb.width <= 1024,
          `the tooltip is >= 14 px, in Chinese, on screen (${tipFont} px: ${tipText})`);
        const capFont = await pp.evaluate(() => parseFloat(getComputedStyle(document.querySelector('[data-testid=head-1] div')).fontSize));
        check(capFont >= 14, `the heads' names are >= 14 px (${capFont} px)`);
        await pp.mouse.move(0, 0);
        await shot(pp, 'projector-zh');
      }
    }
    // Fast enough for the 512-token preset with large font too.
    mark = await readyMark(pp);
    const t512 = Date.now();
    await pp.goto(new URL('?lang=zh&p=d&params=init:random&h=12&seed=7&large=1', base).href);
    await pp.waitForFunction(() => document.body.dataset.ready, null, { timeout: 20000 });
    const took512 = Date.now() - t512;
    const ticks = (await drawnLabels(pp, 'large')).slice(0, -1);
    check((await pp.getAttribute('[data-testid=status]', 'data-kind')) === 'ok' && took512 < 10000 && ticks.length > 4
      && ticks.every((x) => x.size >= 14 && /^\d+$/.test(x.text)),
      `preset (d) with large font renders in ${took512} ms with ${ticks.length} position ticks >= 14 px`);
    await shot(pp, 'projector-512');
    await proj.close();

    // 10. The README's pictures are the ones make screenshots produces: the manifest names each
    // shot as shots.mjs defines it, each file is the one it hashed, the page's inputs are the
    // ones it hashed (else they are stale), the README shows them at the top of its visualizer
    // section, and rendering each state again gives the same picture.
    const docs = join(ROOT, 'docs');
    let manifest = null;
    try { manifest = JSON.parse(readFileSync(join(docs, 'screenshots.json'), 'utf8')); } catch (e) { console.error(String(e)); }
    check(manifest !== null, 'docs/screenshots.json exists');
    if (manifest) {
      check(manifest.inputs && manifest.inputs.sha256 === inputsHash(),
        'the screenshots are not stale: web/ and shots.mjs are as when make screenshots ran (else run make screenshots and commit docs/)');
      const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
      const sect = readme.split(/^## /m).find((x) => x.startsWith('The visualizer'));
      const head = sect ? sect.split('\n\n').slice(1, 2).join('\n') : '';
      const sbrowser = await launchShotBrowser();
      try {
        for (const shot of SHOTS) {
          const m = manifest.shots.find((x) => x.file === shot.file);
          check(m && m.url === `/${shot.url}` && JSON.stringify(m.viewport) === JSON.stringify(shot.viewport)
            && m.fullPage === shot.fullPage && m.deviceScaleFactor === DEVICE_SCALE_FACTOR,
          `${shot.file}: the manifest records it as shots.mjs defines it`);
          const file = join(docs, shot.file);
          const png = existsSync(file) ? readFileSync(file) : null;
          check(png && m && sha256(png) === m.sha256 && png.length <= 400 * 1024,
            `${shot.file}: the committed file is the one make screenshots wrote, ${png ? png.length : 0} bytes (at most 400 KiB)`);
          check(head.includes(`](docs/${shot.file})`), `${shot.file}: README shows it at the top of "The visualizer"`);
          if (!png) continue;
          const again = await renderShot(sbrowser.browser, base, shot);
          writeFileSync(join(outDir, `again-${shot.file}`), again);
          const cmp = await compareImages(page, png, again);
          check(cmp.sameSize && cmp.differ <= cmp.blocks * 0.005,
            `${shot.file}: rendering its state again gives the same picture (${cmp.sameSize ? `${cmp.size.join('x')}, ${cmp.differ} of ${cmp.blocks} 8x8 blocks differ, ${(cmp.identical * 100).toFixed(2)}% of bytes identical` : `sizes ${cmp.a} and ${cmp.b}`})`);
        }
      } finally {
        await sbrowser.close();
      }
    }

    check(foreign.length === 0, `the page fetched nothing but attnd (${foreign.join(', ') || 'none'})`);
    // The deliberate 400 of step 6 is logged by the browser as a failed load; nothing else may be.
    const unexpected = consoleErrors.filter((m) => !/status of 400/.test(m));
    check(unexpected.length === 0, `no console errors (${unexpected.join('; ') || 'none'})`);
  } finally {
    if (browser) await browser.close();
    proc.kill('SIGTERM');
  }
  finish('visualizer');
}

main().catch((e) => { console.error(e); process.exit(1); });
