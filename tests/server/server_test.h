/* server_test.h - what the files of test_server (tests/server/) share: its settings, the
 * tensors and MHA cases they check, the requests they send, and the test groups main runs. The
 * shared harness (checks, the daemon, HTTP) is tests/harness.h; what is here is test_server's own.
 *
 * Legend: N batch, L query length, S key length, E embedding, H heads, D/Dv the SDPA widths. */
#ifndef ATTND_TESTS_SERVER_TEST_H
#define ATTND_TESTS_SERVER_TEST_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../harness.h"

#define TOL         1e-4 /* absolute, against float64 references */
#define SLOW_TARGET 0.8  /* seconds of compute a "slow" job should take */

/* The test's settings, set once by main. */
typedef struct settings {
    const char *attnd, *data, *openapi, *promtool, *only;
} settings;

extern settings cfg;

/* ---- util.c: data and HTTP --------------------------------------------------------------- */

/* A dense tensor of doubles read from a response. */
typedef struct tens {
    double *v;
    size_t n;
    size_t shape[8];
    int rank;
} tens;

float rnd(uint64_t *state);
float *rnd_array(size_t n, uint64_t seed);
unsigned char *b64_decode(const char *s, size_t *n);
void tens_free(tens *t);
bool tens_from_json(const json_t *j, tens *t);
json_t *json_matrix(const float *a, size_t rows, size_t cols);
json_t *json_tensor3(const float *a, size_t n, size_t rows, size_t cols);
json_t *json_vector(const float *a, size_t n);
json_t *json_b64(const float *a, const size_t *shape, int rank);
char *dump(json_t *j);
bool post(CURL *c, int port, const char *path, const char *body, reply *r);
void check_error(const reply *r, long status, const char *code, const char *field,
                 const char *what);
bool reply_tensor(const reply *r, const char *member, tens *t, const char *what);
double max_diff(const tens *t, const double *want, size_t n);
bool same(const tens *a, const tens *b);

/* ---- reference.c: float64 references ------------------------------------------------------ */

/* Checks an MHA answer against ref_mha over N batch elements; rank says the query's rank. */
typedef struct mha_case {
    size_t N, L, S, E, H, kd, vd;
    bool self, bias, split; /* split: q/k/v_proj_weight instead of in_proj_weight */
    float *xq, *xk, *xv;    /* (N, L, E), (N, S, kd), (N, S, vd) */
    float *w_in;            /* (3E, E) when !split */
    float *wq, *wk, *wv;    /* (E, E), (E, kd), (E, vd) when split */
    float *b_in, *wo, *bo;  /* (3E) or NULL, (E, E), (E) or NULL */
} mha_case;

void ref_attend(const double *q, size_t qs, const double *k, size_t ks, const double *v, size_t vs,
                size_t L, size_t S, size_t D, size_t Dv, double scale, int causal, double *out,
                size_t os, double *w);
void ref_mha(const float *xq, const float *xk, const float *xv, size_t L, size_t S, size_t E,
             size_t H, size_t kd, size_t vd, const float *wq, const float *wk, const float *wv,
             const float *b3, const float *wo, const float *bo, double *out, double *w);
void mha_case_make(mha_case *c, size_t N, size_t L, size_t S, size_t E, size_t H, size_t kd,
                   size_t vd, bool self, bool bias, uint64_t seed);
void mha_case_free(mha_case *c);
char *mha_case_body(const mha_case *c, bool rank2, bool b64in, const char *encoding,
                    const char *weights);
void mha_case_ref(const mha_case *c, double *out, double *w);

/* ---- slow_jobs.c: slow jobs and requests on their own threads ------------------------------ */

/* The daemons that compute slow_body lift the FLOP bound: the job is calibrated to compute for
 * about SLOW_TARGET seconds, up to 275 GFLOP on a slow machine or under a sanitizer, past the
 * default --max-job-flops. */
#define SLOW_FLOPS "--max-job-flops", "0"

typedef struct async_req {
    int port;
    const char *path;
    char *body;
    const req *q; /* sent instead of path and body when set */
    reply r;
    pthread_t th;
} async_req;

char *slow_body(size_t L);
void async_start(async_req *a, int port, const char *path, char *body);
double usage_of(const reply *r, const char *key);
size_t calibrate_slow(int port, int *runs);

/* ---- v2_util.c: a client of the Open Inference Protocol ------------------------------------ */

/* An input of a v2 infer request. */
typedef struct v2_in {
    const char *name, *dtype; /* dtype: "FP32", "INT32" or "BOOL" */
    int rank;
    size_t dims[4];
    const void *data; /* float, int32_t or uint8_t elements, row-major */
} v2_in;

/* A v2 reply: the body (decoded when it came with a Content-Encoding), its JSON part. */
typedef struct v2_out {
    json_t *j;
    unsigned char *body;
    size_t len, json_len;
    char *encoding; /* the Content-Encoding it came with, or NULL */
} v2_out;

char *v2_body(const v2_in *in, size_t n, bool binary, const char *params, const char *outputs,
              size_t *len, size_t *hlen);
bool v2_post(int port, const char *path, const char *body, size_t len, size_t hlen,
             const char *ctype, const char *h1, const char *h2, reply *r);
unsigned char *deflate_all(const void *in, size_t n, bool gzip, size_t *out_len);
void v2_out_free(v2_out *o);
bool v2_read(const reply *r, v2_out *o, const char *what);
bool v2_tensor(const v2_out *o, const char *name, tens *t, bool *binary);
bool v1_tensor(const reply *r, const char *name, tens *t);
bool same_bits_tens(const tens *a, const tens *b, size_t *at);
char *v1_body_for(const char *model, const v2_in *in, size_t n, const char *extra);
void v2_agrees(int port, const char *what, const char *model, const v2_in *in, size_t n,
               const char *v1_extra, const char *params);
void check_v2_error(const reply *r, long status, const char *phrase, const char *what);

/* ---- The tests, one group a file, run by main.c ------------------------------------------- */

/* startup.c */
void test_startup_refusals(void);
void test_body_blocks(void);     /* body.c: server/body.c called directly */
void test_conns_take_head(void); /* conns.c: server/conn.c called directly */
void test_broken_models(void);

/* v1.c */
void test_endpoints(int port);
void test_errors(int port);
void test_results(int port);
void test_file_models(int port);

/* http.c */
void test_request_id_keepalive_cors(int port);
void test_auth(void);

/* lesson.c */
void test_lesson(int port);

/* parallel.c */
void test_parallel(int port);

/* metrics.c */
void test_metrics(int port, const char *log_path);

/* queue.c */
void test_queue_and_deadline(size_t *slow_l);
void test_drain(size_t L);
void test_shutdown_delay(void); /* shutdown.c */

/* batching.c */
void test_batching(const char *tokens, size_t slow_l);
void test_batch_wait(size_t slow_l);
void test_inline(size_t slow_l);
void test_inline_off(size_t slow_l);
void test_batch_places(size_t slow_l);
void test_v2_batching(size_t slow_l);
/* share.c */
void test_share(size_t slow_l);

/* sessions.c */
void test_sessions(void);

/* v2.c */
void test_v2_routes(int port);
void test_v2_infer(int port, const char *log_path);
void test_v2_coded_budget(void);

#endif
