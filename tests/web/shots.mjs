// What the visualizer's browser tests and `make screenshots` share: starting attnd, starting
// Debian's chromium through playwright-core, and the README's screenshots (which states of the
// page, how they are rendered, and how two renderings are compared).
//
// The screenshots are made deterministic enough to be checked on another machine: a fixed
// viewport and device scale factor, one font package for every glyph (fonts-wqy-microhei,
// through a fontconfig file of its own, so that no other installed font takes part), no
// animation or caret, and the status's timing (the only text that changes between runs)
// hidden.

import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startAttnd as startOpenapiAttnd } from '../openapi/attnd.mjs';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];

// The README's pictures. Each is the page at url (which holds the whole state), in a browser
// window of viewport, after its first run (and, when given, once waitFor is on the page, and
// after clicks, each {click, waitFor}), with scrollTo at the top of the window when given.
export const SHOTS = [
  {
    file: 'visualizer-seed.png',
    what: 'the seed example (preset a) with its step tables, in English',
    url: '?lang=en&p=a',
    viewport: { width: 1024, height: 768 },
    fullPage: true,
  },
  {
    file: 'visualizer-heads.png',
    what: 'the lesson model\'s sentence 程序员把服务器日志发给同事，因为它记录了错误原因。: its four named heads and their mean, and the coreference head selected (它 looks at 服务器日志), in Chinese with large font, as a projector at 1024x768 shows it',
    url: '?lang=zh&p=c1&large=1&head=3',
    viewport: { width: 1024, height: 768 },
    fullPage: false,
  },
  {
    file: 'visualizer-steps.png',
    what: 'the row of 它 in the coreference head of 程序员把服务器日志发给同事，因为它记录了错误原因。, step by step from the API\'s trace (scores, the mask, softmax weights, × V) as the chapter shows it, and what 它 received (服务器日志, the nearest value vector), in Chinese at 1024x768',
    url: '?lang=zh&p=c1&head=3',
    viewport: { width: 1024, height: 768 },
    fullPage: false,
    scrollTo: '[data-testid=steps]',
    waitFor: '[data-testid=recv-nearest][data-word]',
  },
  {
    file: 'visualizer-exp3.png',
    what: '实验三 on Redis 是一个内存数据库。 with 数据库 replaced by 缓存, run with the causal mask on and off: the heatmaps mark the rows whose output changed, and with the mask off the row of 内存 changes too (the leak), in Chinese at 1024x768',
    url: '?lang=zh&p=c5&e3=2',
    viewport: { width: 1024, height: 768 },
    fullPage: false,
    scrollTo: '[data-testid=exp3]',
    waitFor: '[data-testid=exp3-map-off]',
  },
  {
    file: 'visualizer-phone.png',
    what: 'the lesson model\'s sentence 程序员把服务器日志发给同事，因为它记录了错误原因。 on a phone (390x844) in Chinese: the header wrapped with 中文 / English whole, the heads, and the coreference head\'s heatmap on the first screen with its axis titles 键 and 查询',
    url: '?lang=zh&p=c1&head=3',
    viewport: { width: 390, height: 844 },
    fullPage: false,
  },
  // The guided path (web/path.js): a step in the URL sets the page and scrolls to its section
  // under the path's panel, which the page does itself (no scrollTo).
  {
    file: 'path-step2.png',
    what: 'the guided path, step 2 of 12, in Chinese at 1024x768: the row of 它 in the coreference head of 程序员把服务器日志发给同事，因为它记录了错误原因。, step by step, under the panel that says what to look at and why',
    url: '?lang=zh&step=2',
    viewport: { width: 1024, height: 768 },
    fullPage: false,
    waitFor: 'body[data-path-step="2"] [data-testid=recv-nearest][data-word]',
  },
  {
    file: 'path-step2-en.png',
    what: 'the guided path, step 2 of 12, in English at 1024x768: the row of "it" in the coreference head of the English twin, The programmer sent the server log to a colleague, because it recorded the cause of the error., step by step, no Chinese on the page',
    url: '?lang=en&step=2',
    viewport: { width: 1024, height: 768 },
    fullPage: false,
    waitFor: 'body[data-path-step="2"] [data-testid=recv-nearest][data-word]',
  },
  {
    file: 'path-step2-projector.png',
    what: 'the guided path, step 2 of 12, on a projector (1024x768, large font) in Chinese: the controls folded behind 设置, the compact panel (its buttons and dots on one line, the text under them), and the row of 它 in the coreference head across the width',
    url: '?lang=zh&step=2&large=1',
    viewport: { width: 1024, height: 768 },
    fullPage: false,
    waitFor: 'body[data-path-step="2"] [data-testid=recv-nearest][data-word]',
  },
  {
    file: 'path-step4.png',
    what: 'the guided path, step 4 of 12 (实验一), in Chinese at 1024x768: 张工把配置文件发给测试同学，因为它包含新的开关。 with the chapter\'s four candidates, a typed guess (1, 6, 1, 0), 新的开关 marked not yet read, and the guess beside each head\'s weights, one picture per head',
    url: '?lang=zh&step=4&p=c4&head=3&e1g=1:1,3:6,5:1,10:0&e1=1',
    viewport: { width: 1024, height: 768 },
    fullPage: false,
    waitFor: 'body[data-path-step="4"] [data-testid=exp1-pics] figure',
  },
  {
    file: 'path-step7.png',
    what: 'the guided path, step 7 of 12 (实验三), in Chinese at 1024x768: Redis 是一个内存数据库。 with 数据库 replaced by 缓存, run with the causal mask on and off',
    url: '?lang=zh&step=7',
    viewport: { width: 1024, height: 768 },
    fullPage: false,
    waitFor: 'body[data-path-step="7"] [data-testid=exp3-map-off]',
  },
  {
    file: 'path-step8.png',
    what: 'the guided path, step 8 of 12 (generation), in Chinese at 1024x768: 程序员把服务器日志发给同事，因为它记录了错误原因。 appended to a decode session token by token up to 它 (decode step 9): the query q_9 · 它 under the rows above, the same bit for bit as at decode step 8, nine keys and values, and the chart of the cache\'s bytes (linear) beside recomputing the prefix (quadratic)',
    url: '?lang=zh&step=8',
    viewport: { width: 1024, height: 768 },
    fullPage: false,
    waitFor: 'body[data-path-step="8"] [data-testid=gen][data-t="1"]',
    // Next token, eight times: each waits for its row.
    clicks: Array.from({ length: 8 }, (_, k) => ({ click: '[data-testid=gen-next]', waitFor: `[data-testid=gen][data-t="${k + 2}"][data-busy="0"]` })),
    scrollTo: '[data-testid=gen-now]',
  },
  {
    file: 'path-step12.png',
    what: 'the guided path, step 12 of 12, the ending, in Chinese at 1024x768: 本章小结 in a few lines and the six 自测题 of 第 6 章, each with its link to the step that shows its answer and a box to answer in before the answer opens; Next reads 学完了',
    url: '?lang=zh&step=12',
    viewport: { width: 1024, height: 768 },
    fullPage: false,
    waitFor: 'body[data-path-step="12"] [data-testid=quiz] li',
  },
  // The built-in induction model's heads (web/learned.js): the shot depends on the model's file
  // too, which INPUTS hashes.
  {
    file: 'learned-induction.png',
    what: 'the guided path, step 5 of 12, a model that learned, in English at 1024x1250: the built-in induction model on a seeded random sequence of its English words that repeats, its 2 layers × 4 heads as small maps with their scores, and the layer-1 head with the highest induction score open large: the dotted cells where the same word stood before, the solid cells one step to their right where an induction head looks, and the sentence that says whether this head does',
    url: '?lang=en&step=5',
    viewport: { width: 1024, height: 1250 },
    fullPage: false,
    waitFor: 'body[data-path-step="5"] [data-testid=learned-result]:not([hidden])',
    scrollTo: '[data-testid=learned-seq]',
  },
];
export const DEVICE_SCALE_FACTOR = 1;

