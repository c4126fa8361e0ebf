// The strings of the exports, the call and the screens (the colour scale, the axis titles, the
// way to the controls on a phone), in English and Chinese; i18n.js adds them to its table, so
// that every rule of that table holds for them too.

export const SCREEN_STRINGS = {
  en: {
    'nav.controls': 'Settings ↓',
    'nav.views': 'Heatmap ↑',
    'cscale': 'Colour scale',
    'cscale.unit': 'every map from 0 to 1',
    'cscale.max': 'each map to its own maximum',
    'axis.query': 'query',
    'axis.key': 'key',
    'axis.grid': 'rows: queries · columns: keys',
    'stale': 'The last result, greyed out: this run failed.',

    'export.title': 'Export, and the call itself',
    'export.heatmap': 'Heatmap',
    'export.lines': 'Lines',
    'export.json': 'JSON',
    'export.request': 'request',
    'export.response': 'response',
    'export.none': 'Run first: there is nothing to export yet.',
    'call.title': 'The request the page just made, from any language',
    'call.note': 'The same request to the same API: run it from a terminal, Python or JavaScript and the answer is the one the page drew. The page may also ask for the mean of the heads or for the trace (the step tables): same API, another request.',
    'call.copy': 'Copy',
    'call.copied': 'copied',
    'call.selected': 'selected: press Ctrl+C',
  },
  zh: {
    'nav.controls': '设置 ↓',
    'nav.views': '热力图 ↑',
    'cscale': '颜色刻度',
    'cscale.unit': '所有图都从 0 到 1',
    'cscale.max': '每张图按它自己的最大值',
    'axis.query': '查询',
    'axis.key': '键',
    'axis.grid': '行：查询 · 列：键',
    'stale': '上一次的结果（已变灰）：这次运行失败了。',

    'export.title': '导出，以及这次调用本身',
    'export.heatmap': '热力图',
    'export.lines': '连线图',
    'export.json': 'JSON',
    'export.request': '请求',
    'export.response': '响应',
    'export.none': '先运行一次：现在还没有可以导出的结果。',
    'call.title': '页面刚刚发出的请求，用任何语言都能发',
    'call.note': '同一个请求发给同一个 API：在终端或任何一种编程语言里运行，得到的就是页面画出来的结果。页面有时还会另外请求各头的平均或中间结果（逐步计算表）：同一个 API，另一个请求。',
    'call.copy': '复制',
    'call.copied': '已复制',
    'call.selected': '已选中，请用键盘复制',
  },
};
