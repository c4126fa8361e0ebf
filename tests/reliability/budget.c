/* budget.c - the memory attnd can be made to hold is a number that fits the machine (issue
 * "Hardening, round 4", finding 3): the bound it logs at the defaults is within the machine's
 * memory, and within a cgroup's limit when it runs in one; gzip bodies that are never finished
 * hold what was sent, not what they would inflate to; and when bodies fill the job memory budget
 * a new request gets 503 memory_budget at once, and is served once the room comes back. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../harness.h"
#include "reliability.h"

/* The number after key= in the daemon's log (the first one), or 0. */
static size_t logged(const attnd *d, const char *key) {
    char *log = slurp(d->log), pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(log, pat);
    size_t v = p ? (size_t)strtoull(p + strlen(pat), NULL, 10) : 0;
    free(log);
    return v;
}

static size_t mem_total(void) {
    char *m = slurp("/proc/meminfo");
    const char *p = strstr(m, "MemTotal:");
    size_t kb = p ? (size_t)strtoull(p + 9, NULL, 10) : 0;
    free(m);
    return kb * 1024;
}

/* At the defaults the logged bound is within the machine's memory (3/4 of what it leaves beside
 * attnd at rest), and every default flag fits it. */
static void bound_at_defaults(void) {
    attnd d;
    if (!attnd_start(&d, "budget-defaults", NULL, NULL))
        return;
    size_t bound = logged(&d, "memory_bound"), limit = logged(&d, "memory_limit"),
           total = mem_total();
    size_t rest = logged(&d, "rest_bytes");
    printf("test_reliability: budget: at the defaults attnd logs memory_bound=%zu (%.2f GiB) "
           "against memory_limit=%zu (%.2f GiB; MemTotal %.2f GiB)\n",
           bound, (double)bound / 1073741824.0, limit, (double)limit / 1073741824.0,
           (double)total / 1073741824.0);
    CHECK(bound > 0 && total > 0 && bound <= total,
          "the bound logged at the defaults (%zu) should be within the machine's memory (%zu)",
          bound, total);
    CHECK(limit > 0 && limit <= total && bound == (limit - rest) / 4 * 3,
          "at the defaults the bound should be 3/4 of what the limit %zu leaves beside the %zu "
          "bytes at rest: %zu",
          limit, rest, bound);
    char *log = slurp(d.log);
    CHECK(!strstr(log, "memory_unfit"), "at the defaults every flag should fit the bound");
    free(log);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "budget-defaults: exit status");
}

/* A cgroup v1 made for a test under this process's own, in one hierarchy ("memory" or "cpu"). */
typedef struct cg {
    char own[512]; /* this process's cgroup directory in the hierarchy */
    char dir[700];
    bool made;
} cg;

static bool write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* Makes the cgroup name in the hierarchy of ctrl; false (with a SKIP line) when this machine has
 * no writable cgroup v1 hierarchy for it. */
static bool cg_make(cg *c, const char *ctrl, const char *name) {
    memset(c, 0, sizeof *c);
    char *text = slurp("/proc/self/cgroup");
    size_t n = strlen(ctrl);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b)
            continue;
        *b = '\0';
        for (const char *p = a + 1; *p; p += strcspn(p, ","), p += *p == ',')
            if (!strncmp(p, ctrl, n) && (p[n] == ',' || p[n] == '\0'))
                snprintf(c->own, sizeof c->own, "/sys/fs/cgroup/%s%s", a + 1,
                         strcmp(b + 1, "/") ? b + 1 : "");
    }
    free(text);
    snprintf(c->dir, sizeof c->dir, "%s/attnd-%s-%d", c->own, name, (int)getpid());
    if (!c->own[0] || (mkdir(c->dir, 0755) != 0 && errno != EEXIST)) {
        printf("test_reliability: budget: SKIP %s: no writable cgroup v1 %s hierarchy here (%s)\n",
               name, ctrl, c->own[0] ? strerror(errno) : "none in /proc/self/cgroup");
        return false;
    }
    c->made = true;
    return true;
}

static bool cg_set(const cg *c, const char *file, const char *value) {
    char path[800];
    snprintf(path, sizeof path, "%s/%s", c->dir, file);
    return CHECK(write_file(path, value), "cannot write %s to %s", value, path);
}

/* This process joins c (into = true) or goes back to its own cgroup: attnd, started between the
 * two, runs in c. */
