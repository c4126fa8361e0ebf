/* parallel.c - 64 parallel clients on the main daemon: every answer must match the float64
 * reference, whatever batches the requests were run in. */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

#define NCLIENTS   64
#define PER_CLIENT 4

#define NDISTINCT 8

typedef struct par_shared {
    int port;
    char *bodies[NDISTINCT];
    const char *paths[NDISTINCT];
    tens want[NDISTINCT];
    tens want_w[NDISTINCT]; /* weights, n = 0 when not asked */
} par_shared;

typedef struct par_client {
    par_shared *sh;
    int index;
    int ok, bad;
    char why[256];
} par_client;

static void *par_main(void *arg) {
    par_client *pc = arg;
    CURL *c = curl_easy_init();
    for (int i = 0; i < PER_CLIENT; i++) {
        int k = (pc->index + 3 * i) % NDISTINCT;
        reply r;
        req q = {.path = pc->sh->paths[k], .ctype = "application/json", .body = pc->sh->bodies[k]};
        http(c, pc->sh->port, &q, &r);
        json_t *j = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
        tens t = {0}, tw = {0};
        bool good = j && tens_from_json(json_object_get(j, "output"), &t);
        if (good && pc->sh->want_w[k].n)
            good =
                tens_from_json(json_object_get(j, "weights"), &tw) && same(&tw, &pc->sh->want_w[k]);
        good = good && same(&t, &pc->sh->want[k]);
        if (good) {
            pc->ok++;
        } else {
            pc->bad++;
            snprintf(pc->why, sizeof pc->why, "request %d: status %ld, %s", k, r.status,
                     r.status == 200 ? "answer differs from the sequential one" : r.body);
        }
        tens_free(&t);
        tens_free(&tw);
        json_decref(j);
        reply_free(&r);
    }
    curl_easy_cleanup(c);
    return NULL;
}

void test_parallel(int port) {
    par_shared sh = {.port = port};
    mha_case cs[3];
    mha_case_make(&cs[0], 3, 6, 4, 16, 4, 16, 16, false, true, 500);
    mha_case_make(&cs[1], 1, 5, 8, 16, 2, 6, 10, false, true, 510);
    mha_case_make(&cs[2], 2, 20, 20, 32, 4, 32, 32, true, false, 520);
    sh.bodies[0] = mha_case_body(&cs[0], false, false, NULL, "per_head");
    sh.bodies[1] = mha_case_body(&cs[1], true, true, "base64", NULL);
    sh.bodies[2] = mha_case_body(&cs[2], false, true, NULL, "mean");
    float *x = rnd_array(2 * 16 * 64, 530);
    sh.bodies[3] = dump(json_pack("{s:o,s:s}", "query", json_matrix(x, 16, 64), "need_weights",
                                  "per_head")); /* W1 on the demo model */
    sh.bodies[4] = dump(json_pack("{s:o}", "query", json_tensor3(x, 2, 16, 64)));
    float *qkv = rnd_array(3 * 2 * 9 * 8, 540);
    size_t sh4[4] = {2, 1, 9, 8};
    sh.bodies[5] = dump(json_pack("{s:o,s:o,s:o,s:b,s:b}", "q", json_b64(qkv, sh4, 4), "k",
                                  json_b64(qkv + 144, sh4, 4), "v", json_b64(qkv + 288, sh4, 4),
                                  "causal", 1, "need_weights", 1));
    sh.bodies[6] =
        dump(json_pack("{s:o,s:o,s:o}", "q", json_matrix(qkv, 7, 8), "k",
                       json_matrix(qkv + 56, 11, 8), "v", json_matrix(qkv + 144, 11, 8)));
    char path[700];
    snprintf(path, sizeof path, "%s/cases/kvdim.json", cfg.data);
    json_t *kc = json_load_file(path, 0, NULL);
    sh.bodies[7] = kc ? json_dumps(json_object_get(kc, "request"), JSON_COMPACT)
                      : strdup("{\"query\": [[1]]}");
    json_decref(kc);
    for (int k = 0; k < NDISTINCT; k++)
        sh.paths[k] = (k == 5 || k == 6) ? "/v1/sdpa" : "/v1/attention";

    /* The answers, computed once, one request at a time. */
    bool ready = true;
    for (int k = 0; k < NDISTINCT; k++) {
        reply r;
        post(NULL, port, sh.paths[k], sh.bodies[k], &r);
        char what[48];
        snprintf(what, sizeof what, "parallel request %d (sequential)", k);
        ready &= reply_tensor(&r, "output", &sh.want[k], what);
        json_t *j = json_loads(r.body, 0, NULL);
        if (json_object_get(j, "weights"))
            tens_from_json(json_object_get(j, "weights"), &sh.want_w[k]);
        json_decref(j);
        reply_free(&r);
    }
    /* The MHA ones are also right, not only stable. */
    for (int k = 0; k < 3 && ready; k++) {
        size_t on = cs[k].N * cs[k].L * cs[k].E;
        double *out = malloc(on * sizeof *out);
        mha_case_ref(&cs[k], out, NULL);
        CHECK(max_diff(&sh.want[k], out, on) < TOL, "parallel request %d off by %g", k,
              max_diff(&sh.want[k], out, on));
        free(out);
    }
    if (ready) {
        pthread_t th[NCLIENTS];
        par_client pc[NCLIENTS];
        double t0 = now();
        for (int i = 0; i < NCLIENTS; i++) {
            pc[i] = (par_client){.sh = &sh, .index = i};
            pthread_create(&th[i], NULL, par_main, &pc[i]);
        }
        int ok = 0, bad = 0;
        for (int i = 0; i < NCLIENTS; i++) {
            pthread_join(th[i], NULL);
            ok += pc[i].ok;
            bad += pc[i].bad;
            if (pc[i].bad)
                CHECK(false, "parallel client %d: %s", i, pc[i].why);
        }
        CHECK(ok == NCLIENTS * PER_CLIENT && bad == 0, "parallel: %d of %d answers right and 200",
              ok, NCLIENTS * PER_CLIENT);
        printf("test_server: %d parallel clients x %d requests: %d right answers in %.2f s\n",
               NCLIENTS, PER_CLIENT, ok, now() - t0);
    }
    for (int k = 0; k < NDISTINCT; k++) {
        free(sh.bodies[k]);
        tens_free(&sh.want[k]);
        tens_free(&sh.want_w[k]);
    }
    for (int k = 0; k < 3; k++)
        mha_case_free(&cs[k]);
    free(x);
    free(qkv);
}
