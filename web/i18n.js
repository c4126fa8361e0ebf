// attnd visualizer: every string the page shows, in English and Chinese, in one table.
//
// Keys are grouped by where the string appears. A value may hold {name} placeholders, which
// tr() fills; both languages of a key use the same placeholders (tests/web checks it). The
// Chinese strings use the seed chapters' terms: 查询 Q / 键 K / 值 V, 注意力权重, 缩放, 掩码,
// 因果掩码, 填充掩码, 多头, 拼接, 输出投影; "token" and "softmax" stay as the chapters write them.
// A formula keeps its ASCII form (QK^T, √d_k, W_O^T), as the chapters do.
//
// Error messages of the API itself stay in English (they are part of the API): the page shows a
// line in its own language (errors.js, err.*) and folds the API's message away under it, for the
// teacher. An empty value means "show nothing" in that language.
//
// To add a control: give its element data-i18n="key" (text), data-i18n-placeholder or
// data-i18n-aria, and add the key here in both languages. The lesson model's sentences, its
// vocabulary and the two experiments have their keys under text.*, vocab.*, headname.*,
// lesson.*, exp1.* and exp3.*; the guided path, 实验二 and the 思考题 have theirs under path.*,
// exp2.*, think.*, tied.*, multi.* and cost.*, in strings-lesson.js; the busy server's line, the
// error lines and the controls' fold theirs under busy.*, err.* and controls.*, in
// strings-class.js; the chapters' last pieces (√d_k, concat → W^O, the ending, the gloss, the
// experiments' calls) theirs in strings-chapter.js; the path's step on a model that learned
// theirs under path.learned.* and learned.*, in strings-learned.js; generation on a decode
// session theirs under gen.*, in strings-gen.js.

import { LESSON_STRINGS } from './strings-lesson.js';

import { SCREEN_STRINGS } from './i18n-screens.js';
import { CLASS_STRINGS } from './strings-class.js';
import { CHAPTER_STRINGS } from './strings-chapter.js';
import { LEARNED_STRINGS } from './strings-learned.js';
import { GEN_STRINGS } from './strings-gen.js';

export const LANGS = ['zh', 'en'];

// The switch's own labels: each language's name in that language, the same on both pages.
export const LANG_NAMES = { zh: '中文', en: 'English' };