static void cg_move(const cg *c, bool into) {
    char path[800], me[32];
    snprintf(path, sizeof path, "%s/cgroup.procs", into ? c->dir : c->own);
    snprintf(me, sizeof me, "%d", (int)getpid());
    CHECK(!c->made || write_file(path, me), "cannot move into %s", path);
}

static void cg_remove(cg *c) {
    if (c->made)
        rmdir(c->dir);
    c->made = false;
}

/* In a cgroup (v1, as these machines have; made here, with a 2 GiB limit) the bound follows the
 * cgroup's limit, and the log says where the limit came from. */
static void bound_in_cgroup(void) {
    cg mem;
    if (!cg_make(&mem, "memory", "budget"))
        return;
    attnd d;
    cg_set(&mem, "memory.limit_in_bytes", "2147483648");
    cg_move(&mem, true);
    bool up = attnd_start(&d, "budget-cgroup", NULL, NULL);
    cg_move(&mem, false);
    if (up) {
        size_t bound = logged(&d, "memory_bound"), limit = logged(&d, "memory_limit");
        char *log = slurp(d.log);
        const char *src = strstr(log, "memory_limit_source=");
        printf("test_reliability: budget: in a cgroup of 2 GiB attnd logs memory_bound=%zu "
               "(%.2f GiB), memory_limit=%zu\n",
               bound, (double)bound / 1073741824.0, limit);
        CHECK(limit == 2147483648u && bound > 0 && bound < limit,
              "in a 2 GiB cgroup: memory_limit %zu, memory_bound %zu", limit, bound);
        CHECK(src && strstr(src, "cgroup v1") && strstr(src, "attnd-budget-"),
              "the log should say the limit is the cgroup's: %.200s", src ? src : "(none)");
        CHECK(!strstr(log, "memory_unfit"), "in 2 GiB every default flag should fit the bound");
        free(log);
        CHECK(attnd_stop(&d, SIGTERM) == 0, "budget-cgroup: exit status");
    }
    cg_remove(&mem);
}

/* attnd sizes itself to a small container (issue "A whole class at once"): in a cgroup with a
 * CPU quota of 1 CPU and 256 MiB, it starts one worker (and says the quota is why), derives the
 * sizes not given from the limit so that they fit (no memory_unfit; the bound and the size at
 * rest within the limit; a place per MiB), refuses to start (2) when a flag given cannot fit,
 * naming it, and starts anyway with --memory-unfit warn. */
static void sized_to_cgroup(void) {
    cg mem, cpu;
    if (!cg_make(&mem, "memory", "small"))
        return;
    if (!cg_make(&cpu, "cpu", "small")) {
        cg_remove(&mem);
        return;
    }
    cg_set(&mem, "memory.limit_in_bytes", "268435456");
    cg_set(&cpu, "cpu.cfs_period_us", "100000");
    cg_set(&cpu, "cpu.cfs_quota_us", "100000");
    cg_move(&mem, true);
    cg_move(&cpu, true);
    attnd d;
    bool up = attnd_start(&d, "budget-small", NULL, NULL);
    char *out = NULL;
    const char *big[] = {"--max-job-bytes", "1G", NULL};
    int refused = attnd_run(big, NULL, "budget-small-refused", &out);
    char *warned_out = NULL;
    const char *warn[] = {"--max-job-bytes", "1G", "--memory-unfit", "warn", NULL};
    attnd w;
    bool warned = attnd_start(&w, "budget-small-warn", warn, NULL);
    cg_move(&cpu, false);
    cg_move(&mem, false);
    if (up) {
        size_t bound = logged(&d, "memory_bound"), limit = logged(&d, "memory_limit"),
               rest = logged(&d, "rest_bytes"), workers = logged(&d, "workers"),
               conns = logged(&d, "max_connections"), job = logged(&d, "max_job_bytes"),
               body = logged(&d, "max_body_bytes"), jobs = logged(&d, "job_budget_bytes");
        char *log = slurp(d.log);
        const char *from = strstr(log, "workers_from=");
        printf("test_reliability: budget: in 1 CPU and 256 MiB: workers=%zu, memory_bound=%zu, "
               "max_connections=%zu, max_job_bytes=%zu, max_body_bytes=%zu, job budget %zu\n",
               workers, bound, conns, job, body, jobs);
        CHECK(workers == 1 && from && strstr(from, "cpu.cfs_quota_us"),
              "a quota of 1 CPU should give 1 worker, and say so: %zu, %.120s", workers,
              from ? from : "(none)");
        CHECK(limit == 268435456u && bound + rest <= limit && !strstr(log, "memory_unfit"),
              "in 256 MiB the defaults should fit: bound %zu + rest %zu against %zu", bound, rest,
              limit);
        CHECK(conns == 256 && job <= jobs / 2 && body + body / 2 <= jobs,
              "the sizes not given follow the limit: %zu connections, a job of %zu and a body of "
              "%zu in a job budget of %zu",
              conns, job, body, jobs);
        free(log);
        reply r;
        CHECK(post(NULL, d.port, "/v1/sdpa", SDPA_SMALL, 0, &r) && r.status == 200,
              "in 1 CPU and 256 MiB a job is served: %ld", r.status);
        reply_free(&r);
        CHECK(attnd_stop(&d, SIGTERM) == 0, "budget-small: exit status");
    }
    CHECK(refused == 2 && out && strstr(out, "memory_unfit") && strstr(out, "--max-job-bytes") &&
              strstr(out, "--memory-unfit warn"),
          "--max-job-bytes 1G in 256 MiB: exit 2 naming it (%d): %.300s", refused, out ? out : "");
    free(out);
    if (CHECK(warned, "--memory-unfit warn should start anyway")) {
        char *log = slurp(w.log);
        CHECK(strstr(log, "warn memory_unfit") && strstr(log, "--max-job-bytes"),
              "--memory-unfit warn: the warning names --max-job-bytes");
        free(log);
        CHECK(attnd_stop(&w, SIGTERM) == 0, "budget-small-warn: exit status");
    }
    free(warned_out);
    cg_remove(&cpu);
    cg_remove(&mem);
}

