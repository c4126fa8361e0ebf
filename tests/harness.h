/* harness.h - what the daemon's integration tests (test_server, in tests/server/, and
 * test_reliability, in tests/reliability/) share, in tests/harness.c: counted checks, the clock,
 * starting and stopping build/attnd on 127.0.0.1:0, and HTTP requests with libcurl.
 *
 *     harness_init("build/attnd", "build/tests/server", 1.0);
 *     attnd d;
 *     if (attnd_start(&d, "main", (const char *[]){"--threads", "2", NULL}, NULL)) {
 *         reply r;
 *         CHECK(get(d.port, "/healthz", &r) && r.status == 200, "healthz: %ld", r.status);
 *         reply_free(&r);
 *         CHECK(attnd_stop(&d, SIGTERM) == 0, "exit status");
 *     }
 *     return harness_summary("test_x", t0);
 *
 * Every wait is bounded, by a time multiplied by the scale given to harness_init. */
#ifndef ATTND_TESTS_HARNESS_H
#define ATTND_TESTS_HARNESS_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* ---- Set-up ---------------------------------------------------------------------------------- */

/* Called once by main, before anything below: the daemon to run, the directory its logs go to
 * (DIR/NAME.log), and the factor (at least 1) that multiplies every time bound below, for a
 * daemon under valgrind. The strings are borrowed. */
void harness_init(const char *attnd_path, const char *log_dir, double time_scale);

/* Seconds one HTTP request may take, before the time scale; 30 unless a test sets it. */
extern double harness_http_secs;

/* ---- Checks ---------------------------------------------------------------------------------- */

/* Counts a check; when !ok, prints "FAIL FILE:LINE: message" (FILE without its directory) to
 * stderr. Returns ok. Thread-safe. */
bool check(bool ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define CHECK(cond, ...) check((cond), __FILE__, __LINE__, __VA_ARGS__)

/* Prints "NAME: S s" (seconds since t0, from now()) and "P passed, F failed"; returns the exit
 * status: 1 when a check failed, else 0. */
int harness_summary(const char *name, double t0);

/* ---- Time and files -------------------------------------------------------------------------- */

/* Monotonic seconds. */
double now(void);

/* Sleeps s seconds. */
void sleep_s(double s);

/* The whole file at path (read to its end, so /proc files work too), NUL-terminated; an empty
 * string when it cannot be read. The caller frees it. */
char *slurp(const char *path);

/* ---- The daemon ------------------------------------------------------------------------------ */

/* A running attnd. */
typedef struct attnd {
    pid_t pid; /* 0 once it has exited or been killed */
    int port;
    char log[700]; /* its stderr and stdout */
} attnd;

/* Starts attnd --listen 127.0.0.1:0 with the extra args (NULL-terminated; may be NULL) and env
 * ("NAME=value", NULL-terminated; may be NULL), ATTND_* variables of our environment dropped
 * (but the BLAS ones), its output in DIR/NAME.log; waits for its port in the log and for
 * /readyz to answer 200 (20 s). False after a failed check (the daemon is then gone). */
bool attnd_start(attnd *d, const char *name, const char *const *extra, const char *const *env);

/* Sends sig and waits for the exit (60 s); returns the exit status (128 + the signal when a
 * signal ended it), or -1 after the wait, when it was killed. */
int attnd_stop(attnd *d, int sig);

/* Starts attnd --listen 127.0.0.1:0 with extra and env as attnd_start does, its output in
 * DIR/NAME.log, and returns at once, waiting for nothing (d->port stays 0): for tests of the
 * start itself. Stop it with attnd_wait or attnd_stop. */
void attnd_launch(attnd *d, const char *name, const char *const *extra, const char *const *env);

/* Waits up to secs (times the scale) for d to exit; returns its wait status (WIFEXITED and
 * WIFSIGNALED tell them apart), or -1 after the wait, when it was killed (SIGKILL). */
int attnd_wait(attnd *d, double secs);

/* Runs attnd with args (and env, as attnd_start), expecting it to exit by itself within 20 s;
 * returns its exit status (-1 on timeout: then it was killed) and its output in *out (freed by
 * the caller). */
int attnd_run(const char *const *args, const char *const *env, const char *name, char **out);

/* ---- HTTP ------------------------------------------------------------------------------------ */

/* A reply. After http(), body and hdr are never NULL. */
typedef struct reply {
    long status; /* 0 when none came */
    char *body;
    size_t len, cap; /* body holds len bytes and a NUL, in cap */
    char *hdr;       /* the header lines of every response received (a 100 Continue too) */
    size_t hlen;
    long connects; /* new connections this transfer opened: 0 when one was reused */
    CURLcode rc;
    double secs;
} reply;

/* Frees r's memory and zeroes it. */
void reply_free(reply *r);

/* The value of the last response's header name (a new string), or NULL. */
char *header(const reply *r, const char *name);

/* A request. */
typedef struct req {
    const char *method; /* default: GET, or POST with a body */
    const char *path;
    const char *ctype; /* Content-Type, or NULL for none */
    const char *body;
    size_t len;                  /* 0 = strlen(body) */
    size_t chunked;              /* > 0: send this many bytes (spaces) as a chunked body instead */
    const char *hdrs[6];         /* extra "Name: value" lines */
    const char *const *hdr_list; /* more of them, NULL-terminated; may be NULL */
} req;

/* Sends q to the daemon at port on c (a new handle when NULL), within harness_http_secs (times
 * the scale). False on a transport error (r->rc says which). r is overwritten; free it with
 * reply_free. */
bool http(CURL *c, int port, const req *q, reply *r);

/* GET path on a new handle. */
bool get(int port, const char *path, reply *r);

/* A counter or gauge sample from /metrics ("name" or "name{labels}"), or -1. */
double metric(int port, const char *sample);

/* Waits until metric(sample) >= want; false after secs. */
bool wait_metric(int port, const char *sample, double want, double secs);

#endif
