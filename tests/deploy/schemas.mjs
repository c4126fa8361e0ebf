// schemas.mjs - every manifest of deploy/k8s/ (and its kserve/ folder) against its published
// schema, and each schema shown able to refuse a manifest broken on purpose.
//
// - The Kubernetes kinds (ConfigMap, Deployment, Service, HorizontalPodAutoscaler,
//   PodDisruptionBudget, Ingress): the validators of the npm package kubernetes-models, generated from
//   Kubernetes' published OpenAPI definitions (types, required fields, enums). Like the API
//   server without strict field validation, they let unknown fields through.
// - ServiceMonitor: @kubernetes-models/prometheus-operator, generated from the Prometheus
//   Operator's CRD the same way.
// - ServingRuntime and InferenceService: KServe's CRDs (tests/deploy/schemas/kserve/, their
//   source in README.md there): the openAPIV3Schema of the manifest's version, with ajv, strictly
//   (as kubeconform -strict does: an object schema that lists its properties takes no others,
//   unless it says x-kubernetes-preserve-unknown-fields), so a misspelt field is an error.
// - Kustomization (kustomize's own kind, which no schema package of Debian or npm carries): its
//   resources are files of the folder that hold the kinds above, and its images name the
//   Deployment's image.
//
// Usage: node tests/deploy/schemas.mjs   (after npm ci in tests/deploy)
// Prints one line per manifest and "N passed, N failed"; exits 1 on any failure.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import yaml from 'js-yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const k8sDir = path.join(root, 'deploy', 'k8s');
let passed = 0, failed = 0;
function check(ok, what) {
  if (ok) passed++;
  else { failed++; console.log(`FAIL ${what}`); }
  return ok;
}

// Kubernetes' kinds, by apiVersion/kind, from kubernetes-models.
const MODELS = {
  'v1/ConfigMap': 'kubernetes-models/v1/ConfigMap',
  'v1/Service': 'kubernetes-models/v1/Service',
  'apps/v1/Deployment': 'kubernetes-models/apps/v1/Deployment',
  'autoscaling/v2/HorizontalPodAutoscaler': 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler',
  'policy/v1/PodDisruptionBudget': 'kubernetes-models/policy/v1/PodDisruptionBudget',
  'networking.k8s.io/v1/Ingress': 'kubernetes-models/networking.k8s.io/v1/Ingress',
  'monitoring.coreos.com/v1/ServiceMonitor':
    '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor',
};
const CRDS = {
  ServingRuntime: 'serving.kserve.io_servingruntimes.yaml',
  InferenceService: 'serving.kserve.io_inferenceservices.yaml',
};

// kubeconform's strict mode on a CRD schema: objects with properties take no others.
function strict(schema) {
  if (Array.isArray(schema)) return schema.map(strict);
  if (!schema || typeof schema !== 'object') return schema;
  const out = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === 'x-kubernetes-preserve-unknown-fields' || k.startsWith('x-kubernetes-')) continue;
    out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v).map(([p, s]) => [p, strict(s)]))
                                : strict(v);
  }
  if (schema.properties && schema.additionalProperties === undefined &&
      !schema['x-kubernetes-preserve-unknown-fields'])
    out.additionalProperties = false;
  return out;
}

const ajv = new Ajv({ allErrors: false, strict: false, validateFormats: false, logger: false });
const crdValidators = {};
function crdValidator(kind, version) {
  const key = `${kind}/${version}`;
  if (!(key in crdValidators)) {
    const crd = yaml.load(fs.readFileSync(path.join(here, 'schemas', 'kserve', CRDS[kind]), 'utf8'));
    const v = crd.spec.versions.find((x) => x.name === version);
    crdValidators[key] = v ? ajv.compile(strict(v.schema.openAPIV3Schema)) : null;
  }
  return crdValidators[key];
}

