/* bench_api.c - where the time of a request goes outside HTTP: parsing and validating its body
 * (api_job_parse), computing it (api_job_run) and writing the response (api_job_respond), for
 * the core benchmark's workloads W1-W5. Prints one JSON object per workload on stdout for
 * bench/run_bench.py.
 *
 * Usage: bench_api [--time SECONDS]
 *
 * W1 is sent and answered as JSON numbers (the classroom case); W2-W5 as base64 tensors, the
 * fast path for large inputs. The models are registered up front, as a server loads them at
 * start, and requests name them. Times are medians over at least 5 runs.
 *
 * Legend: N batch, L = S sequence length, E embedding, H heads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "attention.h"

typedef struct workload {
    const char *name;
    size_t n, l, e, h;
    const char *causal;      /* JSON value or NULL */
    const char *key_lengths; /* JSON value or NULL */
    const char *weights;     /* need_weights JSON value or NULL */
    bool base64;
} workload;

static const workload WORKLOADS[] = {
    {"W1", 1, 16, 64, 4, NULL, NULL, "\"per_head\"", false},
    {"W2", 8, 128, 256, 8, "true", NULL, NULL, true},
    {"W3", 4, 512, 768, 12, NULL, "[512, 448, 384, 320]", NULL, true},
    {"W4", 1, 4096, 512, 8, "true", NULL, NULL, true},
    {"W5", 1, 512, 768, 12, NULL, NULL, "\"per_head\"", true},
};

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Appends the query (N, L, E) of workload w, uniform in [-1, 1), as JSON or base64. */
static void append_query(api_buf *b, const workload *w) {
    size_t count = w->n * w->l * w->e;
    float *x = malloc(count * sizeof *x);
    if (!x) {
        b->failed = true;
        return;
    }
    uint64_t s = 12345;
    for (size_t i = 0; i < count; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((double)(s >> 40) / 8388608.0 - 1.0);
    }
    if (w->base64) {
        char head[128];
        int len = snprintf(head, sizeof head,
                           "{\"dtype\": \"float32\", \"shape\": [%zu, %zu, %zu], \"data\": \"",
                           w->n, w->l, w->e);
        api_buf_append(b, head, (size_t)len);
        size_t enc = api_base64_encoded_len(count * sizeof *x);
        char *t = malloc(enc);
        if (t) {
            api_base64_encode(t, (const uint8_t *)x, count * sizeof *x);
            api_buf_append(b, t, enc);
        } else {
            b->failed = true;
        }
        free(t);
        api_buf_append(b, "\"}", 2);
    } else {
        char num[40];
        size_t i = 0;
        api_buf_append(b, "[", 1);
        for (size_t n = 0; n < w->n; n++) {
            api_buf_append(b, n ? ",[" : "[", n ? 2 : 1);
            for (size_t l = 0; l < w->l; l++) {
                api_buf_append(b, l ? ",[" : "[", l ? 2 : 1);
                for (size_t e = 0; e < w->e; e++, i++) {
                    if (e)
                        api_buf_append(b, ",", 1);
                    api_buf_append(b, num, api_float_write(num, x[i]));
                }
                api_buf_append(b, "]", 1);
            }
            api_buf_append(b, "]", 1);
        }
        api_buf_append(b, "]", 1);
    }
    free(x);
}

static void append_str(api_buf *b, const char *s) {
    api_buf_append(b, s, strlen(s));
}

