/* wire.c - the bytes of each connection as they come off the socket, checked for the framing of
 * HTTP/1.1 (RFC 9112) before libmicrohttpd parses them: every line of a request's head, of a
 * chunked body's chunk sizes and of its trailer must end in CRLF; a CR must be followed by LF; a
 * field name (in the head or the trailer) is a token, one or more of RFC 9110's tchar (letters,
 * digits and !#$%&'*+-.^_`|~), and ends at its colon, with no whitespace before it; no field line
 * is folded onto the one before it; a chunk's data must be followed by CRLF at once; no line
 * holds a NUL byte. And a Content-Length is a number of bytes: digits after optional
 * whitespace, with nothing after them, at most 2^64 - 1.
 *
 * Why here: libmicrohttpd 0.9.75 takes a bare LF as the end of a header line and of a chunk line,
 * folds lines that begin with whitespace, and keeps any byte but the colon in a field name
 * (VT, FF, DEL, bytes past 0x7f), where a proxy in front may not, or may trim such a byte
 * (HAProxy did, CVE-2019-18277) and frame by "Content-Length\x0b": the two would then
 * disagree on where a body ends, and a request could be smuggled inside another's body. attnd
 * sees headers only once parsed and chunked bodies only once decoded, so it reads the bytes
 * themselves: libmicrohttpd receives with recv(2) (its MHD_recv_), which this file defines for
 * the process. Sockets it was not told of (srv_wire_open) pass through untouched. A
 * Content-Length libmicrohttpd cannot read (it reads digits alone after the whitespace it
 * skips, so whitespace after them fails too) it refuses with a reply of its own, whose
 * connection attnd can only guess at (http.c: answer_raw); here it is known, by its descriptor.
 *
 * Where a request ends, the gate follows the request's own framing as libmicrohttpd does:
 * Content-Length bytes, or chunks up to the last one and its trailer. A request whose framing
 * attnd refuses anyway, and closes the connection after (two Content-Lengths that differ,
 * Content-Length with Transfer-Encoding, a coding other than chunked: see http.c; a chunk size
 * libmicrohttpd refuses), is not followed further, and the connection reads as ended if
 * libmicrohttpd ever asks it for more.
 *
 * A line that breaks these rules is refused, with the connection's descriptor, by the refuse
 * callback (srv_wire_refusal: 400 invalid_request; for a Content-Length past 2^64 - 1, 413),
 * which writes the reply to the socket, and the connection ends: recv returns 0 (end of
 * stream) to libmicrohttpd from then on, so none of those bytes is ever parsed. libmicrohttpd only
 * receives while it reads a request (never while it writes a reply), so the reply cannot cut into
 * another reply; a valid request that came in the same read as the bad bytes is dropped with them.
 *
 * Cost: one pass over the bytes of heads, chunk lines and trailers; a body's data is skipped
 * by its length without being looked at.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "server.h"

typedef enum wire_part {
    W_START = 0, /* before a request line (empty lines are skipped) */
    W_LINE,      /* in the request line */
    W_FIELD,     /* in a field line of the head (or at its start) */
    W_BODY,      /* in a Content-Length body: left bytes to go */
    W_SIZE,      /* in a chunk-size line */
    W_DATA,      /* in a chunk's data: left bytes to go */
    W_DATA_CR,   /* after a chunk's data: its CR */
    W_DATA_LF,   /* after a chunk's data and CR: its LF */
    W_TRAILER,   /* in a trailer field line (or at its start) */
    W_PASS,      /* framing attnd refuses anyway: not followed further */
    W_BAD,       /* refused: every recv returns 0 */
} wire_part;

/* What the head of the request so far says of its framing. */
typedef struct wire_head {
    unsigned cl, te;   /* Content-Length and Transfer-Encoding lines */
    bool cl_differ;    /* a Content-Length that differs from the first */
    bool te_chunked;   /* the (first) Transfer-Encoding is "chunked" */
    uint64_t cl_value; /* the first Content-Length */
} wire_head;

