// Browser tests of the attnd visualizer: playwright-core drives Debian's chromium (headless)
// against a live attnd on an ephemeral loopback port. Exits non-zero on any failed check.
//
// Usage: node tests/web/visualizer.test.mjs ATTND_BINARY OUTPUT_DIR

import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [attndBin, outDir] = process.argv.slice(2);
if (!attndBin || !outDir) {
  console.error('usage: visualizer.test.mjs ATTND_BINARY OUTPUT_DIR');
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });

let failures = 0, checks = 0;
function check(ok, what) {
  checks++;
  if (!ok) { failures++; console.error(`FAIL: ${what}`); } else console.log(`ok: ${what}`);
}

// Starts attnd on 127.0.0.1:0 and resolves with its base URL once its start-up log names the port.
function startAttnd() {
  return new Promise((resolve, reject) => {
    const p = spawn(attndBin, ['--listen', '127.0.0.1:0', '--log-format', 'text'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    const timer = setTimeout(() => reject(new Error(`attnd did not report its port:\n${log}`)), 15000);
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/listening address=127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); resolve({ proc: p, base: `http://127.0.0.1:${m[1]}/` }); }
    };
    p.stdout.on('data', onData);
    p.stderr.on('data', onData);
    p.on('exit', (code) => { clearTimeout(timer); reject(new Error(`attnd exited ${code}:\n${log}`)); });
  });
}

async function waitReady(page, before, timeout = 15000) {
  await page.waitForFunction((b) => document.body.dataset.ready && document.body.dataset.ready !== b,
    before, { timeout });
  const status = await page.textContent('[data-testid=status]');
  return status;
}

const readyMark = (page) => page.evaluate(() => document.body.dataset.ready || '');

async function tableRow(page, testid, i) {
  return page.$$eval(`[data-testid=${testid}] td[data-i="${i}"]`, (tds) => tds.map((td) => td.textContent));
}

// Mean and spread of a PNG's pixels, decoded by the browser itself.
async function imageStats(page, png) {
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

async function shot(page, name, locator) {
  const file = join(outDir, `${name}.png`);
  const png = await (locator ? page.locator(locator).screenshot({ path: file }) : page.screenshot({ path: file, fullPage: true }));
  const s = await imageStats(page, png);
  check(s.sd > 10 && s.colours > 8, `screenshot ${name}.png is not blank (sd ${s.sd.toFixed(1)}, ${s.colours} colours)`);
}

// Pixel colour at the centre of cell (i, j) of the large heatmap.
async function cellPixel(page, i, j) {
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

async function main() {
  const { proc, base } = await startAttnd();
  const userDir = mkdtempSync(join(tmpdir(), 'attnd-chromium-'));
  let ctx;
  try {
    ctx = await chromium.launchPersistentContext(userDir, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      viewport: { width: 1280, height: 800 },
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
    const page = ctx.pages()[0] || await ctx.newPage();
    const consoleErrors = [];
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    // Nothing but attnd: any other host is refused and recorded.
    const foreign = [];
    await ctx.route((url) => !url.href.startsWith(base), (route) => { foreign.push(route.request().url()); route.abort(); });

    // 1. Preset (a): the seed's numbers.
    await page.goto(base);
    await page.waitForFunction(() => document.body.dataset.ready);
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

    // 2. Causal on, on an MHA preset: upper triangle masked; numbers equal the API's.
    mark = await readyMark(page);
    await page.selectOption('[data-testid=preset]', 'c1');
    await waitReady(page, mark);
    mark = await readyMark(page);
    await page.selectOption('[data-testid=causal]', 'top_left');
    const st = await waitReady(page, mark);
    check(st.startsWith('ok'), `causal run succeeds (${st})`);
    const L = 10;
    let maskedOk = true, openOk = true;
    for (let i = 0; i < L; i++) {
      const cls = await page.$$eval(`[data-testid=table-softmax] td[data-i="${i}"]`, (tds) => tds.map((td) => td.className));
      cls.forEach((c, j) => { if (j > i && c !== 'masked') maskedOk = false; if (j <= i && c === 'masked') openOk = false; });
    }
    check(maskedOk && openOk, 'the softmax table marks exactly the upper triangle as masked');
    const px = [await cellPixel(page, 0, 5), await cellPixel(page, 2, 9), await cellPixel(page, 5, 2), await cellPixel(page, 9, 9)];
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
    await page.mouse.move(box.x + (geom.labW + 1.5 * geom.cell) * scale, box.y + (geom.labH + 7.5 * geom.cell) * scale);
    await page.waitForSelector('[data-testid=tooltip]:not([hidden])', { timeout: 3000 });
    const tip = await page.textContent('[data-testid=tooltip]');
    const want7 = (await tableRow(page, 'table-softmax', 7))[1];
    check(tip.includes('它') && tip.includes('把') && tip.includes(Number(api.weights[0][7][1]).toFixed(4)),
      `hovering (7, 1) shows query 它, key 把 and the weight ${want7} (tooltip: ${tip})`);
    await shot(page, 'tooltip');

    // 4. Switch heads.
    const before = await tableRow(page, 'table-softmax', 9);
    await page.click('[data-testid=head-2]');
    await page.waitForFunction(() => document.getElementById('large-title').textContent.startsWith('head 2'));
    const after = await tableRow(page, 'table-softmax', 9);
    const want2 = api.weights[2][9].map((x) => x.toFixed(2));
    check(after.join(' ') === want2.join(' ') && after.join(' ') !== before.join(' '),
      `head 2 shows its own weights (${after.join(' ')})`);
    check(new URL(page.url()).searchParams.get('head') === '2', 'the URL records the selected head');
    await shot(page, 'head-grid', '[data-testid=head-grid]');

    // 5. A shared link reproduces the view.
    const link = page.url();
    const page2 = await ctx.newPage();
    await page2.goto(link);
    await page2.waitForFunction(() => document.body.dataset.ready);
    const again = await tableRow(page2, 'table-softmax', 9);
    check(again.join(' ') === after.join(' '), 'opening the page URL reproduces the same view');
    await page2.close();

    // 6. An API error is shown with its message: 64-wide embeddings cannot split into 3 heads.
    mark = await readyMark(page);
    await page.selectOption('[data-testid=params-kind]', 'init:identity');
    await waitReady(page, mark);
    mark = await readyMark(page);
    await page.fill('[data-testid=num-heads]', '3');
    await page.dispatchEvent('[data-testid=num-heads]', 'change');
    await waitReady(page, mark);
    const err = await page.textContent('[data-testid=error]');
    check(await page.isVisible('[data-testid=error]') && err.startsWith('400') && /3/.test(err),
      `an API error shows its status and message (${err})`);
    check((await page.textContent('[data-testid=status]')) === 'error', 'the status shows the error state');
    await shot(page, 'api-error');
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

    check(foreign.length === 0, `the page fetched nothing but attnd (${foreign.join(', ') || 'none'})`);
    // The deliberate 400 of step 6 is logged by the browser as a failed load; nothing else may be.
    const unexpected = consoleErrors.filter((m) => !/status of 400/.test(m));
    check(unexpected.length === 0, `no console errors (${unexpected.join('; ') || 'none'})`);
  } finally {
    if (ctx) await ctx.close();
    rmSync(userDir, { recursive: true, force: true });
    proc.kill('SIGTERM');
  }
  console.log(`visualizer: ${checks} checks, ${failures} failed`);
  writeFileSync(join(outDir, 'result.txt'), `${checks} checks, ${failures} failed\n`);
  process.exit(failures ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
