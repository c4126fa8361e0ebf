// calls_orval.ts - the README's calls through the fetch client orval generates from
// api/openapi.yaml (attnd.ts), against a live attnd. generators.mjs compiles it with tsc --strict
// beside the generated client and runs it:
//   node calls_orval.js BASE_URL
// Exits 1 on any failure.
import {
  appendSession, attention, deleteSession, getSession, listModels, openSession, sdpa, v2Infer,
  type AttentionRequest, type Bias, type InputTensor, type Mask, type OutTensor, type Scores, type Tensor, type TopK,
  type V2InferInput, type Weights,
} from './attnd.js';
import {
  base64Query, check, demoQuery, finish, flatNumbers, flatQuery, nestedShape, recordingFetch, sameShape, sent,
} from './calls_common.js';

// The tensors are types, not `any`: each line below must be a type error; were the type `any`,
// tsc would report the directive unused (TS2578).
// @ts-expect-error strings are no tensor
export const notTensor: Tensor = [['x']];
// @ts-expect-error nor an input tensor
export const notInput: InputTensor = [['x']];
// @ts-expect-error nor a mask
export const notMask: Mask = [['x']];
// @ts-expect-error nor a bias ("-inf" is the only string)
export const notBias: Bias = [['x']];
// @ts-expect-error nor scores
export const notScores: Scores = [['x']];
// @ts-expect-error nor indices
export const notIndices: TopK['indices'] = [['x']];
// @ts-expect-error nor v2 data
export const notData: V2InferInput['data'] = [[{}]];

// orval's client calls the global fetch with paths alone: this one sends them to attnd.
Object.assign(globalThis, { fetch: recordingFetch });

function shapeOf(t: OutTensor | undefined): number[] {
  if (t === undefined) return [];
  return Array.isArray(t) ? nestedShape(t) : t.shape;
}
function weightsShape(w: Weights | undefined): number[] {
  if (w === undefined || Array.isArray(w)) return shapeOf(w);
  return 'indices' in w ? shapeOf(w.values) : shapeOf(w);
}

// POST /v1/attention, the README's demo call: (3, 64) through the demo model, causal, per head.
// The request names only the fields it sets: the others, defaults included, are optional.
const demo: AttentionRequest = { model: 'demo', query: demoQuery, causal: true, need_weights: 'per_head' };
let v1Output: number[] = [];
{
  const r = await attention(demo);
  if (check(r.status === 200, `POST /v1/attention: ${r.status} ${JSON.stringify(r.data)}`) && r.status === 200) {
    const d = r.data;
    check(sameShape(shapeOf(d.output), [3, 64]), `attention output ${shapeOf(d.output)}, want 3,64`);
    check(sameShape(weightsShape(d.weights), [4, 3, 3]), `attention weights ${weightsShape(d.weights)}, want 4,3,3`);
    check(d.model === 'demo' && d.num_heads === 4, `attention model ${d.model}, ${d.num_heads} heads`);
    check(d.shape.N === 1 && d.shape.L === 3 && d.shape.S === 3 && d.shape.E === 64, `attention shape ${JSON.stringify(d.shape)}`);
    check(d.usage.flops > 0, 'attention usage.flops > 0');
    v1Output = flatNumbers(d.output);
  }
}

// The same through base64, as the README's Python example: (2, 16, 64), per-head weights.
{
  const r = await attention({ query: base64Query(), causal: true, need_weights: 'per_head', encoding: 'base64' });
  if (check(r.status === 200, `POST /v1/attention base64: ${r.status} ${JSON.stringify(r.data)}`) && r.status === 200) {
    const out = r.data.output;
    check(out !== undefined && !Array.isArray(out) && out.dtype === 'float32' && sameShape(out.shape, [2, 16, 64]) &&
          atob(out.data).length === 2 * 16 * 64 * 4, 'base64 output is float32 (2, 16, 64)');
    check(sameShape(weightsShape(r.data.weights), [2, 4, 16, 16]), `base64 weights ${weightsShape(r.data.weights)}`);
  }
}

