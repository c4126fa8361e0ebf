/* log.c - log lines, as key=value text or as JSON objects, one write(2) each so that lines from
 * different threads never interleave. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

#define LINE_MAX_BYTES  8192
#define VALUE_MAX_BYTES 1024 /* longer string values are cut, marked with "..." */

typedef struct line {
    char buf[LINE_MAX_BYTES];
    size_t len;
    bool cut;
} line;

static void put(line *l, const char *s, size_t n) {
    size_t room = l->len < sizeof l->buf - 2 ? sizeof l->buf - 2 - l->len : 0; /* + newline */
    if (n > room) {
        n = room;
        l->cut = true;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void puts_(line *l, const char *s) {
    put(l, s, strlen(s));
}

static void putf(line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void putf(line *l, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(l, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* v in decimal at o; returns the end. */
static char *put_u64(char *o, unsigned long long v) {
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *o++ = tmp[--n];
    return o;
}

/* An integer field's value, as "%lld" writes it. */
static void put_int(line *l, long long v) {
    char tmp[24], *o = tmp;
    if (v < 0)
        *o++ = '-';
    o = put_u64(o, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v);
    put(l, tmp, (size_t)(o - tmp));
}

/* A number field's value with 3 decimals: the times a line carries (finite, in [0, 1e12)) as
 * the replies' usage writes them (api_ms_write), so that both show the same text; otherwise as
 * "%.3f". */
static void put_num(line *l, double d) {
    if (!(d >= 0 && d < 1e12)) {
        putf(l, "%.3f", d);
        return;
    }
    char tmp[API_MS_MAX];
    put(l, tmp, api_ms_write(tmp, d));
}

/* The line's time, "2026-11-30T21:14:31.684Z" (UTC, milliseconds), into ts (at least 25 bytes);
 * the text up to the seconds is made once per second per thread. */
static void timestamp(char *ts) {
    static _Thread_local time_t last_sec = -1;
    static _Thread_local char last[24];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    if (tv.tv_sec != last_sec) {
        struct tm tm;
        gmtime_r(&tv.tv_sec, &tm);
        if (strftime(last, sizeof last, "%Y-%m-%dT%H:%M:%S", &tm) != 19)
            memcpy(last, "0000-00-00T00:00:00", 20);
        last_sec = tv.tv_sec;
    }
    unsigned ms = (unsigned)(tv.tv_usec / 1000);
    memcpy(ts, last, 19);
    ts[19] = '.';
    ts[20] = (char)('0' + ms / 100);
    ts[21] = (char)('0' + ms / 10 % 10);
    ts[22] = (char)('0' + ms % 10);
    ts[23] = 'Z';
    ts[24] = '\0';
}

/* A JSON string: api_buf_json_string's escaping (invalid UTF-8 as \ufffd), cut after
 * VALUE_MAX_BYTES bytes with "..." at the end. esc is scratch memory. */
static void put_json_str(line *l, api_buf *esc, const char *s) {
    size_t n = strnlen(s, VALUE_MAX_BYTES + 1);
    bool cut = n > VALUE_MAX_BYTES;
    api_buf_reset(esc);
    api_buf_json_string(esc, s, cut ? VALUE_MAX_BYTES : n);
    if (esc->failed || esc->len < 2) {
        puts_(l, "\"?\"");
        return;
    }
    put(l, esc->data, esc->len - 1); /* without the closing quote */
    puts_(l, cut ? "...\"" : "\"");
}

/* A text value: bare when it is plain, else quoted with \" \\ and \xNN escapes. */
static void put_text_str(line *l, const char *s) {
    bool plain = *s != '\0' && strlen(s) <= VALUE_MAX_BYTES;
    for (const unsigned char *p = (const unsigned char *)s; *p && plain; p++)
        plain = *p > ' ' && *p < 0x7f && *p != '"' && *p != '\\' && *p != '=';
    if (plain) {
        puts_(l, s);
        return;
    }
    put(l, "\"", 1);
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++, k++) {
        if (k == VALUE_MAX_BYTES) {
            puts_(l, "...");
            break;
        }
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            put(l, e, 2);
        } else if (*p < 0x20 || *p >= 0x7f) {
            putf(l, "\\x%02x", *p);
        } else {
            put(l, (const char *)p, 1);
        }
    }
    put(l, "\"", 1);
}

void srv_log_write(const srv_log *log, const char *level, const char *msg, const srv_kv *kv,
                   size_t n) {
    line l;
    l.len = 0;
    l.cut = false;
    char ts[32];
    timestamp(ts);
    bool json = log && log->format == SRV_LOG_JSON;
    api_buf esc = {0}; /* JSON escaping scratch */

    if (json) {
        puts_(&l, "{\"time\":\"");
        puts_(&l, ts);
        puts_(&l, "\",\"level\":\"");
        puts_(&l, level);
        puts_(&l, "\",\"msg\":");
        put_json_str(&l, &esc, msg);
    } else {
        puts_(&l, ts);
        put(&l, " ", 1);
        puts_(&l, level);
        put(&l, " ", 1);
        puts_(&l, msg);
    }
    for (size_t i = 0; i < n; i++) {
        const srv_kv *f = &kv[i];
        line fl; /* one field, appended only when it fits whole */
        fl.len = 0;
        fl.cut = false;
        if (json) {
            put(&fl, ",", 1);
            put_json_str(&fl, &esc, f->key);
            put(&fl, ":", 1);
        } else {
            put(&fl, " ", 1);
            puts_(&fl, f->key);
            put(&fl, "=", 1);
        }
        switch (f->type) {
        case SRV_KV_STR:
            if (!f->s)
                puts_(&fl, json ? "null" : "-");
            else if (json)
                put_json_str(&fl, &esc, f->s);
            else
                put_text_str(&fl, f->s);
            break;
        case SRV_KV_INT:
            put_int(&fl, f->i);
            break;
        case SRV_KV_NUM:
            put_num(&fl, f->d);
            break;
        case SRV_KV_BOOL: /* a JSON boolean, never the string "true" */
            puts_(&fl, f->i ? "true" : "false");
            break;
        }
        if (fl.cut || l.len + fl.len + 32 > sizeof l.buf) {
            l.cut = true;
            break;
        }
        put(&l, fl.buf, fl.len);
    }
    if (l.cut)
        puts_(&l, json ? ",\"cut\":true" : " cut=true");
    if (json)
        put(&l, "}", 1);
    api_buf_free(&esc);
    l.buf[l.len++] = '\n';
    size_t off = 0;
    while (off < l.len) {
        ssize_t w = write(STDERR_FILENO, l.buf + off, l.len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}
