// attnd visualizer: every string the page shows, in English and Chinese, in one table.
//
// Keys are grouped by where the string appears. A value may hold {name} placeholders, which
// tr() fills; both languages of a key use the same placeholders (tests/web checks it). The
// Chinese strings use the seed chapters' terms: 查询 Q / 键 K / 值 V, 注意力权重, 缩放, 掩码,
// 因果掩码, 填充掩码, 多头, 拼接, 输出投影; "token" and "softmax" stay as the chapters write them.
// A formula keeps its ASCII form (QK^T, √d_k, W_O^T), as the chapters do.
//
// Error messages of the API itself stay in English (they are part of the API); the page puts a
// Chinese line above them (err.api_lead). An empty value means "show nothing" in that language.
//
// To add a control: give its element data-i18n="key" (text), data-i18n-placeholder or
// data-i18n-aria, and add the key here in both languages. Sections to come (the lesson model's
// presets and experiments) add their keys under their own prefix (preset.*, exp1.*, exp3.*).

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
    'preset.c1': '(c) 程序员把服务器日志发给同事…',
    'preset.c2': '(c) 小李把笔记本放进背包…',
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
    'large.title': 'Selected head',
    'large.weights': 'attention weights',
    'large.max': 'max {max}',
    'large.topk': 'top-{k} per row from the API',
    'large.aria': 'heatmap of {name}: {l} queries (rows) × {s} keys (columns)',
    'lines.title': 'Lines',
    'lines.hint': 'hover a token to filter',
    'scale.masked': 'masked (never attended)',
    'tip': 'query “{q}” → key “{k}”: {w}',
    'tip.weight': 'weight {w}',
    'tip.masked': 'masked',

    'steps.title': 'Step by step: softmax(QK^T / √d_k) V',
    'steps.pick': 'Select a head (weights "per head") to see its steps.',
    'steps.noparams': 'The step tables need the projection weights, which this page can regenerate only for the demo model and for init identity or random.',
    'steps.noreproduce': 'The page could not reproduce this model\'s weights, so it shows no step tables.',
    'tbl.q': 'query Q ({n}×{d})',
    'tbl.k': 'key K ({n}×{d})',
    'tbl.v': 'value V ({n}×{d})',
    'step.1': 'Step 1: QK^T',
    'step.2.sqrt': 'Step 2: scale, ÷ √d_k = ÷ √{dk} ≈ ÷ {root}',
    'step.2.scale': 'Step 2: scale, × {s}',
    'step.3': 'Step 3: mask (−∞ where blocked)',
    'step.4': 'Step 4: softmax per row = attention weights (from attnd)',
    'step.5.out': 'Step 5: × V = output (from attnd)',
    'step.5.head': 'Step 5: × V = output of head {h}',
    'output.title': 'Output vectors',
    'output.sdpa': 'output = weights × V',
    'output.mha': 'output = concat(heads) × W_O^T + b, the output projection ({l}×{d})',
    'output.mha.cut': 'output = concat(heads) × W_O^T + b, the output projection ({l}×{d}, first {shown} of {d} dims)',

    'footer.api': 'API:',
    'footer.models': 'models',

    // Token labels of the seed presets (a) and (b).
    'tok.query': 'query',
    'tok.key': 'key {i}',

    // The page's own errors.
    'err.json_parse': 'the pasted JSON does not parse: {msg}',
    'err.json_object': 'the pasted JSON must be an object',
    'err.json_fields': 'give "embeddings" (L rows of E numbers), or "q", "k" and "v"',
    'err.json_labels': '{n} token labels for {m} embeddings',
    'err.keys': 'real keys must be a whole number from 0 to {s}',
    'err.models': 'cannot list the models (GET /v1/models: {msg})',
    'err.network': 'cannot reach the API: {msg}',
    // Above an API error's English message; empty in English, where the message speaks for itself.
    'err.api_lead': '',
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
    'preset.c1': '(c) 程序员把服务器日志发给同事…',
    'preset.c2': '(c) 小李把笔记本放进背包…',
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
    'large.title': '选中的头',
    'large.weights': '注意力权重',
    'large.max': '最大值 {max}',
    'large.topk': '每行前 {k} 个（由 API 给出）',
    'large.aria': '{name}的热力图：{l} 个查询（行）× {s} 个键（列）',
    'lines.title': '连线图',
    'lines.hint': '鼠标移到 token 上，只看它的连线',
    'scale.masked': '被掩码（不参与注意力）',
    'tip': '查询「{q}」→ 键「{k}」：{w}',
    'tip.weight': '权重 {w}',
    'tip.masked': '被掩码',

    'steps.title': '逐步计算：softmax(QK^T / √d_k) V',
    'steps.pick': '选中一个头（注意力权重选“每个头”），就能看到它的逐步计算。',
    'steps.noparams': '逐步计算表需要投影矩阵的权重；本页只能为 demo 模型和“单位矩阵”“随机”两种初始化重新生成它们。',
    'steps.noreproduce': '本页无法复现这个模型的权重，所以不显示逐步计算表。',
    'tbl.q': '查询 Q（{n}×{d}）',
    'tbl.k': '键 K（{n}×{d}）',
    'tbl.v': '值 V（{n}×{d}）',
    'step.1': '第 1 步：QK^T',
    'step.2.sqrt': '第 2 步：缩放，÷ √d_k = ÷ √{dk} ≈ ÷ {root}',
    'step.2.scale': '第 2 步：缩放，× {s}',
    'step.3': '第 3 步：掩码（不可看的位置填 −∞）',
    'step.4': '第 4 步：逐行 softmax，得到注意力权重（attnd 算出）',
    'step.5.out': '第 5 步：× V = 输出（attnd 算出）',
    'step.5.head': '第 5 步：× V = 头 {h} 的输出',
    'output.title': '输出向量',
    'output.sdpa': '输出 = 注意力权重 × V',
    'output.mha': '输出 = 拼接(各头) × W_O^T + b，即输出投影（{l}×{d}）',
    'output.mha.cut': '输出 = 拼接(各头) × W_O^T + b，即输出投影（{l}×{d}，只显示 {d} 维中的前 {shown} 维）',

    'footer.api': 'API：',
    'footer.models': '模型列表',

    'tok.query': '查询',
    'tok.key': '键 {i}',

    'err.json_parse': '粘贴的 JSON 无法解析（浏览器的说明：{msg}）',
    'err.json_object': '粘贴的 JSON 必须是一个对象',
    'err.json_fields': '请给出 "embeddings"（L 行，每行 E 个数），或者 "q"、"k" 和 "v"',
    'err.json_labels': '有 {n} 个 token 标签，却有 {m} 个嵌入向量',
    'err.keys': '真实键的个数必须是 0 到 {s} 之间的整数',
    'err.models': '无法获取模型列表（GET /v1/models：{msg}）',
    'err.network': '无法连接 API：{msg}',
    'err.api_lead': 'API 拒绝了这个请求（HTTP {status}，{code}）。下面是 API 的英文原文：',
  },
};

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
