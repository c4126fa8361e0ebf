/* main.c - test_reliability: attnd under hostile and faulty clients. This file holds main and
 * the --only dispatch; each scenario lives in a file of its own beside it (limits.c, faults.c,
 * slow.c, framing.c, security.c, rss.c, unsent.c, jobmem.c, probes.c, startup.c), on helpers that
 * reliability.h declares (util.c, sockets.c).
 *
 * What it covers: every limit answered with its status and a message naming it, bodies that stop
 * mid-way, clients that vanish before the reply, slow clients (idle, trickling headers, trickling
 * bodies), HTTP framing (RFC 9112) and content codings (gzip, deflate, bombs), SIGPIPE, the API
 * key, CORS and the security headers, the default address, the daemon's memory over 20 000 mixed
 * good and bad requests, its memory with clients that never read their replies (and the reply
 * budget reserved before compute), its job memory: reused from a large job to the next,
 * returned to the system when idle, and its start: odd files in --models refused, naming them,
 * and a signal that ends a long start at once.
 *
 * Starts build/attnd itself on 127.0.0.1:0 for each scenario (with tests/harness.c, as
 * test_server does) and talks to it with libcurl and with raw sockets where a client must
 * misbehave. Every wait is bounded; every scenario ends with the daemon exiting 0 on SIGTERM,
 * but startup's, whose daemons are refused or stopped before they are ready.
 *
 * Usage: test_reliability --attnd build/attnd --work DIR [--only NAMES] [--time-scale F]
 *   NAMES: some of limits, faults, slow, framing, security, rss, unsent, jobmem, probes,
 *   starve, budget, startup (comma-separated; default all).
 *   --time-scale multiplies every time bound, for a daemon under valgrind (rss is then
 *   skipped: meaningless there). Prints one line per failed check and "N passed, N failed";
 *   exits 1 on any failure. */
#include <curl/curl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../harness.h"
#include "reliability.h"

settings cfg = {.scale = 1.0};

static bool want(const char *name) {
    return !cfg.only || strstr(cfg.only, name) != NULL;
}

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--attnd"))
            cfg.attnd = argv[i + 1];
        else if (!strcmp(argv[i], "--work"))
            cfg.work = argv[i + 1];
        else if (!strcmp(argv[i], "--only"))
            cfg.only = argv[i + 1];
        else if (!strcmp(argv[i], "--time-scale"))
            cfg.scale = atof(argv[i + 1]);
    }
    if (!cfg.attnd || !cfg.work || !(cfg.scale >= 1)) {
        fprintf(stderr, "usage: test_reliability --attnd PATH --work DIR [--only NAMES] "
                        "[--time-scale F >= 1]\n  NAMES: some of limits,faults,slow,framing,"
                        "security,rss,unsent,jobmem,probes,starve,budget,startup\n");
        return 2;
    }
    mkdir(cfg.work, 0755); /* may exist */
    harness_init(cfg.attnd, cfg.work, cfg.scale);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    double t0 = now();
    if (want("limits"))
        test_limits();
    if (want("faults"))
        test_faults();
    if (want("slow")) {
        test_slow();
        test_idle();
        test_begun_after_reply();
        test_drain_reader();
    }
    if (want("framing"))
        test_framing();
    if (want("security"))
        test_security();
    if (want("rss"))
        test_rss();
    if (want("unsent")) {
        test_unsent();
        test_slow_reader();
    }
    if (want("jobmem")) {
        test_job_memory();
        test_small_job_faults();
    }
    if (want("probes")) {
        test_probes();
        test_probes_at_limit();
        test_metrics_scrapers();
    }
    if (want("starve")) {
        test_starve_senders();
        test_starve_hold();
        test_starve_parsing();
    }
    if (want("budget"))
        test_budget();
    if (want("startup"))
        test_startup();
    curl_global_cleanup();
    return harness_summary("test_reliability", t0);
}
