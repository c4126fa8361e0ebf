/* sizing.c - what the machine or the container gives attnd, and how attnd shares its memory out.
 *
 * The memory limit: the cgroup's, as the JVM's container support and Go's automaxprocs read it,
 * else the machine's memory. The process's cgroup comes from /proc/self/cgroup, the mount of each
 * hierarchy from /proc/self/mountinfo (a container sees its own cgroup at the mount's root). v2
 * (the unified hierarchy): memory.max of the cgroup and of each parent up to the mount, the
 * smallest ("max" is none). v1: memory.stat's hierarchical_memory_limit (the cgroup's with its
 * parents'), else memory.limit_in_bytes. A limit at or above the machine's memory (v1's
 * "unlimited" is 2^63 rounded to a page) is no limit.
 *
 * The memory plan (SECURITY.md, "Memory"): --max-memory, by default three quarters of what the
 * limit leaves beside attnd at rest, is all that clients can make attnd hold. It is shared out as
 *   fixed:   each connection place's buffers (SRV_CONN_BYTES), the zlib state of each thread that
 *            codes (SRV_CODING_BYTES), the /metrics renderings alive at once, per HTTP thread
 *            a metadata reply being written (64 KiB and 1 KiB a model), the free memory
 *            glibc may keep atop the malloc heap of each thread that allocates for requests
 *            (SRV_HEAP_TRIM_BYTES), and the records of --max-sessions decode sessions;
 *   replies: --max-unsent-bytes, the job replies reserved or held (with their coded copies);
 *   jobs:    the rest, the job memory cache's budget (api_mem_set_budget): request bodies as they
 *            arrive and decode, jobs' arenas, batch workspaces, other large replies (model
 *            listings), and the decode sessions' caches and parameters, which give way: a block
 *            that does not fit ends idle sessions first, least recently used first. A request
 *            that still finds it full gets 503 memory_budget at once.
 * A flag whose bound cannot fit is named at start. */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server.h"

/* a + b and a * b, saturating at SIZE_MAX. */
static size_t sat_add(size_t a, size_t b) {
    size_t r;
    return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}
static size_t sat_mul(size_t a, size_t b) {
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

/* The first line of path as a byte count; "max" (v2's none) and anything unreadable are
 * SIZE_MAX. */
static size_t read_bytes(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f)
        return SIZE_MAX;
    char line[64] = "";
    bool got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    char *end;
    unsigned long long v = got ? strtoull(line, &end, 10) : 0;
    return got && end != line ? (size_t)v : SIZE_MAX;
}

/* v1's memory.stat: hierarchical_memory_limit, or SIZE_MAX. */
static size_t read_hierarchical(const char *dir) {
    char path[1100];
    snprintf(path, sizeof path, "%.1000s/memory.stat", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return SIZE_MAX;
    char line[256];
    size_t v = SIZE_MAX;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "hierarchical_memory_limit ", 26))
            v = (size_t)strtoull(line + 26, NULL, 10);
    fclose(f);
    return v;
}

