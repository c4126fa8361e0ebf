/* safetensors.c - model files: loads a safetensors file (stfile.c reads the format) as a model
 * of one nn.MultiheadAttention, its state_dict's names at the top (in_proj_weight,
 * out_proj.weight, ...), or as a model of layers (layers.c), its names under layers.i.
 *
 * A model that takes words carries a vocabulary: __metadata__ "vocab", a JSON list of token
 * strings held in one metadata string, with the tensors token_embeddings (V, E) and optionally
 * position_embeddings (P, E); __metadata__ "head_names" (a JSON list likewise) names the heads,
 * and __metadata__ "start_token", one token of the vocabulary, is put before the words of every
 * request (unless it says "add_special_tokens": false). __metadata__ "text_split" says how text
 * is split: "longest_match" (the default) or "words", which keeps Latin words whole (vocab.c).
 *
 * A module made with add_bias_kv has bias_k and bias_v (1, 1, E) in its state_dict; one made with
 * add_zero_attn cannot say so there, so its file says __metadata__ "add_zero_attn": "true".
 *
 * Legend: E embedding width, kdim/vdim the key and value widths, V vocabulary size, P
 * positions. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models.h"

/* The widths of the projections: E from out_proj.weight, kdim and vdim from k_proj_weight and
 * v_proj_weight (E when packed, with in_proj_weight). 0, or -1 with c->err. */
static int projection_dims(apip_st_ctx *c, const apip_st_file *f, size_t *e, size_t *kdim,
                           size_t *vdim, bool *packed) {
    const apip_st_tensor *t = f->t;
    if (!t[APIP_P_OUT_W].present)
        return apip_st_fail(c, "tensor out_proj.weight is missing");
    *packed = t[APIP_P_IN_W].present;
    bool split = t[APIP_P_Q_W].present || t[APIP_P_K_W].present || t[APIP_P_V_W].present;
    if (*packed && split)
        return apip_st_fail(c, "give in_proj_weight or q/k/v_proj_weight, not both");
    if (!*packed && !split)
        return apip_st_fail(c, "tensor in_proj_weight (or q/k/v_proj_weight) is missing");
    for (int i = APIP_P_Q_W; split && i <= APIP_P_V_W; i++)
        if (!t[i].present)
            return apip_st_fail(c, "tensor %s is missing", apip_st_name(i));
    if (t[APIP_P_BIAS_K].present != t[APIP_P_BIAS_V].present)
        return apip_st_fail(c, "tensor %s is missing: add_bias_kv gives bias_k and bias_v together",
                            apip_st_name(t[APIP_P_BIAS_K].present ? APIP_P_BIAS_V : APIP_P_BIAS_K));
    const apip_st_tensor *ow = &t[APIP_P_OUT_W];
    if (ow->rank != 2 || ow->dims[0] != ow->dims[1] || ow->dims[0] == 0)
        return apip_st_fail(c, "tensor out_proj.weight must be (E, E) with E >= 1");
    *e = *kdim = *vdim = ow->dims[0];
    if (split) {
        *kdim = t[APIP_P_K_W].rank == 2 ? t[APIP_P_K_W].dims[1] : 0;
        *vdim = t[APIP_P_V_W].rank == 2 ? t[APIP_P_V_W].dims[1] : 0;
    }
    return 0;
}

/* The vocabulary's tables against its list (vocab, NULL when none), then every tensor's shape
 * against E, kdim, vdim and the vocabulary, and E against num_heads; *npos gets the rows of
 * position_embeddings (0 when absent). 0, or -1 with c->err. */
