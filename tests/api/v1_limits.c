/* v1_limits.c - limits on a job before it runs: max_job_bytes and its messages, numeric
 * overflow, bodies that declare far more than they hold, the compute bound (max_job_flops), and
 * responses that never pass the bound they were counted with. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "codec.h"
#include "job.h"
#include "models.h"
#include "v1.h"
#include "api_test.h"

/* ---- Limits, numeric overflow ------------------------------------------------------------- */

void test_limits(void) {
    const char *body = "{\"query\":[[1,0],[0,1],[1,1]],\"params\":{\"init\":\"random\",\"seed\":1,"
                       "\"num_heads\":2},\"need_weights\":\"mean\"}";
    api_limits lim = api_limits_default();
    CHECK(lim.max_job_bytes == (size_t)1 << 30 && lim.max_dim == 65536 && lim.max_heads == 256 &&
              lim.nslots == 1,
          "api_limits_default");
    api_error e = {0};
    api_job *job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &e);
    CHECK(job != NULL, "parse: %s", e.message);
    size_t arena = api_job_bytes(job), resp = api_job_response_bytes(job), bytes = arena + resp;
    CHECK(arena > 0 && arena % 64 == 0, "job bytes %zu", arena);
    CHECK(resp > 0, "response bytes %zu", resp);
    CHECK(api_job_flops(job) > 0, "flops");
    api_error twice = {0};
    CHECK(api_job_run(job, NULL, &e) == 0 && api_job_run(job, NULL, &twice) == -1 &&
              twice.status == 500,
          "a job runs once");
    api_job_destroy(job);
    lim.max_job_bytes = bytes;
    job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &e);
    CHECK(job != NULL, "exactly at the limit: %s", e.message);
    api_job_destroy(job);
    lim.max_job_bytes = bytes - 1;
    api_error big = {0};
    job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &big);
    char need[32], limit[32];
    char parts[64];
    snprintf(need, sizeof need, "%zu bytes", bytes);
    snprintf(limit, sizeof limit, "%zu bytes", bytes - 1);
    snprintf(parts, sizeof parts, "%zu of working memory and up to %zu for its response", arena,
             resp);
    CHECK(!job && big.status == 413 && strcmp(big.code, "job_too_large") == 0 &&
              strstr(big.message, "max_job_bytes") && strstr(big.message, need) &&
              strstr(big.message, limit) && strstr(big.message, parts),
          "413 names the limit and the sizes: %s", big.message);
    /* An arena of 2^62 floats is refused before anything is allocated. */
    const char *huge = "{\"query\":{\"dtype\":\"float32\",\"shape\":[65536,65536,65536],\"data\":"
                       "\"\"},\"params\":{\"init\":\"identity\",\"num_heads\":1}}";
    api_error h = {0};
    lim = api_limits_default();
    job = api_job_parse(API_OP_ATTENTION, huge, strlen(huge), NULL, &lim, &h);
    CHECK(!job && (h.status == 413 || h.status == 400), "huge shape: %d %s", h.status, h.message);
    /* max_heads counts as API_MAX_HEADS at most (the duplicate check of heads needs a bound). */
    sb hb = {0};
    for (int t = 0; t < 3; t++) { /* q, k and v all (65537, 1, 1) */
        sb_add(&hb, "%s\"%c\":[", t ? "," : "{", "qkv"[t]);
        for (int i = 0; i < API_MAX_HEADS + 1; i++)
            sb_add(&hb, "%s[[0]]", i ? "," : "");
        sb_add(&hb, "]");
    }
    sb_add(&hb, "}");
    api_limits many = api_limits_default();
    many.max_heads = many.max_dim = (size_t)1 << 20;
    api_error mh = {0};
    job = api_job_parse(API_OP_SDPA, hb.s, hb.n, NULL, &many, &mh);
    CHECK(!job && mh.status == 413 && strstr(mh.message, "65537 heads") &&
              strstr(mh.message, "max_heads limit of 65536"),
          "max_heads above API_MAX_HEADS: %s", mh.message);
    api_job_destroy(job);
    free(hb.s);
    /* A mask whose element count overflows size_t: the message names the limit and sizes. */
    const char *hm = "{\"query\":[[1]],\"params\":{\"init\":\"identity\",\"num_heads\":1},"
                     "\"attn_mask\":{\"dtype\":\"float32\",\"shape\":[65536,65536,65536,65536],"
                     "\"data\":\"\"}}";
    api_error hme = {0};
    job = api_job_parse(API_OP_ATTENTION, hm, strlen(hm), NULL, &lim, &hme);
    CHECK(!job && hme.status == 413 && strcmp(hme.code, "job_too_large") == 0 &&
              strcmp(hme.field, "attn_mask") == 0 && strstr(hme.message, "max_job_bytes") &&
              strstr(hme.message, "1073741824 bytes") &&
              strstr(hme.message, "(65536, 65536, 65536, 65536)"),
          "413 for a huge attn_mask names the limit and the sizes: %s", hme.message);
    /* usage.flops beyond 2^63 (llround's range) is written exactly; beyond 2^64, saturated. */
    static const struct {
        double flops;
        const char *want;
    } fl[] = {{1e19, "\"flops\":10000000000000000000,"},
              {0x1p63, "\"flops\":9223372036854775808,"},
              {2e19, "\"flops\":18446744073709551615,"},
              {0x1p52 + 1, "\"flops\":4503599627370497,"},
              {1234.4, "\"flops\":1234,"}};
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        api_error fe = {0};
        job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &fe);
        CHECK(job && api_job_run(job, NULL, &fe) == 0, "flops job: %s", fe.message);
        if (!job)
            continue;
        job->plan.flops = fl[i].flops;
        job->init_flops = 0; /* the body's identity weights are counted apart (test_job_flops) */
        api_buf fb = {0};
        CHECK(api_job_respond(job, 0.0, 0.0, &fb, &fe) == 0, "respond: %s", fe.message);
        api_buf_append(&fb, "", 1);
        CHECK(!fb.failed && strstr(fb.data, fl[i].want), "flops %g: want %s in %.80s", fl[i].flops,
              fl[i].want, strstr(fb.data, "\"usage\"") ? strstr(fb.data, "\"usage\"") : "");
        api_buf_free(&fb);
        api_job_destroy(job);
    }
    /* Numeric overflow: logits beyond float32. */
    const char *ov = "{\"q\":[[1e20,1e20]],\"k\":[[1e20,1e20]],\"v\":[[1,1]]}";
    api_error o = {0};
    json_t *j = request_str(API_OP_SDPA, ov, NULL, &o);
    CHECK(!j && o.status == 400 && strcmp(o.code, "numeric_overflow") == 0,
          "numeric overflow: %d %s", o.status, o.code);
    json_decref(j);
    /* A NULL registry has no default model. */
    api_error nm = {0};
    j = request_str(API_OP_ATTENTION, "{\"query\":[[1]]}", NULL, &nm);
    CHECK(!j && nm.status == 404 && strcmp(nm.field, "model") == 0, "no default model");
}

