/* trace.c - the trace of a job's attention (attn_trace): q, k, v and the heads' outputs copied
 * from the forward's buffers, and the scores, masked scores and weights computed again with the
 * direct path's row code (sdpa.c), after the job has run.
 *
 * Legend: N batch, L query length, S key length (S' with MHA's appended keys), H heads, Hkv
 * key/value heads, D and Dv the query/key and value widths of one attention problem. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "internal.h"

/* Copies the rows of one view tensor into dst (N, H, rows, w) contiguous: head h of batch n from
 * base + n sn + (h / group) sh, rows ld apart (group: the query heads that share a key/value
 * head, 1 for q and the outputs). Row i is the view's row (i + rot) mod rows: rot moves MHA's
 * appended keys from first to last. */
static void trace_copy(float *dst, const float *base, size_t sn, size_t sh, size_t ld,
                       const attn_sdpa_dims *d, size_t group, size_t rows, size_t rot, size_t w) {
    for (size_t n = 0; n < d->n; n++)
        for (size_t h = 0; h < d->h; h++)
            for (size_t i = 0; i < rows; i++)
                memcpy(dst + ((n * d->h + h) * rows + i) * w,
                       base + n * sn + h / group * sh + (i + rot) % rows * ld, w * sizeof *dst);
}

void attn_trace_write(attn_run *r, attn_trace *t) {
    const attn_plan *p = r->p;
    const attn_view *v = &r->view;
    const attn_sdpa_dims *d = &p->sd;
    const size_t L = d->l, S = d->s, group = d->h / d->hkv, x = p->kv_extra;
    r->ks = attnk_get();
    t->scale = p->scale;
    if (t->q)
        trace_copy(t->q, v->q, v->q_sn, v->q_sh, v->ldq, d, 1, L, 0, d->d);
    if (t->k)
        trace_copy(t->k, v->k, v->k_sn, v->k_sh, v->ldk, d, group, S, x, d->d);
    if (t->v)
        trace_copy(t->v, v->v, v->v_sn, v->v_sh, v->ldv, d, group, S, x, d->dv);
    if (t->heads)
        trace_copy(t->heads, v->o, v->o_sn, v->o_sh, v->ldo, d, 1, L, 0, d->dv);
    if (!t->scores && !t->masked && !t->weights)
        return;
    for (size_t n = 0; n < d->n; n++)
        for (size_t h = 0; h < d->h; h++) {
            size_t at = (n * d->h + h) * L * S;
            /* Each step's (L, S) rows: scores first, then the others made from them. */
            float *sc = t->scores ? t->scores + at : t->masked ? t->masked + at : t->weights + at;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)L, (int)S, (int)d->d,
                        p->scale, v->q + n * v->q_sn + h * v->q_sh, (int)v->ldq,
                        v->k + n * v->k_sn + attn_kv_head(p, h) * v->k_sh, (int)v->ldk, 0.0f, sc,
                        (int)S);
            for (size_t i = 0; i < L && (t->masked || t->weights); i++) {
                size_t lim = attn_row_limit(p, n, i);
                /* masked: the scores row through the direct path's mask code */
                float *xm = t->masked ? t->masked + at + i * S : t->weights + at + i * S;
                if (xm != sc + i * S)
                    memcpy(xm, sc + i * S, S * sizeof *xm);
                float m = attn_row_mask_max(r, xm, S, lim, attn_masks_for_row(p, n, h, i), 0);
                if (!t->weights)
                    continue;
                /* weights: the softmax of the masked row, as the direct path takes it */
                float *w = t->weights + at + i * S;
                if (w != xm)
                    memcpy(w, xm, S * sizeof *w);
                if (m == -INFINITY) {
                    memset(w, 0, S * sizeof *w);
                    continue;
                }
                if (lim > S)
                    lim = S;
                float sum = r->ks->exp_sum(w, lim, m);
                r->ks->scale(w, lim, 1.0f / sum);
                memset(w + lim, 0, (S - lim) * sizeof *w);
            }
            /* The appended keys last, as in the weights. */
            if (t->scores)
                attn_rows_rotate(t->scores + at, S, L, S, x);
            if (t->masked)
                attn_rows_rotate(t->masked + at, S, L, S, x);
            if (t->weights)
                attn_rows_rotate(t->weights + at, S, L, S, x);
        }
}