static int check_shapes(apip_st_ctx *c, const apip_st_file *f, size_t e, size_t kdim, size_t vdim,
                        const apip_strlist *vocab, size_t *npos) {
    const apip_st_tensor *t = f->t;
    size_t v = vocab ? vocab->n : 0;
    *npos = t[APIP_T_POS].rank == 2 ? t[APIP_T_POS].dims[0] : 0;
    const char *problem = vocab && !t[APIP_T_TOK].present ? "__metadata__.vocab needs the tensor "
                                                            "token_embeddings (V, E)"
                          : !vocab && t[APIP_T_TOK].present
                              ? "the tensor token_embeddings needs __metadata__.vocab, the list of "
                                "its tokens"
                          : t[APIP_T_POS].present && !t[APIP_T_TOK].present
                              ? "the tensor position_embeddings needs token_embeddings and "
                                "__metadata__.vocab"
                          : vocab && (kdim != e || vdim != e)
                              ? "a model with a vocabulary does self-attention: kdim and vdim must "
                                "equal E"
                              : NULL;
    if (problem || (t[APIP_T_POS].present && *npos == 0))
        return apip_st_fail(
            c, "%s", problem ? problem : "tensor position_embeddings must be (P, E), P >= 1");
    const size_t want[APIP_T_COUNT][3] = {{3 * e, e}, {3 * e},   {e, e},    {e},
                                          {e, e},     {e, kdim}, {e, vdim}, {1, 1, e},
                                          {1, 1, e},  {v, e},    {*npos, e}};
    const size_t want_rank[APIP_T_COUNT] = {2, 1, 2, 1, 2, 2, 2, 3, 3, 2, 2};
    for (int i = 0; i < APIP_T_COUNT; i++) {
        if (!t[i].present)
            continue;
        size_t rank = want_rank[i];
        bool fits = t[i].rank == rank;
        for (size_t k = 0; fits && k < rank; k++)
            fits = t[i].dims[k] == want[i][k] && (k == 0 || want[i][k] != 0);
        if (!fits) {
            char got[64], exp[64];
            apip_dims_str(got, sizeof got, t[i].dims, t[i].rank);
            apip_dims_str(exp, sizeof exp, want[i], rank);
            if (i == APIP_T_TOK)
                return apip_st_fail(c,
                                    "tensor %s has shape %s; with E=%zu and the %zu tokens of "
                                    "__metadata__.vocab it must be %s",
                                    apip_st_name(i), got, e, v, exp);
            return apip_st_fail(c, "tensor %s has shape %s; with E=%zu it must be %s",
                                apip_st_name(i), got, e, exp);
        }
    }
    if (e % f->h != 0)
        return apip_st_fail(c, "the embedding width E=%zu is not divisible by num_heads=%zu", e,
                            f->h);
    return 0;
}

/* Gives m its head names and vocabulary (taking names and vocab) and converts every tensor of
 * the file into it. m, or NULL with c->err (m destroyed). */
static api_model *fill_model(apip_st_ctx *c, api_model *m, const apip_st_file *f,
                             apip_strlist *vocab, apip_strlist *names, size_t npos) {
    const apip_st_tensor *t = f->t;
    const attn_mha_params *pp = apip_model_params(m);
    float *tok = NULL, *pos = NULL;
    if (names)
        apip_model_set_head_names(m, names);
    if (vocab && apip_model_set_vocab(m, vocab, npos, &tok, &pos, c->err)) {
        api_model_destroy(m);
        return NULL;
    }
    float *dst[APIP_T_COUNT] = {(float *)pp->in_proj_weight,
                                (float *)pp->in_proj_bias,
                                (float *)pp->out_proj_weight,
                                (float *)pp->out_proj_bias,
                                (float *)pp->q_proj_weight,
                                (float *)pp->k_proj_weight,
                                (float *)pp->v_proj_weight,
                                (float *)pp->bias_k,
                                (float *)pp->bias_v,
                                tok,
                                pos};
    for (int i = 0; i < APIP_T_COUNT; i++) {
        if (!t[i].present)
            continue;
        if (apip_st_convert(c, apip_st_name(i), &t[i], f->data, dst[i])) {
            api_model_destroy(m);
            return NULL;
        }
    }
    return m;
}

static api_model *parse(const char *label, const char *name, const uint8_t *bytes, size_t len,
                        api_error *err) {
    apip_st_ctx cx = {.label = label, .err = err}, *c = &cx;
    /* The header's slots hold a model of up to APIP_MAX_LAYERS layers: on the heap. */
    apip_st_file *f = calloc(1, sizeof *f);
    if (!f)
        return api_fail(err, 500, "out_of_memory", NULL, "%s: out of memory reading the header",
                        label),
               NULL;
    api_model *m = NULL;
    size_t e = 0, kdim = 0, vdim = 0, npos = 0;
    bool packed = false;
    apip_strlist *vocab = NULL, *names = NULL;
    uint32_t start = 0;
    if (apip_st_read(c, bytes, len, f))
        goto done;
    if (f->layers) { /* a model of layers */
        if (!apip_st_lists(c, f, &vocab, &names, &start))
            m = apip_layers_model(c, name, f, vocab, names, f->start_val != NULL, start);
        goto done;
    }
    for (int i = 0; i < APIP_S_COUNT; i++)
        if (f->top[i].present) {
            apip_st_fail(c,
                         "tensor %s belongs to a model of layers, but the file has no "
                         "layers.0.self_attn.in_proj_weight",
                         apip_st_top_name(i));
            goto done;
        }
    if (projection_dims(c, f, &e, &kdim, &vdim, &packed) ||
        apip_st_lists(c, f, &vocab, &names, &start))
        goto done;
    if (!check_shapes(c, f, e, kdim, vdim, vocab, &npos))
        m = apip_model_alloc(name, "file", e, f->h, kdim, vdim, packed, f->t[APIP_P_IN_B].present,
                             f->t[APIP_P_OUT_B].present, f->t[APIP_P_BIAS_K].present, err);
    if (!m) {
        apip_strlist_free(vocab);
        apip_strlist_free(names);
        goto done;
    }
    m = fill_model(c, m, f, vocab, names, npos);
    if (m && f->start_val)
        apip_model_set_start_token(m, start);
    if (m)
        apip_model_set_zero_attn(m, f->zero_attn);
done:
    free(f);
    return m;
}