/* ---- Bodies that declare far more than they hold (issue 10, item 1) ---------------------- */

static double thread_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Appends [first, 0, 0, ...] with n elements in all: nested arrays take their shape from their
 * first element, so this declares n rows of first's shape in about 2n bytes. */
static void sb_hollow(sb *b, const char *first, size_t n) {
    sb_add(b, "[%s", first);
    for (size_t i = 1; i < n; i++)
        sb_add(b, ",0");
    sb_add(b, "]");
}

/* The bodies: SDPA q, k, v (65536, 1, 65536, 1) with "causal": "bottom_right" (0.8 MB),
 * and /v1/attention with query (32768, 65535, 1) (197 KB). Each is refused with 413 at once:
 * in thread CPU time (not wall time: other processes' load does not count) at most 200 ms and
 * 50 times what validating its JSON costs, never time proportional to N x L (seconds before). */
void test_declared_shapes(void) {
    sb row = {0}, plane = {0}, sd = {0}, at = {0};
    sb_hollow(&row, "[0]", 65536); /* (65536, 1) */
    sb_add(&plane, "[%s]", row.s); /* (1, 65536, 1) */
    sb_add(&sd, "{\"causal\":\"bottom_right\"");
    for (int t = 0; t < 3; t++) {
        sb_add(&sd, ",\"%c\":", "qkv"[t]);
        sb_hollow(&sd, plane.s, 65536);
    }
    sb_add(&sd, "}");
    sb inner = {0};
    sb_hollow(&inner, "[0]", 65535);
    sb_add(&at, "{\"params\":{\"init\":\"identity\",\"num_heads\":1},\"causal\":true,\"query\":");
    sb_hollow(&at, inner.s, 32768);
    sb_add(&at, "}");
    const struct {
        const char *what;
        api_op op;
        const sb *body;
    } cases[] = {{"sdpa N = L = 65536", API_OP_SDPA, &sd},
                 {"attention N = 32768, L = 65535", API_OP_ATTENTION, &at}};
    api_limits lims[2] = {api_limits_default(), api_limits_default()};
    lims[1].max_job_bytes = (size_t)256 << 20; /* attnd's default --max-job-bytes */
    for (size_t c = 0; c < 2; c++) {
        for (size_t l = 0; l < 2; l++) {
            double t0 = thread_cpu_ms();
            api_error je = {0};
            CHECK(apip_json_check(cases[c].body->s, cases[c].body->n, "b", NULL, &je) == 0, "%s",
                  je.message);
            double t1 = thread_cpu_ms();
            api_error e = {0};
            api_job *job =
                api_job_parse(cases[c].op, cases[c].body->s, cases[c].body->n, NULL, &lims[l], &e);
            double t2 = thread_cpu_ms(), json_ms = t1 - t0, parse_ms = t2 - t1;
            CHECK(!job && e.status == 413 && !strcmp(e.code, "job_too_large"),
                  "%s (%zu bytes): %d %s: %s", cases[c].what, cases[c].body->n, e.status, e.code,
                  e.message);
            CHECK(parse_ms < 200.0 && parse_ms < 50.0 * json_ms + 5.0,
                  "%s (%zu bytes): refused in %.1f ms of CPU (validating its JSON: %.2f ms)",
                  cases[c].what, cases[c].body->n, parse_ms, json_ms);
            api_job_destroy(job);
        }
    }
    free(row.s), free(plane.s), free(sd.s), free(inner.s), free(at.s);
}