/* True when the comma-separated list opts holds the word w. */
static bool has_option(const char *opts, const char *w) {
    size_t n = strlen(w);
    for (const char *p = opts; *p; p += strcspn(p, ","), p += *p == ',')
        if (!strncmp(p, w, n) && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* The directory of the process's cgroup in the hierarchy of version v (2: unified; 1: the one
 * with the controller ctrl, "memory" or "cpu"), from /proc/self/cgroup and /proc/self/mountinfo;
 * false when there is none. mount receives the mount point (the top a walk up stops at). */
static bool cgroup_dir(int v, const char *ctrl, char *dir, size_t dir_len, char *mount,
                       size_t mount_len) {
    size_t cl = strlen(ctrl);
    char path[1024] = "", line[2048];
    bool have = false;
    FILE *f = fopen("/proc/self/cgroup", "r");
    while (f && !have && fgets(line, sizeof line, f)) {
        /* hierarchy-ID:controllers:path */
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1;
        bool match = false;
        if (v == 2)
            match = !strcmp(line, "0") && *ctrls == '\0';
        else
            for (const char *p = ctrls; *p && !match; p += strcspn(p, ","), p += *p == ',')
                match = !strncmp(p, ctrl, cl) && (p[cl] == ',' || p[cl] == '\0');
        if (match) {
            snprintf(path, sizeof path, "%s", c2 + 1);
            path[strcspn(path, "\n")] = '\0';
            have = true;
        }
    }
    if (f)
        fclose(f);
    if (!have)
        return false;
    have = false;
    f = fopen("/proc/self/mountinfo", "r");
    while (f && !have && fgets(line, sizeof line, f)) {
        /* ID parent major:minor root mount-point options [optional...] - fstype source super */
        char root[1024], point[1024];
        if (sscanf(line, "%*s %*s %*s %1023s %1023s", root, point) != 2)
            continue;
        const char *dash = strstr(line, " - ");
        if (!dash)
            continue;
        char fstype[32] = "", super[512] = "";
        if (sscanf(dash + 3, "%31s %*s %511s", fstype, super) < 1)
            continue;
        bool ok = v == 2 ? !strcmp(fstype, "cgroup2")
                         : !strcmp(fstype, "cgroup") && has_option(super, ctrl);
        if (!ok)
            continue;
        /* the cgroup's path below the mount's root: a container's own cgroup is its root */
        size_t rl = strlen(root);
        const char *rest = path;
        if (!strcmp(root, "/"))
            rest = path;
        else if (!strncmp(path, root, rl) && (path[rl] == '/' || path[rl] == '\0'))
            rest = path + rl;
        else
            rest = "";
        snprintf(mount, mount_len, "%s", point);
        snprintf(dir, dir_len, "%.500s%.500s", point, !strcmp(rest, "/") ? "" : rest);
        have = true;
    }
    if (f)
        fclose(f);
    return have;
}

void srv_memory_limit_read(srv_memory_limit *out) {
    memset(out, 0, sizeof *out);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t machine = pages > 0 && page > 0 ? sat_mul((size_t)pages, (size_t)page) : SIZE_MAX;
    out->machine = machine;
    out->bytes = machine;
    snprintf(out->source, sizeof out->source, "the machine's memory");
    char dir[1200], mount[1024];
    if (cgroup_dir(2, "", dir, sizeof dir, mount, sizeof mount)) {
        /* memory.max of the cgroup and its parents, up to the mount point */
        size_t best = SIZE_MAX;
        char at[1200], best_at[1100] = "";
        snprintf(at, sizeof at, "%s", dir);
        for (;;) {
            char p[1100];
            snprintf(p, sizeof p, "%.1000s/memory.max", at);
            size_t v = read_bytes(p);
            if (v < best) {
                best = v;
                memcpy(best_at, p, sizeof best_at);
            }
            if (strlen(at) <= strlen(mount))
                break;
            char *slash = strrchr(at, '/');
            if (!slash || slash == at)
                break;
            *slash = '\0';
        }
        if (best < out->bytes) {
            out->bytes = best;
            snprintf(out->source, sizeof out->source, "cgroup v2 %.500s", best_at);
        }
    }
    if (cgroup_dir(1, "memory", dir, sizeof dir, mount, sizeof mount)) {
        char p[1100];
        size_t v = read_hierarchical(dir);
        if (v < out->bytes) {
            out->bytes = v;
            snprintf(out->source, sizeof out->source,
                     "cgroup v1 %.500s/memory.stat hierarchical_memory_limit", dir);
        } else {
            snprintf(p, sizeof p, "%.1000s/memory.limit_in_bytes", dir);
            v = read_bytes(p);
            if (v < out->bytes) {
                out->bytes = v;
                snprintf(out->source, sizeof out->source, "cgroup v1 %.500s", p);
            }
        }
    }
}

/* The CPUs a cgroup directory's quota allows, and its file, by version: v2 cpu.max ("max" or
 * "QUOTA PERIOD"), v1 cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us. 0 when none. */
static double dir_quota(int v, const char *dir, char *file, size_t file_len) {
    char p[1100], line[128] = "";
    snprintf(p, sizeof p, v == 2 ? "%.1000s/cpu.max" : "%.1000s/cpu.cfs_quota_us", dir);
    FILE *f = fopen(p, "r");
    bool got = f && fgets(line, sizeof line, f);
    if (f)
        fclose(f);
    if (!got)
        return 0;
    double quota = 0, period = 0;
    if (v == 2) {
        if (sscanf(line, "%lf %lf", &quota, &period) != 2) /* "max PERIOD": none */
            return 0;
    } else {
        quota = atof(line);
        char pp[1100];
        snprintf(pp, sizeof pp, "%.1000s/cpu.cfs_period_us", dir);
        size_t per = read_bytes(pp);
        period = per == SIZE_MAX ? 0 : (double)per;
    }
    if (!(quota > 0) || !(period > 0))
        return 0;
    snprintf(file, file_len, "%s", p);
    return quota / period;
}

/* The smallest quota of the cgroup at dir and its parents up to mount (0: none). */
static double walk_quota(int v, const char *dir, const char *mount, char *file, size_t file_len) {
    char at[1200];
    snprintf(at, sizeof at, "%s", dir);
    double best = 0;
    for (;;) {
        char f[1100];
        double q = dir_quota(v, at, f, sizeof f);
        if (q > 0 && (best == 0 || q < best)) {
            best = q;
            snprintf(file, file_len, "%s", f);
        }
        if (strlen(at) <= strlen(mount))
            break;
        char *slash = strrchr(at, '/');
        if (!slash || slash == at)
            break;
        *slash = '\0';
    }
    return best;
}

void srv_cpu_limit_read(srv_cpu_limit *out) {
    memset(out, 0, sizeof *out);
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    out->cores = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0
                     ? (size_t)CPU_COUNT(&set)
                 : online > 0 ? (size_t)online
                              : 1;
    char dir[1200], mount[1024], file[1100] = "";
    double q2 = 0, q1 = 0;
    char file2[1100] = "", file1[1100] = "";
    if (cgroup_dir(2, "", dir, sizeof dir, mount, sizeof mount))
        q2 = walk_quota(2, dir, mount, file2, sizeof file2);
    if (cgroup_dir(1, "cpu", dir, sizeof dir, mount, sizeof mount))
        q1 = walk_quota(1, dir, mount, file1, sizeof file1);
    out->quota = q2 > 0 && (q1 == 0 || q2 <= q1) ? q2 : q1;
    snprintf(file, sizeof file, "%s", out->quota == q2 && q2 > 0 ? file2 : file1);
    /* whole CPUs, rounded up: a quota of 1.5 gives 2 threads, each busy 3/4 of the time */
    size_t cpus = out->quota > 0 ? (size_t)ceil(out->quota - 1e-9) : 0;
    if (cpus > 0 && cpus < out->cores) {
        out->threads = cpus;
        snprintf(out->source, sizeof out->source, "cgroup %s %.500s (%.2f CPUs)",
                 out->quota == q2 && q2 > 0 ? "v2" : "v1", file, out->quota);
    } else {
        out->threads = out->cores;
        snprintf(out->source, sizeof out->source, "the CPUs this process may run on (affinity)");
    }
}

size_t srv_memory_rss(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long vsize = 0, rss = 0;
    bool ok = f && fscanf(f, "%llu %llu", &vsize, &rss) == 2;
    if (f)
        fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? sat_mul((size_t)rss, (size_t)page) : 0;
}

/* Appends flag to the list of flags that cannot fit. */
static void unfit(srv_memory_plan *p, const char *flag) {
    size_t n = strlen(p->unfit);
    snprintf(p->unfit + n, sizeof p->unfit - n, "%s%s", n ? ", " : "", flag);
}

size_t srv_memory_heap_trim(size_t limit) {
    size_t t = limit / 128, lo = (size_t)1 << 20;
    return t < lo ? lo : t > (size_t)SRV_HEAP_TRIM_BYTES ? (size_t)SRV_HEAP_TRIM_BYTES : t;
}

void srv_memory_size_connections(srv_config *cfg, const srv_memory_limit *lim) {
    if (cfg->given & SRV_GIVEN_MAX_CONNECTIONS)
        return;
    size_t n = lim->bytes >> 20; /* a place (48 KiB) per MiB of the limit: under 5% of it */
    cfg->max_connections = n < 64 ? 64 : n > 1024 ? 1024 : n;
}

void srv_memory_plan_make(srv_config *cfg, size_t models, const srv_memory_limit *lim, size_t rest,
                          srv_memory_plan *p) {
    memset(p, 0, sizeof *p);
    p->limit = lim->bytes;
    p->rest = rest;
    size_t left = lim->bytes > rest ? lim->bytes - rest : 0;
    p->budget = cfg->max_memory ? cfg->max_memory : left / 4 * 3;
    p->auto_budget = cfg->max_memory == 0;
    p->heap_trim = srv_memory_heap_trim(lim->bytes);
    /* the replies' share, when not given: a quarter of the budget, at most 256 MiB */
    if (!(cfg->given & SRV_GIVEN_MAX_UNSENT)) {
        size_t q = p->budget / 4;
        cfg->max_unsent_bytes = q < ((size_t)256 << 20) ? (q > 1024 ? q : 1024) : (size_t)256 << 20;
    }
    /* every thread that may code a reply (a worker, an HTTP thread for a tiny job, a parse thread
     * for a tiny job it ran) or decode a body (a parse thread) holds zlib's state meanwhile */
    size_t parsers = cfg->parse_threads ? cfg->parse_threads : cfg->threads;
    size_t coders = sat_add(sat_add(cfg->threads, cfg->http_threads), parsers);
    /* an HTTP thread writes a metadata reply (a model listing, the statistics: under 500 bytes
     * a model) in a growing buffer before the budget takes it over */
    size_t listing = sat_add((size_t)64 << 10, sat_mul(models, 1024));
    /* the free memory glibc may keep atop each thread's malloc heap (heap_trim): a heap for each
     * thread that allocates for requests */
    size_t heaps =
        sat_add(sat_add(cfg->threads, cfg->pool_threads), sat_add(cfg->http_threads, parsers));
    p->fixed =
        sat_add(sat_add(sat_mul(srv_config_connections_max(cfg), SRV_CONN_BYTES),
                        sat_mul(coders, SRV_CODING_BYTES)),
                sat_add(sat_add(srv_metrics_held_max(models), sat_mul(cfg->http_threads, listing)),
                        sat_mul(heaps, p->heap_trim)));
    p->fixed = sat_add(p->fixed, api_sessions_record_bytes(cfg->max_sessions));
    p->replies = cfg->max_unsent_bytes;
    size_t taken = sat_add(p->fixed, p->replies);
    p->jobs = p->budget > taken ? p->budget - taken : 0;
    /* a job and a body, when not given: one of each fits at the full size beside the other (a
     * job at most half the jobs' share, 256 MiB; a body a third, as it may hold 1.5 x itself
     * while it grows, 64 MiB) */
    if (!(cfg->given & SRV_GIVEN_MAX_JOB)) {
        size_t j = p->jobs / 2;
        cfg->max_job_bytes = j < ((size_t)256 << 20) ? (j > 1024 ? j : 1024) : (size_t)256 << 20;
    }
    if (!(cfg->given & SRV_GIVEN_MAX_BODY)) {
        size_t b = p->jobs / 3;
        cfg->max_body_bytes = b < ((size_t)64 << 20) ? (b > 2 ? b : 2) : (size_t)64 << 20;
    }
    if (!p->auto_budget && cfg->max_memory > lim->bytes)
        unfit(p, "--max-memory");
    if (taken >= p->budget) {
        unfit(p, "--max-connections");
        unfit(p, "--max-unsent-bytes");
    }
    /* a body may hold 1.5 x itself while it grows, and a job's arena needs its own room */
    size_t body = sat_add(cfg->max_body_bytes, cfg->max_body_bytes / 2);
    if (body > p->jobs)
        unfit(p, "--max-body-bytes");
    if (cfg->max_job_bytes > p->jobs)
        unfit(p, "--max-job-bytes");
}
