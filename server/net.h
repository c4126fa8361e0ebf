/* net.h - part of server.h, which includes it (include server.h, not this): the pieces of
 * server/ between the socket and a job, each with its contract: the parse threads (tasks.c),
 * request bodies and content codings (body.c), the static files (static.c), the connections as
 * the timeouts and the connection limit see them (conn.c), and the wire's framing checks
 * (wire.c). http.c puts them together. */
#ifndef ATTND_SERVER_NET_H
#define ATTND_SERVER_NET_H

/* ---- Parse threads (tasks.c) -------------------------------------------------------------- */

/* The largest body (as sent, without a content coding) an HTTP thread parses itself: well under
 * a millisecond of parsing (bench/RESULTS.md: about 75 MB/s for JSON numbers). Larger or coded
 * bodies go to a parse thread. */
#define SRV_INLINE_PARSE_BYTES ((size_t)64 << 10)

typedef struct srv_task srv_task;

/* What a task runs, on a parse thread; it may free the task record. */
typedef void (*srv_task_fn)(srv_task *task);

/* A task as the pool holds it: the caller allocates it (usually inside a request) and keeps it
 * alive until fn has been called. */
struct srv_task {
    srv_task_fn fn;
    srv_task *next; /* private to tasks.c */
};

/* A pool of threads running tasks in FIFO order, with at most max_queued waiting. Opaque. */
typedef struct srv_tasks srv_tasks;

/* Starts nthreads threads. NULL with err on failure. Free with srv_tasks_destroy. */
srv_tasks *srv_tasks_create(size_t nthreads, size_t max_queued, srv_error *err);

/* Queues task: SRV_OK (a thread will call task->fn, perhaps before this returns), SRV_QUEUE_FULL
 * (max_queued tasks wait) or SRV_CLOSED (the pool is being destroyed); nothing is taken then. */
int srv_tasks_submit(srv_tasks *t, srv_task *task);

/* Tasks waiting, and tasks a thread is running. */
void srv_tasks_stats(srv_tasks *t, size_t *queued, size_t *running);

/* Refuses new tasks, runs every queued one, and joins the threads. NULL does nothing. */
void srv_tasks_destroy(srv_tasks *t);

/* ---- Request bodies (body.c) ------------------------------------------------------------- */

/* The content codings a request body may carry (Content-Encoding). */
typedef enum srv_coding {
    SRV_CODING_IDENTITY = 0, /* none */
    SRV_CODING_GZIP,         /* gzip (RFC 1952), also named x-gzip */
    SRV_CODING_DEFLATE,      /* deflate: the zlib format (RFC 1950), as RFC 9110 defines it */
} srv_coding;

/* Reads one Content-Encoding value (case-insensitive, spaces around allowed): identity, gzip,
 * x-gzip or deflate. False for anything else, a list of several codings included. */
bool srv_coding_parse(const char *value, srv_coding *out);

/* "identity", "gzip" or "deflate". */
const char *srv_coding_name(srv_coding coding);

/* Where a body stands. After a failure the body holds no memory and only counts what comes. */
typedef enum srv_body_state {
    SRV_BODY_OK = 0,
    SRV_BODY_OVER,   /* more than max bytes, decoded or as sent */
    SRV_BODY_BAD,    /* the coded stream does not decode (srv_body_error says why) */
    SRV_BODY_OOM,    /* out of memory */
    SRV_BODY_BUDGET, /* past the job memory budget (api_mem_alloc_bounded) */
} srv_body_state;

/* A request body being received; a coded one is decoded once it has arrived whole. Opaque. */
typedef struct srv_body srv_body;

/* A body of coding, kept up to max decoded bytes (and max bytes as sent), with reserve bytes
 * allocated at once, in blocks of mem (the job memory cache, within its budget; NULL: malloc).
 * Beyond reserve it grows by doubling, never past expect (the length Content-Length announced;
 * 0 when unknown), so it holds at most about twice the bytes that have come. NULL when out of
 * memory, or past the budget (then *over_budget, which may be NULL, is set true). Free with
 * srv_body_destroy (NULL does nothing). */
srv_body *srv_body_create(srv_coding coding, size_t max, size_t reserve, size_t expect,
                          api_mem *mem, bool *over_budget);
void srv_body_destroy(srv_body *b);

/* Appends n bytes as they came off the wire (kept as sent: a coded body is decoded by
 * srv_body_finish). Cheap: a copy, and a larger block now and then. Returns the body's state:
 * the first failure stays. */
srv_body_state srv_body_append(srv_body *b, const void *data, size_t n);

/* The body has ended: a coded one is decoded now (inflate is never given room past max;
 * SRV_BODY_OVER past it, SRV_BODY_BAD when the stream does not decode or is cut short), into a
 * buffer that replaces the bytes as sent; it takes time in the decoded size, so call it where a
 * body is parsed, not on an HTTP thread. Returns the state; later calls return it again. */
srv_body_state srv_body_finish(srv_body *b);

