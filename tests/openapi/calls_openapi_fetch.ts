// calls_openapi_fetch.ts - the README's calls through openapi-fetch, typed by the types
// openapi-typescript generates from api/openapi.yaml (attnd.d.ts), against a live attnd.
// generators.mjs compiles it with tsc --strict beside the generated types and runs it:
//   node calls_openapi_fetch.js BASE_URL
// Exits 1 on any failure.
import createClient from 'openapi-fetch';
import type { components, paths } from './attnd.js';
import {
  base, base64Query, check, demoQuery, finish, flatNumbers, flatQuery, nestedShape, recordingFetch, sameShape,
  sent,
} from './calls_common.js';

type Schemas = components['schemas'];

// The tensors are types, not `any` (a schema that referred to itself made them `any`: TS2502).
// Each line below must be a type error; were the type `any`, tsc would report the directive
// unused (TS2578).
// @ts-expect-error strings are no tensor
export const notTensor: Schemas['Tensor'] = [['x']];
// @ts-expect-error nor an input tensor
export const notInput: Schemas['InputTensor'] = [['x']];
// @ts-expect-error nor a mask
export const notMask: Schemas['Mask'] = [['x']];
// @ts-expect-error nor a bias ("-inf" is the only string)
export const notBias: Schemas['Bias'] = [['x']];
// @ts-expect-error nor scores
export const notScores: Schemas['Scores'] = [['x']];
// @ts-expect-error nor indices
export const notIndices: Schemas['TopK']['indices'] = [['x']];
// @ts-expect-error nor v2 data
export const notData: Schemas['V2InferInput']['data'] = [[{}]];

function shapeOf(t: Schemas['OutTensor'] | undefined): number[] {
  if (t === undefined) return [];
  return Array.isArray(t) ? nestedShape(t) : t.shape;
}
function weightsShape(w: Schemas['Weights'] | undefined): number[] {
  if (w === undefined || Array.isArray(w)) return shapeOf(w);
  return 'indices' in w ? shapeOf(w.values) : shapeOf(w);
}

const client = createClient<paths>({ baseUrl: base, fetch: recordingFetch });

// POST /v1/attention, the README's demo call: (3, 64) through the demo model, causal, per head.
// The request names only the fields it sets: the others, defaults included, are optional.
const demo: Schemas['AttentionRequest'] = { model: 'demo', query: demoQuery, causal: true, need_weights: 'per_head' };
let v1Output: number[] = [];
{
  const { data, error, response } = await client.POST('/v1/attention', { body: demo });
  if (check(data !== undefined, `POST /v1/attention: ${response.status} ${JSON.stringify(error)}`) && data) {
    check(sameShape(shapeOf(data.output), [3, 64]), `attention output ${shapeOf(data.output)}, want 3,64`);
    check(sameShape(weightsShape(data.weights), [4, 3, 3]), `attention weights ${weightsShape(data.weights)}, want 4,3,3`);
    check(data.model === 'demo' && data.num_heads === 4, `attention model ${data.model}, ${data.num_heads} heads`);
    check(data.shape.N === 1 && data.shape.L === 3 && data.shape.S === 3 && data.shape.E === 64,
          `attention shape ${JSON.stringify(data.shape)}`);
    check(data.usage.flops > 0, 'attention usage.flops > 0');
    v1Output = flatNumbers(data.output);
  }
}

// The same through base64, as the README's Python example: (2, 16, 64), per-head weights.
{
  const { data, error, response } = await client.POST('/v1/attention', {
    body: { query: base64Query(), causal: true, need_weights: 'per_head', encoding: 'base64' },
  });
  if (check(data !== undefined, `POST /v1/attention base64: ${response.status} ${JSON.stringify(error)}`) && data) {
    const out = data.output;
    check(out !== undefined && !Array.isArray(out) && out.dtype === 'float32' && sameShape(out.shape, [2, 16, 64]) &&
          atob(out.data).length === 2 * 16 * 64 * 4, 'base64 output is float32 (2, 16, 64)');
    check(sameShape(weightsShape(data.weights), [2, 4, 16, 16]), `base64 weights ${weightsShape(data.weights)}`);
  }
}

// POST /v1/sdpa, the README's JavaScript example.
{
  const { data, error, response } = await client.POST('/v1/sdpa', {
    body: { q: [[1, 1], [0, 1]], k: [[1, 1], [0, 1]], v: [[1, 0], [0, 1]], causal: true, need_weights: true },
  });
  if (check(data !== undefined, `POST /v1/sdpa: ${response.status} ${JSON.stringify(error)}`) && data) {
    check(sameShape(shapeOf(data.output), [2, 2]), `sdpa output ${shapeOf(data.output)}, want 2,2`);
    check(sameShape(weightsShape(data.weights), [2, 2]), `sdpa weights ${weightsShape(data.weights)}, want 2,2`);
    const w = data.weights;
    check(Array.isArray(w) && JSON.stringify(w[0]) === '[1,0]', `sdpa causal row 0 is [1,0]: ${JSON.stringify(w)}`);
  }
}