/* ---- Response size (issue 10, item 2) ---------------------------------------------------- */

/* ---- The compute bound (issue 23, item 4) -------------------------------------------------- */

/* usage.flops counts making params.init weights (4 E^2 of them, at APIP_INIT_RANDOM_FLOP or
 * APIP_INIT_IDENTITY_FLOP each) beside the plan's FLOPs; max_job_flops refuses a job over it with
 * 413 from the shapes alone, before any tensor is decoded; num_heads past max_heads names the
 * limit, not the integer range. */
void test_job_flops(void) {
    const char *fmt = "{\"query\":[[0.5,1,2,3],[1,0,0,0]],\"params\":{\"init\":\"%s\",%s"
                      "\"num_heads\":2}}";
    const struct {
        const char *init, *seed;
        double per_weight;
    } inits[] = {{"random", "\"seed\":3,", APIP_INIT_RANDOM_FLOP},
                 {"identity", "", APIP_INIT_IDENTITY_FLOP}};
    for (size_t i = 0; i < 2; i++) {
        char body[256];
        snprintf(body, sizeof body, fmt, inits[i].init, inits[i].seed);
        api_limits lim = api_limits_default();
        api_error e = {0};
        api_job *job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &e);
        CHECK(job != NULL, "init %s: %s", inits[i].init, e.message);
        if (!job)
            continue;
        double want = api_job_plan_flops(job) + 4.0 * 4 * 4 * inits[i].per_weight;
        CHECK(api_job_flops(job) == want && api_job_plan_flops(job) > 0,
              "init %s: flops %.17g, want plan %.17g + 16 weights", inits[i].init,
              api_job_flops(job), api_job_plan_flops(job));
        api_error re = {0};
        api_buf out = {0};
        CHECK(api_job_run(job, NULL, &re) == 0 && api_job_respond(job, 0, 0, &out, &re) == 0,
              "init %s runs: %s", inits[i].init, re.message);
        api_buf_append(&out, "", 1);
        char usage[64];
        snprintf(usage, sizeof usage, "\"flops\":%.0f,", want);
        CHECK(!out.failed && strstr(out.data, usage), "init %s: usage says %s in %.120s",
              inits[i].init, usage, out.data ? out.data : "");
        api_buf_free(&out);
        /* The limit: at the job's FLOPs it passes; one FLOP less, 413 naming both figures. */
        lim.max_job_flops = want;
        api_job *again = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &e);
        CHECK(again != NULL, "init %s at max_job_flops = its flops: %s", inits[i].init, e.message);
        api_job_destroy(again);
        lim.max_job_flops = want - 1;
        api_error over = {0};
        again = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &over);
        CHECK(!again && over.status == 413 && strcmp(over.code, "job_too_large") == 0 &&
                  strstr(over.message, "max_job_flops") &&
                  strstr(over.message, "making params.init weights included"),
              "init %s one FLOP over: %d %s", inits[i].init, over.status, over.message);
        api_job_destroy(again);
        api_job_destroy(job);
    }
    /* The body: SDPA with L = S = 65536 and D = 1 (17 GFLOP) in under 1 MB, with a value
     * that is not a number at its end. A limit of 1 GFLOP refuses it with 413 from its shapes,
     * before the tensors are decoded (decoding would have found the bad value: 400). */
    sb b = {0};
    for (int t = 0; t < 3; t++) {
        sb_add(&b, "%s\"%c\":", t ? "," : "{", "qkv"[t]);
        sb_hollow(&b, "[1]", 65536);
    }
    b.n -= 2; /* the last row of v, ",0]" -> ",\"x\"]" */
    b.s[b.n] = '\0';
    sb_add(&b, "\"x\"]}");
    api_limits lim = api_limits_default();
    lim.max_job_flops = 1e9;
    api_error e = {0};
    api_job *job = api_job_parse(API_OP_SDPA, b.s, b.n, NULL, &lim, &e);
    CHECK(!job && e.status == 413 && strstr(e.message, "max_job_flops limit of 1e+09") &&
              !strstr(e.message, "params.init"),
          "17 GFLOP SDPA over a 1 GFLOP limit: %d %s", e.status, e.message);
    lim.max_job_flops = 0; /* no limit: decoding finds the bad value */
    api_error bad = {0};
    job = api_job_parse(API_OP_SDPA, b.s, b.n, NULL, &lim, &bad);
    CHECK(!job && bad.status == 400, "without the limit the bad value is found: %d %s", bad.status,
          bad.message);
    api_job_destroy(job);
    free(b.s);
    /* num_heads: past max_heads (even past 2^64) is 413 naming the limit; 0 or 2.5 is 400 naming
     * the range the limit allows. */
    const struct {
        const char *heads;
        int status;
        const char *says;
    } nh[] = {
        {"257", 413, "max_heads limit of 256"},  {"1099511627777", 413, "max_heads limit of 256"},
        {"1e30", 413, "max_heads limit of 256"}, {"0", 400, "from 1 to 256"},
        {"2.5", 400, "from 1 to 256"},           {"-3", 400, "from 1 to 256"}};
    for (size_t i = 0; i < sizeof nh / sizeof nh[0]; i++) {
        char body[160];
        snprintf(body, sizeof body,
                 "{\"query\":[[1,2]],\"params\":{\"init\":\"identity\",\"num_heads\":%s}}",
                 nh[i].heads);
        api_limits dl = api_limits_default();
        api_error he = {0};
        job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &dl, &he);
        CHECK(!job && he.status == nh[i].status && strstr(he.message, nh[i].says) &&
                  !strstr(he.message, "1099511627776") && !strcmp(he.field, "params.num_heads"),
              "num_heads %s: %d %s", nh[i].heads, he.status, he.message);
        api_job_destroy(job);
    }
}

