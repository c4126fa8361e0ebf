/* body.c - a request body as it arrives: kept in one growing buffer up to a cap (blocks of the
 * job memory cache, so that a large body reuses the pages of the one before, and counted in its
 * budget), and decoded when it carries a content coding (gzip, deflate; zlib) once it has
 * arrived whole, by srv_body_finish, which runs where the body is parsed (a parse thread, never an
 * HTTP thread: http.c). Until then a coded body holds only the bytes as sent, so a small body that
 * would inflate to gigabytes (a "gzip bomb"), or many that are never finished, cost what was
 * sent. The cap applies to the decoded bytes, and inflate is never given room past it; the bytes
 * as sent are capped too. A buffer grows by doubling (to the announced length at most), so a body
 * holds at most about twice what has arrived. Any route that takes a body can use it; it knows
 * nothing of HTTP. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "server.h"

/* A growing buffer of blocks of the job memory cache, with room for a NUL after len. */
typedef struct body_buf {
    char *data; /* (cap + 1 bytes) */
    size_t len, cap;
} body_buf;

struct srv_body {
    srv_coding coding;
    srv_body_state state;
    size_t max;      /* most decoded bytes kept, and most bytes as sent */
    size_t expect;   /* what Content-Length announced (0: unknown, or coded) */
    size_t raw;      /* bytes appended as sent */
    body_buf buf;    /* identity: the body; coded: the bytes as sent, until srv_body_finish
                        replaces them with the decoded body */
    api_mem *mem;    /* the job memory cache, or NULL */
    bool finished;   /* srv_body_finish has run */
    char error[160]; /* what was wrong with a SRV_BODY_BAD stream */
};

bool srv_coding_parse(const char *value, srv_coding *out) {
    while (*value == ' ' || *value == '\t')
        value++;
    size_t n = strlen(value);
    while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t'))
        n--;
    static const struct {
        const char *name;
        srv_coding coding;
    } known[] = {
        {"identity", SRV_CODING_IDENTITY},
        {"gzip", SRV_CODING_GZIP},
        {"x-gzip", SRV_CODING_GZIP},
        {"deflate", SRV_CODING_DEFLATE},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strlen(known[i].name) == n && !strncasecmp(value, known[i].name, n)) {
            *out = known[i].coding;
            return true;
        }
    return false;
}

const char *srv_coding_name(srv_coding coding) {
    switch (coding) {
    case SRV_CODING_GZIP:
        return "gzip";
    case SRV_CODING_DEFLATE:
        return "deflate";
    case SRV_CODING_IDENTITY:
        break;
    }
    return "identity";
}

/* A block of mem for at least want bytes (and a NUL), at most most; *got receives the bytes it
 * holds (at most most). NULL when out of memory, or past the job memory budget (*st says which:
 * SRV_BODY_OOM or SRV_BODY_BUDGET). */
static char *buf_block(api_mem *mem, size_t want, size_t most, size_t *got, srv_body_state *st) {
    size_t have = 0;
    bool over = false;
    char *d = api_mem_alloc_bounded(mem, want + 1, most + 1, &have, &over);
    *got = d ? (have - 1 < most ? have - 1 : most) : 0;
    *st = d ? SRV_BODY_OK : over ? SRV_BODY_BUDGET : SRV_BODY_OOM;
    return d;
}

/* Makes room in bb for want more bytes, up to max (and to expect when it is known and larger
 * than what bb holds): the block is doubled, or made just large enough, and its bytes copied, so
 * for a moment both are held. A block that may grow again holds at most max / 2 bytes, and the
 * last one (max, or the announced length) never grows, so the two together stay within 1.5 x
 * max (SECURITY.md); a block holds at most about twice the bytes that have come.
 * SRV_BODY_OK, SRV_BODY_OVER when they would pass max, SRV_BODY_OOM when out of memory,
 * SRV_BODY_BUDGET past the job memory budget (bb unchanged then). */
static srv_body_state buf_grow(api_mem *mem, body_buf *bb, size_t want, size_t max, size_t expect) {
    if (bb->len + want <= bb->cap)
        return SRV_BODY_OK;
    if (want > max - bb->len)
        return SRV_BODY_OVER;
    size_t cap = bb->cap > max / 2 ? max : bb->cap * 2;
    if (cap < bb->len + want)
        cap = bb->len + want;
    if (cap > max / 2) /* the last block, which never grows: the old one held at most max / 2 */
        cap = max;
    if (expect >= bb->len + want && cap > expect) /* never past the announced length */
        cap = expect;
    size_t got = 0;
    srv_body_state st;
    char *d = buf_block(mem, cap, cap, &got, &st);
    if (!d)
        return st;
    if (bb->len)
        memcpy(d, bb->data, bb->len);
    api_mem_free(bb->data);
    bb->data = d;
    bb->cap = got;
    return SRV_BODY_OK;
}

