/* job.c - runs parsed jobs on libattn: one at a time (api_job_run; a job on a model of layers
 * as a stack, with its next-token predictions), or as batches of jobs on the same parameters
 * (api_jobs_run), whose projections libattn computes as one GEMM; and the job's accessors and
 * release.
 *
 * Legend: N batch, L query length, E embedding width. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"

/* The params.init weights of the last job a thread made them for, kept for its next job: a
 * flood of small jobs on the same "init" and seed (the classroom's, a benchmark's) then makes
 * them once per thread instead of once per job or batch. Only weights of at most
 * API_INIT_CACHE_FLOATS floats are kept (E <= 256), so each thread holds at most 1 MiB; the
 * thread's exit frees it (the key's destructor). */
typedef struct init_cache {
    int init; /* APIP_INIT_* */
    uint64_t seed;
    size_t e;
    float *w; /* (4 E^2): in_proj (3E, E), then out_proj (E, E) */
} init_cache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_ok;

static void cache_free(void *p) {
    init_cache *c = p;
    if (c)
        free(c->w);
    free(c);
}

static void cache_key_make(void) {
    cache_ok = pthread_key_create(&cache_key, cache_free) == 0;
}

/* True when job's params.init weights (4 E^2 floats) are small enough to keep per thread. */
static bool cacheable(const api_job *job) {
    return job->e > 0 && 4 * job->e * job->e <= API_INIT_CACHE_FLOATS;
}

/* This thread's copy of job's params.init weights, made now if it holds others; NULL when they
 * are too large to keep or memory is short (the caller makes them in the job's arena). */
static const float *cache_get(const api_job *job) {
    size_t e = job->e, n = 4 * e * e;
    if (!cacheable(job))
        return NULL;
    pthread_once(&cache_once, cache_key_make);
    if (!cache_ok)
        return NULL;
    init_cache *c = pthread_getspecific(cache_key);
    if (!c) {
        if (!(c = calloc(1, sizeof *c)))
            return NULL;
        if (pthread_setspecific(cache_key, c) != 0) {
            free(c);
            return NULL;
        }
    }
    if (c->w && c->e == e && c->init == job->init &&
        (job->init == APIP_INIT_IDENTITY || c->seed == job->seed))
        return c->w;
    if (c->e != e) {
        free(c->w);
        c->e = 0;
        if (!(c->w = malloc(n * sizeof *c->w)))
            return NULL;
    }
    if (job->init == APIP_INIT_RANDOM)
        apip_init_random(c->w, c->w + 3 * e * e, e, job->seed);
    else
        apip_init_identity(c->w, c->w + 3 * e * e, e);
    c->init = job->init;
    c->seed = job->seed;
    c->e = e;
    return c->w;
}

/* Gives a job on params.init its weights, once: this thread's cached copy when they are small
 * (cache_get), else made in the job's arena. */
static void params_make(api_job *job) {
    if (job->params_ready)
        return;
    const float *w = cache_get(job);
    if (w) {
        job->params.in_proj_weight = w;
        job->params.out_proj_weight = w + 3 * job->e * job->e;
    } else {
        float *in = (float *)job->params.in_proj_weight;
        float *out = (float *)job->params.out_proj_weight;
        if (job->init == APIP_INIT_RANDOM)
            apip_init_random(in, out, job->e, job->seed);
        else
            apip_init_identity(in, out, job->e);
    }
    job->params_ready = true;
}

/* Makes a job's seeded inputs in its arena, once. Output i of a stream is made from the state
 * seed + i * gamma, so batch_first false's rows, sent (T, N, W) and stored (N, T, W), are made
 * each from its place in the stream, in the order they are stored. */
static void inputs_make(api_job *job) {
    if (job->inputs_ready)
        return;
    for (int i = 0; i < 3; i++) {
        const apip_seeded *sd = &job->seeded[i];
        if (!sd->dst)
            continue;
        if (!sd->t) {
            apip_uniform_fill(sd->dst, sd->count, 1.0, sd->seed);
            continue;
        }
        for (size_t b = 0; b < sd->n; b++)
            for (size_t j = 0; j < sd->t; j++)
                apip_uniform_fill(sd->dst + (b * sd->t + j) * sd->w, sd->w, 1.0,
                                  sd->seed +
                                      (uint64_t)((j * sd->n + b) * sd->w) * APIP_SPLITMIX_GAMMA);
    }
    job->inputs_ready = true;
}