/* After srv_body_finish returned SRV_BODY_OK: the decoded bytes, NUL-terminated (*len without
 * the NUL), owned by b and writable; NULL otherwise. */
char *srv_body_data(srv_body *b, size_t *len);

/* One line saying why a SRV_BODY_BAD body does not decode, naming the coding. */
const char *srv_body_error(const srv_body *b);

/* The coding a reply may take by an Accept-Encoding value (value may be NULL): gzip when it
 * accepts gzip (or x-gzip, or *) with a q above 0, else deflate when it accepts that, else
 * identity. */
srv_coding srv_coding_accepted(const char *value);

/* Replaces the n bytes of b with themselves coded as coding (gzip or deflate, zlib's fastest
 * level), in a block of mem (may be NULL) of their coded length. True when done; false (b
 * unchanged) for identity, when coding would not make them smaller, when the coded copy does not
 * fit the job memory budget now, or when out of memory. While it runs, b and the copy (zlib's
 * deflateBound(n) + 64 bytes, a bounded block of mem: api_mem_alloc_bounded) are held together,
 * with zlib's state (about 256 KiB). */
bool srv_coding_encode(srv_coding coding, api_buf *b, api_mem *mem);

/* ---- Static files (static.c and the generated embed table) ------------------------------- */

/* A file built into the binary by server/server.mk. */
typedef struct srv_static_file {
    const char *path;          /* URL path: "/index.html", "/openapi.yaml", ... */
    const unsigned char *data; /* the file's bytes */
    const unsigned char *end;  /* one past the last byte */
} srv_static_file;

/* The built-in file served at path ("/" is "/index.html", "/favicon.ico" is "/favicon.svg"), or
 * NULL. Only exact matches: nothing outside the table is ever served. */
const srv_static_file *srv_static_find(const char *path);

/* The file's ETag (a quoted strong validator from its bytes), or NULL when out of memory. */
const char *srv_static_etag(const srv_static_file *f);

/* The Cache-Control of the file's replies: "no-cache" (revalidated on every load, 304 while it
 * is the same) for the page's files, a day for the icon. */
const char *srv_static_cache_control(const srv_static_file *f);

/* True when an If-None-Match value (a list of entity tags, or *) names etag. NULL: false. */
bool srv_static_etag_matches(const char *if_none_match, const char *etag);

/* The Content-Type for a path, from its extension. */
const char *srv_static_mime(const char *path);

/* ---- Connections (conn.c) ----------------------------------------------------------------- */

/* Creates a listening TCP socket for cfg->host:cfg->port. Writes the bound address
 * ("127.0.0.1:43121", with the actual port) to bound. Returns the fd, or SRV_ERR with err. */
int srv_listen(const srv_config *cfg, char *bound, size_t bound_len, srv_error *err);

/* Where a connection is, as the read and send timeouts see it. */
typedef enum srv_conn_state {
    SRV_CONN_IDLE = 0, /* between requests (or before the first): no byte of the next yet */
    SRV_CONN_READING,  /* a request is arriving (headers or body) */
    SRV_CONN_ARRIVED,  /* the request has arrived and is being computed */
    SRV_CONN_SENDING,  /* its reply is queued and being sent (--min-send-rate applies) */
} srv_conn_state;

/* Why attnd shut a connection down. */
typedef enum srv_conn_end {
    SRV_CONN_LIVE = 0,   /* it has not */
    SRV_CONN_READ_LATE,  /* its request took longer than --read-timeout to arrive */
    SRV_CONN_SEND_SLOW,  /* its reply was read slower than --min-send-rate */
    SRV_CONN_EVICTED,    /* at --max-connections, a new connection took its place */
    SRV_CONN_OVER_LIMIT, /* it came at --max-connections with no connection to evict */
} srv_conn_end;

/* The reason's name for logs ("read_timeout", "send_timeout", "evicted", "connection_limit");
 * NULL for SRV_CONN_LIVE. */
const char *srv_conn_end_name(srv_conn_end end);

/* The open connections as --read-timeout, --send-timeout with --min-send-rate, --idle-timeout
 * and --max-connections see them, and the reaper thread that shuts down those whose request is
 * late or whose reply is read too slowly. Opaque; every function is thread-safe. */
typedef struct srv_conns srv_conns;

/* One tracked connection, owned by its srv_conns. Opaque. */
typedef struct srv_conn srv_conn;

/* Tracks connections by cfg's timeouts and connection limit, logging to log (borrowed), with a
 * reaper thread when the read timeout or the send rate is on. NULL with err on failure. Free
 * with srv_conns_destroy. */
srv_conns *srv_conns_create(const srv_config *cfg, const srv_log *log, srv_error *err);

/* Stops the reaper (joins it): from now on no connection is shut down for its read timeout.
 * Connections may still open and close. NULL does nothing. */
void srv_conns_stop(srv_conns *cs);

/* Stops the reaper if it still runs and frees cs. Every connection must have been closed
 * (srv_conn_close). NULL does nothing. */
