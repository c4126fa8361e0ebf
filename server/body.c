/* body.c - a request body as it arrives: kept in one growing buffer up to a cap (blocks of the
 * job memory cache, so that a large body reuses the pages of the one before), and decoded on
 * the way in when it carries a content coding (gzip, deflate; zlib, streaming). The cap applies
 * to the decoded bytes, and inflate is never given room past it, so a small body that would
 * inflate to gigabytes (a "gzip bomb") costs at most the cap. The bytes as sent are capped too.
 * Any route that takes a body can use it; it knows nothing of HTTP. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "server.h"

struct srv_body {
    srv_coding coding;
    srv_body_state state;
    size_t max;    /* most decoded bytes kept */
    size_t expect; /* what Content-Length announced (0: unknown, or coded) */
    size_t raw;    /* bytes appended as sent */
    char *data; /* (len of cap + 1 bytes): the decoded body, and room for a NUL; a block of mem */
    size_t len, cap;
    api_mem *mem;    /* the job memory cache, or NULL */
    z_stream z;      /* the decoder, for a coding other than identity */
    bool z_live;     /* z was initialised */
    bool z_end;      /* the coded stream has ended */
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

/* A block of b->mem for a body of at least cap bytes (and its NUL), at most most; sets *got to
 * the body bytes it holds. NULL when out of memory. */
static char *body_block(const srv_body *b, size_t cap, size_t most, size_t *got) {
    size_t have = 0;
    char *d = api_mem_alloc(b->mem, cap + 1, most + 1, &have);
    *got = have - 1 < most ? have - 1 : most;
    return d;
}

srv_body *srv_body_create(srv_coding coding, size_t max, size_t reserve, size_t expect,
                          api_mem *mem) {
    srv_body *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->coding = coding;
    b->max = max;
    b->expect = coding == SRV_CODING_IDENTITY && expect <= max ? expect : 0;
    b->mem = mem;
    /* A block that may have to grow holds at most half the cap, so that the old block and the
     * new one held together while it grows (body_grow) stay within 1.5 x max; one that holds
     * the whole announced body never grows. */
    size_t first = reserve < max ? reserve : max;
    bool whole = b->expect && b->expect <= first;
    if (!whole && first > max / 2)
        first = max / 2 > 0 ? max / 2 : 1;
    b->data = body_block(b, first, whole ? max : max / 2 > first ? max / 2 : first, &b->cap);
    if (!b->data) {
        free(b);
        return NULL;
    }
    if (coding != SRV_CODING_IDENTITY) {
        /* windowBits 15, plus 16 for the gzip wrapper; deflate is the zlib format (RFC 9110). */
        int bits = coding == SRV_CODING_GZIP ? 15 + 16 : 15;
        if (inflateInit2(&b->z, bits) != Z_OK) {
            api_mem_free(b->data);
            free(b);
            return NULL;
        }
        b->z_live = true;
    }
    return b;
}

void srv_body_destroy(srv_body *b) {
    if (!b)
        return;
    if (b->z_live)
        inflateEnd(&b->z);
    api_mem_free(b->data);
    free(b);
}

/* Ends the body with state (the first failure wins) and frees what it held. */
static srv_body_state body_fail(srv_body *b, srv_body_state state) {
    if (b->state == SRV_BODY_OK)
        b->state = state;
    api_mem_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    if (b->z_live) {
        inflateEnd(&b->z);
        b->z_live = false;
    }
    return b->state;
}

/* Makes room for want more bytes, up to the cap; false (the body failed) when they would pass
 * it, or memory ran out. The body is copied to a new block, so for a moment both are held: a
 * block that may grow again holds at most max / 2 bytes, and the last block (the cap, or the
 * announced length) never grows, so the two together stay within 1.5 x max (SECURITY.md counts
 * it per connection). */
static bool body_grow(srv_body *b, size_t want) {
    if (b->len + want <= b->cap)
        return true;
    if (b->cap >= b->max || want > b->max - b->len) {
        body_fail(b, SRV_BODY_OVER);
        return false;
    }
    size_t cap = b->cap > b->max / 2 ? b->max : b->cap * 2;
    if (cap < b->len + want)
        cap = b->len + want;
    /* Past what was reserved at first, straight to the announced length: one more block, not a
     * chain of doublings (each of which the cache would keep). */
    if (b->expect >= b->len + want && b->expect > cap)
        cap = b->expect;
    size_t most = b->max / 2;
    if (cap > most) /* the last block: the announced length (it grows no more), else the cap */
        most = cap = b->expect >= b->len + want ? cap : b->max;
    size_t got = 0;
    char *d = body_block(b, cap, most, &got);
    if (!d) {
        body_fail(b, SRV_BODY_OOM);
        return false;
    }
    memcpy(d, b->data, b->len);
    api_mem_free(b->data);
    b->data = d;
    b->cap = got;
    return true;
}

