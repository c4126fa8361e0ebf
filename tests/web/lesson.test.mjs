// Browser tests of the lesson model on the visualizer (issues 11 and 25), split from
// visualizer.test.mjs: its sentences with named heads, 实验一, 实验三, a sentence of one's own with
// the vocabulary, the URL, and the step tables from the API's trace (what 它 received, the start
// token apart and hidden, 实验三 on the heatmap). playwright-core drives Debian's chromium
// against a live attnd on an ephemeral loopback port. Exits non-zero on any failed check.
//
// Usage: node tests/web/lesson.test.mjs ATTND_BINARY OUTPUT_DIR

import { startAttnd } from './shots.mjs';
import {
  cellMean, check, checkLanguage, finish, lum, openBrowser, readyMark, shot, stringTable, tableRow, testArgs,
  waitReady,
} from './helpers.mjs';

const { attndBin } = testArgs('lesson');

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

    await page.goto(base);
    await page.waitForFunction(() => document.body.dataset.ready);
    const table = await stringTable(page);
    let mark = '';

    // 11. The lesson model on the page (issue 11, section 3): its sentences with named heads,
    // 实验一, 实验三, a sentence of one's own with the vocabulary one click away, and the URL.
    const open = async (p, query) => {
      await p.goto(new URL(query, base).href);
      await p.waitForFunction(() => document.body.dataset.ready);
    };
    const apiPost = async (body) => (await fetch(new URL('v1/attention', base), {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    })).json();
    const lessonModel = await (await fetch(new URL('v1/models/lesson', base))).json();
    const headNames = lessonModel.head_names;
    const sentences = {
      c1: '程序员把服务器日志发给同事，因为它记录了错误原因。', c2: '小李把笔记本放进背包，因为它太重了。',
      c3: '小王昨天提交了补丁，因为他发现缓存模块在高并发下会返回旧数据。', c4: '张工把配置文件发给测试同学，因为它包含新的开关。',
      c5: 'Redis 是一个内存数据库。',
    };
    const sentReq = async (p) => JSON.parse((await p.textContent('[data-testid=request-json]')).split('\n').slice(1).join('\n'));
    const rowLabels = (p) => p.$$eval('[data-testid=table-softmax] tr', (trs) => trs.slice(1).map((tr) => tr.querySelector('th').textContent));
    const tiles = (p) => p.$$eval('[data-testid=head-grid] .head-cell', (cs) => cs.map((c) => ({
      name: c.querySelector('.name').textContent, gloss: c.querySelector('.gloss') ? c.querySelector('.gloss').textContent : '',
    })));
    for (const [p, text] of Object.entries(sentences)) {
      await open(page, `?lang=zh&p=${p}`);
      const req = await sentReq(page);
      const api = await apiPost({ model: 'lesson', text, need_weights: false });
      const got = await tiles(page), labels = await rowLabels(page);
      const glosses = headNames.map((n) => table.STRINGS.zh[`headname.${n}`]);
      const apiLabels = api.tokens.map((x, j) => (j === 0 && S0 ? START.zh : x));
      check(req.model === 'lesson' && req.text === text && !('query' in req) && labels.join('|') === apiLabels.join('|')
        && (await page.inputValue('[data-testid=text]')) === text && await page.isVisible('[data-testid=text]'),
      `preset ${p} sends its sentence as text to the lesson model and shows the API's words (${labels.join(' ')})`);
      check(got.map((x) => x.name).join('|') === headNames.concat(['平均']).join('|')
        && got.slice(0, 4).every((x, i) => x.gloss === glosses[i] && /^[\u4e00-\u9fff]+$/.test(x.gloss)),
      `preset ${p} in Chinese: the head tiles carry the model's head names with a Chinese gloss (${got.map((x) => `${x.name} ${x.gloss}`).join(', ')})`);
    }
    await open(page, '?lang=en&p=c2');
    check((await tiles(page)).map((x) => x.name + x.gloss).join('|') === headNames.concat(['mean']).join('|'),
      `in English the tiles carry the head names alone (${(await tiles(page)).map((x) => x.name).join(' ')})`);
    const paramsChoices = () => page.$$eval('[data-testid=params-kind] option', (os) => os.map((o) => o.value).join(' '));
    // A model of layers (the built-in induction model has a vocabulary too) has its own step on
    // the path (learned.js): the main view, whose weights have no layer axis, does not offer it.
    const withVocab = (await (await fetch(new URL('v1/models', base))).json()).models
      .filter((m) => m.vocab_size > 0 && !m.num_layers).map((m) => `model:${m.name}`).join(' ');
    check(withVocab.includes('model:lesson') && (await paramsChoices()) === withVocab,
      `a sentence offers only the models with a vocabulary and no layers, as GET /v1/models lists them (${await paramsChoices()}; ${withVocab})`);
    mark = await readyMark(page);
    await page.selectOption('[data-testid=preset]', 'random');
    await waitReady(page, mark);
    check((await page.inputValue('[data-testid=params-kind]')) === 'model:demo' && !(await page.isVisible('[data-testid=text]'))
      && (await paramsChoices()).includes('init:identity') && !new URL(page.url()).searchParams.has('text'),
    `leaving the sentences for embeddings goes back to the default model, without the box (${await page.inputValue('[data-testid=params-kind]')})`);

    // In coreference, the row of 它 puts its largest weight on 服务器日志: in the numbers the page
    // shows and in the heatmap's colours (the darkest cell of the row).
    await open(page, '?lang=zh&p=c1&head=3');
    const corefTitle = await page.textContent('[data-testid=large-title]');
    const itRow = (await tableRow(page, 'table-softmax', 7 + S0)).map(Number);
    const keys = (await page.$$eval('[data-testid=table-softmax] tr:first-of-type th', (ths) => ths.map((th) => th.textContent))).slice(1);
    const lumRow = [];
    for (let j = 0; j < 11 + S0; j++) lumRow.push(lum(await cellMean(page, 7 + S0, j)));
    const argmax = (a) => a.indexOf(Math.max(...a));
    check(corefTitle.startsWith('coreference') && (await rowLabels(page))[7 + S0] === '它' && keys[argmax(itRow)] === '服务器日志'
      && itRow.filter((x) => x === Math.max(...itRow)).length === 1 && keys[argmax(lumRow.map((x) => -x))] === '服务器日志',
    `coreference: the row of 它 is largest at 服务器日志, in the table (${itRow.join(' ')}) and the heatmap's darkest cell (${keys[argmax(lumRow.map((x) => -x))]})`);

    // The mean of the heads, selected, is a link too (head=mean; it read as NaN and drew nothing).
    await open(page, '?lang=en&p=c1&head=mean');
    check((await page.textContent('[data-testid=large-title]')).startsWith('mean · max')
      && (await page.getAttribute('[data-testid=head-mean]', 'class')).includes('selected') && !(await page.isVisible('[data-testid=error]')),
    `head=mean in the URL selects the mean (${await page.textContent('[data-testid=large-title]')})`);

    // The page says the heads were built by hand, in both languages.
    check(await page.isVisible('[data-testid=lesson-note]') && (await page.textContent('[data-testid=lesson-note]')).includes(table.STRINGS.en['lesson.note']),
      'the lesson model\'s page says its heads were built by hand and that learned heads are rarely this clean');
    await open(page, '?lang=zh&p=c1');
    check((await page.textContent('[data-testid=lesson-note]')).includes('不要把单个头的可视化当成模型完整推理过程'),
      'and in Chinese, with the chapter\'s 不要把单个头的可视化当成模型完整推理过程');
    await open(page, '?lang=en&p=a');
    check(!(await page.isVisible('[data-testid=lesson-note]')) && !(await page.isVisible('[data-testid=exp1]')) && !(await page.isVisible('[data-testid=exp3]')),
      'the note and the experiments belong to sentences only (hidden on preset a)');

    // 实验一 on the 张工 sentence: the query defaults to 它; the candidates are the chapter's
    // four (张工, 配置文件, 测试同学, 新的开关); typed weights; a guess all on 配置文件 is closest to
    // coreference. (tests/web/path.test.mjs checks the pictures' bars and the word not yet read.)
    await open(page, '?lang=zh&p=c4');
    check((await page.inputValue('[data-testid=exp1-query]')) === String(7 + S0), `实验一's query defaults to the pronoun 它, word ${7 + S0} (${await page.inputValue('[data-testid=exp1-query]')})`);
    const want = [0, 2, 4, 9].map((j) => j + S0);
    const pressed = () => page.$$eval('[data-testid=exp1-keys] button', (bs) => bs.filter((b) => b.getAttribute('aria-pressed') === 'true').map((b) => Number(b.dataset.j)));
    const dflt = await pressed();
    check(dflt.join() === want.join(), `实验一's default candidates are the chapter's four, 张工, 配置文件, 测试同学 and 新的开关 (${dflt.join()})`);
    await page.click(`[data-testid=exp1-keys] button[data-j="${6 + S0}"]`);
    await page.click(`[data-testid=exp1-keys] button[data-j="${6 + S0}"]`);
    check((await pressed()).join() === want.join(), `a candidate can be added and removed again (${(await pressed()).join()})`);
    // Guesses are given by word (0: the first word, after the start token).
    const setGuess = async (w) => { for (const [j, x] of Object.entries(w)) await page.fill(`[data-testid=exp1-weight-${Number(j) + S0}]`, String(x)); };
    const shares = () => page.$$eval('[data-testid=exp1-guess] output', (os) => os.map((o) => `${o.dataset.j}:${o.textContent}`).join(' '));
    await setGuess({ 0: 6, 2: 2, 4: 0, 9: 0 });
    check((await shares()) === `${S0}:0.75 ${2 + S0}:0.25 ${4 + S0}:0.00 ${9 + S0}:0.00`, `the guess is normalised to sum 1 (${await shares()})`);
    check(!(await page.isVisible('[data-testid=exp1-result]')), 'the comparison waits for Compare');
    await page.click('[data-testid=exp1-compare]');
    const perHead = (await apiPost({ model: 'lesson', text: sentences.c4, need_weights: 'per_head' })).weights;
    const l1 = (g) => perHead.map((w) => w[7 + S0].reduce((s, x, j) => s + Math.abs((g[j - S0] || 0) - x), 0));
    const shownL1 = () => page.$$eval('[data-testid=exp1-pics] figure', (fs) => fs.map((f) => ({ h: f.dataset.h, d: Number(f.dataset.d) })));
    const compareOk = async (g, what) => {
      const want1 = l1(g), best = want1.indexOf(Math.min(...want1));
      const shown = await shownL1(), closest = await page.getAttribute('[data-testid=exp1-result]', 'data-closest');
      const verdict = await page.textContent('[data-testid=exp1-verdict]');
      check(shown.length === 4 && shown.every((x, h) => x.h === String(h) && Math.abs(x.d - want1[h]) < 1e-5),
        `实验一 ${what}: the L1 distance to each head is the API's (${shown.map((x) => `${x.h} ${x.d.toFixed(2)}`).join(', ')})`);
      check(closest === String(best) && verdict.includes(headNames[best]) && verdict.includes(want1[best].toFixed(2)),
        `实验一 ${what}: it names the closest head, ${headNames[best]} (${verdict})`);
      return best;
    };
    await compareOk({ 0: 0.75, 2: 0.25 }, 'with 张工 0.75, 配置文件 0.25');
    const guessBars = await page.$$eval('[data-testid=exp1-pics] figure[data-h="0"] .e1-row.cand .e1-bar.g', (bs) => bs.map((b) => Number(b.dataset.w).toFixed(2)).join(' '));
    check(guessBars === '0.75 0.25 0.00 0.00', `the guess stands beside each head's weights (${guessBars})`);
    await setGuess({ 0: 0, 2: 10 });
    const best1 = await compareOk({ 2: 1 }, 'with everything on 配置文件');
    check(headNames[best1] === 'coreference', `a guess all on 配置文件 is closest to the coreference head (${headNames[best1]})`);
    await shot(page, 'lesson-exp1');

    // 实验三 on "Redis 是一个内存数据库。": t = 4 (数据库), replaced by 缓存. The page's verdict
    // per row is checked against the test's own comparison of the API's float32 bits.
    await open(page, '?lang=zh&p=c5');
    check((await page.inputValue('[data-testid=exp3-pos]')) === String(4 + S0) && (await page.inputValue('[data-testid=exp3-word]')) === '缓存',
      `实验三 defaults to t = 4 (数据库) replaced by 缓存 (${await page.inputValue('[data-testid=exp3-pos]')}, ${await page.inputValue('[data-testid=exp3-word]')})`);
    const exp3Runs = () => page.evaluate(() => Number(document.querySelector('[data-testid=exp3-result]').dataset.runs || 0));
    const exp3Click = async (id) => {
      const n = await exp3Runs();
      await page.click(`[data-testid=${id}]`);
      await page.waitForFunction((m) => Number(document.querySelector('[data-testid=exp3-result]').dataset.runs || 0) > m
        && !document.querySelector('[data-testid=exp3-result]').hidden, n, { timeout: 10000 });
    };
    const exp3Rows = (which) => page.$$eval(`[data-testid=exp3-table] td.delta.${which}`, (tds) => tds.map((td) => ({
      same: td.dataset.same === '1', max: Number(td.dataset.max), rel: Number(td.dataset.rel || 0), zeroMark: td.classList.contains('exact-zero'),
      red: td.classList.contains('nonzero'), text: td.textContent,
    })));
    // A change as the page writes it: plain decimals from 0.01 on, else a power of ten; its share.
    const changeText = /^(\d\.\d\d × 10-\d+|\d+\.\d+) \([\d.]+%\)$/;
    const bitsDiffer = async (tokens, t3, w, causal) => {
      const b = tokens.slice();
      b[t3 - S0] = w; // t3 counts the start token, which the API puts before the tokens
      const body = (x) => Object.assign({ model: 'lesson', tokens: x, need_weights: false, encoding: 'base64' }, causal ? { causal: 'top_left' } : {});
      const [ra, rb] = [await apiPost(body(tokens)), await apiPost(body(b))];
      const [A, B] = [Buffer.from(ra.output.data, 'base64'), Buffer.from(rb.output.data, 'base64')];
      const e = ra.output.shape[1], fa = new Float32Array(A.buffer, A.byteOffset, A.length / 4), fb = new Float32Array(B.buffer, B.byteOffset, B.length / 4);
      return Array.from({ length: tokens.length + S0 }, (_, i) => {
        let max = 0;
        for (let c = i * e; c < (i + 1) * e; c++) max = Math.max(max, Math.abs(fa[c] - fb[c]));
        return { same: A.subarray(i * e * 4, (i + 1) * e * 4).equals(B.subarray(i * e * 4, (i + 1) * e * 4)), max };
      });
    };
    const redis = ['Redis', '是', '一个', '内存', '数据库', '。'];
    await exp3Click('exp3-run');
    let on = await exp3Rows('on');
    let ref = await bitsDiffer(redis, 4 + S0, '缓存', true);
    check(on.length === 6 + S0 && on.slice(0, 4 + S0).every((r) => r.same && r.zeroMark && r.text === table.STRINGS.zh['exp3.zero'])
      && on.slice(4 + S0).every((r) => !r.same && r.max > 0 && !r.zeroMark && changeText.test(r.text)),
    `实验三, causal on: rows 0-3 are marked exactly 0, rows 4-5 non-zero (${on.map((r) => r.text).join(' | ')})`);
    check(on.every((r, i) => r.same === ref[i].same && (r.same || Math.abs(r.max - ref[i].max) <= 1e-12)),
      `实验三, causal on: the page's rows are the bitwise comparison of the API's float32 outputs (${ref.map((r) => (r.same ? '=' : r.max.toExponential(2))).join(' ')})`);
    check(!(await page.isVisible('[data-testid=exp3-verdict-off]')) && (await page.textContent('[data-testid=exp3-verdict-on]')).startsWith(`因果掩码开：t 之前的 ${4 + S0} 行每一位都相同`),
      `实验三 says so (${await page.textContent('[data-testid=exp3-verdict-on]')})`);
    await exp3Click('exp3-off');
    const off = await exp3Rows('off');
    ref = await bitsDiffer(redis, 4 + S0, '缓存', false);
    on = await exp3Rows('on');
    // Without the mask the earlier rows differ; only those moved by more than float rounding
    // (1e-5 of their length) count as changed, in red, named largest first: 内存's, by 17%.
    const leak = off.slice(0, 4 + S0).filter((r) => !r.same && r.max > 0 && !r.zeroMark);
    const real = leak.filter((r) => r.rel > 1e-5), rounding = leak.filter((r) => r.rel <= 1e-5);
    check(on.slice(0, 4 + S0).every((r) => r.same) && leak.length > 0 && leak.every((r) => changeText.test(r.text) && r.red === r.rel > 1e-5)
      && off.every((r, i) => r.same === ref[i].same && (r.same || Math.abs(r.max - ref[i].max) <= 1e-12)),
    `实验三, causal off: ${leak.length} earlier rows differ, ${real.length} beyond rounding in red, shown beside the causal run (${off.map((r) => r.text).join(' | ')})`);
    const verdictOff = await page.textContent('[data-testid=exp3-verdict-off]');
    const memRel = off[3 + S0].rel;
    check(real.length >= 1 && real.every((r) => r.rel <= memRel) && memRel > 0.1
      && verdictOff.startsWith(`因果掩码关：t 之前的 ${4 + S0} 行中有 ${real.length} 行变了：「内存」，变化 ${Math.round(memRel * 100)}%`
        + (real.length > 1 ? `、其余 ${real.length - 1} 行变化不超过` : '。'))
      && (rounding.length === 0 ? !verdictOff.includes('另有') : verdictOff.includes(`另有 ${rounding.length} 行`)),
    `the leak is named, the rounding apart (${verdictOff})`);
    check(new URL(page.url()).searchParams.get('e3') === '2', 'the URL records both runs');
    await shot(page, 'lesson-exp3');
    // Another position and word, chosen in the selects.
    await page.selectOption('[data-testid=exp3-pos]', String(2 + S0));
    await page.selectOption('[data-testid=exp3-word]', '这个');
    check(!(await page.isVisible('[data-testid=exp3-result]')) && await page.isDisabled('[data-testid=exp3-off]'), 'new settings clear the old result');
    await exp3Click('exp3-run');
    on = await exp3Rows('on');
    ref = await bitsDiffer(redis, 2 + S0, '这个', true);
    check(on.slice(0, 2 + S0).every((r) => r.same && r.zeroMark) && !on[2 + S0].same && on.every((r, i) => r.same === ref[i].same)
      && (await page.textContent('[data-testid=exp3-table] tr.at-t td.word')) === '一个 → 这个',
    `实验三 at t = 2 (一个 → 这个): rows 0-1 exactly 0, row 2 non-zero (${on.map((r) => r.text).join(' | ')})`);

    // A sentence of one's own: an unknown word shows the error line with the word and where it
    // is (both languages), and is selected; the vocabulary opens from there, and a click on a
    // word replaces it.
    await open(page, '?lang=en&p=c1');
    mark = await readyMark(page);
    await page.fill('[data-testid=text]', '程序员把X发给同事。');
    await page.press('[data-testid=text]', 'Enter');
    await waitReady(page, mark);
    const leadEn = await page.textContent('[data-testid=error-lead]');
    const sel = await page.evaluate(() => { const x = document.querySelector('[data-testid=text]'); return [x.selectionStart, x.selectionEnd]; });
    check(await page.isVisible('[data-testid=error-lead]') && leadEn.includes('“X”') && leadEn.includes('character 4')
      && (await page.textContent('[data-testid=error-api]')).includes('unknown_token') && sel.join() === '4,5' && await page.isVisible('[data-testid=error-vocab]'),
    `an unknown word: the error line names it and its place, it is selected in the box (${leadEn}; selection ${sel})`);
    await page.click('[data-testid=lang-zh]');
    const leadZh = await page.textContent('[data-testid=error-lead]');
    check(leadZh.includes('“X”') && leadZh.includes('第 4 个字符'), `and in Chinese (${leadZh})`);
    await checkLanguage(page, table, 'zh', 'an unknown word in Chinese');
    await page.click('[data-testid=error-vocab]');
    await page.waitForSelector('[data-testid=vocab-words] button');
    const nWords = await page.$$eval('[data-testid=vocab-words] button', (bs) => bs.length);
    check(await page.isVisible('[data-testid=vocab]') && nWords === lessonModel.vocab.length - S0
      && (await page.textContent('[data-testid=vocab-title]')).includes(String(lessonModel.vocab.length - S0)),
    `one click opens the vocabulary: ${nWords} words, GET /v1/models/lesson has ${lessonModel.vocab.length} (the start token is not offered)`);
    await checkLanguage(page, table, 'zh', 'the vocabulary in Chinese');
    await shot(page, 'lesson-vocab-zh');
    mark = await readyMark(page);
    await page.click('[data-testid=vocab-words] button[data-word="服务器日志"]');
    await waitReady(page, mark);
    const own = new URL(page.url()).searchParams;
    check(!(await page.isVisible('[data-testid=error]')) && (await page.inputValue('[data-testid=text]')) === '程序员把服务器日志发给同事。'
      && (await page.getAttribute('[data-testid=status]', 'data-kind')) === 'ok' && own.get('p') === 'text' && own.get('text') === '程序员把服务器日志发给同事。'
      && (await rowLabels(page)).join('|') === withStart('zh', ['程序员', '把', '服务器日志', '发给', '同事', '。']).join('|'),
    `a click on a word replaces the unknown one and the sentence runs (${own.get('text')}, ${(await rowLabels(page)).join(' ')})`);
    await page.click('[data-testid=vocab-close]');
    check(!(await page.isVisible('[data-testid=vocab]')), 'the vocabulary closes');

    // The URL holds everything: a link opens the same sentence and experiments (large font, in
    // Chinese), and a sentence of one's own.
    await open(page, '?lang=zh&p=c4&large=1&head=3');
    await page.selectOption('[data-testid=exp1-query]', String(7 + S0));
    await setGuess({ 0: 3, 2: 7, 9: 1 });
    await page.click('[data-testid=exp1-compare]');
    await page.selectOption('[data-testid=exp3-pos]', String(9 + S0));
    await page.selectOption('[data-testid=exp3-word]', '开关');
    await exp3Click('exp3-run');
    await exp3Click('exp3-off');
    const snapshot = (p) => p.evaluate(() => ({
      text: document.querySelector('[data-testid=text]').value, preset: document.querySelector('[data-testid=preset]').value,
      large: document.documentElement.classList.contains('large'), lang: document.documentElement.lang,
      title: document.querySelector('[data-testid=large-title]').textContent,
      q: document.querySelector('[data-testid=exp1-query]').value,
      guess: [...document.querySelectorAll('[data-testid=exp1-guess] input')].map((x) => `${x.dataset.j}:${x.value}`).join(','),
      verdict1: document.querySelector('[data-testid=exp1-verdict]').textContent, table1: document.querySelector('[data-testid=exp1-pics]').textContent,
      pos: document.querySelector('[data-testid=exp3-pos]').value, word: document.querySelector('[data-testid=exp3-word]').value,
      table3: document.querySelector('[data-testid=exp3-table]').textContent,
      verdict3: document.querySelector('[data-testid=exp3-verdict-off]').textContent,
    }));
    const s1 = await snapshot(page);
    const link3 = page.url();
    await checkLanguage(page, table, 'zh', 'the lesson sentence with both experiments, large font, in Chinese');
    await shot(page, 'lesson-link-zh');
    const page3 = await ctx.newPage();
    await open(page3, link3);
    await page3.waitForFunction(() => !document.querySelector('[data-testid=exp3-verdict-off]').hidden, null, { timeout: 30000 });
    const s2 = await snapshot(page3);
    const diff = Object.keys(s1).filter((k) => s1[k] !== s2[k]);
    check(diff.length === 0 && s1.guess === [[0, 3], [2, 7], [4, ''], [9, 1]].map(([j, x]) => `${j + S0}:${x}`).join() && s1.pos === String(9 + S0) && s1.word === '开关' && s1.large && s1.lang === 'zh-CN',
      `a link reproduces the sentence, its guess and comparison, and both runs of 实验三 (${diff.length ? diff.map((k) => `${k}: ${s1[k]} / ${s2[k]}`).join('; ') : link3})`);
    // In English the sentence is its English twin, run again with both experiments.
    mark = await readyMark(page3);
    await page3.click('[data-testid=lang-en]');
    await waitReady(page3, mark);
    await page3.waitForFunction(() => !document.querySelector('[data-testid=exp3-verdict-off]').hidden, null, { timeout: 30000 });
    await checkLanguage(page3, table, 'en', 'the lesson sentence with both experiments, in English');
    await page3.goto(new URL(`?${own}`, base).href);
    await page3.waitForFunction(() => document.body.dataset.ready);
    check((await page3.inputValue('[data-testid=text]')) === '程序员把服务器日志发给同事。' && (await page3.inputValue('[data-testid=preset]')) === 'text'
      && (await rowLabels(page3)).length === 6 + S0, 'a link with a sentence of one\'s own opens it');
    await page3.close();

    // 12. Issue 25: the page uses the API's trace and the start token. The step tables' numbers
    // are the trace's; what 它 received; the start token apart, and hidden; 实验三 on the heatmap.
    check(S0 === 1, `the lesson model declares a start token (GET /v1/models/lesson: ${JSON.stringify(lessonModel.start_token)})`);
    const traceOf = async (body) => (await apiPost(Object.assign({}, body, { trace: true, need_weights: body.q ? true : 'per_head' }))).trace;
    const num = (x) => (x === '-inf' ? -Infinity : Number(x));
    const near = (a, b) => (a === b) || Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b));
    const rowCol = (p, col) => p.$$eval(`[data-testid=row-steps] td[data-col=${col}]`, (tds) => tds.map((td) => Number(td.dataset.x)));
    const vnorm = (x) => Math.sqrt(x.reduce((s, y) => s + y * y, 0));
    await open(page, '?lang=zh&p=c1&head=3');
    const tok1 = (await apiPost({ model: 'lesson', text: sentences.c1, need_weights: false })).tokens;
    const tr1 = await traceOf({ model: 'lesson', text: sentences.c1 });
    const it = tok1.indexOf('它');
    const rs = await page.$eval('[data-testid=row-steps]', (x) => ({ row: Number(x.dataset.row), head: Number(x.dataset.head) }));
    const [sc1, ms1, w1, c1c] = [await rowCol(page, 'score'), await rowCol(page, 'masked'), await rowCol(page, 'weight'), await rowCol(page, 'contrib')];
    const wantW = tr1.weights[3][it].map(num);
    check(rs.row === it && rs.head === 3 && sc1.length === tok1.length
      && sc1.every((x, j) => near(x, num(tr1.scores[3][it][j]))) && ms1.every((x, j) => near(x, num(tr1.masked_scores[3][it][j])))
      && w1.every((x, j) => near(x, wantW[j])) && c1c.every((x, j) => near(x, wantW[j] * vnorm(tr1.v[3][j]))),
    `the row of 它 (row ${it}) in coreference: score, masked score, softmax weight and weight × |v| are the trace's (${sc1.map((x) => x.toFixed(2)).join(' ')})`);
    const bestW = wantW.indexOf(Math.max(...wantW));
    const scoreText = await page.textContent(`[data-testid=row-steps] tr[data-j="${bestW}"] td[data-col=score]`);
    check(tok1[bestW] === '服务器日志' && wantW[bestW] > 0.8 && scoreText === num(tr1.scores[3][it][bestW]).toFixed(2),
      `它's row rests on 服务器日志 as the chapter's table does: score ${scoreText} → weight ${wantW[bestW].toFixed(2)}`);
    const out1 = await tableRow(page, 'row-out', 0);
    check(out1.length === 16 && out1.every((x, c) => x === num(tr1.head_outputs[3][it][c]).toFixed(2)),
      `× V: the head's output row is the trace's head_outputs (${out1.slice(0, 6).join(' ')} …)`);
    const scaledOk = [];
    for (const [tid, key] of [['table-scaled', 'scores'], ['table-softmax', 'weights']]) {
      const shown = await tableRow(page, tid, it);
      const want = tr1[key][3][it].map((x) => (num(x) === -Infinity ? '−∞' : num(x).toFixed(2)));
      scaledOk.push(shown.join(' ') === want.join(' ') ? '' : `${tid}: ${shown.join(' ')} / ${want.join(' ')}`);
    }
    check(scaledOk.every((x) => !x), `the whole matrices (scaled, softmax) show the trace's rows (${scaledOk.filter(Boolean).join('; ') || 'they do'})`);
    // Without a mask the "after the mask" column and step 3 would repeat the scores: they are
    // left out, and a line says so. With the causal mask they are there, the trace's.
    check(ms1.length === 0 && !(await page.$('[data-testid=table-masked]')) && await page.isVisible('#steps .step-none')
      && await page.isVisible(`[data-testid=row-steps] >> xpath=../../p[text()="${table.STRINGS.zh['row.nomask']}"]`),
    'no mask: no column "after the mask" and no step 3 table repeating the scores, a line instead');
    await open(page, '?lang=zh&p=c1&head=3&causal=top_left');
    const trc = await traceOf({ model: 'lesson', text: sentences.c1, causal: 'top_left' });
    const msc = await rowCol(page, 'masked'), mtab = await tableRow(page, 'table-masked', it);
    check(msc.length === tok1.length && msc.every((x, j) => near(x, num(trc.masked_scores[3][it][j])))
      && mtab.join(' ') === trc.masked_scores[3][it].map((x) => (num(x) === -Infinity ? '−∞' : num(x).toFixed(2))).join(' '),
    `with the causal mask, the column after the mask and step 3 show the trace's masked scores (${mtab.join(' ')})`);
    await open(page, '?lang=zh&p=c1&head=3');
    // What 它 received: the keys by weight × |v|, and the nearest vocabulary word, 服务器日志.
    const recv = await page.$$eval('[data-testid=recv-top] tr[data-j]', (trs) => trs.map((tr) => ({ j: Number(tr.dataset.j), c: Number(tr.lastElementChild.dataset.x) })));
    check(recv.length > 0 && tok1[recv[0].j] === '服务器日志' && recv.every((x, k) => k === 0 || x.c <= recv[k - 1].c)
      && recv.every((x) => near(x.c, wantW[x.j] * vnorm(tr1.v[3][x.j]))),
    `what 它 received: the keys that added most, by weight × |v|, 服务器日志 first (${recv.map((x) => `${tok1[x.j]} ${x.c.toFixed(2)}`).join(', ')})`);
    await page.waitForSelector('[data-testid=recv-nearest][data-word]', { timeout: 15000 });
    const nearest = await page.$eval('[data-testid=recv-nearest]', (x) => ({ word: x.dataset.word, text: x.textContent }));
    check(nearest.word === '服务器日志' && nearest.text.includes('服务器日志'),
      `the output of 它 in coreference is nearest to the value vector of 服务器日志 (${nearest.text})`);
    // The row is chosen in its select and kept in the URL.
    await page.selectOption('[data-testid=row-pick]', String(it + 1));
    check((await page.getAttribute('[data-testid=row-steps]', 'data-row')) === String(it + 1) && new URL(page.url()).searchParams.get('row') === String(it + 1),
      'another row is picked from the select and recorded in the URL');
    // Any model: the demo model (no vocabulary), its step tables from its own trace.
    await open(page, '?lang=en&p=random&params=model:demo&L=6&rseed=3');
    const dreq = await sentReq(page);
    const trd = await traceOf(dreq);
    let demoOk = true;
    for (let i = 0; i < 6; i++) {
      const shown = await tableRow(page, 'table-softmax', i);
      if (shown.join(' ') !== trd.weights[0][i].map((x) => num(x).toFixed(2)).join(' ')) demoOk = false;
    }
    const q0 = await tableRow(page, 'table-q', 0), dsc = await rowCol(page, 'score');
    check(demoOk && q0.join(' ') === trd.q[0][0].map((x) => x.toFixed(2)).join(' ') && dsc.every((x, j) => near(x, trd.scores[0][0][j])),
      `the demo model's step tables are its trace's (Q row 0: ${q0.slice(0, 4).join(' ')} …)`);

    // The start token: its column apart and named, one line saying what it is, and the switch
    // that hides it, each row renormalised over the real words.
    if (S0) {
      await open(page, '?lang=zh&p=c1&head=3');
      const g0 = JSON.parse(await page.getAttribute('[data-testid=large-canvas]', 'data-geom'));
      const col0 = await page.textContent('[data-testid=table-softmax] tr:first-of-type th:nth-of-type(2)');
      check(g0.start === 0 && col0 === table.STRINGS.zh['tok.start'] && await page.isVisible('[data-testid=start-note]')
        && (await page.textContent('[data-testid=start-note]')) === table.STRINGS.zh['start.note'],
      `the start token's column is drawn apart and labelled ${col0}, with its line (${await page.textContent('[data-testid=start-note]')})`);
      await page.click('[data-testid=nostart]');
      await page.waitForFunction(() => JSON.parse(document.querySelector('[data-testid=large-canvas]').dataset.geom).start === -1);
      const g1 = JSON.parse(await page.getAttribute('[data-testid=large-canvas]', 'data-geom'));
      const title = await page.textContent('[data-testid=large-title]');
      const b1 = await page.locator('[data-testid=large-canvas]').boundingBox();
      const hid = [];
      for (let j = 0; j < g1.s; j++) {
        await page.mouse.move(b1.x + g1.labW + (j + 0.5) * g1.cell, b1.y + g1.labH + (it - 1 + 0.5) * g1.cell);
        await page.waitForFunction((jj) => document.querySelector('[data-testid=tooltip]').dataset.j === String(jj), j);
        hid.push(await page.textContent('[data-testid=tooltip]'));
      }
      await page.mouse.move(0, 0);
      const ws = hid.map((x) => Number(/([\d.]+)$/.exec(x)[1]));
      const rest = 1 - wantW[0];
      check(g1.s === tok1.length - 1 && title.includes(table.STRINGS.zh['large.renorm']) && new URL(page.url()).searchParams.get('ns') === '1'
        && Math.abs(ws.reduce((s, x) => s + x, 0) - 1) < 2e-3 && ws.every((x, j) => Math.abs(x - wantW[j + 1] / rest) < 1e-4)
        && hid.every((x) => !x.includes(table.STRINGS.zh['tok.start'])),
      `hiding the start token: 它's row without its column sums to 1, each weight renormalised over the real words (${ws.join(' ')}; ${title})`);
    }

    // 实验三: with the mask off, replacing 数据库 changes 内存's row by at least 10% of its norm,
    // and the heatmap marks the changed rows (a red bar at their right), mask on and off: those
    // that moved by more than float rounding (1e-5 of their length).
    await open(page, '?lang=zh&p=c5');
    const t5 = S0 + 4;
    await exp3Click('exp3-run');
    await exp3Click('exp3-off');
    const marks = async (which) => page.$eval(`[data-testid=exp3-map-${which}] canvas`, (cv) => {
      const g = JSON.parse(cv.dataset.geom), ctx = cv.getContext('2d'), d = window.devicePixelRatio || 1;
      const px = (i) => Array.from(ctx.getImageData(Math.round((g.markX + g.markW / 2) * d), Math.round((g.labH + (i + 0.5) * g.cell) * d), 1, 1).data.slice(0, 3));
      const marked = JSON.parse(cv.dataset.marked);
      return { marked, px: Array.from({ length: Math.round((cv.height / d - g.labH - 2) / g.cell) }, (_, i) => px(i)) };
    });
    const red = (c) => c[0] > 150 && c[1] < 90 && c[2] < 90, white = (c) => c.every((x) => x > 240);
    for (const which of ['on', 'off']) {
      const rows = await exp3Rows(which), m = await marks(which);
      const want = rows.map((r, i) => (r.same || r.rel <= 1e-5 ? -1 : i)).filter((i) => i >= 0);
      check(m.marked.join() === want.join() && m.px.every((c, i) => (want.includes(i) ? red(c) : white(c))),
        `实验三, causal ${which}: the heatmap marks exactly the rows whose output changed (${want.join(', ')})`);
    }
    const rel = await page.$$eval('[data-testid=exp3-table] td.delta.off', (tds) => tds.map((td) => Number(td.dataset.rel || 0)));
    const mem = t5 - 1;
    const outs = await Promise.all(['数据库', '缓存'].map((w) => apiPost({ model: 'lesson', tokens: ['Redis', '是', '一个', '内存', w, '。'], need_weights: false })));
    const d5 = outs[0].output[mem].map((x, c) => x - outs[1].output[mem][c]);
    const want5 = vnorm(d5) / vnorm(outs[0].output[mem]);
    check(Math.abs(rel[mem] - want5) < 1e-4 && rel[mem] >= 0.1,
      `实验三, causal off: replacing 数据库 changes 内存's row by ${(rel[mem] * 100).toFixed(1)}% of its norm (at least 10%)`);
    await shot(page, 'exp3-maps', '[data-testid=exp3]');

    // The new parts keep the page within the window: a phone (390x844) and a projector
    // (1024x768), with the step tables, what 它 received and both runs of 实验三.
    for (const vp of [{ width: 390, height: 844 }, { width: 1024, height: 768 }]) {
      const c = await newContext({ viewport: vp, locale: 'zh-CN' });
      const p = await c.newPage();
      for (const q of ['?lang=zh&p=c1&head=3&e3=2', '?lang=en&p=a', '?lang=zh&p=c5&e3=2&large=1']) {
        await open(p, q);
        if (q.includes('e3=2')) await p.waitForSelector('[data-testid=exp3-map-off]', { timeout: 10000 });
        const w = await p.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
        check(w[0] <= w[1], `${vp.width}x${vp.height}, ${q}: the document is no wider than the window (${w[0]} <= ${w[1]})`);
      }
      await c.close();
    }
    await open(page, '?lang=zh&p=c1&head=3&e3=2');
    await page.waitForSelector('[data-testid=exp3-map-off]', { timeout: 10000 });
    await page.waitForSelector('[data-testid=recv-nearest][data-word]', { timeout: 15000 });
    await checkLanguage(page, table, 'zh', 'the step tables, what 它 received and 实验三\'s heatmaps in Chinese');
    await page.click('[data-testid=lang-en]');
    await checkLanguage(page, table, 'en', 'and in English');

    check(foreign.length === 0, `the page fetched nothing but attnd (${foreign.join(', ') || 'none'})`);
    // The deliberate 400 of the unknown word is logged by the browser as a failed load; nothing else may be.
    const unexpected = consoleErrors.filter((m) => !/status of 400/.test(m));
    check(unexpected.length === 0, `no console errors (${unexpected.join('; ') || 'none'})`);
  } finally {
    if (browser) await browser.close();
    proc.kill('SIGTERM');
  }
  finish('lesson');
}

main().catch((e) => { console.error(e); process.exit(1); });