void srv_conns_destroy(srv_conns *cs);

/* A connection has opened on socket fd (-1 when unknown): idle, before its first request. When
 * it makes more than --max-connections live ones, another is shut down to make room: the one
 * idle the longest (silent before its first request, or between requests; not one opened in the
 * last half second that has sent nothing yet), else the one whose request has been arriving the
 * longest, else the one sending a reply furthest behind the send rule's rate. When none can go
 * (every other is fresh, computing, or sending to a client that reads), this one takes a spare
 * place (srv_conn_spare), pushing out the oldest spare past SRV_CONN_SPARE per HTTP thread.
 * Evictions are logged. NULL when out of memory; the socket is then shut down, so that every
 * connection that serves is tracked (srv_conns_take_head relies on it). */
srv_conn *srv_conn_open(srv_conns *cs, int fd);

/* The connections now and the shut-downs so far. Thread-safe. */
srv_conn_stats srv_conns_stats(srv_conns *cs);

/* True when c holds a spare place: it may be served one probe (and is closed after it), and any
 * other request gets 503. Fixed when c opened; read without the lock by the thread serving c.
 * False for NULL. */
bool srv_conn_spare(const srv_conn *c);

/* The connection is closing (its socket is still open): logs idle_timeout when it closes idle
 * after --idle-timeout, and frees c. NULL does nothing. */
void srv_conn_close(srv_conns *cs, srv_conn *c);

/* A request line has come on c, served by the calling thread; its headers are not handed over
 * yet. Its read timeout starts now, unless its first bytes were already seen. NULL does
 * nothing. */
void srv_conn_request_line(srv_conns *cs, srv_conn *c);

/* Moves c to state (its headers have been handed over, its reply queued, or its request done):
 * SRV_CONN_READING starts the read timeout unless the request was already seen arriving;
 * SRV_CONN_SENDING starts the send rule; SRV_CONN_IDLE starts idleness. NULL does nothing. */
void srv_conn_set(srv_conns *cs, srv_conn *c, srv_conn_state state);

/* c's reply of len bytes is queued: the send rule starts (--min-send-rate, and --max-send-time by
 * len). NULL does nothing. */
void srv_conn_sending(srv_conns *cs, srv_conn *c, size_t len);

/* True when the request on c has been arriving for longer than --read-timeout (never when it is
 * off, or c is NULL). */
bool srv_conn_late(srv_conns *cs, srv_conn *c);

/* Why attnd shut c down (SRV_CONN_LIVE when it has not, or for NULL). */
srv_conn_end srv_conn_cut(srv_conns *cs, srv_conn *c);

/* The socket of the one connection served by the calling thread whose request line has come and
 * whose headers are not handed over yet, now marked handed over; -1 when there is none, or more
 * than one (they cannot be told apart: then no mark changes, so that a later call does not find
 * one of them alone). For a connection wire.c does not read (see srv_wire_open), whose bad
 * Content-Length libmicrohttpd refuses itself. */
int srv_conns_take_head(srv_conns *cs);

/* ---- The wire (wire.c) -------------------------------------------------------------------- */

/* What wire.c refuses a connection for. */
typedef enum srv_wire_refusal {
    SRV_WIRE_FRAMING = 0,       /* a line breaks HTTP/1.1's framing (400) */
    SRV_WIRE_LENGTH_NOT_NUMBER, /* a Content-Length that is not digits after optional
                                   whitespace, with none after them (400) */
    SRV_WIRE_LENGTH_TOO_LARGE,  /* a Content-Length of digits past 2^64 - 1 (413) */
} srv_wire_refusal;

/* Called when the bytes of the connection on socket fd are refused, for what (why: one line
 * saying how, for the log and the reply): answers on fd, which is the connection that sent the
 * bytes (the caller owns the connection's fate: it has ended for libmicrohttpd, which never
 * parsed the refused bytes). Runs on the thread that serves the connection. */
typedef void (*srv_wire_refuse_fn)(void *ctx, int fd, srv_wire_refusal what, const char *why);

/* Makes wire.c's table of connections (once per process; later calls do nothing). SRV_OK, or
 * SRV_ERR when out of memory. */
int srv_wire_start(void);

/* A connection has opened on fd: its bytes are checked from a request's start, and refuse (with
 * ctx) answers it if they break the framing or carry a Content-Length that is not a number
 * (srv_wire_refusal). Out of memory (or an fd past the process's limit): its bytes are not
 * checked, and libmicrohttpd is left to refuse such a Content-Length (srv_conns_take_head). */
void srv_wire_open(int fd, srv_wire_refuse_fn refuse, void *ctx);

/* The connection on fd is closing: fd is no longer checked. */
void srv_wire_close(int fd);

/* How many of the bytes at the start of the string s are token characters (RFC 9110 section
 * 5.6.2: letters, digits and !#$%&'*+-.^_`|~), the characters of a field name: strlen(s) when
 * s is a token or empty. */
size_t srv_wire_token(const char *s);

#endif
