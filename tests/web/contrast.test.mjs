// WCAG AA contrast of every number and label on the rendered page (issue 35, part 4): the
// guided path's twelve steps in English and in Chinese at 1280x800, and on a projector (1024x768,
// large font), with the experiments run. playwright-core drives Debian's chromium against a
// live attnd on an ephemeral loopback port. Exits non-zero on any failed check.
//
// How it is measured, on the page as drawn: for every visible text node (and every number box
// and select), its colour (with its own and its ancestors' opacity) and its boxes on the page;
// then the page is drawn again with every text transparent, so that the screenshot holds what
// lies behind each text, whatever it is (a bar, a gradient, a striped cell), and each text's
// colour is compared with every background colour that fills at least 5% of its boxes. The text
// drawn on canvases is compared with its canvas's pixels around it. WCAG 2's ratio: at least
// 4.5:1 below 24 px (18.7 px bold), 3:1 above. Disabled controls are exempt, as WCAG has them.
//
// Usage: node tests/web/contrast.test.mjs ATTND_BINARY OUTPUT_DIR

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startAttnd } from './shots.mjs';
import { check, finish, openAt, openBrowser, testArgs } from './helpers.mjs';

const { attndBin, outDir } = testArgs('contrast');

// What each step waits for: its demo done.
const STEP_DONE = {
  2: '[data-testid=recv-nearest][data-word]',
  5: '[data-testid=learned-result]:not([hidden])',
  6: '[data-testid=exp2-result]:not([hidden])',
  7: '[data-testid=exp3-verdict-off]:not([hidden])',
  8: '[data-testid=gen][data-t="1"]',
  10: '[data-testid=cost-result][data-done]',
  11: '[data-testid=multi-result]:not([hidden])',
  12: '[data-testid=quiz] li',
};

// Records the text drawn on canvases with its colour, size and box, before the page's scripts.
function recordCanvasInk() {
  window.__ink = [];
  const fill = CanvasRenderingContext2D.prototype.fillText;
  CanvasRenderingContext2D.prototype.fillText = function (text, x, y, ...rest) {
    const m = this.getTransform(), mt = this.measureText(text);
    const px = parseFloat((this.font.match(/([\d.]+)px/) || [0, 0])[1]);
    const pts = [[x - mt.actualBoundingBoxLeft, y - mt.actualBoundingBoxAscent], [x + mt.actualBoundingBoxRight, y + mt.actualBoundingBoxDescent]]
      .map(([a, b]) => [m.a * a + m.c * b + m.e, m.b * a + m.d * b + m.f]);
    window.__ink.push({ el: this.canvas, text: String(text), fill: String(this.fillStyle), px: px * Math.sqrt(Math.abs(m.a * m.d - m.b * m.c)),
      bold: /bold|[6-9]00/.test(this.font), box: [Math.min(pts[0][0], pts[1][0]), Math.min(pts[0][1], pts[1][1]), Math.max(pts[0][0], pts[1][0]), Math.max(pts[0][1], pts[1][1])] });
    return fill.call(this, text, x, y, ...rest);
  };
  // A canvas cleared whole (dom.js setupCanvas) starts a new drawing: its old labels are gone.
  const clear = CanvasRenderingContext2D.prototype.clearRect;
  CanvasRenderingContext2D.prototype.clearRect = function (x, y, w, h) {
    const m = this.getTransform();
    if (x <= 0 && y <= 0 && (w * m.a >= this.canvas.width || w >= this.canvas.width)) window.__ink = window.__ink.filter((r) => r.el !== this.canvas);
    return clear.call(this, x, y, w, h);
  };
}

