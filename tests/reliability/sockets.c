/* sockets.c - clients on raw sockets, for test_reliability's clients that misbehave: connect,
 * send, read to the end, vanish with a reset, one raw exchange, and a reader that takes its reply
 * slowly. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../harness.h"
#include "reliability.h"

int tcp_connect_rcvbuf(int port, int rcvbuf) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (rcvbuf > 0) /* before the handshake, so that the window it offers stays small */
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int tcp_connect(int port) {
    return tcp_connect_rcvbuf(port, 0);
}

bool send_all(int fd, const void *p, size_t n) {
    const char *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

/* Reads until the peer closes (true) or secs pass (false); what came is appended to out (may be
 * NULL). A reset counts as closed. */
bool read_to_end(int fd, double secs, str *out) {
    double t0 = now();
    char buf[65536];
    for (;;) {
        double left = secs - (now() - t0);
        if (left <= 0)
            return false;
        struct pollfd p = {fd, POLLIN, 0};
        int rc = poll(&p, 1, (int)(left * 1000) + 1);
        if (rc == 0)
            continue;
        if (rc < 0)
            return false;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return true;
        if (r > 0 && out)
            str_add(out, buf, (size_t)r);
    }
}

/* Closes fd with a reset (no FIN): a client that vanishes. */
void close_reset(int fd) {
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

void post_head(str *s, const char *path, size_t len) {
    str_printf(s,
               "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               "Connection: close\r\nContent-Length: %zu\r\n\r\n",
               path, len);
}

void exchange_on(int fd, const char *raw, size_t n, double secs, exchange *x) {
    memset(x, 0, sizeof *x);
    double t0 = now();
    send_all(fd, raw, n);
    x->closed = read_to_end(fd, secs, &x->out);
    x->secs = now() - t0;
    if (!x->out.p)
        str_add(&x->out, "", 0);
    for (const char *p = x->out.p; (p = strstr(p, "HTTP/1.")) != NULL; p += 7)
        if ((p == x->out.p || p[-1] == '\n') && p[8] == ' ') {
            if (x->lines++ == 0)
                x->status = atol(p + 9);
        }
}

/* Sends raw (n bytes) on a new connection and reads until the server closes it or secs pass.
 * The write side stays open: whatever closes the connection is the server. */
void exchange_raw(int port, const char *raw, size_t n, double secs, exchange *x) {
    int fd = tcp_connect(port);
    exchange_on(fd, raw, n, secs, x);
    close(fd);
}

void *trickle_main(void *arg) {
    trickle_ctx *t = arg;
    int fd = tcp_connect_rcvbuf(t->port, t->rcvbuf);
    if (fd < 0)
        return NULL;
    if (!send_all(fd, t->raw, t->n)) {
        close(fd);
        return NULL;
    }
    double t0 = now();
    char *buf = malloc(t->chunk);
    while (now() - t0 < t->secs) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t r = recv(fd, buf, t->chunk, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            t->closed = true;
            t->t_close = now() - t0;
            break;
        }
        if (r > 0)
            str_add(&t->out, buf, (size_t)r);
        sleep_s(t->gap);
    }
    free(buf);
    close(fd);
    return NULL;
}
