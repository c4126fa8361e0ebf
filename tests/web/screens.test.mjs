// Browser tests of the visualizer's exports and screens (issue 26, sections 3 and 4):
// playwright-core drives Debian's chromium (headless) against a live attnd on an ephemeral
// loopback port, with every request that is not to attnd refused (the page must work offline).
// It checks the export files (a PNG that decodes, an SVG that parses and carries the weights'
// colours, JSON equal to the API's answer), the call as curl, Python and JavaScript run against
// the server, the page offline, the favicon, no sideways scroll on a phone and on a projector in
// large font, no table wider than its card, the axis titles, the colour scale's switch,
// punctuation tokens drawn apart, a failed run greying out the last result, and no console
// errors. Exits non-zero on any failed check.
//
// Usage: node tests/web/screens.test.mjs ATTND_BINARY OUTPUT_DIR

import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS, ROOT, startAttnd } from './shots.mjs';

const [attndBin, outDir] = process.argv.slice(2);
if (!attndBin || !outDir) {
  console.error('usage: screens.test.mjs ATTND_BINARY OUTPUT_DIR');
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });

let failures = 0, checks = 0;
function check(ok, what) {
  checks++;
  if (!ok) { failures++; console.error(`FAIL: ${what}`); } else console.log(`ok: ${what}`);
}

// Runs cmd with args, input on its standard input; resolves with its standard output.
const run = (cmd, args, input) => new Promise((resolve) => {
  const p = execFile(cmd, args, { timeout: 30000, maxBuffer: 64 << 20 }, (err, stdout, stderr) => resolve({ err, stdout, stderr }));
  p.stdin.end(input);
});

// An answer of the API without its timings (usage.*_ms), which differ from call to call.
function untimed(r) {
  const c = JSON.parse(JSON.stringify(r));
  if (c && c.usage) for (const k of Object.keys(c.usage)) if (k.endsWith('_ms')) delete c.usage[k];
  return c;
}
const sameJson = (a, b) => JSON.stringify(untimed(a)) === JSON.stringify(untimed(b));

// Records every fillText with its font, before the page's scripts run.
function recordCanvasText() {
  window.__text = [];
  const fill = CanvasRenderingContext2D.prototype.fillText;
  CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
    window.__text.push({ canvas: this.canvas.id, text: String(text), font: this.font });
    return fill.call(this, text, ...rest);
  };
}