bool api_job_params_cheap(const api_job *job) {
    if (job && job->session) /* a session's params.init weights are made by its first append */
        return job->session->params_ready;
    return job && (job->init == APIP_INIT_NONE || cacheable(job));
}

/* The API error of a failed libattn run. */
static int run_fail(api_error *err, int rc, const attn_error *ae) {
    if (rc == ATTN_ERR_NUMERIC)
        return api_fail(err, 400, "numeric_overflow", NULL,
                        "the result overflows float32 (%s); scale the inputs down", ae->msg);
    return api_fail(err, 500, "internal", NULL, "the computation failed: %s", ae->msg);
}

/* ---- Models of layers ------------------------------------------------------------------- */

/* The predictions of a row of V logits: the K largest (largest first, the lower token first
 * among equals) into ids and lg, and their softmax probabilities over all V into prob
 * (summed in double from the largest logit). */
static void predict_row(const float *logits, size_t v, size_t k, int32_t *ids, float *prob,
                        float *lg) {
    size_t n = 0;
    for (size_t j = 0; j < v; j++) {
        float x = logits[j];
        if (n == k && !(x > lg[k - 1]))
            continue;
        size_t at = n < k ? n++ : k - 1;
        while (at > 0 && x > lg[at - 1]) {
            lg[at] = lg[at - 1];
            ids[at] = ids[at - 1];
            at--;
        }
        lg[at] = x;
        ids[at] = (int32_t)j;
    }
    double sum = 0.0, top = (double)lg[0];
    for (size_t j = 0; j < v; j++)
        sum += exp((double)logits[j] - top);
    for (size_t i = 0; i < k; i++)
        prob[i] = (float)(exp((double)lg[i] - top) / sum);
}

/* Runs a job on a model of layers: the stack's forward, keeping the weights and trace of the
 * layers the reply carries (kept layer i's in place i of each), then the predictions. */
static int stack_run(api_job *job, attn_pool *pool, api_error *err) {
    const apip_stack_job *sj = job->sj;
    attn_stack_layer_out keep[APIP_MAX_LAYERS];
    attn_weights_out w[APIP_MAX_LAYERS];
    attn_trace t[APIP_MAX_LAYERS];
    memset(keep, 0, sj->stack->layers * sizeof keep[0]);
    const size_t nle = job->n * job->l * job->e, maps = job->n * job->h * job->l * job->l;
    for (size_t i = 0; i < sj->nkeep; i++) {
        attn_stack_layer_out *o = &keep[sj->keep[i]];
        if (job->plan.weights_elems) {
            w[i] = (attn_weights_out){.values = job->wout.values + i * sj->plan.weights_elems};
            if (job->wout.indices)
                w[i].indices = job->wout.indices + i * sj->plan.index_elems;
            o->weights = &w[i];
        }
        if (job->traced) {
            const attn_trace *b = &job->trace;
            t[i] = (attn_trace){.q = b->q + i * nle,
                                .k = b->k + i * nle,
                                .v = b->v + i * nle,
                                .heads = b->heads + i * nle,
                                .scores = b->scores + i * maps,
                                .masked = b->masked + i * maps,
                                .weights = b->weights + i * maps};
            o->trace = &t[i];
            o->residual = sj->residual + i * nle;
            o->attn_out = sj->attn_out + i * nle;
        }
    }
    attn_error ae = {0};
    int rc = attn_mha_stack_forward(&sj->plan, job->workspace, job->out, sj->logits, keep, job->q,
                                    &sj->stack->params, pool, &ae);
    if (rc != ATTN_OK)
        return run_fail(err, rc, &ae);
    if (job->traced && sj->nkeep)
        job->trace.scale = t[0].scale;
    const size_t v = sj->stack->vocab, k = sj->top_k;
    for (size_t r = 0; k && r < job->n * job->l; r++)
        predict_row(sj->logits + r * v, v, k, sj->pred_ids + r * k, sj->pred_probs + r * k,
                    sj->pred_logits + r * k);
    job->ran = true;
    return 0;
}

/* A session's append: its params.init weights made in its block when it has none yet (its
 * first append), then the step on its cache. */