/* The example: SDPA q, k, v (1, 200, 512, 1) with weights, 2.9 MB of request and a
 * 690 MB JSON response, is refused before compute with default limits (api/'s 1 GiB and
 * attnd's 256 MiB), naming the response size; as base64 it fits the 1 GiB. */
void test_response_limit(void) {
    sb b = {0};
    sb_add(&b, "{\"need_weights\":true");
    for (int t = 0; t < 3; t++) {
        sb_add(&b, ",\"%c\":[[", "qkv"[t]);
        for (int h = 0; h < 200; h++) {
            sb_add(&b, "%s[", h ? "," : "");
            for (int i = 0; i < 512; i++)
                sb_add(&b, "%s[%d]", i ? "," : "", (i * 7 + h) % 3);
            sb_add(&b, "]");
        }
        sb_add(&b, "]]");
    }
    size_t json_end = b.n;
    sb_add(&b, "}");
    api_limits lims[2] = {api_limits_default(), api_limits_default()};
    lims[1].max_job_bytes = (size_t)256 << 20;
    for (int l = 0; l < 2; l++) {
        api_error e = {0};
        api_job *job = api_job_parse(API_OP_SDPA, b.s, b.n, NULL, &lims[l], &e);
        char limit[64];
        snprintf(limit, sizeof limit, "limit of %zu bytes", lims[l].max_job_bytes);
        CHECK(!job && e.status == 413 && !strcmp(e.code, "job_too_large") &&
                  strstr(e.message, "for its response") && strstr(e.message, limit) &&
                  strstr(e.message, "base64"),
              "q, k, v (1, 200, 512, 1) with weights, max_job_bytes %zu: %d %s",
              lims[l].max_job_bytes, e.status, e.message);
        api_job_destroy(job);
    }
    /* The bound: 52428800 weights at 17 bytes and 102400 outputs at 17, plus brackets. */
    b.n = json_end;
    sb_add(&b, ",\"encoding\":\"base64\"}");
    api_error e = {0};
    api_job *job = api_job_parse(API_OP_SDPA, b.s, b.n, NULL, &lims[0], &e);
    CHECK(job != NULL, "the same as base64 fits 1 GiB: %s", e.message);
    size_t w_b64 = (52428800 * 4 + 2) / 3 * 4, o_b64 = (102400 * 4 + 2) / 3 * 4;
    CHECK(job && api_job_response_bytes(job) > w_b64 + o_b64 &&
              api_job_response_bytes(job) < w_b64 + o_b64 + 400,
          "base64 response bound %zu, want %zu + fixed text", api_job_response_bytes(job),
          w_b64 + o_b64);
    api_job_destroy(job);
    free(b.s);
}

