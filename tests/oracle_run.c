/* oracle_run.c - runs libattn on the cases that tests/oracle/run_oracle.py writes, so that script
 * can compare the results with PyTorch in float64.
 *
 * Usage: oracle_run CASE_DIR...
 *
 * Each CASE_DIR holds case.txt, lines of "key value..." (the keys are in case_keys and
 * case_parse below), and the inputs as raw little-endian row-major tensors: .f32 float32, .i32
 * int32, .u8 uint8. Every input file must hold exactly the elements its shape needs. For each case
 * this writes status.txt ("ok", or "error <status>: <message>") and, when the forward succeeded,
 * out.f32 and, when the plan returns weights, weights.f32 (and indices.i32 with top_k). Outputs
 * start as NaN (indices as -1) and the workspace as NaN bytes, so a cell libattn forgets to write,
 * or scratch it reads before writing, shows up in the comparison.
 *
 * Exits 0 when libattn succeeded on every case, 1 when it returned an error on some case, 2 on a
 * usage, file or memory error (the other cases still run).
 *
 * Legend: N batch, L query length, S key length, E embedding, H heads, D and Dv the SDPA
 * query/key and value widths, K the top-k count. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the oracle tensors are little-endian files read natively; port the reader first"
#endif

#define MAX_HEADS  64 /* entries of the "heads" key */
#define PATH_BYTES 4096

enum { RUN_OK = 0, RUN_ATTN = 1, RUN_IO = 2 };

/* One case as case.txt describes it. Dimensions and flags are size_t; absent keys are 0. */
typedef struct oracle_case {
    int sdpa;                     /* "kind sdpa" (1) or "kind mha" (0) */
    size_t n, l, s, e, h;         /* MHA and SDPA */
    size_t kdim, vdim;            /* MHA; 0 = E */
    size_t d, dv;                 /* SDPA */
    size_t inputs;                /* 0 separate tensors; 1 one pointer for all (MHA) or for q and
                                     k (SDPA); 2 the key pointer also as value (MHA) */
    size_t packed;                /* MHA: in_proj_weight (1) or q/k/v_proj_weight (0) */
    size_t bias;                  /* MHA: in_proj_bias and out_proj_bias present */
    size_t causal;                /* attn_causal */
    size_t key_lengths, key_mask; /* present (1) or not */
    size_t key_mask_n;
    size_t attn_mask, attn_mask_n, attn_mask_h;
    size_t attn_bias, attn_bias_n, attn_bias_h;
    size_t weights, top_k, path, block_q, block_k; /* attn_opts */
    size_t pool;                                   /* run on the shared 2-slot pool */
    uint32_t heads[MAX_HEADS];                     /* (n_heads) */
    size_t n_heads;
    int has_scale;
    float scale;
} oracle_case;

static const struct {
    const char *name;
    size_t offset;
} case_keys[] = {
    {"n", offsetof(oracle_case, n)},
    {"l", offsetof(oracle_case, l)},
    {"s", offsetof(oracle_case, s)},
    {"e", offsetof(oracle_case, e)},
    {"h", offsetof(oracle_case, h)},
    {"kdim", offsetof(oracle_case, kdim)},
    {"vdim", offsetof(oracle_case, vdim)},
    {"d", offsetof(oracle_case, d)},
    {"dv", offsetof(oracle_case, dv)},
    {"inputs", offsetof(oracle_case, inputs)},
    {"packed", offsetof(oracle_case, packed)},
    {"bias", offsetof(oracle_case, bias)},
    {"causal", offsetof(oracle_case, causal)},
    {"key_lengths", offsetof(oracle_case, key_lengths)},
    {"key_mask", offsetof(oracle_case, key_mask)},
    {"key_mask_n", offsetof(oracle_case, key_mask_n)},
    {"attn_mask", offsetof(oracle_case, attn_mask)},
    {"attn_mask_n", offsetof(oracle_case, attn_mask_n)},
    {"attn_mask_h", offsetof(oracle_case, attn_mask_h)},
    {"attn_bias", offsetof(oracle_case, attn_bias)},
    {"attn_bias_n", offsetof(oracle_case, attn_bias_n)},
    {"attn_bias_h", offsetof(oracle_case, attn_bias_h)},
    {"weights", offsetof(oracle_case, weights)},
    {"top_k", offsetof(oracle_case, top_k)},
    {"path", offsetof(oracle_case, path)},
    {"block_q", offsetof(oracle_case, block_q)},
    {"block_k", offsetof(oracle_case, block_k)},
    {"pool", offsetof(oracle_case, pool)},
};

