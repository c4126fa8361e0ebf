/* harness.c - the integration tests' shared harness (see harness.h): checks, the clock, the
 * daemon's process, and libcurl requests. */
#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *attnd_bin = "build/attnd";
static const char *logs = ".";
static double scale = 1.0;

double harness_http_secs = 30;

void harness_init(const char *attnd_path, const char *log_dir, double time_scale) {
    attnd_bin = attnd_path;
    logs = log_dir;
    scale = time_scale >= 1 ? time_scale : 1;
}

#define START_SECS (20.0 * scale) /* for a daemon to print its port and answer /readyz */
#define STOP_SECS  (60.0 * scale) /* for a daemon to exit after a signal */

/* ---- Checks ---------------------------------------------------------------------------------- */

static atomic_int passed, failed;

bool check(bool ok, const char *file, int line, const char *fmt, ...) {
    if (ok) {
        atomic_fetch_add(&passed, 1);
        return true;
    }
    atomic_fetch_add(&failed, 1);
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    fprintf(stderr, "FAIL %s:%d: %s\n", base ? base + 1 : file, line, msg);
    return false;
}

int harness_summary(const char *name, double t0) {
    int p = atomic_load(&passed), f = atomic_load(&failed);
    printf("%s: %.1f s\n%d passed, %d failed\n", name, now() - t0, p, f);
    return f ? 1 : 0;
}

/* ---- Time and files -------------------------------------------------------------------------- */

double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return calloc(1, 1);
    char *s = NULL;
    size_t n = 0, cap = 0, k;
    char buf[65536];
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
        if (n + k + 1 > cap) {
            cap = cap ? 2 * cap : sizeof buf;
            while (cap < n + k + 1)
                cap *= 2;
            char *t = realloc(s, cap);
            if (!t)
                break;
            s = t;
        }
        memcpy(s + n, buf, k);
        n += k;
    }
    fclose(f);
    if (!s)
        return calloc(1, 1);
    s[n] = '\0';
    return s;
}

/* ---- The daemon ------------------------------------------------------------------------------ */

/* Runs attnd with args (NULL-terminated) and env ("NAME=value", NULL-terminated; may be NULL)
 * in a child whose stderr goes to log; ATTND_* variables of our environment are removed first
 * (but the BLAS ones). */
static pid_t spawn(const char *const *args, const char *const *env, const char *log) {
    unlink(log); /* so that nothing of an earlier run is read */
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        dup2(fd, 2);
        dup2(fd, 1);
        close(fd);
    }
    extern char **environ;
    char names[64][128];
    int nn = 0;
    for (char **e = environ; *e && nn < 64; e++)
        if (!strncmp(*e, "ATTND_", 6) && strncmp(*e, "ATTND_BLAS_", 11)) {
            size_t k = strcspn(*e, "=");
            snprintf(names[nn++], sizeof names[0], "%.*s", (int)k, *e);
        }
    for (int i = 0; i < nn; i++)
        unsetenv(names[i]);
    for (int i = 0; env && env[i]; i++)
        putenv((char *)env[i]);
    const char *argv[64];
    int n = 0;
    argv[n++] = attnd_bin;
    for (int i = 0; args && args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    execv(attnd_bin, (char *const *)argv);
    _exit(127);
}

/* The port of a "listening" log line, text or JSON; 0 when there is none yet. */
static int log_port(const char *log) {
    const char *p = strstr(log, "listening");
    if (!p || !strchr(p, '\n')) /* the line may still be being written */
        return 0;
    const char *t = strstr(p, "port=");
    const char *j = strstr(p, "\"port\":");
    if (t)
        return atoi(t + 5);
    if (j)
        return atoi(j + 7);
    return 0;
}