/* For many jobs (both endpoints, JSON and base64, every weights mode, top-k, registry models,
 * ranks 2 to 4), the response is never longer than api_job_response_bytes, also when every
 * float takes the longest form there is ("-0.0000123456791", 16 characters). */
void test_response_bound(void) {
    api_registry *models = demo_registry();
    size_t jobs = 0, worst_slack = SIZE_MAX;
    for (size_t t = 0; t < 240; t++) {
        bool sdpa = t % 2, b64 = t % 5 == 1;
        size_t rank = sdpa ? 2 + t / 2 % 3 : 2 + t / 2 % 2;
        size_t N = 1 + t % 3, H = 1 + t / 3 % 3, L = 1 + t % 7, S = 1 + t / 7 % 9;
        size_t D = sdpa ? 1 + t % 4 : 4 * H, Dv = sdpa ? 1 + t / 4 % 3 : D;
        bool model = !sdpa && t % 6 == 4; /* demo: E = 64, H = 4 */
        if (model)
            D = Dv = 64, H = 4;
        size_t lead[2], nl = 0;
        if (sdpa && rank == 4)
            lead[nl++] = N, lead[nl++] = H;
        else if (sdpa && rank == 3)
            lead[nl++] = H;
        else if (!sdpa && rank == 3)
            lead[nl++] = N;
        size_t qd[4], kd[4], vd[4], cq = 1, ck = 1, cv = 1;
        for (size_t i = 0; i < nl; i++)
            qd[i] = kd[i] = vd[i] = lead[i], cq *= lead[i], ck *= lead[i], cv *= lead[i];
        qd[nl] = L, qd[nl + 1] = D, kd[nl] = vd[nl] = S, kd[nl + 1] = D, vd[nl + 1] = Dv;
        cq *= L * D, ck *= S * D, cv *= S * Dv;
        float *q = frand_new(cq), *k = frand_new(ck), *v = frand_new(cv);
        sb b = {0};
        sb_add(&b, "{\"%s\":", sdpa ? "q" : "query");
        sb_tensor(&b, q, qd, nl + 2);
        sb_add(&b, ",\"%s\":", sdpa ? "k" : "key");
        sb_tensor(&b, k, kd, nl + 2);
        sb_add(&b, ",\"%s\":", sdpa ? "v" : "value");
        sb_tensor(&b, v, vd, nl + 2);
        if (!sdpa && !model)
            sb_add(&b, ",\"params\":{\"init\":\"random\",\"seed\":%zu,\"num_heads\":%zu}", t, H);
        const char *nw = sdpa ? (t % 3 ? "true" : "false")
                              : (t % 3 == 0   ? "false"
                                 : t % 3 == 1 ? "\"per_head\""
                                              : "\"mean\"");
        sb_add(&b, ",\"need_weights\":%s", nw);
        if (strcmp(nw, "false") && t % 4 == 3)
            sb_add(&b, ",\"weights_top_k\":%zu", 1 + t % S);
        if (b64)
            sb_add(&b, ",\"encoding\":\"base64\"");
        sb_add(&b, "}");
        api_error e = {0};
        api_limits lim = api_limits_default();
        api_job *job =
            api_job_parse(sdpa ? API_OP_SDPA : API_OP_ATTENTION, b.s, b.n, models, &lim, &e);
        CHECK(job && api_job_run(job, NULL, &e) == 0, "job %zu: %s", t, e.message);
        for (int longest = 0; job && longest < 2 && !e.status; longest++) {
            if (longest) { /* every float as long as a float gets */
                for (size_t i = 0; i < job->plan.out_elems; i++)
                    job->out[i] = -1.23456791e-05f;
                for (size_t i = 0; i < job->plan.weights_elems; i++)
                    job->wout.values[i] = -1.23456791e-05f;
            }
            api_buf out = {0};
            apip_buf_puts(&out, "prefix");
            CHECK(api_job_respond(job, 1e12, 123456.789, &out, &e) == 0, "job %zu: %s", t,
                  e.message);
            size_t len = out.len - 6, bound = api_job_response_bytes(job);
            CHECK(len <= bound, "job %zu (%s): response %zu bytes over its bound %zu", t, b.s, len,
                  bound);
            CHECK(out.cap <= 6 + bound + 64 || out.cap == 256, /* 256: api_buf's first block */
                  "job %zu: the buffer grew to %zu for %zu + %zu", t, out.cap, (size_t)6, bound);
            if (longest && !b64 && bound - len < worst_slack)
                worst_slack = bound - len;
            jobs++;
            api_buf_free(&out);
        }
        api_job_destroy(job);
        free(q), free(k), free(v), free(b.s);
    }
    CHECK(jobs >= 400, "only %zu responses checked", jobs);
    /* With the longest floats a JSON bound is nearly reached: only the integers and times
     * written shorter than their widest are left over. */
    CHECK(worst_slack < 200, "the JSON bound is loose: at least %zu bytes to spare", worst_slack);
    api_registry_destroy(models);
}

