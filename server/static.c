/* static.c - lookup of the files built into the binary (web/ and api/openapi.yaml, listed in
 * server/server.mk, which generates the table). Nothing is read from disk at run time. */
#include <string.h>

#include "server.h"

/* The generated table (build/server/embed_table.c). */
extern const srv_static_file srv_static_files[];
extern const size_t srv_static_count;

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
