// What the visualizer's browser suites share (tests/web/visualizer.test.mjs, lesson.test.mjs and
// the others that import it): the arguments and the tally of checks, a browser whose pages may
// fetch nothing but attnd, waiting for a run, reading tables and pixels, the page's texts against
// the string table (web/i18n.js), the canvases' text as drawn, and WCAG's contrast ratio.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './shots.mjs';

let outDir = '.';
let failures = 0, checks = 0;

// The suite's arguments (ATTND_BINARY OUTPUT_DIR); exits with its usage when one is missing.
export function testArgs(name) {
  const [attndBin, dir] = process.argv.slice(2);
  if (!attndBin || !dir) {
    console.error(`usage: ${name}.test.mjs ATTND_BINARY OUTPUT_DIR`);
    process.exit(2);
  }
  mkdirSync(dir, { recursive: true });
  outDir = dir;
  return { attndBin, outDir: dir };
}

export function check(ok, what) {
  checks++;
  if (!ok) { failures++; console.error(`FAIL: ${what}`); } else console.log(`ok: ${what}`);
}

// Prints the tally, writes it to OUTPUT_DIR/result.txt and exits non-zero on any failure.
export function finish(name) {
  console.log(`${name}: ${checks} checks, ${failures} failed`);
  writeFileSync(join(outDir, 'result.txt'), `${checks} checks, ${failures} failed\n`);
  process.exit(failures ? 1 : 0);
}

// Debian's chromium, headless, and newContext(opts): a browser context whose pages record
// console errors and may fetch nothing but attnd at base (any other host is refused and
// recorded in foreign).
export async function openBrowser(base) {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
  const consoleErrors = [];
  const foreign = [];
  const newContext = async (opts) => {
    const c = await browser.newContext(opts);
    c.on('page', (p) => {
      p.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
      p.on('pageerror', (e) => consoleErrors.push(String(e)));
    });
    await c.route((url) => !url.href.startsWith(base), (route) => { foreign.push(route.request().url()); route.abort(); });
    return c;
  };
  return { browser, newContext, consoleErrors, foreign };
}

// Opens query (a URL relative to base) in p and waits for its first run.
export async function openAt(p, base, query) {
  await p.goto(new URL(query, base).href);
  await p.waitForFunction(() => document.body.dataset.ready);
}


export async function waitReady(page, before, timeout = 15000) {
  await page.waitForFunction((b) => document.body.dataset.ready && document.body.dataset.ready !== b,
    before, { timeout });
  const status = await page.textContent('[data-testid=status]');
  return status;
}

export const readyMark = (page) => page.evaluate(() => document.body.dataset.ready || '');

export async function tableRow(page, testid, i) {
  return page.$$eval(`[data-testid=${testid}] td[data-i="${i}"]`, (tds) => tds.map((td) => td.textContent));
}

// Mean and spread of a PNG's pixels, decoded by the browser itself.
export async function imageStats(page, png) {
  const url = `data:image/png;base64,${png.toString('base64')}`;
  return page.evaluate(async (src) => {
    const img = new Image();
    img.src = src;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.width; c.height = img.height;
    const ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    const seen = new Set();
    let sum = 0, sq = 0, n = 0;
    for (let i = 0; i < d.length; i += 4 * 7) {
      const g = (d[i] + d[i + 1] + d[i + 2]) / 3;
      sum += g; sq += g * g; n++;
      if (seen.size < 64) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    }
    const mean = sum / n;
    return { mean, sd: Math.sqrt(sq / n - mean * mean), colours: seen.size };
  }, url);
}

export async function shot(page, name, locator) {
  const file = join(outDir, `${name}.png`);
  const png = await (locator ? page.locator(locator).screenshot({ path: file }) : page.screenshot({ path: file, fullPage: true }));
  const s = await imageStats(page, png);
  check(s.sd > 10 && s.colours > 8, `screenshot ${name}.png is not blank (sd ${s.sd.toFixed(1)}, ${s.colours} colours)`);
}

// Pixel colour at the centre of cell (i, j) of the large heatmap.
export async function cellPixel(page, i, j) {
  return page.evaluate(([ci, cj]) => {
    const cv = document.querySelector('[data-testid=large-canvas]');
    const g = JSON.parse(cv.dataset.geom);
    const x = Math.floor(g.labW + (cj + 0.5) * g.cell), y = Math.floor(g.labH + (ci + 0.5) * g.cell);
    // Sample a few pixels: a hatched cell shows grey stripes, never a heat colour.
    const d = cv.getContext('2d').getImageData(x - 2, y - 2, 5, 5).data;
    let grey = true;
    for (let k = 0; k < d.length; k += 4) if (Math.abs(d[k] - d[k + 1]) > 6 || Math.abs(d[k + 1] - d[k + 2]) > 6) grey = false;
    return { grey, rgb: [d[48], d[49], d[50]] };
  }, [i, j]);
}