// The texts of the page with their colours and boxes (page coordinates), as drawn now.
const texts = () => {
  const rgba = (s) => { const m = s.match(/rgba?\(([^)]+)\)/); if (!m) return null; const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const opacity = (el) => { let o = 1; for (let e = el; e && e.nodeType === 1; e = e.parentElement) o *= Number(getComputedStyle(e).opacity); return o; };
  const out = [];
  // A box cut to the scrolling boxes around el (a wide table in its own scrolling box): only what
  // shows counts.
  const clip = (el, r) => {
    let [l, t, rr, b] = [r.left, r.top, r.right, r.bottom];
    for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.overflowX === 'visible' && cs.overflowY === 'visible') continue;
      const c = e.getBoundingClientRect();
      [l, t, rr, b] = [Math.max(l, c.left), Math.max(t, c.top), Math.min(rr, c.right), Math.min(b, c.bottom)];
    }
    return [l, t, rr, b];
  };
  const add = (el, text, rects) => {
    const cs = getComputedStyle(el), c = rgba(cs.color);
    if (!c || el.closest(':disabled') || el.closest('[aria-disabled=true]')) return;
    const boxes = [...rects].map((r) => clip(el, r)).filter(([l, t, r, b]) => r - l >= 1 && b - t >= 1)
      .map(([l, t, r, b]) => [l + scrollX, t + scrollY, r + scrollX, b + scrollY]);
    if (!boxes.length) return;
    const where = el.closest('[data-testid]') ? el.closest('[data-testid]').dataset.testid : el.closest('[id]') ? el.closest('[id]').id : el.tagName;
    out.push({ text: text.slice(0, 40), where, colour: c.slice(0, 3), alpha: c[3] * opacity(el), px: parseFloat(cs.fontSize), bold: Number(cs.fontWeight) >= 600, boxes });
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || el.closest('script, style, option') || !el.checkVisibility()) continue;
    const r = document.createRange();
    r.selectNodeContents(n);
    add(el, n.textContent.trim(), r.getClientRects());
  }
  for (const el of document.querySelectorAll('input[type=number], input[type=text], textarea, select')) {
    if (!el.checkVisibility() || !(el.value || (el.selectedOptions && el.selectedOptions.length))) continue;
    const r = el.getBoundingClientRect(), cs = getComputedStyle(el);
    const pl = parseFloat(cs.paddingLeft) + parseFloat(cs.borderLeftWidth), pt = parseFloat(cs.paddingTop) + parseFloat(cs.borderTopWidth);
    add(el, el.value || el.selectedOptions[0].textContent, [new DOMRect(r.left + pl, r.top + pt, Math.max(0, r.width - 2 * pl), Math.max(0, r.height - 2 * pt))]);
  }
  return out;
};

// Every text transparent: what remains is what lies behind the texts.
const HIDE = '*, *::before, *::after { color: transparent !important; -webkit-text-fill-color: transparent !important; text-shadow: none !important; caret-color: transparent !important; }';

async function measure(page, shotName) {
  await page.evaluate(() => window.scrollTo(0, 0)); // the path's panel where it stands
  await page.waitForTimeout(100);
  const items = await page.evaluate(texts);
  const ink = await page.evaluate(() => {
    const shown = new Set([...document.querySelectorAll('canvas')].filter((c) => c.checkVisibility()));
    const seen = new Map(); // a canvas's last drawing: the records since its last size change are what is on it
    for (const r of window.__ink) if (shown.has(r.el)) { const k = r.el; if (!seen.has(k)) seen.set(k, []); seen.get(k).push(r); }
    const out = [];
    for (const [cv, rs] of seen) {
      const ctx = cv.getContext('2d'), d = cv.width / cv.getBoundingClientRect().width;
      for (const r of rs) {
        // The background: the commonest colour of a ring of 2 px around the label's box (its own
        // ink fills a punctuation mark's box), a transparent pixel being the white card behind.
        const [x0, y0, x1, y1] = [Math.floor(r.box[0]) - 2, Math.floor(r.box[1]) - 2, Math.ceil(r.box[2]) + 2, Math.ceil(r.box[3]) + 2];
        if (x0 < 0 || y0 < 0 || x1 > cv.width || y1 > cv.height) continue;
        const w = x1 - x0, h = y1 - y0, px = ctx.getImageData(x0, y0, w, h).data, count = new Map();
        for (let y = 0; y < h; y++) {
          for (let x = 0; x < w; x++) {
            if (x >= 2 && x < w - 2 && y >= 2 && y < h - 2) continue;
            const k = (y * w + x) * 4, a = px[k + 3] / 255;
            const key = [0, 1, 2].map((c) => Math.round(px[k + c] * a + 255 * (1 - a))).join(',');
            count.set(key, (count.get(key) || 0) + 1);
          }
        }
        const bg = [...count].sort((a, b) => b[1] - a[1])[0][0].split(',').map(Number);
        out.push({ text: r.text, where: `canvas ${cv.id || cv.closest('[data-testid]')?.dataset.testid || ''}`, fill: r.fill, bg, px: r.px / d, bold: r.bold });
      }
    }
    return out;
  });
  await page.addStyleTag({ content: HIDE });
  await page.waitForTimeout(50);
  const png = await page.screenshot({ fullPage: true, animations: 'disabled', caret: 'hide' });
  if (shotName) writeFileSync(join(outDir, shotName), png);
  const bad = await page.evaluate(async ([b64, list]) => {
    const img = new Image();
    img.src = `data:image/png;base64,${b64}`;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.width; c.height = img.height;
    const ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const lum = (p) => p.map((v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }).reduce((s, v, k) => s + v * [0.2126, 0.7152, 0.0722][k], 0);
    const ratio = (p, q) => (Math.max(lum(p), lum(q)) + 0.05) / (Math.min(lum(p), lum(q)) + 0.05);
    const out = [];
    let worst = Infinity, n = 0;
    for (const it of list) {
      const count = new Map();
      let total = 0;
      for (const [x0, y0, x1, y1] of it.boxes) {
        const X0 = Math.max(0, Math.floor(x0)), Y0 = Math.max(0, Math.floor(y0)), X1 = Math.min(c.width, Math.ceil(x1)), Y1 = Math.min(c.height, Math.ceil(y1));
        if (X1 <= X0 || Y1 <= Y0) continue;
        const d = ctx.getImageData(X0, Y0, X1 - X0, Y1 - Y0).data;
        for (let k = 0; k < d.length; k += 4) { const key = `${d[k]},${d[k + 1]},${d[k + 2]}`; count.set(key, (count.get(key) || 0) + 1); total++; }
      }
      if (!total) continue;
      const bgs = [...count].filter(([, m]) => m >= total * 0.05).map(([key]) => key.split(',').map(Number));
      const need = it.px >= 24 || (it.bold && it.px >= 18.66) ? 3 : 4.5;
      let min = Infinity, at = null;
      for (const bg of bgs) {
        const fg = it.colour.map((v, k) => v * it.alpha + bg[k] * (1 - it.alpha));
        const r = ratio(fg, bg);
        if (r < min) { min = r; at = bg; }
      }
      n++;
      worst = Math.min(worst, min / need);
      if (min < need) out.push(`${it.where}: "${it.text}" ${it.px.toFixed(1)} px, rgb(${it.colour.join(',')}) on rgb(${at.join(',')}): ${min.toFixed(2)} < ${need}`);
    }
    return { out, n };
  }, [png.toString('base64'), items]);
  const parse = (s) => { const m = s.match(/rgba?\(([^)]+)\)/); if (m) return m[1].split(/[ ,]+/).map(Number).slice(0, 3); const h = s.replace('#', ''); return [0, 2, 4].map((k) => parseInt(h.slice(k, k + 2), 16)); };
  const lum = (p) => p.map((v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }).reduce((s, v, k) => s + v * [0.2126, 0.7152, 0.0722][k], 0);
  const ratio = (p, q) => (Math.max(lum(p), lum(q)) + 0.05) / (Math.min(lum(p), lum(q)) + 0.05);
  for (const r of ink) {
    const need = r.px >= 24 || (r.bold && r.px >= 18.66) ? 3 : 4.5, c = ratio(parse(r.fill), r.bg);
    if (c < need) bad.out.push(`${r.where}: "${r.text}" ${r.px.toFixed(1)} px, ${r.fill} on rgb(${r.bg.join(',')}): ${c.toFixed(2)} < ${need}`);
  }
  return { bad: bad.out, n: bad.n, canvas: ink.length };
}

