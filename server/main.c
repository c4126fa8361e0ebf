/* main.c - attnd's entry point: BLAS set-up, configuration, models, the compute pool, the
 * workers and HTTP, then waiting for SIGTERM/SIGINT and draining.
 *
 * Exit status: 0 after a clean shutdown, 1 on a runtime failure or when the drain timeout cut
 * jobs short (queued or running; they were answered 503) or replies still being sent, 2 on a bad
 * flag, environment variable or model file (one that is not a regular file too), 128 + the
 * signal (143 for SIGTERM, 130 for SIGINT) when one came before attnd was ready. */
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

#define SUFFIX ".safetensors"

/* One start-up failure: one line, plain in text mode, an object in JSON mode. */
static void fatal(const srv_log *log, const char *msg) {
    if (log && log->format == SRV_LOG_JSON) {
        srv_kv kv[] = {SRV_STR("error", msg)};
        srv_log_write(log, "error", "startup_failed", kv, 1);
    } else {
        fprintf(stderr, "attnd: error: %s\n", msg);
    }
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Loads every DIR/NAME.safetensors (in name order) into models. SRV_ERR with err naming the file
 * and what is wrong. */
static int load_models_dir(const char *dir, api_registry *models, srv_error *err) {
    DIR *d = opendir(dir);
    if (!d)
        return srv_fail(err, "--models: cannot open the directory %s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = SRV_OK;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name), sl = sizeof SUFFIX - 1;
        if (de->d_name[0] == '.' || len <= sl || strcmp(de->d_name + len - sl, SUFFIX) != 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn) {
                rc = srv_fail(err, "out of memory listing %s", dir);
                goto done;
            }
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name))) {
            rc = srv_fail(err, "out of memory listing %s", dir);
            goto done;
        }
        n++;
    }
    if (n)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n && rc == SRV_OK; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        api_error e = {0};
        api_model *m = api_model_load_file(path, &e);
        if (!m || api_registry_add(models, m, &e) != 0) {
            if (strstr(e.message, names[i]))
                rc = srv_fail(err, "%s", e.message);
            else
                rc = srv_fail(err, "%s: %s", path, e.message[0] ? e.message : "cannot load");
        }
    }
done:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return rc;
}

static void log_models(const srv_log *log, const api_registry *models) {
    const api_model *def = api_registry_default(models);
    for (size_t i = 0; i < api_registry_count(models); i++) {
        const api_model *m = api_registry_at(models, i);
        api_model_info info = api_model_describe(m);
        srv_kv kv[] = {
            SRV_STR("name", info.name),           SRV_STR("source", info.source),
            SRV_INT("embed_dim", info.embed_dim), SRV_INT("num_heads", info.num_heads),
            SRV_INT("kdim", info.kdim),           SRV_INT("vdim", info.vdim),
            SRV_BOOL("has_bias", info.has_bias),  SRV_INT("vocab_size", info.vocab_size),
            SRV_BOOL("default", m == def),
        };
        srv_log_write(log, "info", "model", kv, sizeof kv / sizeof kv[0]);
    }
}

/* SIGTERM and SIGINT are caught, not blocked: OpenBLAS starts its threads before main runs, with
 * no signal blocked, so a blocked signal could still reach one of them and kill the process.
 * The handler, on whichever thread it runs, posts one unit per signal.
 *
 * Until the start is over, the units go to a watcher thread, so that a signal ends attnd at once
 * whatever the start is doing (loading a large --models directory, waiting on a slow disk): it
 * logs stopped_during_start and exits 128 + the signal, the status a shell gives a process that
 * a signal ended. Once the start is over (start_over), the units are main's again. */
static sem_t stop_sem;
static volatile sig_atomic_t stop_sig;

enum { START_RUNNING, START_OVER, START_STOPPED };
static atomic_int start_state; /* START_*: who owns the start's end, main or the watcher */
static pthread_t start_watcher;

static void on_stop_signal(int sig) {
    stop_sig = sig;
    sem_post(&stop_sem); /* async-signal-safe */
}