// The errors of doc against its schema: [] when valid, null when no schema is known.
async function validate(doc) {
  const api = doc.apiVersion || '';
  const key = `${api}/${doc.kind}`;
  if (MODELS[key]) {
    const mod = await import(MODELS[key]);
    try {
      new mod[doc.kind](doc).validate();
      return [];
    } catch (e) {
      return [e.message.split('\n')[0]];
    }
  }
  if (CRDS[doc.kind] && api.startsWith('serving.kserve.io/')) {
    const v = crdValidator(doc.kind, api.split('/')[1]);
    if (!v) return [`KServe's CRD has no version ${api}`];
    return v(doc) ? [] : v.errors.map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`);
  }
  return null;
}

function manifests(dir) {
  const out = [];
  for (const f of fs.readdirSync(dir).sort()) {
    const p = path.join(dir, f);
    if (fs.statSync(p).isDirectory()) out.push(...manifests(p));
    else if (/\.ya?ml$/.test(f))
      yaml.loadAll(fs.readFileSync(p, 'utf8')).filter(Boolean).forEach((doc, i) =>
        out.push({ file: path.relative(root, p), i, doc }));
  }
  return out;
}

const all = manifests(k8sDir);
const seen = new Set();
let deploymentImage = null;
for (const { file, i, doc } of all) {
  const what = `${file} [${i}] ${doc.kind}`;
  seen.add(doc.kind);
  if (doc.kind === 'Deployment') deploymentImage = doc.spec.template.spec.containers[0].image;
  if (doc.kind === 'Kustomization') continue; // below
  const errs = await validate(doc);
  if (check(errs !== null, `${what}: no published schema is known for ${doc.apiVersion} ${doc.kind}`) &&
      check(errs.length === 0, `${what}: ${errs.join('; ')}`))
    console.log(`ok: ${what} (${doc.apiVersion})`);
}
for (const kind of ['ConfigMap', 'Deployment', 'Service', 'HorizontalPodAutoscaler',
  'PodDisruptionBudget', 'Ingress', 'ServiceMonitor', 'ServingRuntime', 'InferenceService',
  'Kustomization'])
  check(seen.has(kind), `deploy/k8s has a ${kind}`);

// The Kustomization: its resources exist here and hold the core kinds; its image is the
// Deployment's.
for (const { file, doc } of all.filter((m) => m.doc.kind === 'Kustomization')) {
  const dir = path.dirname(path.join(root, file));
  const kinds = new Set();
  for (const r of doc.resources || []) {
    const p = path.join(dir, r);
    if (check(fs.existsSync(p), `${file}: its resource ${r} is missing`))
      yaml.loadAll(fs.readFileSync(p, 'utf8')).filter(Boolean).forEach((d) => kinds.add(d.kind));
  }
  for (const kind of ['ConfigMap', 'Deployment', 'Service', 'HorizontalPodAutoscaler', 'PodDisruptionBudget'])
    check(kinds.has(kind), `${file}: its resources lack a ${kind}`);
  const img = (doc.images || []).find((x) => x.name === deploymentImage);
  check(img && img.newName && img.newTag, `${file}: no images entry sets the Deployment's image ${deploymentImage}`);
  console.log(`ok: ${file} Kustomization (${(doc.resources || []).length} resources, image ${img ? `${img.newName}:${img.newTag}` : '?'})`);
}

// Each schema must be able to refuse: a manifest of each kind broken on purpose.
const broken = {
  Deployment: (d) => { d.spec.replicas = 'two'; },
  Service: (d) => { d.spec.ports[0].port = 'eighty'; },
  HorizontalPodAutoscaler: (d) => { delete d.spec.scaleTargetRef; },
  PodDisruptionBudget: (d) => { d.spec.selector.matchLabels = ['attnd']; },
  ConfigMap: (d) => { d.data = { ATTND_THREADS: 2 }; },
  Ingress: (d) => { d.spec.rules[0].http.paths[0].pathType = 7; },
  ServiceMonitor: (d) => { d.spec.endpoints = 'http'; },
  ServingRuntime: (d) => { d.spec.containers[0].imagePullPolice = 'Always'; }, // misspelt
  InferenceService: (d) => { d.spec.predictor.model.storageURI = d.spec.predictor.model.storageUri; },
};
for (const [kind, breakIt] of Object.entries(broken)) {
  const m = all.find((x) => x.doc.kind === kind);
  if (!m) continue;
  const doc = structuredClone(m.doc);
  breakIt(doc);
  const errs = await validate(doc);
  check(errs && errs.length > 0, `a ${kind} broken on purpose passed its schema`);
}
console.log(`deploy schemas: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