async function main() {
  const { proc, base } = await startAttnd(attndBin);
  let browser;
  try {
    const b = await openBrowser(base);
    browser = b.browser;
    const { newContext } = b;
    for (const [lang, vp, large] of [['en', { width: 1280, height: 800 }, false], ['zh', { width: 1280, height: 800 }, false], ['en', { width: 1024, height: 768 }, true]]) {
      // bypassCSP: attnd's policy refuses inline styles, and the test adds one (every text transparent).
      const ctx = await newContext({ viewport: vp, locale: 'en-US', deviceScaleFactor: 1, bypassCSP: true });
      await ctx.addInitScript(recordCanvasInk);
      for (let n = 1; n <= 12; n++) {
        const page = await ctx.newPage();
        await openAt(page, base, `?lang=${lang}&step=${n}${large ? '&large=1' : ''}`);
        await page.waitForFunction((k) => document.body.dataset.pathStep === String(k), n, { timeout: 30000 });
        if (STEP_DONE[n]) await page.waitForSelector(STEP_DONE[n], { timeout: 60000 });
        if (n === 4) { // 实验一 compared: the guess beside each head's weights, numbers on bars
          const ids = await page.$$eval('[data-testid=exp1-guess] input', (is) => is.map((i) => i.dataset.testid));
          for (const [k, id] of ids.entries()) await page.fill(`[data-testid=${id}]`, String([1, 6, 1, 0][k] ?? 0));
          await page.click('[data-testid=exp1-compare]');
          await page.waitForSelector('[data-testid=exp1-pics] figure');
        }
        if (n === 2 || n === 9) await page.check('[data-testid=nosqrt]'); // the switch's columns too
        if (n === 12) { // an answer written and opened
          await page.fill('[data-testid=quiz-answer-1]', 'Q is what a word looks for');
          await page.click('[data-testid=quiz-show-1]');
        }
        await page.waitForTimeout(300);
        const tag = `${lang}${large ? ', 1024x768 large font' : ''}, step ${n}`;
        const r = await measure(page, n === 4 || n === 5 || n === 7 || n === 8 ? `contrast-${lang}${large ? '-large' : ''}-step${n}.png` : null);
        check(r.bad.length === 0 && r.n > 50, `${tag}: every one of ${r.n} texts and ${r.canvas} canvas labels meets WCAG AA (${r.bad.slice(0, 8).join('; ') || 'all do'})`);
        await page.close();
      }
      await ctx.close();
    }
  } finally {
    if (browser) await browser.close();
    proc.kill('SIGTERM');
  }
  finish('contrast');
}

main().catch((e) => { console.error(e); process.exit(1); });