/* The tensors of one case. Owned: case_data_free releases them all. */
typedef struct case_data {
    float *query; /* MHA (N, L, E); SDPA q (N, H, L, D) */
    float *key;   /* MHA (N, S, kdim); SDPA k (N, H, S, D); NULL when inputs says to reuse */
    float *value; /* MHA (N, S, vdim); SDPA v (N, H, S, Dv); NULL when inputs says to reuse */
    float *in_proj_weight;  /* (3E, E) */
    float *q_proj_weight;   /* (E, E) */
    float *k_proj_weight;   /* (E, kdim) */
    float *v_proj_weight;   /* (E, vdim) */
    float *in_proj_bias;    /* (3E) */
    float *out_proj_weight; /* (E, E) */
    float *out_proj_bias;   /* (E) */
    int32_t *key_lengths;   /* (N) */
    uint8_t *key_mask;      /* (Kn, S) */
    uint8_t *attn_mask;     /* (Mn, Mh, L, S) */
    float *attn_bias;       /* (Bn, Bh, L, S) */
    void *workspace;        /* plan.workspace_bytes, 64-byte aligned */
    float *out;             /* plan.out_elems */
    float *weights;         /* plan.weights_elems */
    int32_t *indices;       /* plan.index_elems */
} case_data;

static void case_data_free(case_data *b) {
    free(b->query);
    free(b->key);
    free(b->value);
    free(b->in_proj_weight);
    free(b->q_proj_weight);
    free(b->k_proj_weight);
    free(b->v_proj_weight);
    free(b->in_proj_bias);
    free(b->out_proj_weight);
    free(b->out_proj_bias);
    free(b->key_lengths);
    free(b->key_mask);
    free(b->attn_mask);
    free(b->attn_bias);
    free(b->workspace);
    free(b->out);
    free(b->weights);
    free(b->indices);
    memset(b, 0, sizeof *b);
}

/* ---- Files -------------------------------------------------------------------------------- */

/* Writes dir/name into path (PATH_BYTES). Returns 0, or -1 when it does not fit. */
static int path_join(char *path, const char *dir, const char *name) {
    int len = snprintf(path, PATH_BYTES, "%s/%s", dir, name);
    if (len < 0 || len >= PATH_BYTES) {
        fprintf(stderr, "oracle_run: path too long: %s/%s\n", dir, name);
        return -1;
    }
    return 0;
}

/* a * b * c * d into *out; false on overflow. */
static int elems_of(size_t *out, size_t a, size_t b, size_t c, size_t d) {
    return !__builtin_mul_overflow(a, b, out) && !__builtin_mul_overflow(*out, c, out) &&
           !__builtin_mul_overflow(*out, d, out);
}

/* Reads dir/name, which must hold exactly a*b*c*d elements of size bytes each. Returns a new
 * buffer (the caller frees it), or NULL after printing why. */
