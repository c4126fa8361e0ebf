/* static.c - lookup of the files built into the binary (web/ and api/openapi.yaml, listed in
 * server/server.mk, which generates the table), their validators for caching (an ETag from the
 * file's bytes) and how long a browser may keep each. Nothing is read from disk at run time. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* The generated table (build/server/embed_table.c). */
extern const srv_static_file srv_static_files[];
extern const size_t srv_static_count;

/* Each file's ETag, made once: a strong validator from its bytes (FNV-1a, 64 bits, and its
 * length), so it changes exactly when a build changes the file. */
#define ETAG_LEN 40
static char (*etags)[ETAG_LEN];
static pthread_once_t etags_once = PTHREAD_ONCE_INIT;

static void etags_make(void) {
    etags = calloc(srv_static_count ? srv_static_count : 1, sizeof *etags);
    for (size_t i = 0; etags && i < srv_static_count; i++) {
        const srv_static_file *f = &srv_static_files[i];
        uint64_t h = 0xcbf29ce484222325ULL;
        for (const unsigned char *p = f->data; p < f->end; p++)
            h = (h ^ *p) * 0x100000001b3ULL;
        snprintf(etags[i], ETAG_LEN, "\"%016llx-%zx\"", (unsigned long long)h,
                 (size_t)(f->end - f->data));
    }
}

const char *srv_static_etag(const srv_static_file *f) {
    pthread_once(&etags_once, etags_make);
    size_t i = (size_t)(f - srv_static_files);
    return etags && i < srv_static_count ? etags[i] : NULL;
}

const char *srv_static_cache_control(const srv_static_file *f) {
    /* The icon is fetched on every page a browser shows; it changes rarely and matters little
     * when stale: kept for a day. The page's own files are revalidated on every load (304, no
     * body, while they are the same), so a new build is seen at once. */
    return !strcmp(f->path, "/favicon.svg") ? "public, max-age=86400" : "no-cache";
}

bool srv_static_etag_matches(const char *if_none_match, const char *etag) {
    if (!if_none_match || !etag)
        return false;
    size_t n = strlen(etag);
    for (const char *p = if_none_match; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '*')
            return true;
        if (!strncmp(p, "W/", 2)) /* weak comparison (RFC 9110 section 13.1.2) */
            p += 2;
        if (!strncmp(p, etag, n) && (p[n] == '\0' || p[n] == ',' || p[n] == ' ' || p[n] == '\t'))
            return true;
        p += strcspn(p, ",");
    }
    return false;
}

const srv_static_file *srv_static_find(const char *path) {
    if (!strcmp(path, "/"))
        path = "/index.html";
    else if (!strcmp(path, "/favicon.ico")) /* where browsers and bookmarks look by default */
        path = "/favicon.svg";
    for (size_t i = 0; i < srv_static_count; i++)
        if (!strcmp(srv_static_files[i].path, path))
            return &srv_static_files[i];
    return NULL;
}

const char *srv_static_mime(const char *path) {
    static const struct {
        const char *ext, *mime;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
        {".yaml", "application/yaml; charset=utf-8"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".txt", "text/plain; charset=utf-8"},
    };
    const char *dot = strrchr(path, '.');
    if (dot && !strchr(dot, '/'))
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (!strcmp(dot, types[i].ext))
                return types[i].mime;
    return "application/octet-stream";
}