static int append_run(api_job *job, attn_pool *pool, api_error *err) {
    apip_session *s = job->session;
    inputs_make(job);
    if (!s->params_ready) {
        float *in = s->param_block, *out = in + 3 * s->e * s->e;
        if (s->init == APIP_INIT_RANDOM)
            apip_init_random(in, out, s->e, s->seed);
        else
            apip_init_identity(in, out, s->e);
        s->params = (attn_mha_params){.in_proj_weight = in, .out_proj_weight = out};
        s->params_ready = true;
    }
    attn_error ae = {0};
    attn_weights_out *wo = job->plan.weights_elems ? &job->wout : NULL;
    attn_trace *tr = job->traced ? &job->trace : NULL;
    int rc = attn_mha_decode_step_traced(job->dplan, job->workspace, &s->cache, job->out, wo, tr,
                                         job->q, job->k, job->v, job->l, &s->params, pool, &ae);
    if (rc != ATTN_OK)
        return run_fail(err, rc, &ae);
    job->ran = true;
    return 0;
}

int api_job_run(api_job *job, attn_pool *pool, api_error *err) {
    if (!job)
        return api_fail(err, 500, "internal", NULL, "no job to run");
    if (job->ran)
        return api_fail(err, 500, "internal", NULL, "the job has already run");
    if (job->session)
        return append_run(job, pool, err);
    inputs_make(job);
    if (job->sj)
        return stack_run(job, pool, err);
    if (job->op == API_OP_ATTENTION)
        params_make(job);
    attn_error ae = {0};
    attn_weights_out *wo = job->plan.weights_elems ? &job->wout : NULL;
    attn_trace *tr = job->traced ? &job->trace : NULL;
    int rc = job->op == API_OP_SDPA
                 ? attn_sdpa_forward_traced(&job->plan, job->workspace, job->out, wo, tr, job->q,
                                            job->k, job->v, pool, &ae)
                 : attn_mha_forward_traced(&job->plan, job->workspace, job->out, wo, tr, job->q,
                                           job->k, job->v, &job->params, pool, &ae);
    if (rc != ATTN_OK)
        return run_fail(err, rc, &ae);
    job->ran = true;
    return 0;
}

size_t api_job_rows(const api_job *job) {
    return job ? job->n * job->l : 0;
}

api_op api_job_op(const api_job *job) {
    return job ? job->op : API_OP_ATTENTION;
}

double api_job_timeout(const api_job *job) {
    return job ? job->timeout_s : 0;
}

size_t api_job_model_index(const api_job *job, const api_registry *models) {
    if (!job)
        return API_NO_MODEL;
    if (job->model)
        return apip_model_index(job->model);
    /* Only a protocol above API v1 gives a job a reply form: v2's "sdpa" model. */
    if (job->op == API_OP_SDPA && job->reply)
        return api_registry_count(models);
    return API_NO_MODEL;
}

/* True when job may join a batch at all: attention, not run, no trace (a batch has none), no
 * keys appended after the projections (libattn runs those alone), not on a model of layers,
 * and not a session's append (a step on its own cache). */
static bool batch_member(const api_job *job) {
    return job && job->op == API_OP_ATTENTION && !job->ran && !job->traced &&
           job->plan.kv_extra == 0 && !job->sj && !job->session;
}

bool api_jobs_batchable(const api_job *a, const api_job *b) {
    if (!batch_member(a) || !batch_member(b))
        return false;
    if (a->e != b->e || a->h != b->h || a->plan.mha.kdim != b->plan.mha.kdim ||
        a->plan.mha.vdim != b->plan.mha.vdim || a->plan.nslots != b->plan.nslots)
        return false;
    if (a->model_name || b->model_name) /* registry models: the same borrowed tensors */
        return a->model_name == b->model_name && !memcmp(&a->params, &b->params, sizeof a->params);
    return a->init != APIP_INIT_NONE && a->init == b->init &&
           (a->init == APIP_INIT_IDENTITY || a->seed == b->seed);
}

/* Batches of up to this many jobs share one stack array of libattn job records; a larger
 * batch runs in chunks. */
#define BATCH_CHUNK 256

/* Runs jobs[0, count) (all batchable with jobs[0], count <= BATCH_CHUNK) as one batch on
 * jobs[0]'s parameters; a failed job's error goes to *errs[i]. Returns how many failed; -1 when
 * the batch could not be planned or its workspace not allocated, and then no job has run. */