// ---- Languages ------------------------------------------------------------------------------

// The string table as the page has it (web/i18n.js, served by attnd); empty when there is none.
export const stringTable = (page) => page.evaluate(async () => {
  try {
    const m = await import(new URL('i18n.js', location.href).href);
    return { STRINGS: m.STRINGS, LANG_NAMES: m.LANG_NAMES };
  } catch (e) {
    return { STRINGS: { en: {}, zh: {} }, LANG_NAMES: {}, error: String(e) };
  }
});

export const norm = (s) => s.replace(/\s+/g, ' ').trim();
export const placeholders = (s) => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort().join(',');

// Each value of a language as a regular expression, its {placeholders} matching anything.
export function templates(strings) {
  return Object.values(strings).filter((s) => norm(s)).map((s) => new RegExp(
    `^${norm(s).replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\\\{\w+\\\}/g, '.+?')}$`, 's'));
}

// Words a Chinese string may keep: the chapters' own (token, softmax), names, and protocols.
export const ZH_KEEPS = new Set(['token', 'softmax', 'attnd', 'demo', 'API', 'JSON', 'HTTP', 'GET', 'QK', 'Redis', 'CLS', 'SEP',
  // and, in the 思考题 and 实验二, the chapters' own: attention, Attention, Value, logits, pad,
  // batch, fp16, GPT-2, Transformer, FlashAttention; MiB, and POST beside a path.
  'attention', 'Attention', 'Value', 'logits', 'pad', 'batch', 'fp', 'GPT', 'Transformer', 'FlashAttention', 'MiB', 'POST',
  // and 第 6 章's 自测题: "Value 的加权和，而不是 Key 的加权和".
  'Key']);

// The English words left in a Chinese string once its placeholders, "quoted code" and URL paths
// are set aside; single letters are symbols (Q, K, V, d_k, L, E).
export function englishWords(s) {
  const rest = s.replace(/\{\w+\}/g, ' ').replace(/"[^"]*"/g, ' ').replace(/\S*\/\S*/g, ' ');
  return (rest.match(/[A-Za-z]{2,}/g) || []).filter((w) => !ZH_KEEPS.has(w));
}

// Every piece of text the page shows a reader outside its data: visible text nodes, every
// option of every select, placeholders, aria-labels and the title. Data (token labels and numbers
// of the tables, the request JSON, the API's own English message) is marked data-i18n-data.
export const pageTexts = (page) => page.evaluate(() => {
  const out = [];
  const where = (el) => { const h = el.closest('[id]'); return h ? `#${h.id}` : el.tagName.toLowerCase(); };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement, text = n.textContent.replace(/\s+/g, ' ').trim();
    if (!text || el.closest('[data-i18n-data], script, style') || !el.checkVisibility()) continue;
    out.push({ text, where: where(el), sw: !!el.closest('[data-testid=lang-switch]') });
  }
  for (const o of document.querySelectorAll('select option')) {
    if (!o.closest('[data-i18n-data]')) out.push({ text: o.textContent.trim(), where: `option of ${where(o)}` });
  }
  for (const el of document.querySelectorAll('[placeholder]')) out.push({ text: el.placeholder, where: `placeholder of ${where(el)}` });
  for (const el of document.querySelectorAll('[aria-label]')) out.push({ text: el.getAttribute('aria-label'), where: `aria-label of ${where(el)}` });
  out.push({ text: document.title, where: 'title' });
  return out.map((x) => ({ ...x, text: x.text.replace(/\s+/g, ' ').trim() })).filter((x) => x.text);
});

// The texts of the page that are neither a value of lang's table (filled in) nor an allowed
// exception: numbers and symbols, a single letter (a symbol such as L or E), the brand, and the
// language switch's two names. Parts joined by " · " are checked one by one.
export async function foreignTexts(page, table, lang) {
  const res = templates(table.STRINGS[lang]);
  const names = Object.values(table.LANG_NAMES);
  const ok = (s) => /^[\s\d.,:;·×÷−+\-=()（）≈√≤≥…]*$/.test(s) || /^[A-Za-z]$/.test(s) || s === 'attnd'
    || res.some((r) => r.test(s));
  return (await pageTexts(page)).filter((x) => !(x.sw && names.includes(x.text))
    && !ok(x.text) && !x.text.split(' · ').every((part) => ok(part.trim())));
}