srv_body *srv_body_create(srv_coding coding, size_t max, size_t reserve, size_t expect,
                          api_mem *mem, bool *over_budget) {
    if (over_budget)
        *over_budget = false;
    srv_body *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->coding = coding;
    b->max = max;
    b->expect = coding == SRV_CODING_IDENTITY && expect <= max ? expect : 0;
    b->mem = mem;
    size_t first = reserve < max ? reserve : max;
    srv_body_state st;
    b->buf.data = buf_block(mem, first ? first : 1, first ? first : 1, &b->buf.cap, &st);
    if (!b->buf.data) {
        if (over_budget)
            *over_budget = st == SRV_BODY_BUDGET;
        free(b);
        return NULL;
    }
    return b;
}

void srv_body_destroy(srv_body *b) {
    if (!b)
        return;
    api_mem_free(b->buf.data);
    free(b);
}

/* Ends the body with state (the first failure wins) and frees what it held. */
static srv_body_state body_fail(srv_body *b, srv_body_state state) {
    if (b->state == SRV_BODY_OK)
        b->state = state;
    api_mem_free(b->buf.data);
    b->buf = (body_buf){0};
    return b->state;
}

srv_body_state srv_body_append(srv_body *b, const void *data, size_t n) {
    b->raw += n;
    if (b->state != SRV_BODY_OK)
        return b->state;
    if (b->raw > b->max) /* the bytes as sent are capped too */
        return body_fail(b, SRV_BODY_OVER);
    srv_body_state st = buf_grow(b->mem, &b->buf, n, b->max, b->expect);
    if (st != SRV_BODY_OK)
        return body_fail(b, st);
    memcpy(b->buf.data + b->buf.len, data, n);
    b->buf.len += n;
    return b->state;
}

static srv_body_state body_bad(srv_body *b, const char *what) {
    snprintf(b->error, sizeof b->error, "the %s body does not decode: %s",
             srv_coding_name(b->coding), what);
    return body_fail(b, SRV_BODY_BAD);
}

/* Decodes the bytes as sent (b->buf) into a new buffer that replaces them: a gzip body may hold
 * several members one after the other (RFC 1952); inflate is never given room past b->max. */
static srv_body_state body_decode(srv_body *b) {
    z_stream z;
    memset(&z, 0, sizeof z);
    /* windowBits 15, plus 16 for the gzip wrapper; deflate is the zlib format (RFC 9110). */
    if (inflateInit2(&z, b->coding == SRV_CODING_GZIP ? 15 + 16 : 15) != Z_OK)
        return body_fail(b, SRV_BODY_OOM);
    /* at most half the cap, so that growing stays within 1.5 x the cap beside the coded bytes */
    size_t first = b->buf.len < ((size_t)64 << 10) ? (size_t)64 << 10 : b->buf.len;
    first = first < b->max / 2 ? first : b->max / 2;
    body_buf out = {0};
    srv_body_state st;
    out.data = buf_block(b->mem, first ? first : 1, first ? first : 1, &out.cap, &st);
    const char *bad = NULL;
    bool ended = false;
    size_t in = 0;
    while (st == SRV_BODY_OK) {
        if (ended) {
            if (in == b->buf.len)
                break;
            if (b->coding != SRV_CODING_GZIP) {
                bad = "data after the end of the stream";
                break;
            }
            inflateReset(&z);
            ended = false;
        }
        if (out.len == out.cap && out.cap < b->max && (st = buf_grow(b->mem, &out, 1, b->max, 0)))
            break;
        /* At the cap, the NUL's slot as a probe: a byte written there is one too many. */
        size_t room = out.len < out.cap ? out.cap - out.len : 1;
        size_t avail = b->buf.len - in;
        z.next_in = (Bytef *)b->buf.data + in;
        z.avail_in = avail > UINT_MAX ? UINT_MAX : (uInt)avail;
        z.next_out = (Bytef *)out.data + out.len;
        z.avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
        uInt in_before = z.avail_in, out_before = z.avail_out;
        int rc = inflate(&z, Z_NO_FLUSH);
        in += in_before - z.avail_in;
        out.len += out_before - z.avail_out;
        if (out.len > b->max)
            st = SRV_BODY_OVER;
        else if (rc == Z_STREAM_END)
            ended = true;
        else if (rc == Z_MEM_ERROR)
            st = SRV_BODY_OOM;
        else if (rc != Z_OK && rc != Z_BUF_ERROR)
            bad = z.msg ? z.msg : "corrupt data";
        else if (z.avail_out > 0 && in == b->buf.len) /* all taken, no end, room left */
            bad = b->raw ? "the stream is cut short" : "the body is empty";
        if (bad)
            break;
    }
    inflateEnd(&z);
    if (st != SRV_BODY_OK || bad) {
        api_mem_free(out.data);
        return bad ? body_bad(b, bad) : body_fail(b, st);
    }
    api_mem_free(b->buf.data);
    b->buf = out;
    return SRV_BODY_OK;
}