/* Gzip bodies that decode to 62 MB, all but their last bytes sent and never finished: attnd
 * holds what was sent (old trees inflated them as they came: 45 to 62 MiB each). */
static void unfinished_gzip(void) {
    attnd d;
    if (!attnd_start(&d, "budget-gzip", NULL, NULL))
        return;
    enum { BODIES = 8 };
    size_t zlen = 0, jlen = 0;
    unsigned char *z = gzip_sdpa(60000, 256, &zlen, &jlen); /* q (1, 256), k and v (60000, 256) */
    str head = {0};
    str_printf(&head,
               "POST /v1/sdpa HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               "Content-Encoding: gzip\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
               zlen);
    sleep_s(0.2);
    size_t rest = rss_bytes(&d);
    int fds[BODIES];
    for (int i = 0; i < BODIES; i++) {
        fds[i] = tcp_connect(d.port);
        send_all(fds[i], head.p, head.n);
        send_all(fds[i], z, zlen - 32);
    }
    sleep_s(1.0);
    size_t grew = rss_bytes(&d) - rest, sent = BODIES * zlen;
    size_t allowed = 2 * sent + BODIES * ((size_t)256 << 10) + ((size_t)16 << 20);
    printf("test_reliability: budget: %d unfinished gzip bodies of %zu bytes (%.1f MB decoded "
           "each): RSS grew %.1f MiB (allowed %.1f MiB)\n",
           BODIES, zlen, (double)jlen / 1e6, (double)grew / 1048576.0, (double)allowed / 1048576.0);
    CHECK(grew <= allowed,
          "unfinished gzip bodies should hold what was sent: RSS grew by %zu bytes for %zu sent "
          "(allowed %zu)",
          grew, sent, allowed);
    /* One of them finished: it decodes, within --max-body-bytes, and the job is answered. */
    send_all(fds[0], z + zlen - 32, 32);
    str out = {0};
    read_to_end(fds[0], 30 * cfg.scale, &out);
    CHECK(out.p && strstr(out.p, "HTTP/1.1 200"), "the finished gzip body's job: %.80s",
          out.p ? out.p : "");
    free(out.p);
    for (int i = 0; i < BODIES; i++)
        close_reset(fds[i]);
    free(head.p);
    free(z);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "budget-gzip: exit status");
}

/* Sends the head of a POST /v1/sdpa announcing cl bytes and then n bytes of its body (spaces),
 * on a new connection; the fd. */
static int holder(int port, size_t cl, const char *piece, size_t n) {
    str head = {0};
    str_printf(&head,
               "POST /v1/sdpa HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               "Content-Length: %zu\r\n\r\n",
               cl);
    int fd = tcp_connect(port);
    send_all(fd, head.p, head.n);
    if (n)
        send_all(fd, piece, n);
    free(head.p);
    return fd;
}