async function main() {
  const { proc, base } = await startAttnd(attndBin);
  let browser;
  try {
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
    const consoleErrors = [], foreign = [], failed = [];
    // A context whose pages may fetch nothing but attnd: any other request is refused and
    // recorded, as are console errors and answers of 400 and above.
    const newContext = async (opts) => {
      const c = await browser.newContext({ acceptDownloads: true, ...opts });
      c.on('page', (p) => {
        p.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(`${p.url()}: ${m.text()}`); });
        p.on('pageerror', (e) => consoleErrors.push(String(e)));
        p.on('response', (r) => { if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`); });
      });
      await c.route((url) => !url.href.startsWith(base), (route) => { foreign.push(route.request().url()); route.abort(); });
      await c.addInitScript(recordCanvasText);
      return c;
    };
    const open = async (p, query) => {
      await p.goto(new URL(query, base).href);
      await p.waitForFunction(() => document.body.dataset.ready, null, { timeout: 20000 });
    };
    const mark = (p) => p.evaluate(() => document.body.dataset.ready || '');
    const waitRun = (p, before) => p.waitForFunction((b) => document.body.dataset.ready !== b, before, { timeout: 20000 });
    const strings = async (p) => p.evaluate(async () => (await import(new URL('i18n.js', location.href).href)).STRINGS);
    const apiPost = async (path, body) => (await fetch(new URL(path, base), {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    })).json();
    const sentRequest = async (p) => JSON.parse((await p.textContent('[data-testid=request-json]')).split('\n').slice(1).join('\n'));
    const download = async (p, testid) => {
      const [dl] = await Promise.all([p.waitForEvent('download', { timeout: 15000 }), p.click(`[data-testid=${testid}]`)]);
      return { name: dl.suggestedFilename(), bytes: readFileSync(await dl.path()) };
    };

    // ---- 1. Offline, and the favicon --------------------------------------------------------
    const ctx = await newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
    const page = await ctx.newPage();
    const requested = [];
    page.on('request', (r) => requested.push(r.url()));
    await open(page, '?lang=en&p=c1&head=3');
    const STR = await strings(page);
    check(foreign.length === 0 && requested.every((u) => u.startsWith(base) || /^(data|blob):/.test(u)),
      `offline: the page asks attnd alone for everything it needs (${requested.length} requests; elsewhere: ${foreign.join(', ') || 'none'})`);
    check((await page.getAttribute('[data-testid=status]', 'data-kind')) === 'ok', 'offline: the lesson sentence runs');
    const staticText = ['web/index.html', 'web/style.css'].map((f) => readFileSync(join(ROOT, f), 'utf8')).join('\n');
    check(!/https?:\/\/|@import|url\(/.test(staticText), 'index.html and style.css name no outside address, import or url() (no CDN, no font)');
    const icon = await page.evaluate(async () => {
      const link = document.querySelector('link[rel=icon]');
      if (!link) return { href: null };
      const r = await fetch(link.href), text = await r.text();
      const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
      return { href: link.getAttribute('href'), status: r.status, type: r.headers.get('content-type'), svg: doc.documentElement.nodeName,
        error: !!doc.querySelector('parsererror'), text };
    });
    // /favicon.ico from node: playwright's routing fails a page's own fetch of that path.
    const ico = await fetch(new URL('favicon.ico', base));
    Object.assign(icon, { ico: ico.status, icoType: ico.headers.get('content-type'), same: (await ico.text()) === icon.text });
    check(icon.status === 200 && icon.type === 'image/svg+xml' && icon.svg === 'svg' && !icon.error,
      `the favicon (${icon.href}) is served by attnd as an SVG that parses (${icon.status} ${icon.type})`);
    check(icon.ico === 200 && icon.same && icon.icoType === 'image/svg+xml', `/favicon.ico answers 200 with the same icon (${icon.ico} ${icon.icoType})`);

    // ---- 2. Exports of the lesson sentence, coreference selected --------------------------------
    const req = await sentRequest(page);
    const apiAnswer = await apiPost('v1/attention', req);
    const tokens = apiAnswer.tokens.map((x, j) => (j === 0 ? STR.en['tok.start'] : x));
    const reqFile = await download(page, 'export-request');
    const respFile = await download(page, 'export-response');
    const respJson = JSON.parse(respFile.bytes.toString('utf8'));
    check(JSON.stringify(JSON.parse(reqFile.bytes.toString('utf8'))) === JSON.stringify(req) && /\.json$/.test(reqFile.name),
      `the request's JSON (${reqFile.name}) is the request the page sent`);
    check(sameJson(respJson, apiAnswer) && /\.json$/.test(respFile.name),
      `the response's JSON (${respFile.name}, ${respFile.bytes.length} bytes) equals what /v1/attention answers to that request`);

    // The SVG parses, carries the head's name, the axis titles and every token, and its cells
    // have the colours of the API's weights on the scale from 0 to 1.
    const svgFile = await download(page, 'export-heat-svg');
    writeFileSync(join(outDir, svgFile.name), svgFile.bytes);
    const svg = await page.evaluate(async ([src, w]) => {
      const { colour } = await import(new URL('heatmap.js', location.href).href);
      const doc = new DOMParser().parseFromString(src, 'image/svg+xml');
      const cells = [...doc.querySelectorAll('g[shape-rendering] rect')];
      const n = w.length, bad = [];
      cells.forEach((r, k) => {
        const want = `rgb(${colour(w[Math.floor(k / n)][k % n]).join(',')})`;
        if (r.getAttribute('fill') !== want) bad.push(`${Math.floor(k / n)},${k % n}: ${r.getAttribute('fill')} != ${want}`);
      });
      const img = new Image();
      img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(src)}`;
      let decodes = true;
      try { await img.decode(); } catch { decodes = false; }
      return { error: !!doc.querySelector('parsererror'), root: doc.documentElement.nodeName, texts: [...doc.querySelectorAll('text')].map((x) => x.textContent),
        rotatedTitles: [...doc.querySelectorAll('text')].filter((x) => /^(query|key) /.test(x.textContent) && x.getAttribute('transform')).length,
        title: doc.querySelector('title').textContent, cells: cells.length, bad, decodes, w: img.width, h: img.height };
    }, [svgFile.bytes.toString('utf8'), apiAnswer.weights[3]]);
    check(!svg.error && svg.root === 'svg' && svg.decodes && svg.w > 200 && svg.h > 200,
      `the heatmap's SVG (${svgFile.name}) parses and draws as an image (${svg.w}x${svg.h})`);
    check(svg.title.startsWith('coreference') && svg.texts.includes('query ↓') && svg.texts.includes('key →') && svg.rotatedTitles === 0
      && tokens.every((x) => svg.texts.filter((s) => s === x).length >= 2),
    `the SVG carries the head's name, the axis titles (horizontal) and every token on both axes (${svg.title})`);
    check(svg.cells === tokens.length ** 2 && svg.bad.length === 0,
      `the SVG's ${svg.cells} cells have the colours of the API's weights on 0 to 1 (${svg.bad.slice(0, 3).join('; ') || 'all do'})`);
    // The PNGs decode, are not blank, and are the SVGs' size at twice the pixels.
    const decode = (bytes) => page.evaluate(async (b64) => {
      const img = new Image();
      img.src = `data:image/png;base64,${b64}`;
      await img.decode();
      const c = document.createElement('canvas');
      c.width = img.width; c.height = img.height;
      const x = c.getContext('2d');
      x.drawImage(img, 0, 0);
      const d = x.getImageData(0, 0, c.width, c.height).data;
      let s = 0, q = 0, n = 0;
      for (let i = 0; i < d.length; i += 4 * 5) { const g = (d[i] + d[i + 1] + d[i + 2]) / 3; s += g; q += g * g; n++; }
      return { w: img.width, h: img.height, sd: Math.sqrt(q / n - (s / n) ** 2) };
    }, bytes.toString('base64'));
    for (const kind of ['heat', 'lines']) {
      const png = await download(page, `export-${kind}-png`);
      writeFileSync(join(outDir, png.name), png.bytes);
      const sig = png.bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
      const d = await decode(png.bytes);
      check(sig && d.w > 300 && d.h > 200 && d.sd > 10, `the ${kind} PNG (${png.name}) decodes, ${d.w}x${d.h}, not blank (sd ${d.sd.toFixed(1)})`);
    }
    const linesSvg = await download(page, 'export-lines-svg');
    const ls = await page.evaluate((src) => {
      const doc = new DOMParser().parseFromString(src, 'image/svg+xml');
      return { error: !!doc.querySelector('parsererror'), lines: doc.querySelectorAll('line').length, texts: [...doc.querySelectorAll('text')].map((x) => x.textContent) };
    }, linesSvg.bytes.toString('utf8'));
    check(!ls.error && ls.lines > 0 && ls.texts.includes('query') && ls.texts.includes('key') && tokens.every((x) => ls.texts.includes(x)),
      `the lines' SVG parses, with ${ls.lines} lines, both axis titles and every token`);

    // ---- 3. The call: curl, Python and JavaScript, each run against the server ----------------
    const callOf = async (p, which) => { await p.click(`[data-testid=call-${which}]`); return p.textContent('[data-testid=call-code]'); };
    const runners = {
      curl: (code) => run('bash', ['-s'], code),
      python: (code) => run('/usr/bin/python3', ['-'], code),
      js: (code) => run(process.execPath, ['--input-type=module', '-'], code),
    };
    const calls = async (p, what, path) => {
      const body = await sentRequest(p);
      const want = await apiPost(path, body);
      for (const [which, go] of Object.entries(runners)) {
        const code = await callOf(p, which);
        const r = await go(code);
        let got = null;
        try { got = JSON.parse(r.stdout); } catch { /* not JSON */ }
        check(!r.err && got && sameJson(got, want) && code.includes(new URL(path, base).href),
          `${what}: the ${which} call, run as shown, gets the same answer from ${path} (${r.err ? `${r.err.message} ${r.stderr}` : `${r.stdout.length} bytes`})`);
      }
    };
    await calls(page, 'the lesson sentence', 'v1/attention');
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base.replace(/\/$/, '') });
    await page.click('[data-testid=call-copy]');
    const clip = await page.evaluate(() => navigator.clipboard.readText());
    check(clip === (await page.textContent('[data-testid=call-code]')) && (await page.textContent('[data-testid=call-copied]')) === STR.en['call.copied'],
      'Copy puts the call shown on the clipboard');
    await open(page, '?lang=en&p=a');
    await calls(page, 'preset (a)', 'v1/sdpa');
    await open(page, '?lang=en&p=random&L=6&E=16&rseed=2&params=init:random&h=4&causal=top_left');
    await calls(page, 'random embeddings with a causal mask', 'v1/attention');

    // ---- 4. The colour scale ---------------------------------------------------------------
    const scaleTop = (p) => p.textContent('[data-testid=scale-top]');
    const cellRgb = (p, i, j) => p.evaluate(([ci, cj]) => {
      const cv = document.querySelector('[data-testid=large-canvas]'), g = JSON.parse(cv.dataset.geom);
      const d = cv.getContext('2d').getImageData(Math.floor((g.labW + (cj + 0.5) * g.cell) * g.dpr), Math.floor((g.labH + (ci + 0.5) * g.cell) * g.dpr), 1, 1).data;
      return Array.from(d.slice(0, 3));
    }, [i, j]);
    const colourOf = (p, x) => p.evaluate(async (w) => (await import(new URL('heatmap.js', location.href).href)).colour(w), x);
    await open(page, '?lang=en&p=a');
    const w00 = (await apiPost('v1/sdpa', await sentRequest(page))).weights[0][0][0][0];
    const unit = await cellRgb(page, 0, 0);
    check((await page.inputValue('[data-testid=colour-scale]')) === 'unit' && (await scaleTop(page)) === '1'
      && unit.join() === (await colourOf(page, w00)).join(),
    `preset (a) is on the scale from 0 to 1 by default: weight ${w00.toFixed(3)} is drawn rgb(${unit}), not as full attention`);
    await page.selectOption('[data-testid=colour-scale]', 'max');
    await page.waitForFunction(() => document.querySelector('[data-testid=scale-top]').textContent !== '1');
    const own = await cellRgb(page, 0, 0);
    check(own.join() === (await colourOf(page, 1)).join() && (await scaleTop(page)) === w00.toFixed(3)
      && new URL(page.url()).searchParams.get('cs') === 'max',
    `switched to each map's own maximum, the same cell is the scale's darkest (rgb(${own})), the legend's top ${await scaleTop(page)}, cs=max in the URL`);
    await page.reload();
    await page.waitForFunction(() => document.body.dataset.ready);
    check((await page.inputValue('[data-testid=colour-scale]')) === 'max' && (await cellRgb(page, 0, 0)).join() === own.join(), 'a link keeps the colour scale');
    await open(page, '?lang=en&p=random&L=6&rseed=2');
    check((await page.inputValue('[data-testid=colour-scale]')) === 'max', 'random embeddings are on their own maximum by default');
    await open(page, '?lang=en&p=c2');
    check((await page.inputValue('[data-testid=colour-scale]')) === 'unit', 'the lesson model\'s sentences are on 0 to 1 by default');

    // ---- 5. Axis titles -------------------------------------------------------------------
    const axes = (p) => p.evaluate(() => {
      const box = (id) => { // where the title's text is drawn
        const el = document.querySelector(`[data-testid=${id}]`), r = document.createRange();
        r.selectNodeContents(el);
        const b = r.getBoundingClientRect();
        return { text: el.textContent, vis: el.checkVisibility() && b.width > 0, l: b.left, r: b.right, t: b.top, b: b.bottom };
      };
      const cv = document.querySelector('[data-testid=large-canvas]'), g = JSON.parse(cv.dataset.geom), c = cv.getBoundingClientRect();
      const lc = document.querySelector('[data-testid=lines-canvas]'), lb = lc.getBoundingClientRect();
      return { key: box('axis-key'), query: box('axis-query'), lq: box('lines-axis-query'), lk: box('lines-axis-key'),
        cells: { l: c.left + g.labW, r: c.left + g.labW + g.s * g.cell, t: c.top + g.labH, b: c.top + g.labH + g.l * g.cell, top: c.top },
        lines: { l: lb.left, t: lb.top, tw: Number(lc.dataset.tw), gap: Number(lc.dataset.gap) },
        grid: box('axis-grid') };
    });
    for (const [lang, q] of [['zh', '?lang=zh&p=c1&head=3'], ['en', '?lang=en&p=a'], ['zh', '?lang=zh&p=c1&large=1']]) {
      await open(page, q);
      const a = await axes(page);
      check(a.key.vis && a.key.text === STR[lang]['axis.key'] && a.key.b <= a.cells.top + 1 && Math.abs(a.key.l + a.key.r - a.cells.l - a.cells.r) / 2 < 4,
        `${q}: the heatmap's key axis is titled ${a.key.text}, above the middle of its columns`);
      check(a.query.vis && a.query.text === STR[lang]['axis.query'] && a.query.r <= a.cells.l && Math.abs(a.query.t + a.query.b - a.cells.t - a.cells.b) / 2 < 4,
        `${q}: its query axis is titled ${a.query.text}, beside the middle of its rows`);
      check(a.lq.vis && a.lk.vis && a.lq.text === STR[lang]['axis.query'] && a.lk.text === STR[lang]['axis.key']
        && a.lq.b <= a.lines.t + 1 && a.lk.b <= a.lines.t + 1 && a.lq.r <= a.lines.l + a.lines.tw + 1 && a.lk.l >= a.lines.l + a.lines.tw + a.lines.gap,
      `${q}: the lines are titled ${a.lq.text} over the queries and ${a.lk.text} over the keys`);
      if (!q.includes('large')) check(a.grid.vis && a.grid.text === STR[lang]['axis.grid'], `${q}: the heads' maps say which axis is which (${a.grid.text})`);
    }
    await open(page, '?lang=zh&p=c5&e3=2');
    await page.waitForSelector('[data-testid=exp3-map-off]', { timeout: 15000 });
    const e3axes = await page.$$eval('[data-testid^=exp3-map-] [data-testid=axis-grid]', (xs) => xs.map((x) => x.textContent));
    check(e3axes.length === 2 && e3axes.every((x) => x === STR.zh['axis.grid']), `实验三's heatmaps say which axis is which (${e3axes.join(', ')})`);

    // ---- 6. Punctuation tokens ------------------------------------------------------------
    const punct = ['"', '”', ',', '，', '.', '。'];
    const json = JSON.stringify({ tokens: ['word', ...punct], embeddings: Array.from({ length: 7 }, (_, i) => [i % 2, 1, (i * 3) % 5, 1]) });
    await open(page, `?lang=en&p=custom&params=init:identity&h=1&json=${encodeURIComponent(json)}`);
    const drawn = await page.evaluate(() => window.__text.filter((x) => x.canvas === 'large'));
    const sizeOf = (x) => ({ px: parseFloat(x.font.match(/([\d.]+)px/)[1]), bold: /bold/.test(x.font) });
    const word = drawn.filter((x) => x.text === 'word').map(sizeOf), marks = drawn.filter((x) => punct.includes(x.text)).map(sizeOf);
    check(word.length && marks.length >= punct.length && marks.every((m) => m.bold && m.px >= 1.4 * word[0].px),
      `punctuation tokens are drawn bold at ${marks.length ? Math.min(...marks.map((m) => m.px)).toFixed(1) : '-'} px against ${word.length ? word[0].px.toFixed(1) : '-'} px for a word`);
    const th = await page.$$eval('[data-testid=table-softmax] tr:first-of-type th', (ths) => ths.slice(1).map((x) => ({ t: x.textContent, p: x.classList.contains('punct'), px: parseFloat(getComputedStyle(x).fontSize) })));
    check(th.length === 7 && th.every((x) => x.p === punct.includes(x.t)) && th.filter((x) => x.p).every((x) => x.px >= 1.3 * th[0].px),
      `and the tables mark them larger (${th.map((x) => `${x.t} ${x.px}px`).join(', ')})`);

    // ---- 7. A failed run greys out the last result ----------------------------------------
    await open(page, '?lang=en&p=c1');
    let m = await mark(page);
    await page.fill('[data-testid=text]', '程序员把服务器日志发给外星人。');
    await page.press('[data-testid=text]', 'Enter');
    await waitRun(page, m);
    const stale = await page.evaluate(() => ({
      kind: document.querySelector('[data-testid=status]').dataset.kind, stale: document.getElementById('views').dataset.stale,
      opacity: Number(getComputedStyle(document.getElementById('heads-section')).opacity),
      pair: Number(getComputedStyle(document.querySelector('.pair')).opacity),
      error: document.getElementById('error').checkVisibility(), errorOpacity: Number(getComputedStyle(document.getElementById('error')).opacity),
      note: document.querySelector('[data-testid=stale-note]').checkVisibility(),
      disabled: [...document.querySelectorAll('[data-export], #call-copy')].every((b) => b.disabled),
      code: document.querySelector('[data-testid=call-code]').textContent,
    }));
    check(stale.kind === 'error' && stale.stale === 'true' && stale.opacity < 0.5 && stale.pair < 0.5 && stale.error && stale.errorOpacity === 1 && stale.note,
      `an unknown word: the error shows, and the last result is greyed out under it (opacity ${stale.opacity}) with a line saying so`);
    check(stale.disabled && stale.code === '', 'and the greyed-out result cannot be exported, nor its call copied');
    await page.screenshot({ path: join(outDir, 'stale.png'), fullPage: true });
    m = await mark(page);
    await page.fill('[data-testid=text]', '程序员把服务器日志发给同事。');
    await page.press('[data-testid=text]', 'Enter');
    await waitRun(page, m);
    check((await page.getAttribute('#views', 'data-stale')) === 'false'
      && Number(await page.evaluate(() => getComputedStyle(document.getElementById('heads-section')).opacity)) === 1
      && !(await page.isDisabled('[data-testid=export-heat-png]')), 'the next good run shows its result in full again');
    await ctx.close();

    // ---- 8. Every screen: a phone, and a projector in large font --------------------------
    // The document is no wider than the window; the language switch shows both names whole; a
    // table or code block wider than its card scrolls in a box of its own within the card.
    const layout = (p) => p.evaluate(() => {
      const out = { docW: document.documentElement.scrollWidth, vw: window.innerWidth, vh: window.innerHeight, spill: [] };
      const sw = document.querySelector('[data-testid=lang-switch]').getBoundingClientRect();
      out.lang = [...document.querySelectorAll('[data-lang]')].map((b) => {
        const r = document.createRange(); r.selectNodeContents(b);
        const t = r.getBoundingClientRect(), bb = b.getBoundingClientRect();
        return { text: b.textContent, whole: t.width <= bb.width && bb.right <= sw.right + 0.5 && bb.left >= sw.left - 0.5, on: bb.left >= 0 && bb.right <= window.innerWidth && bb.top >= 0 };
      });
      for (const el of document.querySelectorAll('#views table, #views pre, aside pre')) {
        if (!el.checkVisibility()) continue;
        const card = el.closest('#views > section, .pair > div, aside');
        const cb = card.getBoundingClientRect();
        if (el.getBoundingClientRect().right <= cb.right + 0.5) continue;
        let box = el.parentElement, ok = getComputedStyle(el).overflowX !== 'visible' && el.clientWidth <= cb.width;
        while (!ok && box && box !== card) {
          if (/auto|scroll/.test(getComputedStyle(box).overflowX) && box.getBoundingClientRect().right <= cb.right + 0.5) ok = true;
          box = box.parentElement;
        }
        if (!ok) out.spill.push(el.id || el.dataset.testid || el.tagName);
      }
      const lg = document.querySelector('[data-testid=large-canvas]').getBoundingClientRect();
      out.heat = { top: lg.top + window.scrollY, bottom: lg.bottom + window.scrollY };
      return out;
    });
    const screens = [
      { vp: { width: 390, height: 844 }, what: 'a phone', queries: ['', '?p=c1&head=3', '?lang=en&p=a', '?p=c3&e1=1&e3=2', '?lang=en&p=random&L=24'] },
      { vp: { width: 1024, height: 768 }, what: 'a projector in large font', queries: ['?large=1', '?lang=zh&p=c1&head=3&large=1', '?lang=en&p=a&large=1', '?lang=zh&p=c3&large=1&e1=1&e3=2', '?lang=en&p=random&L=24&large=1'] },
    ];
    for (const sc of screens) {
      const c = await newContext({ viewport: sc.vp, locale: 'zh-CN' });
      const p = await c.newPage();
      for (const q of sc.queries) {
        await open(p, q);
        if (q.includes('e3=2')) await p.waitForSelector('[data-testid=exp3-map-off]', { timeout: 15000 });
        const l = await layout(p);
        const tag = `${sc.vp.width}x${sc.vp.height} ${sc.what}, ${q || 'a first visit'}`;
        check(l.docW <= l.vw, `${tag}: the document is no wider than the window (${l.docW} <= ${l.vw})`);
        check(l.spill.length === 0, `${tag}: no table or code block is wider than its card (${l.spill.join(', ') || 'none is'})`);
        check(l.lang.length === 2 && l.lang.every((b) => b.whole && b.on), `${tag}: the language switch shows ${l.lang.map((b) => b.text).join(' and ')} whole, on screen`);
        if (sc.vp.width === 390) check(l.heat.top < l.vh, `${tag}: the heatmap starts on the first screen (at ${Math.round(l.heat.top)} of ${l.vh} px)`);
      }
      if (sc.vp.width === 390) {
        await open(p, '');
        check((await p.evaluate(() => document.documentElement.lang)) === 'zh-CN' && (await p.textContent('[data-testid=run]')) === '运行',
          'a browser in Chinese gets the page in Chinese');
        await p.click('[data-testid=to-controls]');
        await p.waitForTimeout(300);
        const sel = await p.evaluate(() => document.querySelector('[data-testid=preset]').getBoundingClientRect().toJSON());
        check(sel.top >= 0 && sel.bottom <= 844, `the controls are one tap away from the heatmap (the preset's select at ${Math.round(sel.top)} px after the tap)`);
        await p.evaluate(() => window.scrollTo(0, 0));
        await p.screenshot({ path: join(outDir, 'phone.png') });
      }
      await c.close();
    }

    check(foreign.length === 0, `no request left for anywhere but attnd (${foreign.join(', ') || 'none did'})`);
    const unexpected = failed.filter((x) => !/^400 .*\/v1\/attention$/.test(x));
    check(unexpected.length === 0, `no request failed but the deliberate 400 of the unknown word (${unexpected.join(', ') || 'none'})`);
    const errs = consoleErrors.filter((x) => !/status of 400/.test(x));
    check(errs.length === 0, `no console errors (${errs.join('; ') || 'none'})`);
  } finally {
    if (browser) await browser.close();
    proc.kill('SIGTERM');
  }
  console.log(`screens: ${checks} checks, ${failures} failed`);
  writeFileSync(join(outDir, 'screens-result.txt'), `${checks} checks, ${failures} failed\n`);
  process.exit(failures ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