static int run(const workload *w, const api_registry *models, attn_pool *pool, double target_s) {
    api_buf body = {0}, resp = {0};
    append_str(&body, "{\"model\": \"");
    append_str(&body, w->name);
    append_str(&body, "\", \"query\": ");
    append_query(&body, w);
    if (w->causal) {
        append_str(&body, ", \"causal\": ");
        append_str(&body, w->causal);
    }
    if (w->key_lengths) {
        append_str(&body, ", \"key_lengths\": ");
        append_str(&body, w->key_lengths);
    }
    if (w->weights) {
        append_str(&body, ", \"need_weights\": ");
        append_str(&body, w->weights);
    }
    append_str(&body, w->base64 ? ", \"encoding\": \"base64\"}" : "}");
    if (body.failed) {
        fprintf(stderr, "bench_api: out of memory building %s\n", w->name);
        return -1;
    }

    api_limits lim = api_limits_default();
    lim.max_job_bytes = (size_t)4 << 30;
    lim.nslots = attn_pool_slots(pool);
    enum { MAX_REPS = 2000 };
    static double tp[MAX_REPS], tc[MAX_REPS], te[MAX_REPS];
    size_t reps = 0;
    double start = now_ms();
    int rc = 0;
    /* Run 0 is a warm-up; then at least 5 timed runs, for about target_s seconds. */
    for (size_t run_i = 0; run_i <= MAX_REPS && (reps < 5 || now_ms() - start < target_s * 1e3);
         run_i++) {
        api_error err = {0};
        double t0 = now_ms();
        api_job *job = api_job_parse(API_OP_ATTENTION, body.data, body.len, models, &lim, &err);
        double t1 = now_ms();
        if (!job || api_job_run(job, pool, &err) != 0) {
            fprintf(stderr, "bench_api: %s: %d %s: %s\n", w->name, err.status, err.code,
                    err.message);
            api_job_destroy(job);
            rc = -1;
            break;
        }
        double t2 = now_ms();
        api_buf_reset(&resp);
        if (api_job_respond(job, 0.0, t2 - t1, &resp, &err) != 0) {
            fprintf(stderr, "bench_api: %s: respond: %s\n", w->name, err.message);
            api_job_destroy(job);
            rc = -1;
            break;
        }
        double t3 = now_ms();
        api_job_destroy(job);
        if (run_i == 0)
            continue;
        tp[reps] = t1 - t0;
        tc[reps] = t2 - t1;
        te[reps] = t3 - t2;
        reps++;
    }
    if (rc == 0) {
        size_t n = reps;
        double p = median(tp, n), c = median(tc, n), e = median(te, n);
        printf("{\"type\":\"io\",\"name\":\"%s\",\"encoding\":\"%s\",\"request_bytes\":%zu,"
               "\"response_bytes\":%zu,\"reps\":%zu,\"parse_ms\":%.4f,\"compute_ms\":%.4f,"
               "\"encode_ms\":%.4f,\"io_over_compute\":%.4f}\n",
               w->name, w->base64 ? "base64" : "json", body.len, resp.len, n, p, c, e, (p + e) / c);
        fflush(stdout);
    }
    api_buf_free(&body);
    api_buf_free(&resp);
    return rc;
}

int main(int argc, char **argv) {
    attn_blas_info info;
    attn_error aerr = {0};
    if (attn_blas_setup(argv, &info, &aerr) != ATTN_OK) {
        fprintf(stderr, "bench_api: %s\n", aerr.msg);
        return 1;
    }
    double target = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--time") && i + 1 < argc) {
            target = atof(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_api [--time SECONDS]\n");
            return 2;
        }
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    attn_pool *pool = attn_pool_create(cores > 1 ? (size_t)cores - 1 : 0, &aerr);
    api_registry *models = api_registry_create();
    int status = 1;
    if (!pool || !models) {
        fprintf(stderr, "bench_api: cannot create the pool or the registry\n");
        goto out;
    }
    for (size_t i = 0; i < sizeof WORKLOADS / sizeof WORKLOADS[0]; i++) {
        api_error err = {0};
        const workload *w = &WORKLOADS[i];
        if (api_registry_add(models, api_model_init_random(w->name, w->e, w->h, 7, &err), &err)) {
            fprintf(stderr, "bench_api: model %s: %s\n", w->name, err.message);
            goto out;
        }
    }
    for (size_t i = 0; i < sizeof WORKLOADS / sizeof WORKLOADS[0]; i++) {
        fprintf(stderr, "bench_api: %s\n", WORKLOADS[i].name);
        if (run(&WORKLOADS[i], models, pool, target) != 0)
            goto out;
    }
    status = 0;
out:
    api_registry_destroy(models);
    attn_pool_destroy(pool);
    return status;
}