export const STRINGS = {
  en: {
    'doc.title': 'attnd · attention visualizer',
    'app.sub': 'attention visualizer',
    'lang.group': 'Language',
    'large': 'large font',

    'status.ready': 'ready',
    'status.busy': 'computing…',
    'status.ok': 'ok',
    'status.time': '{ms} ms (compute {compute} ms)',
    'status.error': 'error',

    'input.title': 'Input',
    'preset': 'Preset',
    'preset.a': '(a) seed: 4 tokens, SDPA, d_k = 2',
    'preset.b': '(b) seed: padding mask',
    'preset.c1': 'sentence: The programmer sent the server log…',
    'preset.c2': 'sentence: Xiao Li put the laptop in the backpack…',
    'preset.c3': 'sentence: Xiao Wang submitted a patch yesterday…',
    'preset.c4': 'sentence: Engineer Zhang sent the config file…',
    'preset.c5': 'sentence: Redis is an in-memory database.',
    'preset.text': 'your own sentence',
    'preset.d': '(d) long random, L = 512, H = 12',
    'preset.random': 'seeded random embeddings',
    'preset.custom': 'pasted JSON',
    'rand.seed': 'seed',
    'custom.json': 'JSON',
    'custom.placeholder': '{"tokens": ["a", "b"], "embeddings": [[1, 0], [0, 1]]}\nor {"tokens": [...], "q": [[...]], "k": [[...]], "v": [[...]]}',

    'params.title': 'Parameters',
    'params.kind': 'Weights of the projections',
    'params.model': 'model {name} (E = {e}, H = {h})',
    'params.identity': 'init: identity',
    'params.random': 'init: random (seed)',
    'params.heads': 'heads',
    'params.seed': 'seed',

    'masks.title': 'Masks',
    'causal': 'Causal mask',
    'causal.off': 'off',
    'causal.top_left': 'top-left (j ≤ i)',
    'causal.bottom_right': 'bottom-right (j ≤ i + S − L)',
    'padding': 'Padding mask: real keys',
    'padding.all': 'all',

    'view.title': 'View',
    'weights': 'Weights',
    'weights.per_head': 'per head, plus their mean',
    'weights.mean': 'mean over heads only',
    'filter': 'Filter',
    'filter.none': 'none',
    'filter.threshold': 'weight ≥ threshold',
    'filter.topk': 'top-k per row',
    'filter.value.threshold': 'threshold',
    'filter.value.topk': 'k',
    'run': 'Run',
    'request': 'Request sent to the API',

    'heads.title': 'Heads',
    'heads.hint': 'click one to select it',
    'head.n': 'head {i}',
    'head.mean': 'mean',
    'head.glossed': '{name} ({gloss})',
    'large.title': 'Selected head',
    'large.weights': 'attention weights',
    'large.max': 'max {max}',
    'large.topk': 'top-{k} per row from the API',
    'large.renorm': 'start token hidden: each row renormalised over the real words',
    'tok.start': '<s>',
    'start.note': '<s> is the start token the model puts before every sentence. It is an attention sink: where a head puts its weight when it has no relation to show, as trained models do with [CLS], [SEP] or the first token.',
    'start.hide': 'hide the start token (renormalise each row over the real words)',
    'large.aria': 'heatmap of {name}: {l} queries (rows) × {s} keys (columns)',
    'lines.title': 'Lines',
    'lines.hint': 'hover a token to filter',
    'scale.masked': 'masked (never attended)',
    'tip': 'query “{q}” → key “{k}”: {w}',
    'tip.weight': 'weight {w}',
    'tip.masked': 'masked',

    'steps.title': 'Step by step: softmax(QK^T / √d_k) V',
    'steps.pick': 'Select a head (weights "per head") to see its steps.',
    'steps.notrace': 'The step tables need the run\'s trace ("trace": true), which the API did not give: {msg}',
    'steps.wide': 'Q and K have {dk} dimensions per head and V has {dv}: too wide for a table here. The scores below are their products.',
    'row.pick': 'Row (query word)',
    'row.title': 'The row of {q} in {name}, step by step',
    'row.col.key': 'key',
    'row.col.score': 'score = q·k {div}',
    'row.col.masked': 'after the mask',
    'row.col.weight': 'softmax weight',
    'row.col.vnorm': '|v|',
    'row.col.contrib': 'weight × |v|',
    'row.sum': 'sum',
    'row.out': '× V: the output of {name} for {q} ({d} dims, length {n})',
    'row.out.cut': '× V: the output of {name} for {q} (first {shown} of {d} dims, length {n})',
    'recv.title': 'What {q} received in {name}',
    'recv.how': 'The keys whose values added the most to this output: the weight times the length of the key\'s value vector, weight × |v|.',
    'recv.loading': 'reading the value vectors of the vocabulary…',
    'recv.nearest': 'The output of {q} in {name} is nearest to the value vector of {w} (cosine {c}).',
    'recv.nearest.what': 'Nearest: of the value vectors of every word of the vocabulary in this head, the one pointing most nearly the same way as the output (the largest cosine).',
    'recv.zero': 'The output of {q} in this head is zero.',
    'recv.noprobe': 'The value vectors of the vocabulary could not be read: {msg}',
    'tbl.q': 'query Q ({n}×{d})',
    'tbl.k': 'key K ({n}×{d})',
    'tbl.v': 'value V ({n}×{d})',
    'step.1': 'Step 1: QK^T',
    'step.3': 'Step 3: mask (−∞ where blocked)',
    'step.4': 'Step 4: softmax per row = attention weights (from attnd)',
    'step.5.out': 'Step 5: × V = output (from attnd)',
    'step.5.head': 'Step 5: × V = output of head {h}',
    'step.5.head.cut': 'Step 5: × V = output of head {h} (first {shown} of {d} dims)',
    'output.title': 'Output vectors',
    'output.sdpa': 'output = weights × V',
    'output.mha': 'output = concat(heads) × W_O^T + b, the output projection ({l}×{d})',
    'output.mha.cut': 'output = concat(heads) × W_O^T + b, the output projection ({l}×{d}, first {shown} of {d} dims)',

    // Sentences: the text box and the vocabulary of a model with one (the lesson model).
    'text.label': 'Sentence, in words of the model\'s vocabulary',
    'text.hint': 'Enter runs it.',
    'vocab.open': 'Vocabulary…',
    'vocab.title': 'Vocabulary of {model}: {n} words',
    'vocab.hint': 'Click a word to put it into the sentence at the cursor (it replaces the selected text).',
    'vocab.close': 'Close',
    'vocab.loading': 'loading…',

    // Named heads: a gloss shown after a model's head name (the lesson model's four). The names
    // are English already, so in English there is none.
    'headname.adjacent': '',
    'headname.subject': '',
    'headname.structure': '',
    'headname.coreference': '',
    'lesson.note.title': 'About these heads',
    'lesson.note': 'These heads were built by hand, each to show one relation (api/lesson/README.md says how). Heads that a model learns are rarely this clean: they mix relations and carry patterns no one can name. Do not take one head\'s picture for the model\'s whole reasoning.',

    // 实验一 of 第 6 章: guess a row, then compare it with every head's.
    'exp1.title': 'Experiment 1 · guess, then compare',
    'exp1.intro': 'When you read the query word, how would you split your attention over the candidates? Type a weight for each (any numbers: they are normalised to sum 1), then compare your guess with that word\'s weights in every head.',
    'exp1.query': 'Query word',
    'exp1.keys': 'Candidates (click a word to add or remove it)',
    'exp1.guess': 'Your guess: a weight for each candidate, and its share',
    'exp1.weight': 'weight of {k}',
    'exp1.compare': 'Compare',
    'exp1.none': 'Give at least one candidate key a weight above 0.',
    'exp1.closest': 'Closest to your guess: {head}, L1 distance {d}.',
    'exp1.l1': 'L1 distance: the sum over all keys of |your weight − the head\'s weight|. 0 is the same row, 2 is no overlap at all.',
    'exp1.needheads': 'Experiment 1 needs every head\'s weights: set Weights to “per head”.',

    // 实验三 of 第 6 章 (and 第 5 章's 未来 token 替换): replace word t, compare the outputs.
    'exp3.title': 'Experiment 3 · no peeking at the future',
    'exp3.intro': 'Replace the word at position t and run the sentence twice with the causal mask on. For each row the page shows the largest change of its output, max |Δ output|. Rows before t cannot see word t, so they must not change at all: not by a rounding error, not by one bit.',
    'exp3.pos': 'Position t',
    'exp3.word': 'Replace it with',
    'exp3.run': 'Run with the causal mask',
    'exp3.off': 'Repeat with the causal mask off',
    'exp3.col.row': 'row',
    'exp3.col.word': 'word',
    'exp3.col.on': 'causal mask on: max |Δ output| (‖Δ output‖ as a share of ‖output‖)',
    'exp3.col.off': 'causal mask off: max |Δ output| (‖Δ output‖ as a share of ‖output‖)',
    'exp3.zero': '0, bit for bit',
    'exp3.signzero': '0, but the bits differ (−0 and +0)',
    'exp3.before': 'before t',
    'exp3.after': 'from t on',
    'exp3.on.ok': 'Causal mask on: all {n} rows before t are the same, bit for bit; from t on, {m} of {k} rows changed.',
    'exp3.on.bad': 'Causal mask on: {c} of the {n} rows before t changed. The mask should have prevented that.',
    'exp3.off.none': 'Causal mask off: no row before t changed in this sentence.',
    'exp3.map.on': 'causal mask on',
    'exp3.map.off': 'causal mask off',
    'exp3.map.title': 'Weights of {name} in the original sentence. A red bar at the right marks a row whose output changed; the outlined column is word t.',
    'exp3.exact': 'The page asks the API for base64 outputs ("encoding": "base64"), so it compares the exact float32 values. Changes are written as powers of ten; the bars are on a log scale, from one hundred-millionth to 1.',

    // 实验一 (exp1.js), as reworked for the guided path: typed weights, one picture per head.
    'exp1.unread': 'not yet read',
    'exp1.placeholder': '?',
    'exp1.unread.why': '“{k}” comes after “{q}”: reading in order, the model has not yet read it when it reads “{q}”, and a language model\'s causal mask (Experiment 3) keeps it out of reach.',
    'exp1.pic.l1': 'L1 distance {d}',
    'exp1.pic.start': '{s} (rests here)',
    'exp1.pic.other': 'other words',
    'exp1.legend.guess': 'your guess (normalised)',
    'exp1.legend.model': 'the head\'s weight',
    'exp1.start': 'The start token counts: a head that puts its weight on it shows no relation for this word, so that weight does not match your guess (which gives it 0). Each picture shows it apart, and the other words together.',

    'footer.api': 'API:',
    'footer.models': 'models',

    // Token labels of the seed presets (a) and (b).
    'tok.query': 'query',
    'tok.key': 'key {i}',

    // The page's own errors.
    'err.json_parse': 'the pasted JSON does not parse',
    'err.json_object': 'the pasted JSON must be an object',
    'err.json_fields': 'give "embeddings" (L rows of E numbers), or "q", "k" and "v"',
    'err.json_labels': '{n} token labels for {m} embeddings',
    'err.keys': 'real keys must be a whole number from 0 to {s}',
    'err.keys_words': 'real keys must be a whole number from 0 to the number of words',
    'err.models': 'cannot list the models (GET /v1/models)',
    'err.network': 'cannot reach the server: check the network, then try again',
    'err.text_empty': 'type a sentence first',
    'err.novocab': 'no model of this server has a vocabulary, so it takes no sentences',
    'err.vocab': 'cannot load the vocabulary (GET /v1/models/{model})',
    // Above the API's unknown_token error: the word and where it is, in the page's language.
    'err.unknown_word': '“{word}” at character {at} of the sentence (counting from 0) is not a word of the {model} model. Open the vocabulary to pick one it knows.',
    'err.unknown_token': 'word {i} (counting from 0), “{word}”, is not a word of the {model} model. Open the vocabulary to pick one it knows.',
  },

  zh: {
    'doc.title': 'attnd · 注意力可视化',
    'app.sub': '注意力可视化',
    'lang.group': '界面语言',
    'large': '大字号',

    'status.ready': '就绪',
    'status.busy': '计算中…',
    'status.ok': '完成',
    'status.time': '{ms} 毫秒（计算 {compute} 毫秒）',
    'status.error': '出错',

    'input.title': '输入',
    'preset': '预设',
    'preset.a': '(a) 第 5 章例题：4 个 token，缩放点积注意力，d_k = 2',
    'preset.b': '(b) 第 5 章例题：填充掩码',
    'preset.c1': '句子：程序员把服务器日志发给同事…',
    'preset.c2': '句子：小李把笔记本放进背包…',
    'preset.c3': '句子：小王昨天提交了补丁…',
    'preset.c4': '句子：张工把配置文件发给测试同学…',
    'preset.c5': '句子：Redis 是一个内存数据库。',
    'preset.text': '自己写的句子',
    'preset.d': '(d) 长序列随机输入，L = 512，H = 12',
    'preset.random': '随机嵌入（可设种子）',
    'preset.custom': '粘贴的 JSON',
    'rand.seed': '种子',
    'custom.json': 'JSON',
    'custom.placeholder': '{"tokens": ["a", "b"], "embeddings": [[1, 0], [0, 1]]}\n或 {"tokens": [...], "q": [[...]], "k": [[...]], "v": [[...]]}',

    'params.title': '参数',
    'params.kind': '投影矩阵的权重',
    'params.model': '模型 {name}（E = {e}，H = {h}）',
    'params.identity': '初始化：单位矩阵',
    'params.random': '初始化：随机（按种子）',
    'params.heads': '头数',
    'params.seed': '种子',

    'masks.title': '掩码',
    'causal': '因果掩码',
    'causal.off': '关',
    'causal.top_left': '左上对齐（j ≤ i）',
    'causal.bottom_right': '右下对齐（j ≤ i + S − L）',
    'padding': '填充掩码：真实键的个数',
    'padding.all': '全部',

    'view.title': '视图',
    'weights': '注意力权重',
    'weights.per_head': '每个头，以及各头的平均',
    'weights.mean': '只看各头的平均',
    'filter': '过滤',
    'filter.none': '不过滤',
    'filter.threshold': '权重 ≥ 阈值',
    'filter.topk': '每行只留最大的 k 个',
    'filter.value.threshold': '阈值',
    'filter.value.topk': 'k',
    'run': '运行',
    'request': '发给 API 的请求',

    'heads.title': '多头',
    'heads.hint': '点击一个头来选中它',
    'head.n': '头 {i}',
    'head.mean': '平均',
    'head.glossed': '{name}（{gloss}）',
    'large.title': '选中的头',
    'large.weights': '注意力权重',
    'large.max': '最大值 {max}',
    'large.topk': '每行前 {k} 个（由 API 给出）',
    'large.renorm': '隐藏了起始符：每行只在真实的词上重新归一化',
    'tok.start': '〈始〉',
    'start.note': '〈始〉是模型放在每个句子前面的起始符。它是一个“注意力汇聚点”：一个头没有关系要表示时，就把权重放在这里；训练出来的模型也这样使用 [CLS]、[SEP] 或第一个 token。',
    'start.hide': '隐藏起始符（每行只在真实的词上重新归一化）',
    'large.aria': '{name}的热力图：{l} 个查询（行）× {s} 个键（列）',
    'lines.title': '连线图',
    'lines.hint': '鼠标移到 token 上，只看它的连线',
    'scale.masked': '被掩码（不参与注意力）',
    'tip': '查询「{q}」→ 键「{k}」：{w}',
    'tip.weight': '权重 {w}',
    'tip.masked': '被掩码',

    'steps.title': '逐步计算：softmax(QK^T / √d_k) V',
    'steps.pick': '选中一个头（注意力权重选“每个头”），就能看到它的逐步计算。',
    'steps.notrace': '逐步计算表需要这次运行的中间结果（请求里的 "trace"），API 没有给出：{msg}',
    'steps.wide': '每个头的 Q、K 有 {dk} 维，V 有 {dv} 维，放不进表格。下面的分数就是它们的乘积。',
    'row.pick': '行（查询词）',
    'row.title': '{name} 里「{q}」这一行，逐步计算',
    'row.col.key': '键',
    'row.col.score': '分数 = q·k {div}',
    'row.col.masked': '掩码之后',
    'row.col.weight': 'softmax 权重',
    'row.col.vnorm': '|v|',
    'row.col.contrib': '权重 × |v|',
    'row.sum': '合计',
    'row.out': '× V：{name} 给「{q}」的输出（{d} 维，长度 {n}）',
    'row.out.cut': '× V：{name} 给「{q}」的输出（{d} 维中的前 {shown} 维，长度 {n}）',
    'recv.title': '「{q}」在 {name} 里得到了什么',
    'recv.how': '对这个输出贡献最大的键：权重乘以该键值向量的长度，即 权重 × |v|。',
    'recv.loading': '正在读取词表里每个词的值向量…',
    'recv.nearest': '「{q}」在 {name} 里的输出，最接近「{w}」的值向量（余弦相似度 {c}）。',
    'recv.nearest.what': '最接近：在这个头里，词表中每个词都有一个值向量，方向和输出最一致的那个（余弦相似度最大）。',
    'recv.zero': '「{q}」在这个头里的输出是零向量。',
    'recv.noprobe': '无法读取词表的值向量：{msg}',
    'tbl.q': '查询 Q（{n}×{d}）',
    'tbl.k': '键 K（{n}×{d}）',
    'tbl.v': '值 V（{n}×{d}）',
    'step.1': '第 1 步：QK^T',
    'step.3': '第 3 步：掩码（不可看的位置填 −∞）',
    'step.4': '第 4 步：逐行 softmax，得到注意力权重（attnd 算出）',
    'step.5.out': '第 5 步：× V = 输出（attnd 算出）',
    'step.5.head': '第 5 步：× V = 头 {h} 的输出',
    'step.5.head.cut': '第 5 步：× V = 头 {h} 的输出（{d} 维中的前 {shown} 维）',
    'output.title': '输出向量',
    'output.sdpa': '输出 = 注意力权重 × V',
    'output.mha': '输出 = 拼接(各头) × W_O^T + b，即输出投影（{l}×{d}）',
    'output.mha.cut': '输出 = 拼接(各头) × W_O^T + b，即输出投影（{l}×{d}，只显示 {d} 维中的前 {shown} 维）',

    'text.label': '句子（用模型词表里的词）',
    'text.hint': '按回车键运行。',
    'vocab.open': '词表…',
    'vocab.title': '{model} 模型的词表：{n} 个词',
    'vocab.hint': '点一个词，把它放进句子里光标所在的地方（会替换选中的文字）。',
    'vocab.close': '关闭',
    'vocab.loading': '加载中…',

    'headname.adjacent': '相邻词',
    'headname.subject': '主语',
    'headname.structure': '结构',
    'headname.coreference': '指代',
    'lesson.note.title': '关于这些头',
    'lesson.note': '这几个头是手工构造的，每个头只展示一种关系（做法见 api/lesson/README.md）。模型训练出来的头很少这么干净：它们常常混着几种关系，还带着说不出名字的模式。不要把单个头的可视化当成模型完整推理过程。',

    'exp1.title': '实验一 · 先猜，再对照',
    'exp1.intro': '读到查询词时，你会怎样把注意力分给几个候选词？给每个候选词填一个权重（任意数字，会归一化成总和为 1），再和每个头里这个词的权重对照。',
    'exp1.query': '查询词',
    'exp1.keys': '候选词（点一个词加入或去掉）',
    'exp1.guess': '你的猜测：每个候选词的权重，以及它占的比例',
    'exp1.weight': '{k} 的权重',
    'exp1.compare': '对照',
    'exp1.none': '至少给一个候选的键大于 0 的权重。',
    'exp1.closest': '和你的猜测最接近的头：{head}，L1 距离 {d}。',
    'exp1.l1': 'L1 距离：对每个键求 |你的权重 − 头的权重|，再全部相加。0 表示两行完全一样，2 表示完全不重叠。',
    'exp1.needheads': '实验一需要每个头的权重：把“注意力权重”设为“每个头”。',

    'exp3.title': '实验三 · 不许偷看未来',
    'exp3.intro': '把位置 t 上的词换掉，在因果掩码打开时把句子算两次。本页逐行显示输出的最大变化：最大 |Δ 输出|。t 之前的行看不到第 t 个词，所以一点都不能变：不是误差很小，而是每一位都相同。',
    'exp3.pos': '位置 t',
    'exp3.word': '换成',
    'exp3.run': '在因果掩码下运行',
    'exp3.off': '关掉因果掩码再做一次',
    'exp3.col.row': '行',
    'exp3.col.word': '词',
    'exp3.col.on': '因果掩码开：最大 |Δ 输出|（‖Δ 输出‖ 占 ‖输出‖ 的比例）',
    'exp3.col.off': '因果掩码关：最大 |Δ 输出|（‖Δ 输出‖ 占 ‖输出‖ 的比例）',
    'exp3.zero': '0，逐位相同',
    'exp3.signzero': '0，但二进制位不同（−0 与 +0）',
    'exp3.before': 't 之前',
    'exp3.after': 't 及之后',
    'exp3.on.ok': '因果掩码开：t 之前的 {n} 行每一位都相同；从 t 开始，{k} 行中有 {m} 行变了。',
    'exp3.on.bad': '因果掩码开：t 之前的 {n} 行中有 {c} 行变了。掩码本应挡住这种变化。',
    'exp3.off.none': '因果掩码关：这句话里 t 之前没有一行变化。',
    'exp3.map.on': '因果掩码开',
    'exp3.map.off': '因果掩码关',
    'exp3.map.title': '原句在 {name} 里的注意力权重。右侧的红条标出输出变了的行；加框的一列是第 t 个词。',
    'exp3.exact': '本页让 API 用 "base64" 编码返回输出（"encoding": "base64"），所以比较的是精确的 32 位浮点数。变化量写成 10 的幂；条形按对数刻度，从一亿分之一到 1。',

    'exp1.unread': '还没读到',
    'exp1.placeholder': '？',
    'exp1.unread.why': '「{k}」在「{q}」之后：按顺序读时，模型读到「{q}」的时候还没读到它；语言模型的因果掩码（实验三）更是让它完全看不到。',
    'exp1.pic.l1': 'L1 距离 {d}',
    'exp1.pic.start': '{s}（无关系时停在这里）',
    'exp1.pic.other': '其他词',
    'exp1.legend.guess': '你的猜测（已归一化）',
    'exp1.legend.model': '这个头的权重',
    'exp1.start': '起始符也算在内：一个头把权重放在起始符上，表示它对这个词没有关系要表示，这部分权重和你的猜测（起始符为 0）对不上。每张图把它单独列出，其他词合在一起。',

    'footer.api': 'API：',
    'footer.models': '模型列表',

    'tok.query': '查询',
    'tok.key': '键 {i}',

    'err.json_parse': '粘贴的 JSON 无法解析',
    'err.json_object': '粘贴的 JSON 必须是一个对象',
    'err.json_fields': '请给出 "embeddings"（L 行，每行 E 个数），或者 "q"、"k" 和 "v"',
    'err.json_labels': '有 {n} 个 token 标签，却有 {m} 个嵌入向量',
    'err.keys': '真实键的个数必须是 0 到 {s} 之间的整数',
    'err.keys_words': '真实键的个数必须是 0 到词数之间的整数',
    'err.models': '无法获取模型列表（GET /v1/models）',
    'err.network': '连不上服务器：请检查网络，再试一次',
    'err.text_empty': '请先输入一个句子',
    'err.novocab': '这个服务器上没有带词表的模型，所以不能发送句子',
    'err.vocab': '无法获取词表（GET /v1/models/{model}）',
    'err.unknown_word': '句子第 {at} 个字符处（从 0 数起）的“{word}”不在 {model} 模型的词表里。打开词表，挑一个它认识的词。',
    'err.unknown_token': '第 {i} 个词（从 0 数起）“{word}”不在 {model} 模型的词表里。打开词表，挑一个它认识的词。',
  },
};
// The exports' and the screens' strings, in their own module (i18n-screens.js).
for (const l of LANGS) Object.assign(STRINGS[l], SCREEN_STRINGS[l]);

