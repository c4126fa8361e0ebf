/* main.c - test_server: integration tests of the attnd daemon over HTTP, with libcurl. This
 * file holds main and the --only dispatch; each group of tests lives in a file of its own beside
 * it (startup.c, v1.c, http.c, lesson.c, parallel.c, metrics.c, queue.c, shutdown.c, batching.c,
 * share.c, sessions.c, v2.c), on
 * helpers that server_test.h declares (util.c, reference.c, slow_jobs.c, v2_util.c).
 *
 * Starts build/attnd itself (fork/exec, with tests/harness.c) on 127.0.0.1:0 for each scenario,
 * reads the bound port from its log, and checks every endpoint, every error code with its JSON
 * error body, base64 in and out, rank-2 and rank-3 queries, cross-attention with kdim/vdim, file
 * models against PyTorch's answers (made by tests/server/make_models.py), X-Request-Id, keep-alive,
 * CORS, the API key, 64 parallel clients whose answers must match the sequential ones, dynamic
 * batching (concurrent requests batched, each answer against its unbatched one), the bounded queue
 * and the request deadline, draining on SIGTERM (and --shutdown-delay before it), and /metrics
 * through `promtool check metrics`. The built-in lesson model is measured here: each named head's
 * documented rule on the chapter's sentences and on new ones, sent as text, and the causal mask's
 * "no peeking" (实验三). The Open Inference Protocol (/v2) is checked route by route, with JSON,
 * binary and mixed tensors, compressed bodies and replies, bad framing, its error form, and its
 * answers against v1's bit for bit (also in one batch with v1 jobs). Shared jobs (share.c) and
 * decode sessions (sessions.c: appends against the whole causal call, every error, owners, ends
 * by each reason, SIGTERM, v2 sequences, never shared) have groups of their own.
 *
 * Usage: test_server --attnd build/attnd --data build/tests/server [--openapi api/openapi.yaml]
 *                    [--promtool promtool] [--only NAME]
 *   NAME: one of body, conns, startup, main, auth, v2-budget, queue, drain, shutdown,
 *   batching, share, sessions (default all).
 * Prints one line per failed check and a closing "N passed, N failed" line; exits 1 on any
 * failure. Every wait is bounded.
 */
#include <curl/curl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

settings cfg;

static bool want(const char *name) {
    return !cfg.only || !strcmp(cfg.only, name);
}

int main(int argc, char **argv) {
    cfg.promtool = "promtool";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--attnd"))
            cfg.attnd = argv[i + 1];
        else if (!strcmp(argv[i], "--data"))
            cfg.data = argv[i + 1];
        else if (!strcmp(argv[i], "--openapi"))
            cfg.openapi = argv[i + 1];
        else if (!strcmp(argv[i], "--promtool"))
            cfg.promtool = argv[i + 1];
        else if (!strcmp(argv[i], "--only"))
            cfg.only = argv[i + 1];
    }
    if (!cfg.attnd || !cfg.data) {
        fprintf(stderr, "usage: test_server --attnd PATH --data DIR [--openapi FILE] "
                        "[--promtool PATH] [--only NAME]\n");
        return 2;
    }
    /* TEST_TIME_SCALE in the environment (at least 1) multiplies every time bound, for a daemon
     * under valgrind (make test-valgrind). */
    const char *scale = getenv("TEST_TIME_SCALE");
    harness_init(cfg.attnd, cfg.data, scale && atof(scale) >= 1 ? atof(scale) : 1.0);
    harness_http_secs = 120; /* for any one request */
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    double t0 = now();

    if (want("body"))
        test_body_blocks();
    if (want("conns"))
        test_conns_take_head();
    if (want("startup")) {
        test_startup_refusals();
        test_broken_models();
    }
    if (want("main")) {
        char models[700];
        snprintf(models, sizeof models, "%s/models", cfg.data);
        const char *args[] = {"--threads",
                              "2",
                              "--models",
                              models,
                              "--max-body-bytes",
                              "1M",
                              "--max-job-bytes",
                              "16M",
                              "--cors-origins",
                              "http://allowed.example,http://other.example",
                              NULL};
        attnd d;
        if (attnd_start(&d, "main", args, NULL)) {
            test_endpoints(d.port);
            test_errors(d.port);
            test_results(d.port);
            test_file_models(d.port);
            test_lesson(d.port);
            test_request_id_keepalive_cors(d.port);
            test_v2_routes(d.port);
            test_v2_infer(d.port, d.log);
            test_parallel(d.port);
            test_metrics(d.port, d.log);
            CHECK(attnd_stop(&d, SIGTERM) == 0, "main daemon: exit status after SIGTERM");
        }
    }
    if (want("auth"))
        test_auth();
    if (want("v2-budget"))
        test_v2_coded_budget();
    size_t slow_l = 0;
    if (want("queue") || want("drain"))
        test_queue_and_deadline(&slow_l);
    if (want("drain"))
        test_drain(slow_l);
    if (want("drain") || want("shutdown"))
        test_shutdown_delay();
    if (want("batching")) {
        test_batching("4096", slow_l ? slow_l : 8192);
        test_batching("48", slow_l ? slow_l : 8192);
        test_batch_wait(slow_l ? slow_l : 12288);
        test_inline(slow_l ? slow_l : 8192);
        test_inline_off(slow_l ? slow_l : 8192);
        test_batch_places(slow_l ? slow_l : 8192);
        test_v2_batching(slow_l ? slow_l : 8192);
    }
    if (want("share"))
        test_share(slow_l); /* 0: calibrated there */
    if (want("sessions"))
        test_sessions();

    curl_global_cleanup();
    return harness_summary("test_server", t0);
}