static void *tensor_read(const char *dir, const char *name, size_t size, size_t a, size_t b,
                         size_t c, size_t d) {
    char path[PATH_BYTES];
    size_t count = 0, bytes = 0;
    void *buf = NULL;
    FILE *f = NULL;
    long len = 0;
    if (path_join(path, dir, name) != 0)
        goto fail;
    if (!elems_of(&count, a, b, c, d) || !elems_of(&bytes, count, size, 1, 1) || bytes == 0 ||
        bytes > (size_t)LONG_MAX) {
        fprintf(stderr, "oracle_run: %s: bad size (%zu x %zu x %zu x %zu elements)\n", path, a, b,
                c, d);
        goto fail;
    }
    f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "oracle_run: %s: %s\n", path, strerror(errno));
        goto fail;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "oracle_run: %s: cannot size the file\n", path);
        goto fail;
    }
    if ((size_t)len != bytes) {
        fprintf(stderr, "oracle_run: %s holds %ld bytes; the case needs %zu\n", path, len, bytes);
        goto fail;
    }
    buf = malloc(bytes);
    if (!buf || fread(buf, 1, bytes, f) != bytes) {
        fprintf(stderr, "oracle_run: %s: %s\n", path, buf ? "short read" : "out of memory");
        goto fail;
    }
    fclose(f);
    return buf;
fail:
    free(buf);
    if (f)
        fclose(f);
    return NULL;
}

/* Writes count elements of size bytes from buf to dir/name. Returns 0, or -1 after printing
 * why. */
static int tensor_write(const char *dir, const char *name, const void *buf, size_t size,
                        size_t count) {
    char path[PATH_BYTES];
    if (path_join(path, dir, name) != 0)
        return -1;
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "oracle_run: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t done = count ? fwrite(buf, size, count, f) : 0;
    if (fclose(f) != 0 || done != count) {
        fprintf(stderr, "oracle_run: %s: write failed\n", path);
        return -1;
    }
    return 0;
}

/* Writes dir/status.txt: "ok" for ATTN_OK, else the status name and the error message. */
static int status_write(const char *dir, int status, const attn_error *err) {
    char path[PATH_BYTES];
    if (path_join(path, dir, "status.txt") != 0)
        return -1;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "oracle_run: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (status == ATTN_OK)
        fprintf(f, "ok\n");
    else
        fprintf(f, "error %s: %s\n", attn_status_name((attn_status)status), err->msg);
    if (fclose(f) != 0) {
        fprintf(stderr, "oracle_run: %s: write failed\n", path);
        return -1;
    }
    return 0;
}

/* ---- case.txt ----------------------------------------------------------------------------- */

/* Parses a non-negative decimal integer. Returns 0, or -1 when s is not one. */
static int parse_size(const char *s, size_t *out) {
    char *end = NULL;
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > SIZE_MAX)
        return -1;
    *out = (size_t)v;
    return 0;
}

/* Sets the key of one case.txt line from its values (vals[0..nvals)). Returns 0, or -1 for an
 * unknown key or a bad value. */
static int case_set(oracle_case *c, const char *key, char **vals, size_t nvals) {
    if (strcmp(key, "kind") == 0) {
        if (nvals != 1 || (strcmp(vals[0], "mha") != 0 && strcmp(vals[0], "sdpa") != 0))
            return -1;
        c->sdpa = strcmp(vals[0], "sdpa") == 0;
        return 0;
    }
    if (strcmp(key, "heads") == 0) {
        if (nvals > MAX_HEADS)
            return -1;
        for (size_t i = 0; i < nvals; i++) {
            size_t v = 0;
            if (parse_size(vals[i], &v) != 0 || v > UINT32_MAX)
                return -1;
            c->heads[i] = (uint32_t)v;
        }
        c->n_heads = nvals;
        return 0;
    }
    if (strcmp(key, "scale") == 0) {
        char *end = NULL;
        if (nvals != 1)
            return -1;
        c->scale = strtof(vals[0], &end);
        c->has_scale = 1;
        return *end == '\0' ? 0 : -1;
    }
    for (size_t i = 0; i < sizeof case_keys / sizeof case_keys[0]; i++)
        if (strcmp(key, case_keys[i].name) == 0)
            return nvals == 1 ? parse_size(vals[0], (size_t *)((char *)c + case_keys[i].offset))
                              : -1;
    return -1;
}