export async function checkLanguage(page, table, lang, what) {
  const bad = await foreignTexts(page, table, lang);
  check(bad.length === 0, `${what}: every text of the page comes from the ${lang} table (${bad.length ? bad.map((x) => `${x.where}: "${x.text}"`).join('; ') : 'all do'})`);
}

// ---- Canvas text, as drawn ----------------------------------------------------------------

// Records every fillText with its context's font and transform, before the page's own scripts
// run: what the test reads of the canvases' labels is what was drawn, not what the page says.
export function recordCanvasText() {
  window.__text = [];
  const fill = CanvasRenderingContext2D.prototype.fillText;
  CanvasRenderingContext2D.prototype.fillText = function (text, x, y, ...rest) {
    const m = this.getTransform(), mt = this.measureText(text);
    window.__text.push({
      canvas: this.canvas.id, text: String(text), font: this.font, m: [m.a, m.b, m.c, m.d, m.e, m.f],
      box: [x - mt.actualBoundingBoxLeft, y - mt.actualBoundingBoxAscent, x + mt.actualBoundingBoxRight, y + mt.actualBoundingBoxDescent],
    });
    return fill.call(this, text, x, y, ...rest);
  };
}

// The labels drawn on canvas id by its last draw: each with its size in CSS px as shown on the
// screen (font size x transform scale x the canvas's CSS-to-pixel ratio), its angle, and its
// ink box in CSS px on the canvas.
export const drawnLabels = (page, id) => page.evaluate((cid) => {
  const cv = document.getElementById(cid);
  const css = cv.getBoundingClientRect().width / cv.width;
  return window.__text.filter((r) => r.canvas === cid).map((r) => {
    const [a, b, c, d, e, f] = r.m;
    const px = parseFloat(r.font.match(/([\d.]+)px/)[1]);
    const pts = [[r.box[0], r.box[1]], [r.box[2], r.box[1]], [r.box[0], r.box[3]], [r.box[2], r.box[3]]]
      .map(([x, y]) => [(a * x + c * y + e) * css, (b * x + d * y + f) * css]);
    return {
      text: r.text, size: px * Math.sqrt(Math.abs(a * d - b * c)) * css, angle: Math.round(Math.atan2(b, a) * 180 / Math.PI),
      x0: Math.min(...pts.map((p) => p[0])), y0: Math.min(...pts.map((p) => p[1])),
      x1: Math.max(...pts.map((p) => p[0])), y1: Math.max(...pts.map((p) => p[1])),
    };
  }).concat([{ cssW: cv.getBoundingClientRect().width, cssH: cv.getBoundingClientRect().height }]);
}, id);

export const clearDrawn = (page) => page.evaluate(() => { window.__text = []; });

// WCAG's relative luminance of an sRGB colour, and the contrast ratio of two.
export const lum = (c) => c.map((v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
  .reduce((s, v, k) => s + v * [0.2126, 0.7152, 0.0722][k], 0);
export const contrast = (p, q) => (Math.max(lum(p), lum(q)) + 0.05) / (Math.min(lum(p), lum(q)) + 0.05);

// The mean colour of the inside of cell (i, j) of the large heatmap.
export const cellMean = (page, i, j) => page.evaluate(([ci, cj]) => {
  const cv = document.querySelector('[data-testid=large-canvas]');
  const g = JSON.parse(cv.dataset.geom);
  const d = g.dpr || 1, x = Math.ceil((g.labW + cj * g.cell + 1) * d), y = Math.ceil((g.labH + ci * g.cell + 1) * d);
  const n = Math.floor((g.cell - 2) * d);
  const px = cv.getContext('2d').getImageData(x, y, n, n).data;
  const s = [0, 0, 0];
  for (let k = 0; k < px.length; k += 4) for (let c = 0; c < 3; c++) s[c] += px[k + c];
  return s.map((v) => v / (px.length / 4));
}, [i, j]);

// The 16 words of the seed chapters' 小王 sentence, as a pasted-JSON input with small seeded
// embeddings (E = 8, 4 random heads): the longest sentence the chapters show, L = 16.
export function sixteenTokens(lang, large) {
  const tokens = ['小王', '昨天', '提交了', '补丁', '，', '因为', '他', '发现', '缓存模块', '在', '高并发', '下', '会', '返回', '旧数据', '。'];
  let x = 12345;
  const r = () => { x = (x * 1103515245 + 12345) % 2147483648; return Math.round((x / 2147483648 * 2 - 1) * 100) / 100; };
  const embeddings = tokens.map(() => Array.from({ length: 8 }, r));
  const q = new URLSearchParams({
    lang, p: 'custom', json: JSON.stringify({ tokens, embeddings }), params: 'init:random', h: '4', seed: '7',
    causal: 'top_left', large: large ? '1' : '0',
  });
  return { url: `?${q}`, tokens };
}