static long run_chunk(api_job *const *jobs, api_error *const *errs, size_t count, attn_pool *pool,
                      size_t max_bytes) {
    attn_mha_batch_job bj[BATCH_CHUNK];
    attn_error ae[BATCH_CHUNK];
    for (size_t i = 0; i < count; i++) {
        api_job *j = jobs[i];
        inputs_make(j);
        ae[i] = (attn_error){0};
        bj[i] = (attn_mha_batch_job){.plan = &j->plan,
                                     .out = j->out,
                                     .weights = j->plan.weights_elems ? &j->wout : NULL,
                                     .query = j->q,
                                     .key = j->k,
                                     .value = j->v,
                                     .err = &ae[i]};
    }
    params_make(jobs[0]);
    const attn_mha_params *params = &jobs[0]->params;
    attn_batch_plan bp;
    attn_error perr = {0};
    if (attn_mha_batch_plan(&bp, bj, count, params, max_bytes, &perr) != ATTN_OK)
        return -1;
    size_t ws_bytes = bp.workspace_bytes ? bp.workspace_bytes : 1;
    void *ws = api_mem_alloc_bounded(jobs[0]->mem, ws_bytes, max_bytes, NULL, NULL);
    if (!ws)
        return -1;
    int rc = attn_mha_batch_forward(&bp, ws, bj, count, params, pool, &perr);
    api_mem_free(ws);
    long failed = 0;
    for (size_t i = 0; i < count; i++) {
        int st = rc != ATTN_OK ? rc : bj[i].status;
        if (st == ATTN_OK) {
            jobs[i]->ran = true;
        } else {
            run_fail(errs[i], st, rc != ATTN_OK ? &perr : &ae[i]);
            failed++;
        }
    }
    return failed;
}

/* Runs a chunk: as one batch when it holds several jobs and the batch can be made, else one by
 * one. Returns how many failed. */
static size_t run_jobs(api_job *const *jobs, api_error *const *errs, size_t count, attn_pool *pool,
                       size_t max_bytes) {
    long f = count > 1 ? run_chunk(jobs, errs, count, pool, max_bytes) : -1;
    if (f >= 0)
        return (size_t)f;
    size_t failed = 0;
    for (size_t i = 0; i < count; i++)
        failed += api_job_run(jobs[i], pool, errs[i]) != 0;
    return failed;
}

size_t api_jobs_run(api_job *const *jobs, size_t count, attn_pool *pool, size_t max_bytes,
                    api_error *errs) {
    if (!jobs || !errs)
        return count;
    api_job *chunk[BATCH_CHUNK];
    api_error *chunk_errs[BATCH_CHUNK];
    size_t n = 0, failed = 0;
    for (size_t i = 0; i < count; i++) {
        bool with = i == 0 ? batch_member(jobs[0]) : api_jobs_batchable(jobs[0], jobs[i]);
        if (!with) {
            failed += api_job_run(jobs[i], pool, &errs[i]) != 0;
            continue;
        }
        chunk[n] = jobs[i];
        chunk_errs[n++] = &errs[i];
        if (n == BATCH_CHUNK) {
            failed += run_jobs(chunk, chunk_errs, n, pool, max_bytes);
            n = 0;
        }
    }
    return failed + run_jobs(chunk, chunk_errs, n, pool, max_bytes);
}

/* The FLOPs of the job's plan: its stack's, on a model of layers. */
static double plan_flops(const api_job *job) {
    return job->sj ? job->sj->plan.flops : job->plan.flops;
}

double api_job_flops(const api_job *job) {
    return job ? plan_flops(job) + job->seeded_flops + job->init_flops : 0.0;
}

double api_job_plan_flops(const api_job *job) {
    return job ? plan_flops(job) + job->seeded_flops : 0.0;
}

size_t api_job_bytes(const api_job *job) {
    return job ? job->arena_bytes : 0;
}

bool api_job_stateful(const api_job *job) {
    return job && job->session;
}

void api_job_destroy(api_job *job) {
    if (job && job->session) /* the session is free for its next append (or ends) */
        apip_session_give(job->session, job->ran, job->session_end);
    api_mem_free(job); /* the job is the start of its arena */
}