/* True (after a failed check, with d->pid 0) when the daemon has exited. */
static bool exited_at_start(attnd *d, const char *name) {
    int st;
    if (waitpid(d->pid, &st, WNOHANG) != d->pid)
        return false;
    char *log = slurp(d->log);
    CHECK(false, "%s: attnd exited at start (status %d): %.600s", name,
          WIFEXITED(st) ? WEXITSTATUS(st) : -1, log);
    free(log);
    d->pid = 0;
    return true;
}

bool attnd_start(attnd *d, const char *name, const char *const *extra, const char *const *env) {
    memset(d, 0, sizeof *d);
    snprintf(d->log, sizeof d->log, "%s/%s.log", logs, name);
    const char *args[48] = {"--listen", "127.0.0.1:0"};
    int n = 2;
    for (int i = 0; extra && extra[i] && n < 47; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    d->pid = spawn(args, env, d->log);
    double t0 = now();
    while (now() - t0 < START_SECS) {
        char *log = slurp(d->log);
        d->port = log_port(log);
        free(log);
        if (d->port)
            break;
        if (exited_at_start(d, name))
            return false;
        sleep_s(0.01);
    }
    /* The port opens before the models are loaded and the pool runs (slow under valgrind);
     * until then, job routes answer 503 not_ready. */
    bool ready = false;
    while (d->port && !ready && now() - t0 < START_SECS) {
        reply r;
        ready = get(d->port, "/readyz", &r) && r.status == 200;
        reply_free(&r);
        if (!ready && exited_at_start(d, name))
            return false;
        if (!ready)
            sleep_s(0.01);
    }
    if (!CHECK(d->port > 0, "%s: no port in the log within %.0f s", name, START_SECS) ||
        !CHECK(ready, "%s: /readyz did not answer 200 within %.0f s", name, START_SECS)) {
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        d->pid = 0;
        return false;
    }
    return true;
}

int attnd_stop(attnd *d, int sig) {
    if (d->pid <= 0)
        return -1;
    kill(d->pid, sig);
    double t0 = now();
    while (now() - t0 < STOP_SECS) {
        int st;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        sleep_s(0.01);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    return -1;
}

void attnd_launch(attnd *d, const char *name, const char *const *extra, const char *const *env) {
    memset(d, 0, sizeof *d);
    snprintf(d->log, sizeof d->log, "%s/%s.log", logs, name);
    const char *args[48] = {"--listen", "127.0.0.1:0"};
    int n = 2;
    for (int i = 0; extra && extra[i] && n < 47; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    d->pid = spawn(args, env, d->log);
}

int attnd_wait(attnd *d, double secs) {
    if (d->pid <= 0)
        return -1;
    double t0 = now();
    while (now() - t0 < secs * scale) {
        int st;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->pid = 0;
            return st;
        }
        sleep_s(0.005);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    return -1;
}

int attnd_run(const char *const *args, const char *const *env, const char *name, char **out) {
    char log[700];
    snprintf(log, sizeof log, "%s/%s.log", logs, name);
    pid_t pid = spawn(args, env, log);
    double t0 = now();
    int status = -1;
    while (now() - t0 < START_SECS) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        sleep_s(0.01);
    }
    if (status < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    *out = slurp(log);
    return status;
}

/* ---- HTTP ------------------------------------------------------------------------------------ */

void reply_free(reply *r) {
    free(r->body);
    free(r->hdr);
    memset(r, 0, sizeof *r);
}

/* The body grows by doubling: growing it to each chunk's end made a 15 MB reply cost
 * gigabytes of copying under ASan (whose realloc always moves), longer than a drain waits. */
static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    reply *r = ud;
    size_t add = size * n;
    if (r->len + add + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + add + 1)
            cap *= 2;
        char *b = realloc(r->body, cap);
        if (!b)
            return 0;
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, p, add);
    r->len += add;
    r->body[r->len] = '\0';
    return add;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    reply *r = ud;
    size_t add = size * n;
    char *b = realloc(r->hdr, r->hlen + add + 1);
    if (!b)
        return 0;
    memcpy(b + r->hlen, p, add);
    r->hdr = b;
    r->hlen += add;
    r->hdr[r->hlen] = '\0';
    return add;
}

char *header(const reply *r, const char *name) {
    if (!r->hdr)
        return NULL;
    size_t nl = strlen(name);
    const char *start = r->hdr;
    /* Only the last response's headers (after any "100 Continue"). */
    for (const char *p = r->hdr; (p = strstr(p, "HTTP/")) != NULL; p++)
        if (p == r->hdr || p[-1] == '\n')
            start = p;
    for (const char *p = start; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > nl && !strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            size_t vl = (size_t)(p + len - v);
            while (vl && (v[vl - 1] == '\r' || v[vl - 1] == ' '))
                vl--;
            char *out = malloc(vl + 1);
            memcpy(out, v, vl);
            out[vl] = '\0';
            return out;
        }
        if (!eol)
            break;
        p = eol + 1;
    }
    return NULL;
}