/* One connection's place in its byte stream. */
typedef struct wire_conn {
    srv_wire_refuse_fn refuse; /* and its ctx: who answers a refused connection */
    void *ctx;
    wire_part part;
    bool cr;       /* the last byte of the current line was CR */
    size_t len;    /* bytes of the current line so far (CR excluded) */
    uint64_t left; /* W_BODY, W_DATA: bytes to go */
    /* the field line being read */
    bool in_value; /* past the colon */
    char name[20]; /* its name, lowercased, while it fits */
    size_t name_len;
    int kind;       /* past the colon: 1 Content-Length, 2 Transfer-Encoding, 0 another */
    uint64_t value; /* Content-Length or chunk size, as read so far */
    size_t digits;  /* of value */
    bool value_bad; /* not a number (a chunk size: or too large) */
    bool value_big; /* a Content-Length of digits alone past 2^64 - 1 */
    char te[8];     /* the start of a Transfer-Encoding value, lowercased */
    size_t te_len;
    bool size_ext; /* W_SIZE: past a ';' (a chunk extension) */
    wire_head head;
    char why[96];             /* a refusal's reason, when it names a byte */
    srv_wire_refusal refusal; /* W_BAD: what for */
} wire_conn;

/* The gate: one slot per file descriptor the process may have, set for the connections
 * libmicrohttpd serves. A slot is written by the thread that serves the connection (open,
 * close) and read by the same thread (recv), so only the pointer needs to be atomic. The table
 * is made once per process, whatever the number of HTTP daemons (the fuzz target runs two). */
static _Atomic(wire_conn *) *wire_slots;
static size_t wire_nslots;
static pthread_once_t wire_once = PTHREAD_ONCE_INIT;

static void wire_table_make(void) {
    struct rlimit rl;
    size_t n = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > n)
        n = (size_t)rl.rlim_cur;
    if (n > ((size_t)1 << 22))
        n = (size_t)1 << 22;
    wire_slots = calloc(n, sizeof *wire_slots);
    wire_nslots = wire_slots ? n : 0;
}

int srv_wire_start(void) {
    pthread_once(&wire_once, wire_table_make);
    return wire_slots ? SRV_OK : SRV_ERR;
}

void srv_wire_open(int fd, srv_wire_refuse_fn refuse, void *ctx) {
    if (fd < 0 || (size_t)fd >= wire_nslots)
        return; /* past the table: its bytes go unchecked, as before the gate */
    wire_conn *w = calloc(1, sizeof *w);
    if (w) {
        w->refuse = refuse;
        w->ctx = ctx;
    }
    wire_conn *old = atomic_exchange_explicit(&wire_slots[fd], w, memory_order_acq_rel);
    free(old);
}

void srv_wire_close(int fd) {
    if (fd < 0 || (size_t)fd >= wire_nslots)
        return;
    free(atomic_exchange_explicit(&wire_slots[fd], NULL, memory_order_acq_rel));
}

/* ---- The framing ------------------------------------------------------------------------ */

static bool name_is(const wire_conn *w, const char *lower) {
    return w->name_len == strlen(lower) && !memcmp(w->name, lower, w->name_len);
}

/* RFC 9110 section 5.6.2: the characters of a token, which a field name is (section 5.1). */
static bool tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

size_t srv_wire_token(const char *s) {
    size_t n = 0;
    while (s[n] && tchar((unsigned char)s[n]))
        n++;
    return n;
}

/* Why a field name with byte c is refused, in w->why. */
static const char *name_byte_refused(wire_conn *w, unsigned char c) {
    char shown[8];
    if (c > ' ' && c < 0x7f)
        snprintf(shown, sizeof shown, "'%c'", c);
    else
        snprintf(shown, sizeof shown, "\\x%02x", c);
    snprintf(w->why, sizeof w->why,
             "the byte %s in a field name, where field names are tokens (RFC 9110 section 5.1)",
             shown);
    return w->why;
}

