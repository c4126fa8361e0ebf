/* conn.c - the listening socket, and each connection as the read timeout sees it.
 *
 * The read timeout (--read-timeout): each connection is tracked (conn_track). Between requests,
 * and before its first, a connection is idle, and only the idle timeout (--idle-timeout,
 * libmicrohttpd's own: it closes a connection that sends nothing) applies to it. A request
 * begins with its first byte, which the reaper thread sees in the socket's byte count
 * (TCP_INFO), or the access handler when the headers have come; from then on it must arrive,
 * headers and body, within the read timeout. A connection whose request is late is closed: by
 * on_access when a late body byte arrives, else by the reaper (a client still trickling its
 * headers, or stalled mid-request), since libmicrohttpd's idle timeout restarts at every byte.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_internal.h"

/* ---- The read timeout --------------------------------------------------------------------- */

/* Bytes the socket fd has received so far (TCP_INFO); 0 when unknown. */
static uint64_t socket_rx_bytes(int fd) {
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
        return 0;
    return ti.tcpi_bytes_received;
}

/* With conns_mu held: makes track idle from now (its reply has gone). */
static void track_idle_locked(conn_track *track) {
    track->state = TRACK_IDLE;
    track->since = srv_now();
    track->rx_mark = socket_rx_bytes(track->fd);
}

/* Moves track to state: TRACK_READING starts the read timeout unless the request was already
 * seen arriving; TRACK_IDLE starts idleness. NULL does nothing. */
void track_set(srv_http *h, conn_track *track, track_state state) {
    if (!track)
        return;
    pthread_mutex_lock(&h->conns_mu);
    track->head = false; /* the headers have been handed over, or the request is done */
    if (state == TRACK_IDLE) {
        track_idle_locked(track);
    } else if (state == TRACK_READING) {
        if (track->state != TRACK_READING)
            track->since = srv_now();
        track->state = TRACK_READING;
    } else {
        track->state = TRACK_ARRIVED;
    }
    pthread_mutex_unlock(&h->conns_mu);
}

/* True when the request on track has been arriving for longer than --read-timeout. */
bool track_late(srv_http *h, conn_track *track) {
    if (!track || h->cfg->read_timeout <= 0)
        return false;
    pthread_mutex_lock(&h->conns_mu);
    bool late = track->state == TRACK_READING && srv_now() - track->since > h->cfg->read_timeout;
    pthread_mutex_unlock(&h->conns_mu);
    return late;
}

void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                   enum MHD_ConnectionNotificationCode code) {
    srv_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_track *c = calloc(1, sizeof *c);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!c) { /* out of memory: every connection must be tracked (see on_mhd_log) */
            if (ci)
                shutdown((int)ci->connect_fd, SHUT_RDWR);
            return;
        }
        c->fd = ci ? (int)ci->connect_fd : -1;
        c->state = TRACK_IDLE;
        c->since = srv_now();
        c->rx_mark = 0; /* any byte received is the first request's */
        pthread_mutex_lock(&h->conns_mu);
        c->next = h->conns;
        if (h->conns)
            h->conns->prev = c;
        h->conns = c;
        pthread_mutex_unlock(&h->conns_mu);
        *socket_context = c;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_track *c = *socket_context;
        if (!c)
            return;
        pthread_mutex_lock(&h->conns_mu);
        if (c->prev)
            c->prev->next = c->next;
        else
            h->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        double idle_s = c->state == TRACK_IDLE ? srv_now() - c->since : 0;
        pthread_mutex_unlock(&h->conns_mu);
        /* libmicrohttpd closes a connection silent for --idle-timeout; a client that closed
         * its side, or a shutdown, ends idleness sooner. */
        if (h->cfg->idle_timeout > 0 && idle_s >= (double)h->cfg->idle_timeout - 0.05) {
            srv_kv kv[] = {SRV_NUM("idle_s", idle_s),
                           SRV_INT("idle_timeout_s", h->cfg->idle_timeout)};
            srv_log_write(h->log, "info", "idle_timeout", kv, 2);
        }
        free(c);
        *socket_context = NULL;
    }
}

/* libmicrohttpd has read a request line: until its headers are handed over (on_access), the
 * connection's record says so, and which thread serves it. */
void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn) {
    (void)uri;
    srv_http *h = cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn_track *track = ci ? ci->socket_context : NULL;
    if (track) {
        pthread_mutex_lock(&h->conns_mu);
        track->head = true;
        track->thread = pthread_self();
        pthread_mutex_unlock(&h->conns_mu);
    }
    return NULL; /* on_access makes the request's object */
}

/* The reaper: a few times per timeout, marks idle connections that have received a byte as
 * reading a request (from now), and shuts down every connection whose request is late;
 * libmicrohttpd then reads the end of the stream and closes it. */
void *reaper_main(void *arg) {
    srv_http *h = arg;
    double period = h->cfg->read_timeout / 8;
    period = period < 0.01 ? 0.01 : period > 0.25 ? 0.25 : period;
    pthread_mutex_lock(&h->conns_mu);
    while (!h->reaper_stop) {
        double now = srv_now();
        size_t cut = 0;
        for (conn_track *c = h->conns; c; c = c->next) {
            if (c->state == TRACK_IDLE && socket_rx_bytes(c->fd) > c->rx_mark) {
                c->state = TRACK_READING;
                c->since = now;
            } else if (c->state == TRACK_READING && !c->cut && c->fd >= 0 &&
                       now - c->since > h->cfg->read_timeout) {
                shutdown(c->fd, SHUT_RDWR);
                c->cut = true;
                cut++;
            }
        }
        if (cut) {
            srv_kv kv[] = {SRV_INT("connections", cut),
                           SRV_NUM("read_timeout_s", h->cfg->read_timeout)};
            srv_log_write(h->log, "warn", "read_timeout", kv, 2);
        }
        srv_cond_wait_for(&h->reaper_cv, &h->conns_mu, period);
    }
    pthread_mutex_unlock(&h->conns_mu);
    return NULL;
}

/* ---- The listening socket ---------------------------------------------------------------- */

int srv_listen(const srv_config *cfg, char *bound, size_t bound_len, srv_error *err) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)cfg->port);
    int rc = getaddrinfo(cfg->host, port, &hints, &res);
    if (rc != 0)
        return srv_fail(err, "--listen: cannot resolve the host '%s': %s", cfg->host,
                        gai_strerror(rc));
    int fd = -1, last = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
            last = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return srv_fail(err, "--listen: cannot listen on %s:%u: %s", cfg->host, (unsigned)cfg->port,
                        strerror(last));
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned p = cfg->port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
            p = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
            p = ntohs(a->sin6_port);
        }
    }
    snprintf(bound, bound_len, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, p);
    return fd;
}