srv_body_state srv_body_finish(srv_body *b) {
    if (b->finished)
        return b->state;
    b->finished = true;
    if (b->state == SRV_BODY_OK && b->coding != SRV_CODING_IDENTITY)
        body_decode(b);
    if (b->state == SRV_BODY_OK)
        b->buf.data[b->buf.len] = '\0';
    return b->state;
}

char *srv_body_data(srv_body *b, size_t *len) {
    bool ok = b->state == SRV_BODY_OK && b->finished;
    *len = ok ? b->buf.len : 0;
    return ok ? b->buf.data : NULL;
}

const char *srv_body_error(const srv_body *b) {
    return b->error[0] ? b->error : "the body could not be read";
}

/* ---- Reply codings ------------------------------------------------------------------------ */

/* The q value of one Accept-Encoding element's parameters (s, n bytes after the coding's
 * name): 1 when none is given, 0 for q=0 (also q=0.0, q=0.000). */
static bool q_positive(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ';')
            continue;
        size_t j = i + 1;
        while (j < n && (s[j] == ' ' || s[j] == '\t'))
            j++;
        if (j + 1 < n && (s[j] == 'q' || s[j] == 'Q') && s[j + 1] == '=') {
            for (j += 2; j < n && s[j] != ';'; j++)
                if (s[j] >= '1' && s[j] <= '9')
                    return true;
            return false;
        }
    }
    return true;
}

srv_coding srv_coding_accepted(const char *value) {
    bool gzip = false, deflate = false;
    for (const char *p = value; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t n = strcspn(p, ","), name = strcspn(p, ";, \t");
        if (name > n)
            name = n;
        bool ok = q_positive(p + name, n - name);
        if ((name == 4 && !strncasecmp(p, "gzip", 4)) ||
            (name == 6 && !strncasecmp(p, "x-gzip", 6)) || (name == 1 && *p == '*'))
            gzip = gzip || ok;
        else if (name == 7 && !strncasecmp(p, "deflate", 7))
            deflate = deflate || ok;
        p += n;
    }
    return gzip ? SRV_CODING_GZIP : deflate ? SRV_CODING_DEFLATE : SRV_CODING_IDENTITY;
}

bool srv_coding_encode(srv_coding coding, api_buf *b, api_mem *mem) {
    if (coding == SRV_CODING_IDENTITY || b->failed)
        return false;
    z_stream z;
    memset(&z, 0, sizeof z);
    /* windowBits 15, plus 16 for the gzip wrapper; deflate is the zlib format (RFC 9110). */
    int bits = coding == SRV_CODING_GZIP ? 15 + 16 : 15;
    if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return false;
    size_t cap = deflateBound(&z, (uLong)b->len) + 64;
    /* The copy is made in the job memory budget, for the moment both are held. */
    char *out = api_mem_alloc_bounded(mem, cap, cap, NULL, NULL);
    bool ok = out != NULL;
    z.next_in = (Bytef *)b->data;
    z.next_out = (Bytef *)out;
    size_t in_left = b->len, out_left = cap;
    int rc = Z_OK;
    while (ok && rc != Z_STREAM_END) {
        /* uInt is 32 bits: feed at most UINT_MAX bytes at a time. */
        uInt in_now = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
        uInt out_now = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;
        z.avail_in = in_now;
        z.avail_out = out_now;
        rc = deflate(&z, in_now == in_left ? Z_FINISH : Z_NO_FLUSH);
        in_left -= in_now - z.avail_in;
        out_left -= out_now - z.avail_out;
        ok = rc == Z_OK || rc == Z_STREAM_END; /* the bound leaves room: no Z_BUF_ERROR */
    }
    deflateEnd(&z);
    size_t n = cap - out_left, got = 0;
    /* Coded only when it is smaller, and then held in a block of its own length, within the
     * reply's reservation (the buffer it replaces was at least as large). */
    char *fit = ok && n < b->len ? api_mem_alloc(mem, n ? n : 1, n ? n : 1, &got) : NULL;
    if (fit)
        memcpy(fit, out, n);
    api_mem_free(out);
    if (!fit)
        return false;
    api_buf_free(b);
    b->data = fit;
    b->len = n;
    b->cap = got;
    b->block = true;
    return true;
}