// POST /v1/sdpa, the README's JavaScript example.
{
  const r = await sdpa({ q: [[1, 1], [0, 1]], k: [[1, 1], [0, 1]], v: [[1, 0], [0, 1]], causal: true, need_weights: true });
  if (check(r.status === 200, `POST /v1/sdpa: ${r.status} ${JSON.stringify(r.data)}`) && r.status === 200) {
    check(sameShape(shapeOf(r.data.output), [2, 2]), `sdpa output ${shapeOf(r.data.output)}, want 2,2`);
    check(sameShape(weightsShape(r.data.weights), [2, 2]), `sdpa weights ${weightsShape(r.data.weights)}, want 2,2`);
    const w = r.data.weights;
    check(Array.isArray(w) && JSON.stringify(w[0]) === '[1,0]', `sdpa causal row 0 is [1,0]: ${JSON.stringify(w)}`);
  }
}

// POST /v2/models/demo/infer in JSON: the demo call again (the same job), the same output to the bit.
{
  const r = await v2Infer('demo', { inputs: [{ name: 'query', shape: [3, 64], datatype: 'FP32', data: flatQuery }],
                                   parameters: { causal: true, need_weights: 'per_head' } });
  // The reply's type is JSON or, with binary outputs (not asked for here), the bytes.
  if (check(r.status === 200, `POST /v2/models/demo/infer: ${r.status} ${JSON.stringify(r.data)}`) && r.status === 200 &&
      check(!(r.data instanceof Blob), 'v2 infer answers JSON') && !(r.data instanceof Blob)) {
    const d = r.data;
    const out = d.outputs.find((o) => o.name === 'output');
    check(out !== undefined && out.datatype === 'FP32' && sameShape(out.shape, [3, 64]) && out.data?.length === 192,
          `v2 output ${JSON.stringify(out?.shape)}, ${out?.data?.length} values`);
    check(d.model_name === 'demo' && d.model_version === '1', `v2 model ${d.model_name} ${d.model_version}`);
    check(v1Output.length === 192 && out?.data?.every((x, i) => x === v1Output[i]) === true, 'v2 output = v1 output');
  }
  const v2 = sent.find((s) => s.path === '/v2/models/demo/infer');
  check(v2?.contentType === 'application/json', `v2 infer sent as ${v2?.contentType}, want application/json`);
}

// GET /v1/models.
{
  const r = await listModels();
  if (check(r.status === 200, `GET /v1/models: ${r.status} ${JSON.stringify(r.data)}`) && r.status === 200) {
    const demoModel = r.data.models.find((m) => m.name === 'demo');
    check(r.data.default === 'demo', `default model ${r.data.default}`);
    check(demoModel?.embed_dim === 64 && demoModel.num_heads === 4, `demo model ${JSON.stringify(demoModel)}`);
  }
}

// A decode session, the README's: open (201), two appends of one row (their outputs equal the
// rows of the demo call, which is causal), GET, DELETE (204), then the typed 404.
{
  const opened = await openSession({ model: 'demo', max_length: 8 });
  if (check(opened.status === 201, `POST /v1/sessions: ${opened.status} ${JSON.stringify(opened.data)}`) &&
      opened.status === 201) {
    const id = opened.data.id;
    const rows: number[] = [];
    for (let t = 0; t < 2; t++) {
      const r = await appendSession(id, { query: [demoQuery[t] ?? []], need_weights: 'per_head', expected_length: t });
      if (check(r.status === 200, `append ${t}: ${r.status} ${JSON.stringify(r.data)}`) && r.status === 200) {
        check(r.data.length === t + 1 && sameShape(weightsShape(r.data.weights), [4, 1, t + 1]),
              `append ${t}: length ${r.data.length}, weights ${weightsShape(r.data.weights)}`);
        rows.push(...flatNumbers(r.data.output));
      }
    }
    const worst = Math.max(...rows.map((x, i) => Math.abs(x - (v1Output[i] ?? NaN))));
    check(rows.length === 128 && worst <= 1e-6, `the appends' rows against the demo call's: ${worst}`);
    const got = await getSession(id);
    check(got.status === 200 && got.data.length === 2 && got.data.model === 'demo',
          `GET the session: ${got.status} ${JSON.stringify(got.data)}`);
    const del = await deleteSession(id);
    check(del.status === 204, `DELETE the session: ${del.status}`);
    const gone = await getSession(id);
    check(gone.status === 404 && gone.data.error.code === 'session_unknown',
          `GET an ended session: ${gone.status} ${JSON.stringify(gone.data)}`);
  }
}

// An error, typed as the spec's Error: a query of width 3 for the demo model (E = 64).
{
  const r = await attention({ query: [[1, 2, 3]] });
  check(r.status === 400 && r.data.error.code === 'invalid_field' && r.data.error.field === 'query',
        `bad query: ${r.status} ${JSON.stringify(r.data)}`);
}

finish('orval client');