/* The words a lesson job echoes (tokens) and its head names count in its response bound: the
 * same job sent as words and as their embeddings differs by at least the echoed text. */
void test_response_bound_words(void) {
    api_registry *models = builtin_registry();
    const char *bodies[2] = {
        "{\"model\":\"lesson\",\"text\":\"程序员把服务器日志发给同事，因为它记录了错误原因。\","
        "\"need_weights\":\"per_head\"}",
        "{\"model\":\"lesson\",\"tokens\":[\"“\",\"它\",\"”\"]}",
    };
    for (int i = 0; i < 2; i++) {
        api_error e = {0};
        api_limits lim = api_limits_default();
        api_job *job =
            api_job_parse(API_OP_ATTENTION, bodies[i], strlen(bodies[i]), models, &lim, &e);
        CHECK(job && api_job_run(job, NULL, &e) == 0, "words job %d: %s", i, e.message);
        if (!job)
            continue;
        api_buf out = {0};
        CHECK(api_job_respond(job, 1e12, 123456.789, &out, &e) == 0, "words job %d: %s", i,
              e.message);
        const char *words = strstr(out.data ? out.data : "", ",\"tokens\":[");
        const char *names = strstr(out.data ? out.data : "", ",\"head_names\":[");
        CHECK(words && names, "words job %d: no tokens or head_names in %.200s", i, out.data);
        /* Without the words' allowance the bound would be short by what they take at most. */
        size_t bound = api_job_response_bytes(job), echo = 0;
        CHECK(out.len <= bound, "words job %d: response %zu bytes over its bound %zu", i, out.len,
              bound);
        apip_resp_shape rs = {.op = API_OP_ATTENTION,
                              .out_rank = job->out_rank,
                              .w_rank = job->w_rank,
                              .model_len = strlen("lesson")};
        memcpy(rs.out_dims, job->out_dims, sizeof rs.out_dims);
        memcpy(rs.w_dims, job->w_dims, sizeof rs.w_dims);
        CHECK(apip_response_bound(&rs, &echo) &&
                  bound - echo >=
                      (size_t)(strchr(words + 11, ']') - words) + strlen(",\"head_names\":"),
              "words job %d: the bound %zu leaves %zu for the words", i, bound, bound - echo);
        api_buf_free(&out);
        api_job_destroy(job);
    }
    api_registry_destroy(models);
}