// The files whose bytes decide what the screenshots show; their hash goes in the manifest. The
// page's files are those attnd serves from web/ (server/server.mk SRV_EMBED: web/*.html,
// web/*.js, web/*.css), so that a new module counts too; and the induction model's file, which
// the step on a model that learned draws.
export const WEB_FILES = readdirSync(join(ROOT, 'web')).filter((f) => /\.(html|js|css)$/.test(f)).sort()
  .map((f) => `web/${f}`);
export const INPUTS = [...WEB_FILES, 'tests/web/shots.mjs', 'api/induction/induction.safetensors'];

export function inputsHash(root = ROOT) {
  const h = createHash('sha256');
  for (const f of INPUTS) {
    h.update(`${f}\0`);
    h.update(readFileSync(join(root, f)));
    h.update('\0');
  }
  return h.digest('hex');
}

export const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');

// Starts attnd on 127.0.0.1:0 (tests/openapi/attnd.mjs: once its log has said ready) and
// resolves with {proc, base}, base ending in a slash for new URL(path, base).
export async function startAttnd(bin) {
  const { proc, base } = await startOpenapiAttnd(bin);
  return { proc, base: `${base}/` };
}

const WQY_DIR = '/usr/share/fonts/truetype/wqy';

// Chromium for the screenshots: its fontconfig sees only WenQuanYi Micro Hei (sans and mono),
// whatever else the machine has. Resolves with {browser, close}.
export async function launchShotBrowser() {
  if (!existsSync(join(WQY_DIR, 'wqy-microhei.ttc'))) {
    throw new Error(`${WQY_DIR}/wqy-microhei.ttc is missing: install fonts-wqy-microhei (make deps-test)`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'attnd-shots-'));
  const alias = (generic, family) => `<alias binding="same"><family>${generic}</family><prefer><family>${family}</family></prefer></alias>`;
  writeFileSync(join(dir, 'fonts.conf'), `<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <dir>${WQY_DIR}</dir>
  <cachedir>${dir}/cache</cachedir>
  ${alias('sans-serif', 'WenQuanYi Micro Hei')}
  ${alias('serif', 'WenQuanYi Micro Hei')}
  ${alias('system-ui', 'WenQuanYi Micro Hei')}
  ${alias('monospace', 'WenQuanYi Micro Hei Mono')}
  ${alias('ui-monospace', 'WenQuanYi Micro Hei Mono')}
</fontconfig>
`);
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [...CHROMIUM_ARGS, '--hide-scrollbars', '--font-render-hinting=none'],
    env: { ...process.env, FONTCONFIG_FILE: join(dir, 'fonts.conf') },
  });
  return { browser, close: async () => { await browser.close(); rmSync(dir, { recursive: true, force: true }); } };
}