/* Reads dir/case.txt into *c. Returns 0, or -1 after printing why. */
static int case_parse(const char *dir, oracle_case *c) {
    char path[PATH_BYTES], line[1024];
    int rc = -1, have_kind = 0;
    size_t lineno = 0;
    memset(c, 0, sizeof *c);
    if (path_join(path, dir, "case.txt") != 0)
        return -1;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "oracle_run: %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        char *vals[MAX_HEADS + 1], *save = NULL;
        size_t nvals = 0;
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            fprintf(stderr, "oracle_run: %s:%zu: line too long\n", path, lineno);
            goto done;
        }
        char *key = strtok_r(line, " \t\r\n", &save);
        if (!key || key[0] == '#')
            continue;
        for (char *t; (t = strtok_r(NULL, " \t\r\n", &save));) {
            if (nvals == MAX_HEADS + 1) {
                fprintf(stderr, "oracle_run: %s:%zu: too many values\n", path, lineno);
                goto done;
            }
            vals[nvals++] = t;
        }
        if (case_set(c, key, vals, nvals) != 0) {
            fprintf(stderr, "oracle_run: %s:%zu: bad line for key \"%s\"\n", path, lineno, key);
            goto done;
        }
        have_kind |= strcmp(key, "kind") == 0;
    }
    if (ferror(f)) {
        fprintf(stderr, "oracle_run: %s: read error\n", path);
        goto done;
    }
    if (!have_kind) {
        fprintf(stderr, "oracle_run: %s: no \"kind\" line\n", path);
        goto done;
    }
    rc = 0;
done:
    fclose(f);
    return rc;
}

/* ---- Inputs ------------------------------------------------------------------------------- */

static size_t extent(size_t x) {
    return x == 0 ? 1 : x;
}

/* Loads the inputs c names from dir into b. Returns 0, or -1 after printing why. */
static int case_load(const char *dir, const oracle_case *c, case_data *b) {
    const size_t N = c->n, L = c->l, S = c->s, H = c->h;
    if (c->sdpa) {
        b->query = tensor_read(dir, "q.f32", 4, N, H, L, c->d);
        if (!b->query)
            return -1;
        if (c->inputs != 1 && !(b->key = tensor_read(dir, "k.f32", 4, N, H, S, c->d)))
            return -1;
        if (!(b->value = tensor_read(dir, "v.f32", 4, N, H, S, c->dv)))
            return -1;
    } else {
        const size_t E = c->e, kdim = c->kdim ? c->kdim : E, vdim = c->vdim ? c->vdim : E;
        b->query = tensor_read(dir, "query.f32", 4, N, L, E, 1);
        if (!b->query)
            return -1;
        if (c->inputs != 1 && !(b->key = tensor_read(dir, "key.f32", 4, N, S, kdim, 1)))
            return -1;
        if (c->inputs == 0 && !(b->value = tensor_read(dir, "value.f32", 4, N, S, vdim, 1)))
            return -1;
        if (c->packed) {
            if (!(b->in_proj_weight = tensor_read(dir, "in_proj_weight.f32", 4, 3 * E, E, 1, 1)))
                return -1;
        } else if (!(b->q_proj_weight = tensor_read(dir, "q_proj_weight.f32", 4, E, E, 1, 1)) ||
                   !(b->k_proj_weight = tensor_read(dir, "k_proj_weight.f32", 4, E, kdim, 1, 1)) ||
                   !(b->v_proj_weight = tensor_read(dir, "v_proj_weight.f32", 4, E, vdim, 1, 1))) {
            return -1;
        }
        if (c->bias &&
            (!(b->in_proj_bias = tensor_read(dir, "in_proj_bias.f32", 4, 3 * E, 1, 1, 1)) ||
             !(b->out_proj_bias = tensor_read(dir, "out_proj_bias.f32", 4, E, 1, 1, 1))))
            return -1;
        if (!(b->out_proj_weight = tensor_read(dir, "out_proj_weight.f32", 4, E, E, 1, 1)))
            return -1;
    }
    if (c->key_lengths && !(b->key_lengths = tensor_read(dir, "key_lengths.i32", 4, N, 1, 1, 1)))
        return -1;
    if (c->key_mask &&
        !(b->key_mask = tensor_read(dir, "key_mask.u8", 1, extent(c->key_mask_n), S, 1, 1)))
        return -1;
    if (c->attn_mask && !(b->attn_mask = tensor_read(dir, "attn_mask.u8", 1, extent(c->attn_mask_n),
                                                     extent(c->attn_mask_h), L, S)))
        return -1;
    if (c->attn_bias &&
        !(b->attn_bias = tensor_read(dir, "attn_bias.f32", 4, extent(c->attn_bias_n),
                                     extent(c->attn_bias_h), L, S)))
        return -1;
    return 0;
}

