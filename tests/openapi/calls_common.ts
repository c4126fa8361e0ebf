// calls_common.ts - what the two generated clients' programs share (calls_openapi_fetch.ts and
// calls_orval.ts): the checks, the README's inputs, and a fetch that sends relative URLs to the
// attnd under test and records each request's method, path and Content-Type. generators.mjs
// copies it beside each generated client and compiles it with tsc --strict.

// node's process, the one member the programs use (the tests install no @types/node).
declare const process: { argv: string[]; exitCode?: number };

// The base URL of the attnd under test, e.g. http://127.0.0.1:40123 (the program's argument).
export const base: string = process.argv[2] ?? '';

let failures = 0;
let passed = 0;

// Counts one check; prints the failed ones.
export function check(ok: boolean, what: string): boolean {
  if (ok) passed++;
  else {
    failures++;
    console.error(`FAIL: ${what}`);
  }
  return ok;
}

// Prints the tally and sets the exit status (1 on any failure, or when nothing was checked).
export function finish(client: string): void {
  console.log(`${client}: ${passed} passed, ${failures} failed`);
  process.exitCode = failures || !passed ? 1 : 0;
}

// The shape of nested arrays, read from the first element of each level.
export function nestedShape(rows: unknown): number[] {
  const shape: number[] = [];
  for (let x = rows; Array.isArray(x); x = x[0]) shape.push(x.length);
  return shape;
}

// The numbers of nested arrays, row-major.
export function flatNumbers(rows: unknown): number[] {
  if (!Array.isArray(rows)) return typeof rows === 'number' ? [rows] : [];
  return rows.flatMap((r: unknown) => flatNumbers(r));
}

export function sameShape(got: readonly number[], want: readonly number[]): boolean {
  return got.length === want.length && got.every((d, i) => d === want[i]);
}

// The README's demo query (POST /v1/attention, "Self-attention with the built-in demo model"):
// (3, 64), row i, column j is ((i * 7 + j) % 5) / 5. flatQuery is the same row-major, for /v2.
export const demoQuery: number[][] = Array.from({ length: 3 }, (_, i) =>
  Array.from({ length: 64 }, (_, j) => ((i * 7 + j) % 5) / 5));
export const flatQuery: number[] = demoQuery.flat();

// A (N, L, E) = (2, 16, 64) float32 query in base64, as the README's Python example sends it.
export function base64Query(): { dtype: 'float32'; shape: number[]; data: string } {
  const x = Float32Array.from({ length: 2 * 16 * 64 }, (_, i) => Math.sin(i));
  const bytes = new Uint8Array(x.buffer);
  if (new Uint16Array(new Uint8Array([1, 0]).buffer)[0] !== 1) {
    for (let i = 0; i < bytes.length; i += 4) bytes.subarray(i, i + 4).reverse(); // to little-endian
  }
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return { dtype: 'float32', shape: [2, 16, 64], data: btoa(bin) };
}

// Each request the program sent: method, path and Content-Type.
export interface Sent {
  method: string;
  path: string;
  contentType: string | null;
}
export const sent: Sent[] = [];

// fetch with relative URLs resolved against base, recording what it sends. Takes what both
// clients pass: a Request (openapi-fetch) or a URL string and init (orval, which calls the
// global fetch: its program puts this one in its place, so it calls node's, kept here).
const nodeFetch = globalThis.fetch;
export const recordingFetch = (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
  const req = input instanceof Request ? input : new Request(new URL(String(input), base), init);
  sent.push({ method: req.method, path: new URL(req.url).pathname,
              contentType: req.headers.get('content-type') });
  return nodeFetch(req);
};