/* Clients that hold bodies they never finish fill a small job memory budget: some that announce
 * 16 MiB and send 9 MiB (each holds a block of 16 MiB), then some that announce 2 MiB and send
 * 600 KiB (1 MiB), then some that announce 128 KiB and send 60 KiB (their first block, 64 KiB),
 * until a new one is refused: it gets 503 memory_budget at once, from its headers, with
 * Retry-After. Once they have gone, a job gets 200. RSS stays within the logged bound above
 * rest. */
static void refusal_when_full(void) {
    attnd d;
    const char *args[] = {"--max-memory",
                          "200M",
                          "--max-unsent-bytes",
                          "8M",
                          "--max-body-bytes",
                          "16M",
                          "--max-job-bytes",
                          "8M",
                          "--max-connections",
                          "200",
                          NULL};
    if (!attnd_start(&d, "budget-full", args, NULL))
        return;
    double budget = (double)logged(&d, "job_budget_bytes");
    sleep_s(0.2);
    size_t rest = rss_bytes(&d);
    size_t big = (size_t)9 << 20;
    char *piece = malloc(big);
    memset(piece, ' ', big);
    enum { MAX_HOLDERS = 400 };
    int fds[MAX_HOLDERS], n = 0, count[3] = {0};
    /* Three sizes of holders: each tier while the room left is over its threshold, the last
     * until one is refused. */
    static const struct {
        size_t cl, sent;
        double room;
    } tier[3] = {{(size_t)16 << 20, (size_t)9 << 20, 40.0 * 1048576},
                 {(size_t)2 << 20, (size_t)600 << 10, 2.5 * 1048576},
                 {(size_t)128 << 10, (size_t)60 << 10, 0}};
    long status = 0;
    double secs = 0;
    str out = {0};
    for (int t = 0; t < 3 && status == 0; t++) {
        while (n < MAX_HOLDERS && status == 0 &&
               budget - metric(d.port, "attnd_job_memory_charged_bytes") > tier[t].room) {
            int fd = holder(d.port, tier[t].cl, piece, tier[t].sent);
            fds[n++] = fd;
            count[t]++;
            /* a refusal comes at once; a body held says nothing */
            double t0 = now();
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, 30) == 1) {
                secs = now() - t0;
                read_to_end(fd, 2 * cfg.scale, &out);
                status = out.p && !strncmp(out.p, "HTTP/1.1 ", 9) ? atol(out.p + 9) : -1;
            }
        }
    }
    double charged = metric(d.port, "attnd_job_memory_charged_bytes");
    printf("test_reliability: budget: held bodies (%d of 16 MiB, %d of 1 MiB, %d of 64 KiB) took "
           "%.1f MiB of a job budget of %.1f MiB; the last got %ld within %.1f ms\n",
           count[0], count[1], count[2], charged / 1048576.0, budget / 1048576.0, status,
           secs * 1e3);
    CHECK(status == 503 && out.p && strstr(out.p, "\"code\":\"memory_budget\"") &&
              strstr(out.p, "--max-memory") && strstr(out.p, "Retry-After: 1"),
          "budget: a request when the budget is full should get 503 memory_budget naming "
          "--max-memory, with Retry-After: 1: %.300s",
          out.p ? out.p : "(nothing)");
    CHECK(charged <= budget, "budget: %.0f bytes charged, over the budget %.0f", charged, budget);
    free(out.p);
    size_t peak = rss_bytes(&d);
    for (int i = 0; i < n; i++)
        close_reset(fds[i]);
    reply r;
    status = 0;
    for (double t1 = now(); now() - t1 < 5 * cfg.scale && status != 200; sleep_s(0.05)) {
        post(NULL, d.port, "/v1/sdpa", SDPA_SMALL, 0, &r);
        status = r.status;
        reply_free(&r);
    }
    CHECK(status == 200, "budget: a job once the bodies are gone: %ld", status);
    size_t bound = logged(&d, "memory_bound");
    CHECK(peak <= rest + bound, "budget: RSS %zu over %zu at rest + the bound %zu", peak, rest,
          bound);
    free(piece);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "budget-full: exit status");
}

void test_budget(void) {
    bound_at_defaults();
    bound_in_cgroup();
    sized_to_cgroup();
    unfinished_gzip();
    refusal_when_full();
}