typedef struct chunked {
    size_t left;
} chunked;

static size_t on_read(char *buf, size_t size, size_t n, void *ud) {
    chunked *c = ud;
    size_t k = size * n < c->left ? size * n : c->left;
    memset(buf, ' ', k);
    c->left -= k;
    return k;
}

bool http(CURL *c, int port, const req *q, reply *r) {
    memset(r, 0, sizeof *r);
    CURL *own = c ? NULL : curl_easy_init();
    CURL *h = c ? c : own;
    char url[2300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, q->path);
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(harness_http_secs * 1000 * scale));
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    /* No Expect: 100-continue unless the request asks for it among its headers (curl adds it to
     * bodies over 1 MiB; most tests want the body sent at once). */
    bool expect = false;
    for (int i = 0; i < 6 && q->hdrs[i]; i++)
        expect = expect || !strncasecmp(q->hdrs[i], "Expect:", 7);
    struct curl_slist *hl = expect ? NULL : curl_slist_append(NULL, "Expect:");
    char ct[200];
    if (q->ctype) {
        snprintf(ct, sizeof ct, "Content-Type: %s", q->ctype);
        hl = curl_slist_append(hl, ct);
    }
    for (int i = 0; i < 6 && q->hdrs[i]; i++)
        hl = curl_slist_append(hl, q->hdrs[i]);
    for (int i = 0; q->hdr_list && q->hdr_list[i]; i++)
        hl = curl_slist_append(hl, q->hdr_list[i]);
    chunked ck = {q->chunked};
    if (q->chunked) {
        hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, &ck);
    } else if (q->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(q->len ? q->len : strlen(q->body)));
    }
    if (q->method)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
    if (q->method && !strcmp(q->method, "HEAD"))
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    double t0 = now();
    r->rc = curl_easy_perform(h);
    r->secs = now() - t0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &r->connects);
    curl_slist_free_all(hl);
    if (own)
        curl_easy_cleanup(own);
    if (!r->body)
        r->body = calloc(1, 1);
    if (!r->hdr)
        r->hdr = calloc(1, 1);
    return r->rc == CURLE_OK;
}

bool get(int port, const char *path, reply *r) {
    req q = {.path = path};
    return http(NULL, port, &q, r);
}

double metric(int port, const char *sample) {
    reply r;
    double v = -1;
    if (get(port, "/metrics", &r) && r.status == 200) {
        size_t n = strlen(sample);
        for (const char *p = r.body; (p = strstr(p, sample)) != NULL; p += n)
            if ((p == r.body || p[-1] == '\n') && p[n] == ' ') {
                v = atof(p + n + 1);
                break;
            }
    }
    reply_free(&r);
    return v;
}

bool wait_metric(int port, const char *sample, double want, double secs) {
    double t0 = now();
    while (now() - t0 < secs) {
        if (metric(port, sample) >= want)
            return true;
        sleep_s(0.005);
    }
    return false;
}