// Renders shot against the attnd at base; resolves with the PNG bytes.
export async function renderShot(browser, base, shot) {
  const ctx = await browser.newContext({
    viewport: shot.viewport, deviceScaleFactor: DEVICE_SCALE_FACTOR, locale: 'en-US',
    reducedMotion: 'reduce', colorScheme: 'light',
  });
  try {
    const page = await ctx.newPage();
    await page.goto(new URL(shot.url, base).href);
    await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 20000 });
    if (shot.waitFor) await page.waitForSelector(shot.waitFor, { timeout: 20000 });
    for (const c of shot.clicks || []) { // what a student clicks first, each waiting for its result
      await page.click(c.click);
      await page.waitForSelector(c.waitFor, { timeout: 20000 });
    }
    await page.evaluate(async (to) => {
      await document.fonts.ready;
      document.querySelector('[data-testid=status-time]').hidden = true;
      document.activeElement && document.activeElement.blur && document.activeElement.blur();
      if (to) document.querySelector(to).scrollIntoView({ block: 'start' });
    }, shot.scrollTo || null);
    return await page.screenshot({ fullPage: shot.fullPage, animations: 'disabled', caret: 'hide' });
  } finally {
    await ctx.close();
  }
}

// Compares two PNGs in page (decoded by the browser): their sizes and, over 8x8-pixel blocks,
// how many blocks' mean colours differ by more than 24 of 255 in a channel.
export async function compareImages(page, a, b) {
  return page.evaluate(async ([sa, sb]) => {
    const load = async (src) => {
      const img = new Image();
      img.src = `data:image/png;base64,${src}`;
      await img.decode();
      const c = document.createElement('canvas');
      c.width = img.width; c.height = img.height;
      const x = c.getContext('2d');
      x.drawImage(img, 0, 0);
      return { w: img.width, h: img.height, d: x.getImageData(0, 0, img.width, img.height).data };
    };
    const [p, q] = [await load(sa), await load(sb)];
    if (p.w !== q.w || p.h !== q.h) return { sameSize: false, a: [p.w, p.h], b: [q.w, q.h] };
    const B = 8;
    let blocks = 0, differ = 0, same = 0;
    for (let by = 0; by < p.h; by += B) {
      for (let bx = 0; bx < p.w; bx += B) {
        const s = [0, 0, 0, 0, 0, 0];
        let n = 0;
        for (let y = by; y < Math.min(by + B, p.h); y++) {
          for (let x = bx; x < Math.min(bx + B, p.w); x++) {
            const o = (y * p.w + x) * 4;
            for (let k = 0; k < 3; k++) { s[k] += p.d[o + k]; s[3 + k] += q.d[o + k]; }
            n++;
          }
        }
        blocks++;
        if (Math.max(...[0, 1, 2].map((k) => Math.abs(s[k] - s[3 + k]) / n)) > 24) differ++;
      }
    }
    for (let i = 0; i < p.d.length; i++) if (p.d[i] === q.d[i]) same++;
    return { sameSize: true, size: [p.w, p.h], blocks, differ, identical: same / p.d.length };
  }, [a.toString('base64'), b.toString('base64')]);
}