static int hex_digit(unsigned char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A field line of the head has ended. NULL, or why it is refused (w->refusal says what for). */
static const char *field_end(wire_conn *w) {
    wire_head *h = &w->head;
    if (w->kind == 1) {
        /* Refused here, on the connection that sent it, and never shown to libmicrohttpd, which
         * would refuse it too (0.9.75 reads the first Content-Length as digits alone after the
         * whitespace it skips: whitespace after them fails) on a reply of its own that attnd
         * could only guess the connection of. */
        if (w->value_bad || w->digits == 0) {
            w->refusal = SRV_WIRE_LENGTH_NOT_NUMBER;
            return "a Content-Length that is not a number";
        }
        if (w->value_big) {
            w->refusal = SRV_WIRE_LENGTH_TOO_LARGE;
            return "a Content-Length past 2^64 - 1";
        }
        if (h->cl++ == 0)
            h->cl_value = w->value;
        else if (w->value != h->cl_value)
            h->cl_differ = true;
    } else if (w->kind == 2) {
        if (h->te++ == 0)
            h->te_chunked = w->te_len == 7 && !memcmp(w->te, "chunked", 7);
    }
    return NULL;
}

/* The head has ended: where its body is. */
static void head_end(wire_conn *w) {
    wire_head *h = &w->head;
    if (h->cl_differ || (h->cl && h->te) || h->te > 1 || (h->te == 1 && !h->te_chunked))
        w->part = W_PASS; /* attnd refuses it and closes the connection */
    else if (h->te == 1)
        w->part = W_SIZE;
    else if (h->cl && h->cl_value > 0) {
        w->part = W_BODY;
        w->left = h->cl_value;
    } else {
        w->part = W_START;
    }
    memset(h, 0, sizeof *h);
}

static void line_reset(wire_conn *w) {
    w->cr = false;
    w->len = 0;
    w->in_value = false;
    w->name_len = 0;
    w->kind = 0;
    w->value = 0;
    w->digits = 0;
    w->value_bad = false;
    w->value_big = false;
    w->te_len = 0;
    w->size_ext = false;
}

/* One content byte of the current line (not CR or LF). NULL, or why it breaks the rules. */
static const char *line_byte(wire_conn *w, unsigned char c) {
    bool first = w->len++ == 0;
    /* libmicrohttpd reads its lines as C strings: a NUL ends a value, and a line that begins
     * with one ends the head. Read on here, a NUL would make the two disagree on the framing. */
    if (c == '\0')
        return "a NUL byte in a line";
    switch (w->part) {
    case W_START:
        w->part = W_LINE;
        return NULL;
    case W_FIELD:
    case W_TRAILER:
        if (first && (c == ' ' || c == '\t'))
            return "a field line folded onto the one before it (obsolete line folding)";
        if (!w->in_value) {
            if (c == ':') {
                if (w->name_len == 0)
                    return "an empty field name (a line that begins with a colon)";
                w->in_value = true;
                w->kind = w->part == W_TRAILER              ? 0
                          : name_is(w, "content-length")    ? 1
                          : name_is(w, "transfer-encoding") ? 2
                                                            : 0;
                return NULL;
            }
            if (c == ' ' || c == '\t')
                return "whitespace before the colon of a field name";
            if (!tchar(c))
                return name_byte_refused(w, c);
            if (w->name_len < sizeof w->name)
                w->name[w->name_len] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            w->name_len++;
            return NULL;
        }
        if (w->kind == 1) { /* optional whitespace, then digits alone */
            if (c >= '0' && c <= '9') {
                uint64_t d = (uint64_t)(c - '0');
                if (w->value > (UINT64_MAX - d) / 10)
                    w->value_big = true;
                else
                    w->value = w->value * 10 + d;
                w->digits++;
            } else if (w->digits > 0 || (c != ' ' && c != '\t')) {
                w->value_bad = true;
            }
            return NULL;
        }
        if (c == ' ' || c == '\t') /* optional whitespace, or within a value */
            return NULL;
        if (w->kind == 2) {
            if (w->te_len < sizeof w->te)
                w->te[w->te_len] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            w->te_len++;
        }
        return NULL;
    case W_SIZE:
        if (w->size_ext)
            return NULL;
        if (c == ';') {
            w->size_ext = true;
            return NULL;
        }
        int d = hex_digit(c);
        if (d < 0 || w->value > (UINT64_MAX >> 4)) {
            w->value_bad = true;
            return NULL;
        }
        w->value = w->value << 4 | (uint64_t)d;
        w->digits++;
        return NULL;
    default:
        return NULL;
    }
}

/* The current line has ended with CRLF. NULL, or why it is refused. */
static const char *line_end(wire_conn *w) {
    const char *why = NULL;
    switch (w->part) {
    case W_START: /* an empty line before a request: skipped */
        break;
    case W_LINE:
        w->part = W_FIELD;
        break;
    case W_FIELD:
        if (w->len == 0)
            head_end(w);
        else
            why = field_end(w);
        break;
    case W_SIZE:
        if (w->value_bad || w->digits == 0)
            w->part = W_PASS; /* libmicrohttpd refuses it (400 or 413) and closes */
        else if (w->value == 0)
            w->part = W_TRAILER;
        else {
            w->part = W_DATA;
            w->left = w->value;
        }
        break;
    case W_TRAILER:
        if (w->len == 0)
            w->part = W_START;
        break;
    default:
        break;
    }
    line_reset(w);
    return why;
}

/* Runs n bytes of p through w. NULL, or why they break the rules. */
static const char *wire_feed(wire_conn *w, const unsigned char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        switch (w->part) {
        case W_PASS:
        case W_BAD:
            return NULL;
        case W_BODY:
        case W_DATA: {
            uint64_t take = n - i < w->left ? n - i : w->left;
            i += (size_t)take;
            w->left -= take;
            if (w->left == 0)
                w->part = w->part == W_BODY ? W_START : W_DATA_CR;
            continue;
        }
        case W_DATA_CR:
            if (p[i] != '\r')
                return p[i] == '\n' ? "a chunk's data ended by a bare LF, not CRLF"
                                    : "a chunk's data longer than its size";
            w->part = W_DATA_LF;
            i++;
            continue;
        case W_DATA_LF:
            if (p[i] != '\n')
                return "a chunk's data ended by a CR without LF";
            w->part = W_SIZE;
            line_reset(w);
            i++;
            continue;
        default:
            break;
        }
        /* a line: the head's, a chunk size's or a trailer's */
        unsigned char c = p[i++];
        if (w->cr) {
            if (c != '\n')
                return "a CR not followed by LF";
            const char *why = line_end(w);
            if (why)
                return why;
        } else if (c == '\r') {
            w->cr = true;
        } else if (c == '\n') {
            return w->part == W_SIZE      ? "a chunk-size line ended by a bare LF, not CRLF"
                   : w->part == W_TRAILER ? "a trailer line ended by a bare LF, not CRLF"
                                          : "a line of the request head ended by a bare LF, "
                                            "not CRLF";
        } else {
            const char *why = line_byte(w, c);
            if (why)
                return why;
        }
    }
    return NULL;
}

/* libmicrohttpd's receive (it calls recv(2) for every socket it reads): the bytes are checked for
 * the connections of srv_wire_open; a refused connection reads as ended. The name is POSIX's,
 * so that the library's calls come here; the bytes come from the kernel by recvfrom. */
ssize_t recv(int fd, void *buf, size_t len, int flags) {
    wire_conn *w = fd >= 0 && (size_t)fd < wire_nslots
                       ? atomic_load_explicit(&wire_slots[fd], memory_order_acquire)
                       : NULL;
    /* A connection past framing attnd refuses is closed by the reply that refuses it, so
     * libmicrohttpd never reads it again; if it does, the two disagree on the framing, and the
     * connection ends here without a byte more. */
    if (w && (w->part == W_BAD || w->part == W_PASS))
        return 0;
    ssize_t got = (ssize_t)syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
    if (!w || got <= 0 || (flags & MSG_PEEK))
        return got;
    const char *why = wire_feed(w, buf, (size_t)got);
    if (!why)
        return got;
    w->part = W_BAD;
    if (w->refuse)
        w->refuse(w->ctx, fd, w->refusal, why);
    return 0;
}