/* ---- Running ------------------------------------------------------------------------------ */

/* Allocates the workspace and outputs of plan into b, poisoned with NaN (indices -1). Returns 0,
 * or -1 when memory runs out. */
static int outputs_alloc(const attn_plan *plan, case_data *b) {
    size_t ws = (plan->workspace_bytes + 63) / 64 * 64;
    b->workspace = aligned_alloc(64, ws ? ws : 64);
    b->out = malloc(plan->out_elems * sizeof *b->out);
    if (plan->weights_elems)
        b->weights = malloc(plan->weights_elems * sizeof *b->weights);
    if (plan->index_elems)
        b->indices = malloc(plan->index_elems * sizeof *b->indices);
    if (!b->workspace || !b->out || (plan->weights_elems && !b->weights) ||
        (plan->index_elems && !b->indices)) {
        fprintf(stderr, "oracle_run: out of memory\n");
        return -1;
    }
    memset(b->workspace, 0xff, ws ? ws : 64); /* every float a NaN */
    for (size_t i = 0; i < plan->out_elems; i++)
        b->out[i] = NAN;
    for (size_t i = 0; i < plan->weights_elems; i++)
        b->weights[i] = NAN;
    for (size_t i = 0; i < plan->index_elems; i++)
        b->indices[i] = -1;
    return 0;
}

/* Plans and runs case c on its loaded inputs b into *plan and b's outputs (the pool is used when
 * c->pool). Returns the libattn status (err filled on error), or -1 when memory runs out. */
