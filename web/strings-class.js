// The strings of a class on one server (issue 34): the line shown while the page waits to retry
// a busy server, the error lines a student reads (the API's own message folded away for the
// teacher), and the button that folds the controls away for the lesson, in English and Chinese;
// i18n.js merges them into its STRINGS, and they follow its rules.

export const CLASS_STRINGS = {
  en: {
    // api.js and busy.js: a 503 is retried after its Retry-After, at most 3 times.
    'busy.retry': 'the server is busy, retrying in {s} s… (retry {n} of {m})',

    // errors.js: the line a student reads for an error, and the fold with the original message.
    'err.details': 'the API\'s own message (for the teacher)',
    'err.details.browser': 'the browser\'s own message (for the teacher)',
    'err.busy': 'The server is still busy after {n} retries. Wait a minute, then try again.',
    'err.api': 'The API refused this request (HTTP {status}, {code}).',
    'err.too_large': 'This job is too large for the server (HTTP {status}, {code}).',
    'err.server': 'The server failed on this request (HTTP {status}, {code}). Try again in a moment.',
    'err.page': 'Something went wrong in the page.',

    // The controls, folded away in large font and on the guided path (index.html, app.js).
    'controls.show': 'Settings',
    'controls.hide': 'Hide the settings',
  },
  zh: {
    'busy.retry': '服务器繁忙，{s} 秒后重试…（第 {n} 次，共 {m} 次）',

    'err.details': 'API 的原文（给老师看）',
    'err.details.browser': '浏览器的原文（给老师看）',
    'err.busy': '服务器仍然繁忙，已经重试了 {n} 次。请等一分钟再试。',
    'err.api': 'API 拒绝了这个请求（HTTP {status}，{code}）。',
    'err.too_large': '这个任务对服务器来说太大了（HTTP {status}，{code}）。',
    'err.server': '服务器处理这个请求时出错了（HTTP {status}，{code}）。请稍后再试。',
    'err.page': '页面出了点问题。',

    'controls.show': '设置',
    'controls.hide': '收起设置',
  },
};