/* The watcher: takes one unit. A signal before the start is over ends the process; after it,
 * the unit taken stands for the one start_over posted, so the signals' count is main's. */
static void *watch_start(void *arg) {
    const srv_log *log = arg;
    while (sem_wait(&stop_sem) != 0)
        ; /* EINTR */
    int expect = START_RUNNING;
    if (!atomic_compare_exchange_strong(&start_state, &expect, START_STOPPED))
        return NULL;
    int sig = stop_sig;
    srv_kv kv[] = {SRV_STR("signal", sig == SIGINT ? "SIGINT" : "SIGTERM"),
                   SRV_INT("exit_status", 128 + sig)};
    srv_log_write(log, "warn", "stopped_during_start", kv, 2);
    _exit(128 + sig); /* nothing of the start is left half-freed: the process ends here */
}

/* Catches SIGTERM and SIGINT, and starts the watcher that ends attnd on one of them until
 * start_over. SRV_ERR with err when the watcher cannot start. */
static int catch_stop_signals(const srv_log *log, srv_error *err) {
    sem_init(&stop_sem, 0, 0);
    atomic_store(&start_state, START_RUNNING);
    int rc = pthread_create(&start_watcher, NULL, watch_start, (void *)log);
    if (rc != 0)
        return srv_fail(err, "cannot start the thread that watches for signals: %s", strerror(rc));
    struct sigaction sa = {.sa_handler = on_stop_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    return SRV_OK;
}

/* The start is over (about to be ready, or failed): signals are main's from now on. When the
 * watcher took a signal first, it is ending the process, and this waits for that. Only main
 * calls it; a second call does nothing. */
static void start_over(void) {
    int expect = START_RUNNING;
    if (atomic_compare_exchange_strong(&start_state, &expect, START_OVER)) {
        sem_post(&stop_sem); /* wakes the watcher, which then returns */
        pthread_join(start_watcher, NULL);
    } else if (expect == START_STOPPED) {
        pthread_join(start_watcher, NULL); /* never returns: the watcher calls _exit */
    }
}

/* Waits for SIGTERM or SIGINT; returns its number. */
static int wait_stop_signal(void) {
    while (sem_wait(&stop_sem) != 0)
        ; /* EINTR */
    return stop_sig;
}

/* `attnd --health-check [flags]`: asks the daemon those flags configure for GET /healthz. A
 * health check needs no BLAS and computes nothing. Returns the exit status. */
static int health_check(int argc, char **argv) {
    srv_config cfg;
    srv_config_init(&cfg);
    srv_error err = {0};
    argv[1] = argv[0];
    if (srv_config_parse(&cfg, argc - 1, argv + 1, &err) != SRV_OK) {
        fprintf(stderr, "attnd: error: %s\n", err.msg);
        return 2;
    }
    return srv_health_check(&cfg, stderr);
}

/* What main starts; stop_all stops and frees it, in reverse order. */
typedef struct attnd {
    srv_metrics *metrics;
    srv_http *http;
    api_registry *models;
    attn_pool *pool;
    srv_workers *workers;
    api_mem *mem;
    api_sessions *sessions; /* the decode sessions: they end with the process */
    api_limits limits;      /* what srv_http_set_ready was given */
} attnd;

/* Models: the built-in demo first (the default unless --default-model says otherwise), then the
 * built-in lesson and induction, then --models. Returns 0, or the exit status after logging why
 * it failed. */
static int load_models(const srv_config *cfg, const srv_log *log, attnd *a) {
    api_error ae = {0};
    srv_error err = {0};
    if (!(a->models = api_registry_create())) {
        fatal(log, "out of memory for the model registry");
        return 1;
    }
    api_model *demo = api_model_demo(&ae);
    if (!demo || api_registry_add(a->models, demo, &ae) != 0) {
        fatal(log, ae.message);
        return 1;
    }
    api_model *lesson = api_model_lesson(&ae);
    if (!lesson || api_registry_add(a->models, lesson, &ae) != 0) {
        fatal(log, ae.message);
        return 1;
    }
    api_model *induction = api_model_induction(&ae);
    if (!induction || api_registry_add(a->models, induction, &ae) != 0) {
        fatal(log, ae.message);
        return 1;
    }
    if (cfg->models_dir[0] && load_models_dir(cfg->models_dir, a->models, &err) != SRV_OK) {
        fatal(log, err.msg);
        return 2;
    }
    if (cfg->default_model[0] &&
        api_registry_set_default(a->models, cfg->default_model, &ae) != 0) {
        char msg[600];
        snprintf(msg, sizeof msg,
                 "--default-model: no model is named '%s' (see the model lines "
                 "above)",
                 cfg->default_model);
        log_models(log, a->models);
        fatal(log, msg);
        return 2;
    }
    log_models(log, a->models);
    return 0;
}

/* The threads and limits lines of the start-up log. */
static void log_settings(const srv_config *cfg, const srv_log *log, const api_limits *limits) {
    {
        srv_kv kv[] = {
            SRV_INT("workers", cfg->threads),
            SRV_STR("workers_from",
                    cfg->given & SRV_GIVEN_THREADS ? "--threads" : cfg->threads_source),
            SRV_INT("pool_threads", cfg->pool_threads),
            SRV_INT("parse_threads", cfg->parse_threads ? cfg->parse_threads : cfg->threads),
            SRV_INT("slots_per_job", limits->nslots),
            SRV_INT("http_threads", cfg->http_threads),
            SRV_INT("cores", sysconf(_SC_NPROCESSORS_ONLN)),
            SRV_INT("batch_window_us", cfg->batch_window_us),
            SRV_INT("max_batch_tokens", cfg->max_batch_tokens),
            SRV_INT("inline_max_flops", cfg->inline_max_flops),
            SRV_STR("share_jobs", cfg->share_jobs ? "on" : "off")};
        srv_log_write(log, "info", "threads", kv, sizeof kv / sizeof kv[0]);
    }
    {
        srv_kv kv[] = {SRV_INT("max_body_bytes", cfg->max_body_bytes),
                       SRV_INT("max_job_bytes", cfg->max_job_bytes),
                       SRV_INT("max_queue", cfg->max_queue),
                       SRV_INT("max_unsent_bytes", cfg->max_unsent_bytes),
                       SRV_INT("max_connections", cfg->max_connections),
                       SRV_NUM("request_timeout_s", cfg->request_timeout),
                       SRV_INT("max_depth", cfg->max_depth),
                       SRV_NUM("read_timeout_s", cfg->read_timeout),
                       SRV_NUM("send_timeout_s", cfg->send_timeout),
                       SRV_INT("min_send_rate", cfg->min_send_rate),
                       SRV_NUM("max_send_time_s", cfg->max_send_time),
                       SRV_INT("max_job_flops", cfg->max_job_flops),
                       SRV_NUM("drain_timeout_s", cfg->drain_timeout),
                       SRV_NUM("shutdown_delay_s", cfg->shutdown_delay),
                       SRV_STR("auth", cfg->api_key_len ? "bearer" : "none"),
                       SRV_INT("api_keys", cfg->api_keys),
                       SRV_INT("max_sessions", cfg->max_sessions),
                       SRV_NUM("session_ttl_s", cfg->session_ttl),
                       SRV_STR("cors_origins", cfg->cors_origins[0] ? cfg->cors_origins : NULL)};
        srv_log_write(log, "info", "limits", kv, sizeof kv / sizeof kv[0]);
    }
}

/* The memory line of the start-up log (the limit, where it comes from, and how it is shared
 * out), and a warning naming the flags whose bound cannot fit. */
static void log_memory(const srv_log *log, const srv_memory_limit *lim, const srv_memory_plan *p) {
    srv_kv kv[] = {SRV_INT("memory_bound", p->budget),
                   SRV_INT("memory_limit", lim->bytes),
                   SRV_STR("memory_limit_source", lim->source),
                   SRV_INT("rest_bytes", p->rest),
                   SRV_STR("max_memory", p->auto_budget ? "auto" : "set"),
                   SRV_INT("fixed_bytes", p->fixed),
                   SRV_INT("reply_bytes", p->replies),
                   SRV_INT("job_budget_bytes", p->jobs)};
    srv_log_write(log, "info", "memory", kv, sizeof kv / sizeof kv[0]);
    if (p->unfit[0]) {
        srv_kv w[] = {SRV_STR("flags", p->unfit), SRV_INT("memory_bound", p->budget),
                      SRV_INT("memory_limit", lim->bytes)};
        srv_log_write(log, "warn", "memory_unfit", w, 3);
    }
}

/* Starts everything in a: metrics, HTTP on the listening socket (/readyz 503 meanwhile), the
 * models, the compute pool, the job memory, the workers; then serves jobs. Returns 0, or the
 * exit status after logging why it failed (a keeps what was started). */
static int start(srv_config *cfg, const srv_log *log, attnd *a) {
    srv_error err = {0};
    attn_error aerr = {0};
    api_error ae = {0};
    /* The memory limit (the cgroup's, else the machine's): the connection places follow it when
     * --max-connections is not given, before HTTP counts them. */
    srv_memory_limit lim;
    srv_memory_limit_read(&lim);
    srv_memory_size_connections(cfg, &lim);
    if (!(a->metrics = srv_metrics_create(&err))) {
        fatal(log, err.msg);
        return 1;
    }
    char bound[300];
    int fd = srv_listen(cfg, bound, sizeof bound, &err);
    if (fd < 0) {
        fatal(log, err.msg);
        return 2;
    }
    if (!(a->http = srv_http_start(cfg, log, fd, a->metrics, &err))) {
        fatal(log, err.msg);
        return 1;
    }
    {
        const char *colon = strrchr(bound, ':');
        srv_kv kv[] = {SRV_STR("address", bound), SRV_INT("port", colon ? atoi(colon + 1) : 0)};
        srv_log_write(log, "info", "listening", kv, 2);
    }
    int status = load_models(cfg, log, a);
    if (status != 0)
        return status;
    if (srv_metrics_set_models(a->metrics, a->models, &err) != SRV_OK) {
        fatal(log, err.msg);
        return 1;
    }

    /* Compute: --threads workers, each job spread over the caller and the pool's helpers. */
    if (cfg->pool_threads > 0 && !(a->pool = attn_pool_create(cfg->pool_threads, &aerr))) {
        fatal(log, aerr.msg);
        return 1;
    }
    /* Memory: the limit shared out (sizing.c), the sizes not given set from it (HTTP reads them
     * only once ready); the job memory cache holds bodies, arenas, workspaces and replies, reuses
     * blocks from job to job, keeps bodies, arenas and workspaces within the plan's budget for
     * them, and returns blocks to the system after SRV_MEM_IDLE_S unused. */
    srv_memory_plan plan;
    srv_memory_plan_make(cfg, api_registry_count(a->models), &lim, srv_memory_rss(), &plan);
    mallopt(M_TRIM_THRESHOLD, (int)plan.heap_trim);
    log_memory(log, &lim, &plan);
    if (plan.unfit[0] && !cfg->memory_unfit_warn) {
        char msg[1024];
        snprintf(msg, sizeof msg,
                 "%s cannot fit the memory bound of %zu bytes (--max-memory; the limit is %zu "
                 "bytes, from %.200s): lower %s, raise --max-memory or the limit, or start "
                 "anyway with --memory-unfit warn",
                 plan.unfit, plan.budget, lim.bytes, lim.source,
                 strchr(plan.unfit, ',') ? "them" : "it");
        fatal(log, msg);
        return 2;
    }
    size_t cache = plan.jobs > SIZE_MAX - plan.replies ? SIZE_MAX : plan.jobs + plan.replies;
    if (!(a->mem = api_mem_create(cache, SRV_MEM_IDLE_S, &ae))) {
        fatal(log, ae.message);
        return 1;
    }
    api_mem_set_budget(a->mem, plan.jobs);
    /* Decode sessions: their blocks in the job memory budget, idle ones giving way (the
     * memory's reclaimer), ended by --session-ttl and at --max-sessions. */
    if (!(a->sessions = api_sessions_create(cfg->max_sessions, cfg->session_ttl, a->mem, &ae))) {
        fatal(log, ae.message);
        return 1;
    }
    a->limits = api_limits_default();
    a->limits.mem = a->mem;
    a->limits.max_job_bytes = cfg->max_job_bytes;
    a->limits.max_dim = cfg->max_dim;
    a->limits.max_heads = cfg->max_heads;
    a->limits.max_depth = cfg->max_depth;
    a->limits.max_job_flops = (double)cfg->max_job_flops;
    a->limits.nslots = attn_pool_slots(a->pool);
    if (!(a->workers =
              srv_workers_create(cfg->threads, cfg->max_queue, a->pool, a->metrics, &err))) {
        fatal(log, err.msg);
        return 1;
    }
    srv_workers_set_batching(a->workers, (double)cfg->batch_window_us * 1e-6, cfg->max_batch_tokens,
                             cfg->max_job_bytes);
    srv_workers_set_inline(a->workers, (double)cfg->inline_max_flops);
    log_settings(cfg, log, &a->limits);
    /* From here a signal is a shutdown, not a stop during the start: once /readyz answers 200,
     * SIGTERM drains, as it does after "ready". */
    start_over();
    srv_http_set_sessions(a->http, a->sessions);
    srv_http_set_ready(a->http, a->models, &a->limits, a->workers);
    srv_log_write(log, "info", "ready", NULL, 0);
    return 0;
}

/* After SIGTERM or SIGINT (sig), for --shutdown-delay: /readyz answers 503 while jobs are
 * still taken and answered, so that whatever routes requests here (a Kubernetes Service, whose
 * endpoints follow a pod's end some time after its SIGTERM; a load balancer that polls
 * /readyz) stops before attnd refuses any; replies close their connections meanwhile, so that
 * clients reconnect elsewhere. A second signal ends the delay. Returns sig. */
static int leave(const srv_config *cfg, const srv_log *log, attnd *a, int sig) {
    if (cfg->shutdown_delay <= 0)
        return sig;
    {
        srv_kv kv[] = {SRV_STR("signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"),
                       SRV_NUM("shutdown_delay_s", cfg->shutdown_delay)};
        srv_log_write(log, "info", "leaving", kv, 2);
    }
    srv_http_set_leaving(a->http);
    double until = srv_now() + cfg->shutdown_delay;
    while (srv_now() < until) {
        if (sem_trywait(&stop_sem) == 0) /* a second signal: drain now */
            break;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return sig;
}

/* After SIGTERM or SIGINT (sig): stops taking jobs, waits for the queued and running ones and
 * their replies within --drain-timeout (a second signal stops waiting), answers the rest 503,
 * and stops HTTP. Returns the exit status; exits at once (1) when jobs were abandoned, since
 * their workers still compute with the pool and the models. */
static int drain(srv_config *cfg, const srv_log *log, attnd *a, int sig) {
    {
        srv_kv kv[] = {SRV_STR("signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"),
                       SRV_NUM("drain_timeout_s", cfg->drain_timeout)};
        srv_log_write(log, "info", "draining", kv, 2);
    }
    srv_http_set_draining(a->http);
    srv_workers_close(a->workers);
    double deadline = srv_now() + cfg->drain_timeout;
    bool idle = false, forced = false;
    for (;;) {
        double step = srv_now() + 0.05;
        idle = srv_workers_wait_idle(a->workers, step < deadline ? step : deadline);
        if (idle || srv_now() >= deadline)
            break;
        if (sem_trywait(&stop_sem) == 0) { /* a second signal: stop waiting */
            forced = true;
            break;
        }
    }
    size_t expired = 0, abandoned = 0;
    if (!idle) {
        expired = srv_workers_expire(a->workers);
        abandoned = srv_workers_abandon(a->workers);
    }
    /* The replies go out within the same drain timeout (clients may read slowly); the 503s of
     * jobs it cut short get a few seconds more. */
    double replies_by = srv_now() + 5.0 > deadline ? srv_now() + 5.0 : deadline;
    bool replied = srv_http_wait_replied(a->http, replies_by);
    srv_http_stop(a->http);
    a->http = NULL;
    {
        srv_kv kv[] = {SRV_BOOL("drained", idle), SRV_BOOL("forced", forced),
                       SRV_INT("expired_jobs", expired), SRV_INT("abandoned_jobs", abandoned),
                       SRV_BOOL("replies_sent", replied)};
        srv_log_write(log, abandoned ? "warn" : "info", "stopped", kv, sizeof kv / sizeof kv[0]);
    }
    if (abandoned) {
        /* Workers are still computing with the pool and the models: do not free them. */
        memset(cfg->api_key, 0, sizeof cfg->api_key);
        _exit(1);
    }
    /* Jobs the drain timeout cut short were answered 503, or replies were cut off. */
    return expired || !replied ? 1 : 0;
}

/* Stops and frees what start started (NULLs are skipped). */
static void stop_all(attnd *a) {
    srv_http_stop(a->http);
    srv_workers_destroy(a->workers);
    api_sessions_destroy(a->sessions); /* every session ends: a client sends its prefix again */
    api_mem_destroy(a->mem); /* every block went back with the replies, jobs and sessions */
    attn_pool_destroy(a->pool);
    api_registry_destroy(a->models);
    srv_metrics_destroy(a->metrics);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--health-check"))
        return health_check(argc, argv);
    /* First: it may re-execute the program with the right OpenBLAS kernel. */
    attn_blas_info blas;
    attn_error aerr = {0};
    if (attn_blas_setup(argv, &blas, &aerr) != ATTN_OK) {
        fprintf(stderr, "attnd: error: ATTND_BLAS_CORETYPE: %s\n", aerr.msg);
        return 2;
    }

    /* glibc gives a thread's heap back to the system (madvise) whenever more than 128 KiB at
     * its top is free, and a fresh process keeps that threshold: small jobs served at once by
     * several threads then faulted their heaps' pages in again on every request (6 minor faults
     * per W1 request; W1 JSON served 6,600 req/s instead of 16,700, side by side). Large blocks
     * come from the job memory cache, which returns its own; the heaps keep up to this much. */
    mallopt(M_TRIM_THRESHOLD, SRV_HEAP_TRIM_BYTES);

    srv_config cfg;
    srv_config_init(&cfg);
    srv_error err = {0};
    int rc = srv_config_parse(&cfg, argc, argv, &err);
    if (rc == SRV_HELP) {
        srv_config_usage(stdout);
        return 0;
    }
    if (rc == SRV_VERSION_ASKED) {
        printf("attnd %s\n", SRV_VERSION);
        return 0;
    }
    if (rc != SRV_OK) {
        fprintf(stderr, "attnd: error: %s\n", err.msg);
        return 2;
    }
    srv_log log = {.format = cfg.log_format};

    if (catch_stop_signals(&log, &err) != SRV_OK) {
        fatal(&log, err.msg);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    {
        srv_kv kv[] = {SRV_STR("version", SRV_VERSION), SRV_INT("pid", getpid())};
        srv_log_write(&log, "info", "starting", kv, 2);
    }
    {
        srv_kv kv[] = {SRV_STR("kernel", blas.active), SRV_STR("detected", blas.detected),
                       SRV_STR("best", blas.best), SRV_STR("how", blas.how)};
        srv_log_write(&log, "info", "blas", kv, 4);
    }
    attnd a = {0};
    int status = start(&cfg, &log, &a);
    /* After a failed start: signals are main's again (after a success this does nothing). */
    start_over();
    if (status == 0) { /* serve until SIGTERM or SIGINT, keep serving --shutdown-delay, drain */
        int sig = wait_stop_signal();
        status = drain(&cfg, &log, &a, leave(&cfg, &log, &a, sig));
    }
    stop_all(&a);
    memset(cfg.api_key, 0, sizeof cfg.api_key);
    return status;
}
