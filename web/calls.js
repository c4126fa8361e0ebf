// A request as code to copy: curl, Python (requests) and JavaScript (fetch), each sending the
// same body to the same URL and printing the API's answer as JSON. The bridge from the page to
// "POST attention jobs from any language".

// value as source text: arrays of numbers or strings on one line each, other arrays and objects
// one entry a line; lit maps true, false and null to the language's words.
function source(value, lit, indent = '') {
  if (value === null || typeof value !== 'object') {
    if (value === null || typeof value === 'boolean') return lit[String(value)];
    return JSON.stringify(value);
  }
  const inner = indent + '    ';
  if (Array.isArray(value)) {
    if (value.every((x) => x === null || typeof x !== 'object')) return `[${value.map((x) => source(x, lit)).join(', ')}]`;
    return `[\n${value.map((x) => inner + source(x, lit, inner)).join(',\n')},\n${indent}]`;
  }
  const keys = Object.keys(value);
  if (!keys.length) return '{}';
  return `{\n${keys.map((k) => `${inner}${JSON.stringify(k)}: ${source(value[k], lit, inner)}`).join(',\n')},\n${indent}}`;
}

// The heredoc's end marker: one that no line of the body is.
function marker(body) {
  let m = 'JSON';
  while (body.split('\n').includes(m)) m += '_';
  return m;
}

// curl, the body on its standard input (a quoted heredoc: the shell changes nothing in it).
export function curlCall(url, body) {
  const json = JSON.stringify(body), end = marker(json);
  return `curl -sS -X POST '${url.replace(/'/g, "'\\''")}' \\\n  -H 'Content-Type: application/json' \\\n  --data-binary @- <<'${end}'\n${json}\n${end}\n`;
}

export function pythonCall(url, body) {
  return `import json\n\nimport requests\n\nurl = ${JSON.stringify(url)}\nbody = ${source(body, { true: 'True', false: 'False', null: 'None' })}\n\n`
    + 'r = requests.post(url, json=body, timeout=60)\nr.raise_for_status()\nreply = r.json()\n'
    + 'print(json.dumps(reply, ensure_ascii=False))\n';
}

// An ES module (top-level await): a browser's console, or node as a .mjs file.
export function jsCall(url, body) {
  return `const url = ${JSON.stringify(url)};\nconst body = ${source(body, { true: 'true', false: 'false', null: 'null' })};\n\n`
    + 'const res = await fetch(url, {\n    method: \'POST\',\n    headers: { \'Content-Type\': \'application/json\' },\n'
    + '    body: JSON.stringify(body),\n});\nif (!res.ok) throw new Error(`${res.status} ${await res.text()}`);\n'
    + 'const reply = await res.json();\nconsole.log(JSON.stringify(reply));\n';
}

export const CALLS = { curl: curlCall, python: pythonCall, js: jsCall };

// Several requests as one program: curl commands one after another; in Python and JavaScript a
// list of (url, body) sent in turn, each answer printed on a line of its own. calls: [{url, body}];
// one request is the single form above.
export function callsCode(lang, calls) {
  if (calls.length === 1) return CALLS[lang](calls[0].url, calls[0].body);
  if (lang === 'curl') return calls.map((c, i) => `# ${i + 1} of ${calls.length}\n${curlCall(c.url, c.body)}`).join('\n');
  if (lang === 'python') {
    const lit = { true: 'True', false: 'False', null: 'None' };
    return `import json\n\nimport requests\n\ncalls = [\n${calls.map((c) => `    (${JSON.stringify(c.url)}, ${source(c.body, lit, '    ')}),`).join('\n')}\n]\n\n`
      + 'for url, body in calls:\n    r = requests.post(url, json=body, timeout=60)\n    r.raise_for_status()\n'
      + '    print(json.dumps(r.json(), ensure_ascii=False))\n';
  }
  const lit = { true: 'true', false: 'false', null: 'null' };
  return `const calls = [\n${calls.map((c) => `    [${JSON.stringify(c.url)}, ${source(c.body, lit, '    ')}],`).join('\n')}\n];\n\n`
    + 'for (const [url, body] of calls) {\n    const res = await fetch(url, {\n        method: \'POST\',\n'
    + '        headers: { \'Content-Type\': \'application/json\' },\n        body: JSON.stringify(body),\n    });\n'
    + '    if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);\n    console.log(JSON.stringify(await res.json()));\n}\n';
}
