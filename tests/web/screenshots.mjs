// make screenshots: renders the README's pictures of the visualizer (shots.mjs SHOTS) against a
// live attnd and writes them, with a manifest, to OUTPUT_DIR (docs/). The manifest records how
// each was made and the hash of the page's inputs, so that tests/web/visualizer.test.mjs can
// tell when they are stale and render them again to compare.
//
// Usage: node tests/web/screenshots.mjs ATTND_BINARY OUTPUT_DIR

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  DEVICE_SCALE_FACTOR, INPUTS, SHOTS, inputsHash, launchShotBrowser, renderShot, sha256, startAttnd,
} from './shots.mjs';

const [attndBin, outDir] = process.argv.slice(2);
if (!attndBin || !outDir) {
  console.error('usage: screenshots.mjs ATTND_BINARY OUTPUT_DIR');
  process.exit(2);
}

async function main() {
  mkdirSync(outDir, { recursive: true });
  const { proc, base } = await startAttnd(attndBin);
  const { browser, close } = await launchShotBrowser();
  try {
    const shots = [];
    for (const shot of SHOTS) {
      const png = await renderShot(browser, base, shot);
      writeFileSync(join(outDir, shot.file), png);
      const width = png.readUInt32BE(16), height = png.readUInt32BE(20);
      shots.push({
        file: shot.file, what: shot.what, url: `/${shot.url}`, viewport: shot.viewport,
        deviceScaleFactor: DEVICE_SCALE_FACTOR, fullPage: shot.fullPage, width, height, sha256: sha256(png),
      });
      console.log(`${join(outDir, shot.file)}: ${width}x${height}, ${png.length} bytes`);
    }
    const manifest = {
      about: 'Written by make screenshots (tests/web/screenshots.mjs); checked by tests/web/visualizer.test.mjs.',
      fonts: 'WenQuanYi Micro Hei and its Mono (fonts-wqy-microhei) only',
      chromium: browser.version(),
      inputs: { files: INPUTS, sha256: inputsHash() },
      shots,
    };
    writeFileSync(join(outDir, 'screenshots.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  } finally {
    await close();
    proc.kill('SIGTERM');
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
