// Browser test of static caching (issue 34, section 5): a second load of the page sends no file
// again (every file revalidates to 304 with no body, or comes from the browser's cache), and the
// favicon is fetched once however often the path's URL changes. playwright-core drives Debian's
// chromium against a live attnd on an ephemeral loopback port; the counts are attnd's own, from
// its access log lines' status and bytes_out. Exits non-zero on any failed check.
//
// Usage: node tests/web/cache.test.mjs ATTND_BINARY OUTPUT_DIR

import { mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS, startAttnd } from './shots.mjs';

const [attndBin, outDir] = process.argv.slice(2);
if (!attndBin || !outDir) {
  console.error('usage: cache.test.mjs ATTND_BINARY OUTPUT_DIR');
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });

let failures = 0, checks = 0;
function check(ok, what) {
  checks++;
  if (!ok) { failures++; console.error(`FAIL: ${what}`); } else console.log(`ok: ${what}`);
}

async function main() {
  const { proc, base } = await startAttnd(attndBin);
  // attnd's access lines, to count the requests that reached it
  let log = '';
  proc.stdout.on('data', (d) => { log += d.toString(); });
  proc.stderr.on('data', (d) => { log += d.toString(); });
  let browser;
  try {
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
    const page = await ctx.newPage();
    // The requests that reach attnd, from the browser's side: the CDP network events say
    // whether a response came from the disk or memory cache (no request at all) or the network.
    const cdp = await ctx.newCDPSession(page);
    await cdp.send('Network.enable');
    const net = [];
    cdp.on('Network.responseReceived', (e) => {
      const url = new URL(e.response.url);
      if (url.origin !== new URL(base).origin || url.pathname.startsWith('/v1/') || url.pathname.startsWith('/v2/')) return;
      net.push({ path: url.pathname, status: e.response.status, fromCache: e.response.fromDiskCache || e.response.fromPrefetchCache || false, id: e.requestId });
    });
    const bodies = new Map();
    cdp.on('Network.loadingFinished', (e) => bodies.set(e.requestId, e.encodedDataLength));
    const load = async (query) => {
      net.length = 0;
      await page.goto(new URL(query, base).href);
      await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 20000 });
      await page.waitForTimeout(300);
      return net.map((n) => ({ ...n, bytes: bodies.get(n.id) ?? 0 }));
    };
    const first = await load('?lang=en&p=a');
    const got200 = first.filter((n) => n.status === 200 && !n.fromCache);
    check(got200.length >= 5, `the first load fetches the page's files (${got200.length}: ${got200.map((n) => n.path).join(' ')})`);
    const mark = log.length;
    const second = await load('?lang=en&p=a');
    // attnd's side: every static file of the second load answered 304 with no body
    const lines = log.slice(mark).split('\n').filter((l) => / access method=GET /.test(l) && !/ path=\/v[12]\//.test(l));
    const sent = lines.filter((l) => !/ status=304 /.test(l) || !/ bytes_out=0 /.test(l));
    check(lines.length >= 5 && sent.length === 0, `a second load sends no file again: ${lines.length} requests reached attnd, ${sent.length} got a body (${sent.map((l) => (l.match(/ path=\S+ status=\d+ bytes_in=\d+ bytes_out=\d+/) || [l])[0]).join('; ') || 'none'})`);
    const bodies2 = second.filter((n) => !n.fromCache && n.bytes > 1024);
    check(bodies2.length === 0, `the browser's side: no response of the second load brought more than its headers (${bodies2.map((n) => `${n.path} ${n.status} ${n.bytes} B`).join(', ') || `${second.length} responses, the largest ${Math.max(0, ...second.map((n) => n.bytes))} B`})`);
    // The path: every step changes the URL; the icon comes once for the whole session.
    for (let step = 0; step < 9; step++) {
      await page.evaluate((s) => { const u = new URL(location.href); u.searchParams.set('path', '1'); u.searchParams.set('step', String(s)); history.pushState(null, '', u); window.dispatchEvent(new PopStateEvent('popstate')); }, step);
      await page.waitForTimeout(50);
    }
    await load('?lang=en&path=1&step=3');
    await load('?lang=zh&path=1&step=10');
    const icons = log.split('\n').filter((l) => / access /.test(l) && / path=\/favicon\.(svg|ico) /.test(l));
    check(icons.length === 1, `the favicon is fetched once over four loads and nine steps of the path (${icons.length} requests reached attnd)`);
    const notModified = log.split('\n').filter((l) => / access /.test(l) && / status=304 /.test(l));
    check(notModified.length >= 5 && notModified.every((l) => / bytes_out=0 /.test(l)), `attnd answered the revalidations 304 with no body (${notModified.length})`);
  } finally {
    if (browser) await browser.close();
    proc.kill('SIGTERM');
  }
  console.log(`cache: ${checks} checks, ${failures} failed`);
  process.exit(failures ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
