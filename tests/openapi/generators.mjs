// generators.mjs - api/openapi.yaml through two TypeScript client generators, each client then
// run against a live attnd (make test-spec, tests/openapi/spec.mk).
//
// (a) openapi-typescript writes the spec's types (attnd.d.ts), which openapi-fetch's client
//     takes; (b) orval writes a fetch client (attnd.ts). Each generated file must compile alone
//     under tsc --strict --noEmit with no error. Then a program per client
//     (calls_openapi_fetch.ts, calls_orval.ts, both with calls_common.ts), compiled by tsc
//     --strict to JavaScript beside the generated code, makes the README's calls through it
//     (POST /v1/attention on the demo model, in JSON and base64; POST /v1/sdpa; POST
//     /v2/models/demo/infer in JSON; GET /v1/models; a decode session opened, appended to, read
//     and deleted; an invalid request's typed error) against
//     attnd on an ephemeral loopback port and checks the answers' shapes; its compilation also
//     checks the types (no tensor is `any`, no request field with a default is required).
// Everything is written under OUT_DIR (e.g. build/openapi-clients), nothing in the repository.
// Every step is bounded in time. Exits 1 on any failure.
//
// Usage: node tests/openapi/generators.mjs ATTND_BINARY OUT_DIR [SPEC]  (default api/openapi.yaml)
import { startAttnd } from './attnd.mjs';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const [bin, outArg, specArg] = process.argv.slice(2);
if (!bin || !outArg) {
  console.error('usage: generators.mjs ATTND_BINARY OUT_DIR [SPEC]');
  process.exit(2);
}
const here = fileURLToPath(new URL('.', import.meta.url));
const spec = specArg ? resolve(specArg) : resolve(here, '../../api/openapi.yaml');
const tools = join(here, 'node_modules', '.bin');
const out = resolve(outArg);

let failures = 0, checks = 0;
function check(ok, what) {
  checks++;
  if (!ok) { failures++; console.error(`FAIL: ${what}`); }
  return ok;
}

// Runs a tool of node_modules/.bin for at most `seconds`; returns {ok, text} (stdout + stderr).
function run(tool, args, seconds, cwd = out) {
  const r = spawnSync(join(tools, tool), args, { cwd, encoding: 'utf8', timeout: seconds * 1000 });
  const text = `${r.stdout || ''}${r.stderr || ''}`;
  if (r.error) return { ok: false, text: `${tool}: ${r.error.message}\n${text}` };
  return { ok: r.status === 0, text };
}

// tsc --strict over the given files, with the options the programs need (ES2022 modules as node
// runs them, fetch's types from the DOM library, no @types packages picked up on the way).
function tsc(dir, files, emit) {
  const config = {
    compilerOptions: {
      strict: true, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext',
      lib: ['ES2022', 'DOM', 'DOM.Iterable'], types: [], noEmit: !emit, outDir: emit ? 'js' : undefined,
    },
    files,
  };
  const name = emit ? 'tsconfig.json' : 'tsconfig.generated.json';
  writeFileSync(join(dir, name), JSON.stringify(config, null, 2));
  const r = run('tsc', ['-p', name], 120, dir);
  const errors = r.text.split('\n').filter((l) => /error TS\d+/.test(l));
  return { ok: r.ok && errors.length === 0, errors, text: r.text };
}

// The files of one client: OUT/NAME with the program and calls_common.ts beside the generated
// code, node_modules (openapi-fetch, for its import) linked from tests/openapi.
function clientDir(name, program) {
  const dir = join(out, name);
  mkdirSync(dir, { recursive: true });
  symlinkSync(join(here, 'node_modules'), join(dir, 'node_modules'));
  writeFileSync(join(dir, 'package.json'), '{"type": "module", "private": true}\n');
  copyFileSync(join(here, program), join(dir, program));
  copyFileSync(join(here, 'calls_common.ts'), join(dir, 'calls_common.ts'));
  return dir;
}

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const clients = [
  {
    name: 'openapi-fetch', program: 'calls_openapi_fetch.ts', generated: 'attnd.d.ts',
    generate: (dir) => run('openapi-typescript', [spec, '-o', join(dir, 'attnd.d.ts')], 120),
  },
  {
    name: 'orval', program: 'calls_orval.ts', generated: 'attnd.ts',
    generate: (dir) => run('orval', ['--input', spec, '--output', join(dir, 'attnd.ts'),
                                      '--client', 'fetch', '--mode', 'single'], 120),
  },
];

const built = [];
for (const c of clients) {
  const dir = clientDir(c.name, c.program);
  const gen = c.generate(dir);
  // openapi-typescript lints the spec on the way (Redocly's rules): say how many warnings.
  const warnings = gen.text.split('\n').filter((l) => l.includes('⚠')).length;
  if (!check(gen.ok, `${c.name}: the generator failed:\n${gen.text.slice(-2000)}`)) continue;
  const alone = tsc(dir, [c.generated], false);
  check(alone.ok, `${c.name}: tsc --strict --noEmit ${c.generated}: ${alone.errors.length} errors\n` +
        (alone.errors.length ? alone.errors.slice(0, 20).join('\n') : alone.text.slice(-2000)));
  const prog = tsc(dir, [c.program], true);
  check(prog.ok, `${c.name}: tsc --strict ${c.program}: ${prog.errors.length} errors\n` +
        (prog.errors.length ? prog.errors.slice(0, 20).join('\n') : prog.text.slice(-2000)));
  console.log(`${c.name}: generated ${c.generated}${warnings ? ` (${warnings} warnings from the generator)` : ''}; ` +
              `tsc --strict: ${alone.errors.length} errors in it, ${prog.errors.length} in ${c.program} with it`);
  if (prog.ok) built.push({ ...c, js: join(dir, 'js', c.program.replace(/\.ts$/, '.js')) });
}

if (built.length) {
  const { proc, base } = await startAttnd(bin);
  try {
    for (const c of built) {
      const r = spawnSync(process.execPath, [c.js, base], { encoding: 'utf8', timeout: 60000 });
      process.stdout.write(r.stdout || '');
      process.stderr.write(r.stderr || '');
      check(r.status === 0, `${c.name}: ${c.program} against attnd: exit ${r.status}${r.error ? ` (${r.error.message})` : ''}`);
    }
  } finally {
    proc.kill('SIGTERM');
  }
}
check(built.length === clients.length, `${built.length} of ${clients.length} clients built and ran`);
console.log(`openapi generators: ${checks - failures} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