api_model *api_model_from_safetensors(const char *name, const uint8_t *bytes, size_t len,
                                      api_error *err) {
    if (!name)
        return api_fail(err, 400, "invalid_model", NULL, "a model needs a name"), NULL;
    return parse(name, name, bytes, len, err);
}

/* Refuses path, whose mode says it is not a regular file: "PATH is a FIFO, not a regular file".
 * Returns -1. */
static int not_regular(const char *path, mode_t mode, api_error *err) {
    const char *kind = S_ISDIR(mode)    ? "a directory"
                       : S_ISFIFO(mode) ? "a FIFO"
                       : S_ISSOCK(mode) ? "a socket"
                       : S_ISCHR(mode)  ? "a character device"
                       : S_ISBLK(mode)  ? "a block device"
                                        : "a file of an unknown kind";
    struct stat lst;
    bool link = lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode);
    return api_fail(err, 400, "invalid_model", NULL, "%s is %s%s, not a regular file", path,
                    link ? "a symlink to " : "", kind);
}

api_model *api_model_load_file(const char *path, api_error *err) {
    if (!path)
        return api_fail(err, 400, "invalid_model", NULL, "no model file given"), NULL;
    /* The name is the file's stem: its base name without the last extension. */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t nlen = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    char name[256];
    if (nlen == 0 || nlen >= sizeof name)
        return api_fail(err, 400, "invalid_model", NULL,
                        "%s: the file name makes no usable model name", path),
               NULL;
    memcpy(name, base, nlen);
    name[nlen] = '\0';

    /* Only a regular file (or a symlink to one) is read. The path is looked at first, so that
     * nothing else is even opened (opening a device can act on it; opening a FIFO releases a
     * writer waiting on it); then the descriptor, opened without blocking (a FIFO would wait
     * for a writer), is what decides, in case the path changed in between. */
    struct stat st;
    if (stat(path, &st) != 0)
        return api_fail(err, 500, "io_error", NULL, "%s: cannot open: %s", path, strerror(errno)),
               NULL;
    if (!S_ISREG(st.st_mode))
        return not_regular(path, st.st_mode, err), NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return api_fail(err, 500, "io_error", NULL, "%s: cannot open: %s", path, strerror(errno)),
               NULL;
    uint8_t *bytes = NULL;
    api_model *m = NULL;
    size_t size = 0, got = 0;
    if (fstat(fd, &st) != 0)
        goto io;
    if (!S_ISREG(st.st_mode)) {
        not_regular(path, st.st_mode, err);
        goto done;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        goto io;
    if ((uintmax_t)st.st_size > SIZE_MAX - 1) {
        api_fail(err, 500, "out_of_memory", NULL, "%s: out of memory reading %jd bytes", path,
                 (intmax_t)st.st_size);
        goto done;
    }
    size = (size_t)st.st_size;
    bytes = malloc(size ? size : 1);
    if (!bytes) {
        api_fail(err, 500, "out_of_memory", NULL, "%s: out of memory reading %zu bytes", path,
                 size);
        goto done;
    }
    while (got < size) {
        ssize_t r = read(fd, bytes + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0; /* the file shrank */
            goto io;
        }
        got += (size_t)r;
    }
    m = parse(path, name, bytes, size, err);
    goto done;
io:
    api_fail(err, 500, "io_error", NULL, "%s: cannot read: %s", path,
             errno ? strerror(errno) : "short read");
done:
    free(bytes);
    close(fd);
    return m;
}