static int case_forward(attn_plan *plan, const oracle_case *c, case_data *b, attn_pool *pool,
                        attn_error *err) {
    attn_masks masks = {
        .causal = (attn_causal)c->causal,
        .key_lengths = b->key_lengths,
        .key_mask = b->key_mask,
        .key_mask_n = c->key_mask_n,
        .attn_mask = b->attn_mask,
        .attn_mask_n = c->attn_mask_n,
        .attn_mask_h = c->attn_mask_h,
        .attn_bias = b->attn_bias,
        .attn_bias_n = c->attn_bias_n,
        .attn_bias_h = c->attn_bias_h,
    };
    attn_opts opts = {
        .weights = (attn_weights_mode)c->weights,
        .heads = c->n_heads ? c->heads : NULL,
        .n_heads = c->n_heads,
        .top_k = c->top_k,
        .has_scale = c->has_scale != 0,
        .scale = c->scale,
        .path = (attn_path)c->path,
        .block_q = c->block_q,
        .block_k = c->block_k,
    };
    attn_pool *use = c->pool ? pool : NULL;
    size_t nslots = attn_pool_slots(use);
    int st;
    if (c->sdpa) {
        attn_sdpa_dims dims = {.n = c->n, .h = c->h, .l = c->l, .s = c->s, .d = c->d, .dv = c->dv};
        st = attn_sdpa_plan(plan, &dims, &opts, &masks, nslots, err);
    } else {
        attn_mha_dims dims = {.n = c->n,
                              .l = c->l,
                              .s = c->s,
                              .e = c->e,
                              .h = c->h,
                              .kdim = c->kdim,
                              .vdim = c->vdim};
        st = attn_mha_plan(plan, &dims, &opts, &masks, nslots, err);
    }
    if (st != ATTN_OK)
        return st;
    if (outputs_alloc(plan, b) != 0)
        return -1;
    attn_weights_out wo = {.values = b->weights, .indices = b->indices};
    attn_weights_out *w = plan->weights_elems ? &wo : NULL;
    /* inputs 1: one pointer for query, key and value (MHA) or for q and k (SDPA); inputs 2: the
     * key pointer is the value too (MHA). */
    const float *key = c->inputs == 1 ? b->query : b->key;
    const float *value = c->inputs == 0 || c->sdpa ? b->value : key;
    if (c->sdpa)
        return attn_sdpa_forward(plan, b->workspace, b->out, w, b->query, key, value, use, err);
    attn_mha_params params = {
        .in_proj_weight = b->in_proj_weight,
        .q_proj_weight = b->q_proj_weight,
        .k_proj_weight = b->k_proj_weight,
        .v_proj_weight = b->v_proj_weight,
        .in_proj_bias = b->in_proj_bias,
        .out_proj_weight = b->out_proj_weight,
        .out_proj_bias = b->out_proj_bias,
    };
    return attn_mha_forward(plan, b->workspace, b->out, w, b->query, key, value, &params, use, err);
}

/* Runs the case in dir and writes its status and outputs there. *pool is created on the first
 * case that asks for one (a helper thread: 2 slots). Returns RUN_OK, RUN_ATTN when libattn
 * returned an error, or RUN_IO. */
static int case_run(const char *dir, attn_pool **pool) {
    oracle_case c;
    case_data b = {0};
    attn_error err = {0};
    attn_plan plan;
    int rc = RUN_IO, st = ATTN_OK;
    if (case_parse(dir, &c) != 0 || case_load(dir, &c, &b) != 0)
        goto done;
    if (c.pool && !*pool && !(*pool = attn_pool_create(1, &err))) {
        fprintf(stderr, "oracle_run: %s: attn_pool_create: %s\n", dir, err.msg);
        goto done;
    }
    st = case_forward(&plan, &c, &b, *pool, &err);
    if (st < 0 || status_write(dir, st, &err) != 0)
        goto done;
    if (st != ATTN_OK) {
        fprintf(stderr, "oracle_run: %s: %s: %s\n", dir, attn_status_name((attn_status)st),
                err.msg);
        rc = RUN_ATTN;
        goto done;
    }
    if (tensor_write(dir, "out.f32", b.out, sizeof *b.out, plan.out_elems) != 0 ||
        (plan.weights_elems &&
         tensor_write(dir, "weights.f32", b.weights, sizeof *b.weights, plan.weights_elems) != 0) ||
        (plan.index_elems &&
         tensor_write(dir, "indices.i32", b.indices, sizeof *b.indices, plan.index_elems) != 0))
        goto done;
    rc = RUN_OK;
done:
    case_data_free(&b);
    return rc;
}

int main(int argc, char **argv) {
    attn_blas_info info;
    attn_error err = {0};
    if (attn_blas_setup(argv, &info, &err) != ATTN_OK) {
        fprintf(stderr, "oracle_run: attn_blas_setup: %s\n", err.msg);
        return RUN_IO;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s CASE_DIR...\n", argv[0]);
        return RUN_IO;
    }
    printf("oracle_run: BLAS core %s: %s\n", info.active, info.how);
    attn_pool *pool = NULL;
    int worst = RUN_OK;
    for (int i = 1; i < argc; i++) {
        int rc = case_run(argv[i], &pool);
        if (rc > worst)
            worst = rc;
    }
    attn_pool_destroy(pool);
    return worst;
}