// The guided path's, 实验二's and the 思考题's strings (strings-lesson.js), in the same table.
for (const lang of LANGS) Object.assign(STRINGS[lang], LESSON_STRINGS[lang]);

// A class on one server: the busy server's retry line, the error lines, the controls' fold
// (strings-class.js).
for (const lang of LANGS) Object.assign(STRINGS[lang], CLASS_STRINGS[lang]);

// The chapters' last pieces: √d_k, concat → W^O, the ending, honest numbers (strings-chapter.js).
for (const lang of LANGS) Object.assign(STRINGS[lang], CHAPTER_STRINGS[lang]);

// A model that learned: the induction model's heads (strings-learned.js).
for (const lang of LANGS) Object.assign(STRINGS[lang], LEARNED_STRINGS[lang]);

// Generation on a decode session, one token at a time (strings-gen.js).
for (const lang of LANGS) Object.assign(STRINGS[lang], GEN_STRINGS[lang]);

// The language to show: the URL's lang when it names one, else the first of the browser's
// languages (navigator.languages) that the table has, else English.
export function pickLang(param, languages) {
  if (LANGS.includes(param)) return param;
  for (const l of languages || []) {
    const base = String(l).toLowerCase().split('-')[0];
    if (LANGS.includes(base)) return base;
  }
  return 'en';
}

// The string of key in lang with its {placeholders} filled from params. A key missing from the
// table is a bug: it shows as the key itself, so that a test sees it.
export function tr(lang, key, params = {}) {
  const s = STRINGS[lang] && STRINGS[lang][key];
  if (s === undefined) return key;
  return s.replace(/\{(\w+)\}/g, (m, name) => (name in params ? String(params[name]) : m));
}