static srv_body_state body_bad(srv_body *b, const char *what) {
    snprintf(b->error, sizeof b->error, "the %s body does not decode: %s",
             srv_coding_name(b->coding), what);
    return body_fail(b, SRV_BODY_BAD);
}

/* Feeds n bytes of the coded stream to inflate, writing into the buffer. */
static srv_body_state body_inflate(srv_body *b, const unsigned char *in, size_t n) {
    z_stream *z = &b->z;
    z->next_in = (Bytef *)in;
    z->avail_in = (uInt)n; /* n <= UINT_MAX: the caller splits */
    for (;;) {
        if (b->z_end) {
            if (z->avail_in == 0)
                return b->state;
            /* A gzip body may hold several members one after the other (RFC 1952). */
            if (b->coding != SRV_CODING_GZIP)
                return body_bad(b, "data after the end of the stream");
            inflateReset(z);
            b->z_end = false;
        }
        size_t room = b->cap - b->len;
        if (room == 0 && b->cap < b->max) {
            if (!body_grow(b, 1))
                return b->state;
            room = b->cap - b->len;
        } else if (room == 0) {
            room = 1; /* the NUL's slot, as a probe: a byte written there is one too many */
        }
        z->next_out = (Bytef *)b->data + b->len;
        z->avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
        uInt before = z->avail_out;
        int rc = inflate(z, Z_NO_FLUSH);
        b->len += before - z->avail_out;
        if (b->len > b->max)
            return body_fail(b, SRV_BODY_OVER);
        if (rc == Z_STREAM_END) {
            b->z_end = true;
            continue;
        }
        if (rc == Z_MEM_ERROR)
            return body_fail(b, SRV_BODY_OOM);
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return body_bad(b, z->msg ? z->msg : "corrupt data");
        if (z->avail_out > 0) /* all the input it could take is taken */
            return b->state;
    }
}

srv_body_state srv_body_append(srv_body *b, const void *data, size_t n) {
    b->raw += n;
    if (b->state != SRV_BODY_OK)
        return b->state;
    if (b->raw > b->max) /* the bytes as sent are capped too */
        return body_fail(b, SRV_BODY_OVER);
    if (b->coding == SRV_CODING_IDENTITY) {
        if (!body_grow(b, n))
            return b->state;
        memcpy(b->data + b->len, data, n);
        b->len += n;
        return b->state;
    }
    const unsigned char *p = data;
    while (n > 0 && b->state == SRV_BODY_OK) {
        size_t k = n > UINT_MAX ? UINT_MAX : n;
        body_inflate(b, p, k);
        p += k;
        n -= k;
    }
    return b->state;
}

srv_body_state srv_body_finish(srv_body *b) {
    if (b->state == SRV_BODY_OK && b->coding != SRV_CODING_IDENTITY && !b->z_end)
        return body_bad(b, b->raw ? "the stream is cut short" : "the body is empty");
    if (b->state == SRV_BODY_OK)
        b->data[b->len] = '\0';
    return b->state;
}

char *srv_body_data(srv_body *b, size_t *len) {
    *len = b->state == SRV_BODY_OK ? b->len : 0;
    return b->state == SRV_BODY_OK ? b->data : NULL;
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

bool srv_coding_encode(srv_coding coding, api_buf *b) {
    if (coding == SRV_CODING_IDENTITY || b->failed)
        return false;
    z_stream z;
    memset(&z, 0, sizeof z);
    /* windowBits 15, plus 16 for the gzip wrapper; deflate is the zlib format (RFC 9110). */
    int bits = coding == SRV_CODING_GZIP ? 15 + 16 : 15;
    if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return false;
    size_t cap = deflateBound(&z, (uLong)b->len) + 64;
    char *out = malloc(cap);
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
    size_t n = cap - out_left;
    /* Coded only when it is smaller, and held at its own length: the reply then never takes
     * more than the buffer it replaces (whose bytes are reserved in the unsent-reply budget). */
    char *fit = ok && n < b->len ? realloc(out, n ? n : 1) : NULL;
    if (!fit) {
        free(out);
        return false;
    }
    api_buf_free(b); /* a job memory block goes back to its cache; fit is malloc's */
    b->data = fit;
    b->len = n;
    b->cap = n;
    return true;
}