// POST /v2/models/demo/infer in JSON: the demo call again (the same job), the same output to the bit.
{
  const { data, error, response } = await client.POST('/v2/models/{name}/infer', {
    params: { path: { name: 'demo' } },
    body: { inputs: [{ name: 'query', shape: [3, 64], datatype: 'FP32', data: flatQuery }], parameters: { causal: true, need_weights: 'per_head' } },
  });
  // The reply's type is JSON or, with binary outputs (not asked for here), the bytes.
  if (check(data !== undefined, `POST /v2/models/demo/infer: ${response.status} ${JSON.stringify(error)}`) &&
      check(typeof data !== 'string', 'v2 infer answers JSON') && data && typeof data !== 'string') {
    const out = data.outputs.find((o) => o.name === 'output');
    check(out !== undefined && out.datatype === 'FP32' && sameShape(out.shape, [3, 64]) && out.data?.length === 192,
          `v2 output ${JSON.stringify(out?.shape)}, ${out?.data?.length} values`);
    check(data.model_name === 'demo' && data.model_version === '1', `v2 model ${data.model_name} ${data.model_version}`);
    check(v1Output.length === 192 && out?.data?.every((x, i) => x === v1Output[i]) === true, 'v2 output = v1 output');
  }
  const v2 = sent.find((s) => s.path === '/v2/models/demo/infer');
  check(v2?.contentType === 'application/json', `v2 infer sent as ${v2?.contentType}, want application/json`);
}

// GET /v1/models.
{
  const { data, error, response } = await client.GET('/v1/models');
  if (check(data !== undefined, `GET /v1/models: ${response.status} ${JSON.stringify(error)}`) && data) {
    const demoModel = data.models.find((m) => m.name === 'demo');
    check(data.default === 'demo', `default model ${data.default}`);
    check(demoModel?.embed_dim === 64 && demoModel.num_heads === 4, `demo model ${JSON.stringify(demoModel)}`);
  }
}

// A decode session, the README's: open (201), two appends of one row (their outputs equal the
// rows of the demo call, which is causal), GET, DELETE (204), then the typed 404.
{
  const opened = await client.POST('/v1/sessions', { body: { model: 'demo', max_length: 8 } });
  const id = opened.data?.id ?? '';
  if (check(opened.response.status === 201 && id.length === 32 && opened.data?.length === 0,
            `POST /v1/sessions: ${opened.response.status} ${JSON.stringify(opened.error)}`)) {
    const path = { params: { path: { id } } };
    const rows: number[] = [];
    for (let t = 0; t < 2; t++) {
      const { data, error, response } = await client.POST('/v1/sessions/{id}', {
        ...path, body: { query: [demoQuery[t]], need_weights: 'per_head', expected_length: t },
      });
      if (check(data !== undefined, `append ${t}: ${response.status} ${JSON.stringify(error)}`) && data) {
        check(data.length === t + 1 && sameShape(weightsShape(data.weights), [4, 1, t + 1]),
              `append ${t}: length ${data.length}, weights ${weightsShape(data.weights)}`);
        rows.push(...flatNumbers(data.output));
      }
    }
    const worst = Math.max(...rows.map((x, i) => Math.abs(x - (v1Output[i] ?? NaN))));
    check(rows.length === 128 && worst <= 1e-6, `the appends' rows against the demo call's: ${worst}`);
    const got = await client.GET('/v1/sessions/{id}', path);
    check(got.data?.length === 2 && got.data.model === 'demo', `GET the session: ${JSON.stringify(got.data)}`);
    const del = await client.DELETE('/v1/sessions/{id}', path);
    check(del.response.status === 204, `DELETE the session: ${del.response.status}`);
    const gone = await client.GET('/v1/sessions/{id}', path);
    check(gone.response.status === 404 && gone.error?.error.code === 'session_unknown',
          `GET an ended session: ${gone.response.status} ${JSON.stringify(gone.error)}`);
  }
}

// An error, typed as the spec's Error: a query of width 3 for the demo model (E = 64).
{
  const { data, error, response } = await client.POST('/v1/attention', { body: { query: [[1, 2, 3]] } });
  check(data === undefined && response.status === 400 && error?.error.code === 'invalid_field' &&
        error.error.field === 'query', `bad query: ${response.status} ${JSON.stringify(error)}`);
}

finish('openapi-fetch client');
