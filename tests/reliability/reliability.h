/* reliability.h - what the files of test_reliability (tests/reliability/) share: its settings,
 * a growable string, requests and raw-socket clients, and the scenarios main runs. The shared
 * harness (checks, the daemon, HTTP) is tests/harness.h; what is here is test_reliability's own. */
#ifndef ATTND_TESTS_RELIABILITY_H
#define ATTND_TESTS_RELIABILITY_H

#include <stdbool.h>
#include <stddef.h>

#include "../harness.h"

typedef struct settings {
    const char *attnd, *work, *only;
    double scale; /* every time bound is multiplied by it */
} settings;

extern settings cfg;

/* ---- util.c -------------------------------------------------------------------------------- */

/* A growable string. */
typedef struct str {
    char *p;
    size_t n, cap;
} str;

void str_add(str *s, const char *b, size_t n);
void str_cat(str *s, const char *text);
void str_printf(str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void str_repeat(str *s, const char *piece, size_t times);
void str_b64_floats(str *s, size_t n);
size_t count_lines_with(const char *text, const char *a, const char *b);
bool alive(const attnd *d);
size_t rss_bytes(const attnd *d);
bool request(CURL *c, int port, const char *method, const char *path, const char *body, size_t len,
             const char *const *hdrs, reply *r);
bool post(CURL *c, int port, const char *path, const char *body, size_t len, reply *r);
bool healthy(const attnd *d);
bool has_header(const reply *r, const char *name, const char *value);
void check_error(const reply *r, long status, const char *code, const char *needle,
                 const char *what);
/* An SDPA request of 2 x 2 tensors with weights. */
extern const char *const SDPA_SMALL;
char *weights_body(size_t n);
/* A gzip body of /v1/sdpa: q (1, dim) and k, v (s, dim) of zeros, about 4 s dim bytes of JSON
 * (*json_len) that deflate to a few hundred KB (*len). The caller frees it. */
unsigned char *gzip_sdpa(size_t s, size_t dim, size_t *len, size_t *json_len);

/* ---- sockets.c ----------------------------------------------------------------------------- */

/* What one raw exchange brought back. */
typedef struct exchange {
    str out;     /* every byte the server sent */
    bool closed; /* the server closed the connection */
    double secs; /* until it closed, or the wait ran out */
    int lines;   /* status lines ("HTTP/1.x NNN " at the start of a line) */
    long status; /* the first one's code */
} exchange;

/* A client that takes its reply slowly: a receive buffer of rcvbuf bytes (so that what TCP
 * acknowledges is what it has read, give or take the buffer), the request sent whole, then at
 * most chunk bytes read every gap seconds, until the server closes or secs pass. */
typedef struct trickle_ctx {
    int port;
    const char *raw;
    size_t n;
    int rcvbuf;
    size_t chunk;
    double gap, secs;
    str out;        /* every byte read */
    bool closed;    /* the server closed (or reset) the connection */
    double t_close; /* seconds from the request to the close */
} trickle_ctx;

int tcp_connect(int port);
/* tcp_connect with a receive buffer of rcvbuf bytes (0: the default), set before the handshake. */
int tcp_connect_rcvbuf(int port, int rcvbuf);
bool send_all(int fd, const void *p, size_t n);
bool read_to_end(int fd, double secs, str *out);
void close_reset(int fd);
void post_head(str *s, const char *path, size_t len);
void exchange_raw(int port, const char *raw, size_t n, double secs, exchange *x);
/* exchange_raw on the connection fd (left open), which may have sent part of a request before. */
void exchange_on(int fd, const char *raw, size_t n, double secs, exchange *x);
void *trickle_main(void *arg);

/* ---- The scenarios, one a file, run by main.c ---------------------------------------------- */

/* limits.c */
void test_limits(void);

/* faults.c */
void test_faults(void);

/* slow.c */
void test_slow(void);
void test_idle(void);
void test_begun_after_reply(void);
void test_drain_reader(void);

/* framing.c */
void test_framing(void);

/* security.c */
void test_security(void);

/* rss.c */
void test_rss(void);

/* unsent.c */
void test_unsent(void);
void test_slow_reader(void);

/* jobmem.c */
void test_job_memory(void);
void test_small_job_faults(void);

/* probes.c */
void test_probes(void);
void test_probes_at_limit(void);
void test_metrics_scrapers(void);

/* starve.c */
void test_starve_senders(void);
void test_starve_hold(void);
void test_starve_parsing(void);

/* budget.c */
void test_budget(void);

/* startup.c */
void test_startup(void);

#endif
