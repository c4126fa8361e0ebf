/* health.c - `attnd --health-check`: the container's HEALTHCHECK. It asks the running daemon's
 * GET /healthz over loopback and exits 0 on a 200, so an image needs no curl. */
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "server.h"

/* The address to reach a daemon listening on host: a wildcard listens on loopback too. */
static const char *reach_host(const char *host) {
    if (!strcmp(host, "0.0.0.0") || !*host)
        return "127.0.0.1";
    if (!strcmp(host, "::") || !strcmp(host, "[::]"))
        return "::1";
    return host;
}

int srv_health_check(const srv_config *cfg, FILE *out) {
    const char *host = reach_host(cfg->host);
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)cfg->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (cfg->port == 0 || getaddrinfo(host, port, &hints, &res) != 0) {
        fprintf(out, "attnd: health check: cannot resolve %s:%s\n", host, port);
        return 1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd < 0)
            continue;
        struct timeval tv = {.tv_sec = 2};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        fprintf(out, "attnd: health check: nothing listens on %s:%s\n", host, port);
        return 1;
    }
    static const char req[] = "GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n";
    char buf[64] = "";
    size_t got = 0;
    if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1)) {
        ssize_t n;
        while (got < sizeof buf - 1 && (n = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0)
            got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    int ok = !strncmp(buf, "HTTP/1.", 7) && !strncmp(buf + 8, " 200", 4);
    if (!ok)
        fprintf(out, "attnd: health check: %s:%s/healthz answered '%.12s'\n", host, port, buf);
    return ok ? 0 : 1;
}