/* usage.workspace_bytes and usage.job_bytes: the job's bytes as the limit counts them (its
 * arena and response bound), and attention's memory linear in L without weights (the tiled
 * path) and quadratic with them, as the chapter's n² cost says. */
void test_usage_bytes(void) {
    api_limits lim = api_limits_default();
    const size_t Ls[2] = {1024, 2048};
    double ws[2][2] = {{0}}, jb[2][2] = {{0}};
    for (int li = 0; li < 2; li++)
        for (int weights = 0; weights < 2; weights++) {
            size_t L = Ls[li], dims[2] = {L, 8};
            float *x = malloc(L * 8 * sizeof *x);
            for (size_t i = 0; i < L * 8; i++)
                x[i] = (float)(i % 13) / 13.0f;
            sb b = {0};
            sb_add(&b, "{\"encoding\":\"base64\",\"need_weights\":%s,\"q\":",
                   weights ? "true" : "false");
            sb_tensor_b64(&b, x, dims, 2);
            sb_add(&b, ",\"k\":");
            sb_tensor_b64(&b, x, dims, 2);
            sb_add(&b, ",\"v\":");
            sb_tensor_b64(&b, x, dims, 2);
            sb_add(&b, "}");
            api_error e = {0};
            api_job *job = api_job_parse(API_OP_SDPA, b.s, strlen(b.s), NULL, &lim, &e);
            CHECK(job != NULL, "L = %zu: %s", L, e.message);
            json_t *j = job ? request(API_OP_SDPA, b.s, strlen(b.s), NULL, &lim, &e) : NULL;
            const json_t *u = json_object_get(j, "usage");
            CHECK(json_is_integer(json_object_get(u, "workspace_bytes")) &&
                      json_is_integer(json_object_get(u, "job_bytes")),
                  "L = %zu: usage has workspace_bytes and job_bytes", L);
            ws[li][weights] = (double)json_integer_value(json_object_get(u, "workspace_bytes"));
            jb[li][weights] = (double)json_integer_value(json_object_get(u, "job_bytes"));
            if (job)
                CHECK(jb[li][weights] == (double)(api_job_bytes(job) + api_job_response_bytes(job)),
                      "L = %zu: job_bytes %.0f is the arena and the response bound (%zu + %zu)", L,
                      jb[li][weights], api_job_bytes(job), api_job_response_bytes(job));
            api_job_destroy(job);
            json_decref(j);
            free(x);
            free(b.s);
        }
    /* Without weights the attention's scratch does not grow with L (tiles of keys), and the job
     * stays far below one L x L matrix; with them the job holds L² floats (and its response). */
    CHECK(ws[1][0] <= ws[0][0] * 1.01 + 4096, "no weights: workspace %.0f at L 2048, %.0f at 1024",
          ws[1][0], ws[0][0]);
    CHECK(jb[1][0] < 2048.0 * 2048 * 4 / 8,
          "no weights: job_bytes %.0f at L 2048 is under 1/8 of "
          "one L x L float32 matrix",
          jb[1][0]);
    CHECK(jb[1][1] > 2048.0 * 2048 * 4 && jb[1][1] / jb[0][1] > 3.5,
          "weights: job_bytes %.0f at L 2048 holds the L x L map and grows as L² (%.2fx from 1024)",
          jb[1][1], jb[1][1] / jb[0][1]);
}
