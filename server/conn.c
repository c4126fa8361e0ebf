/* conn.c - the listening socket, and each connection as the read timeout sees it.
 *
 * The read timeout (--read-timeout): each connection is tracked (a srv_conn in the srv_conns).
 * Between requests, and before its first, a connection is idle, and only the idle timeout
 * (--idle-timeout, libmicrohttpd's own: it closes a connection that sends nothing) applies to
 * it. A request begins with its first byte, which the reaper thread sees in the socket's byte
 * count (TCP_INFO), or with its request line when that is whole (libmicrohttpd's URI
 * callback, srv_conn_request_line), whichever is seen first; from then on it must
 * arrive, headers and body, within the read timeout. A connection whose request is late is
 * closed: by the access handler when a late body byte arrives (srv_conn_late), else by the
 * reaper (a client still trickling its headers, or stalled mid-request), since libmicrohttpd's
 * idle timeout restarts at every byte.
 *
 * The byte count at which idleness began is read by the reaper, at its first look at the idle
 * connection, not by the HTTP thread when the reply has gone: that system call cost W1 over
 * keep-alive 3% of its requests per second. So that bytes which came in between still start
 * the next request, the reaper reads with the count how long ago data last came
 * (tcpi_last_data_recv: milliseconds, counted in the kernel's clock ticks): data later than the
 * start of idleness, by more than RX_SLACK, is the next request's. Data within RX_SLACK after
 * it is taken for the last request's: a client that sends part of a request line within those
 * milliseconds of a reply and then stops is closed by the idle timeout instead, as if it had
 * sent nothing; a whole request line, or a byte more, and the request is seen.
 *
 * The send rule (--send-timeout, --min-send-rate): a reply being sent must be taken by its
 * client at an average of at least --min-send-rate bytes per second once --send-timeout has
 * passed, counted in the bytes the client's TCP has acknowledged (tcpi_bytes_acked) from the
 * reaper's first look at the reply (within a period of the reaper, a quarter second at most).
 * A slower one is reset (SO_LINGER 0, then shut down): what the kernel still holds of the reply
 * is dropped, libmicrohttpd's next write fails, it closes the connection, and the reply's room
 * in --max-unsent-bytes is given back. So a client that never reads, or trickles,
 * holds a reply's room for --send-timeout plus what its receive buffer took at the rate, not
 * for ever.
 *
 * The whole reply (--max-send-time): a reply must also be taken at its length / --max-send-time
 * bytes per second when that is faster than --min-send-rate, so that every reply is read whole
 * within --send-timeout + --max-send-time: a reply read just above the rate holds its room in
 * --max-unsent-bytes for that long at most, however large it is.
 *
 * The connection limit (--max-connections): past it a new connection evicts, in this order, the
 * one idle the longest (but for one opened less than FRESH_S ago, which has had no time to send
 * its request), the one whose request has been arriving the longest, or the one sending a reply
 * furthest behind the send rule's rate (its client takes less than the rate requires, counted
 * from the start of the reply without the --send-timeout grace: a client that does not read).
 * Connections computing, and those whose clients read their replies at the rate, are never
 * evicted. When none can be, the new connection takes a spare place (SRV_CONN_SPARE per HTTP
 * thread, beyond --max-connections): it is served one probe (GET or HEAD of /healthz, /readyz,
 * /v2/health/live or /v2/health/ready) and closed, and any other request on it gets 503
 * connection_limit; a new spare past them takes the place of the oldest. So a probe is answered
 * however the places are held: silent, trickling, computing, sending to clients that read, or
 * not reading.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"

/* ---- The read timeout --------------------------------------------------------------------- */

/* A connection as the read timeout sees it. Made when libmicrohttpd opens the connection and
 * freed when it reports it closed, which it does before it closes the socket: so fd is the
 * connection's own while the record is listed, and the reaper may read its TCP_INFO and shut
 * it down. */
struct srv_conn {
    int fd;
    srv_conn_state state;
    double since;      /* SRV_CONN_READING: when the request began; SRV_CONN_IDLE: when idleness
                          did; SRV_CONN_SENDING: when the reaper first saw the reply going */
    double opened;     /* when the connection opened */
    bool served;       /* a request has begun on it (it is no longer fresh) */
    uint64_t rx_mark;  /* SRV_CONN_IDLE: bytes the socket had received when idleness began, or
                          RX_UNREAD until the reaper has looked */
    uint64_t tx_mark;  /* SRV_CONN_SENDING: bytes the client had acknowledged when the reaper
                          first looked (since), or RX_UNREAD until it has */
    uint64_t tx_last;  /* SRV_CONN_SENDING: bytes acknowledged at the reaper's last look */
    double tx_last_at; /* and when that look was */
    size_t reply_len;  /* SRV_CONN_SENDING: the length of the reply going out */
    srv_conn_end cut;  /* why attnd shut it down; SRV_CONN_LIVE while it has not */
    bool head;         /* a request line has come and its headers are not handed over yet */
    bool spare;        /* it holds a spare place: one probe, then closed (set once, at open) */
    pthread_t thread;  /* the libmicrohttpd thread that serves the connection (once head) */
    srv_conn *prev, *next;
};

struct srv_conns {
    double read_timeout;  /* --read-timeout; 0 = none */
    double send_timeout;  /* --send-timeout */
    double min_send_rate; /* --min-send-rate, bytes/s; 0 = none */
    size_t idle_timeout;  /* --idle-timeout, only to log the closes it makes */
    double max_send_time; /* --max-send-time; 0 = none */
    size_t max_live;      /* --max-connections */
    size_t max_spares;    /* spare places: SRV_CONN_SPARE per HTTP thread */
    const srv_log *log;
    pthread_mutex_t mu; /* guards the list and every record in it */
    pthread_cond_t reaper_cv;
    srv_conn *list;
    size_t live;                  /* connections in the list not shut down by attnd, spares aside */
    size_t spares;                /* spare connections in the list not shut down by attnd */
    uint64_t cuts[SRV_CUT_COUNT]; /* shut-downs so far, by why */
    bool reaper_stop, has_reaper;
    pthread_t reaper;
};

#define RX_UNREAD UINT64_MAX
#define RX_SLACK  0.02 /* s: two clock ticks of a kernel at 100 Hz */
/* s: a new connection that has sent no request yet is not evicted for this long (unless it is
 * the oldest spare): a probe's request line comes within milliseconds of its connect */
#define FRESH_S 0.5
/* s: a reply is judged behind the rate (evictable) only once the reaper has seen it this long */
#define BEHIND_MIN_S 0.2

const char *srv_conn_end_name(srv_conn_end end) {
    switch (end) {
    case SRV_CONN_LIVE:
        return NULL;
    case SRV_CONN_READ_LATE:
        return "read_timeout";
    case SRV_CONN_SEND_SLOW:
        return "send_timeout";
    case SRV_CONN_EVICTED:
        return "evicted";
    case SRV_CONN_OVER_LIMIT:
        return "connection_limit";
    }
    return "unknown";
}

/* What TCP_INFO says of socket fd: the bytes it has received so far (0 when unknown), how long
 * ago, in seconds, data last came (-1 when unknown), and the bytes the peer has acknowledged
 * (*acked; RX_UNREAD when unknown). */
static uint64_t socket_rx(int fd, double *last_data_s, uint64_t *acked) {
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    *last_data_s = -1;
    *acked = RX_UNREAD;
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
        return 0;
    *last_data_s = ti.tcpi_last_data_recv * 1e-3;
    *acked = ti.tcpi_bytes_acked;
    return ti.tcpi_bytes_received;
}

/* With cs->mu held: shuts c down for why (once); it no longer counts as live. A reply read too
 * slowly is reset: what the kernel still holds of it is dropped, not trickled out before a FIN,
 * and the client learns at once (libmicrohttpd's close sends the reset). */
static void conn_cut(srv_conns *cs, srv_conn *c, srv_conn_end why) {
    if (c->cut != SRV_CONN_LIVE)
        return;
    srv_cut k = why == SRV_CONN_READ_LATE      ? SRV_CUT_READ_TIMEOUT
                : why == SRV_CONN_SEND_SLOW    ? SRV_CUT_SEND_TIMEOUT
                : why == SRV_CONN_OVER_LIMIT   ? SRV_CUT_SPARE_FULL
                : c->state == SRV_CONN_IDLE    ? SRV_CUT_EVICTED_IDLE
                : c->state == SRV_CONN_READING ? SRV_CUT_EVICTED_READING
                                               : SRV_CUT_EVICTED_SENDING;
    cs->cuts[k]++;
    if (c->fd >= 0 && why == SRV_CONN_SEND_SLOW) {
        struct linger lg = {1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    if (c->fd >= 0)
        shutdown(c->fd, SHUT_RDWR);
    c->cut = why;
    if (c->spare)
        cs->spares--;
    else
        cs->live--;
}

/* The bytes per second the reply on c must be taken at once the grace has passed: the larger of
 * --min-send-rate and its length / --max-send-time (0 when neither applies). */
static double send_rate(const srv_conns *cs, const srv_conn *c) {
    double whole = cs->max_send_time > 0 ? (double)c->reply_len / cs->max_send_time : 0;
    return whole > cs->min_send_rate ? whole : cs->min_send_rate;
}

void srv_conn_set(srv_conns *cs, srv_conn *c, srv_conn_state state) {
    if (!c)
        return;
    pthread_mutex_lock(&cs->mu);
    c->head = false;              /* the headers have been handed over, or the request is done */
    if (state == SRV_CONN_IDLE) { /* its reply has gone: the reaper reads the byte count */
        c->state = SRV_CONN_IDLE;
        c->since = srv_now();
        c->rx_mark = RX_UNREAD;
    } else if (state == SRV_CONN_READING) {
        if (c->state != SRV_CONN_READING)
            c->since = srv_now();
        c->state = SRV_CONN_READING;
        c->served = true;
    } else if (state == SRV_CONN_SENDING) { /* the reaper takes the marks at its first look */
        c->state = SRV_CONN_SENDING;
        c->tx_mark = RX_UNREAD;
        c->reply_len = 0;
    } else {
        c->state = SRV_CONN_ARRIVED;
    }
    pthread_mutex_unlock(&cs->mu);
}

void srv_conn_sending(srv_conns *cs, srv_conn *c, size_t len) {
    if (!c)
        return;
    pthread_mutex_lock(&cs->mu);
    c->head = false;
    c->served = true;
    c->state = SRV_CONN_SENDING;
    c->tx_mark = RX_UNREAD; /* the reaper takes the marks at its first look */
    c->reply_len = len;
    pthread_mutex_unlock(&cs->mu);
}

srv_conn_stats srv_conns_stats(srv_conns *cs) {
    srv_conn_stats st;
    pthread_mutex_lock(&cs->mu);
    st.live = cs->live;
    st.spare = cs->spares;
    memcpy(st.cuts, cs->cuts, sizeof st.cuts);
    pthread_mutex_unlock(&cs->mu);
    return st;
}

bool srv_conn_spare(const srv_conn *c) {
    return c && c->spare;
}

bool srv_conn_late(srv_conns *cs, srv_conn *c) {
    if (!c || cs->read_timeout <= 0)
        return false;
    pthread_mutex_lock(&cs->mu);
    bool late = c->state == SRV_CONN_READING && srv_now() - c->since > cs->read_timeout;
    pthread_mutex_unlock(&cs->mu);
    return late;
}

srv_conn_end srv_conn_cut(srv_conns *cs, srv_conn *c) {
    if (!c)
        return SRV_CONN_LIVE;
    pthread_mutex_lock(&cs->mu);
    srv_conn_end cut = c->cut;
    pthread_mutex_unlock(&cs->mu);
    return cut;
}

/* With cs->mu held: how many bytes the reply on c is behind the send rule's rate, counted from the
 * reaper's first look without the --send-timeout grace, by the reaper's last look; 0 when it is
 * not behind, or has not been seen long enough to tell. */
static double send_deficit(const srv_conns *cs, const srv_conn *c) {
    if (c->state != SRV_CONN_SENDING || c->tx_mark == RX_UNREAD)
        return 0;
    double seen = c->tx_last_at - c->since, rate = send_rate(cs, c);
    if (seen < BEHIND_MIN_S || rate <= 0)
        return 0;
    double want = rate * seen, got = (double)(c->tx_last - c->tx_mark);
    return got < want ? want - got : 0;
}

/* With cs->mu held: the connection to shut down so that c can be served at --max-connections:
 * the live one idle the longest (not a fresh one), else the one whose request has been arriving
 * the longest, else the one sending a reply furthest behind the rate; NULL when none of them
 * can go (every other is fresh, computing, or sending to a client that reads). *what names the
 * victim's state. */
static srv_conn *conn_victim(srv_conns *cs, const srv_conn *c, double now, const char **what) {
    srv_conn *idle = NULL, *reading = NULL, *behind = NULL;
    double worst = 0;
    for (srv_conn *o = cs->list; o; o = o->next) {
        if (o == c || o->cut != SRV_CONN_LIVE || o->spare)
            continue;
        if (o->state == SRV_CONN_IDLE) {
            bool fresh = !o->served && now - o->opened < FRESH_S;
            if (!fresh && (!idle || o->since < idle->since))
                idle = o;
        } else if (o->state == SRV_CONN_READING) {
            if (!reading || o->since < reading->since)
                reading = o;
        } else if (o->state == SRV_CONN_SENDING) {
            double d = send_deficit(cs, o);
            if (d > worst) {
                worst = d;
                behind = o;
            }
        }
    }
    *what = idle ? "idle" : reading ? "reading" : "sending";
    return idle ? idle : reading ? reading : behind;
}

/* With cs->mu held: the oldest spare connection still live, or NULL. */
static srv_conn *oldest_spare(srv_conns *cs) {
    srv_conn *old = NULL;
    for (srv_conn *o = cs->list; o; o = o->next)
        if (o->spare && o->cut == SRV_CONN_LIVE && (!old || o->opened < old->opened))
            old = o;
    return old;
}

srv_conn *srv_conn_open(srv_conns *cs, int fd) {
    srv_conn *c = calloc(1, sizeof *c);
    if (!c) { /* out of memory: every connection must be tracked (see srv_conns_take_head) */
        if (fd >= 0)
            shutdown(fd, SHUT_RDWR);
        return NULL;
    }
    double now = srv_now();
    c->fd = fd;
    c->state = SRV_CONN_IDLE;
    c->since = c->opened = now;
    c->rx_mark = 0; /* any byte received is the first request's */
    const char *victim_state = NULL;
    bool evicted = false, spare_cut = false;
    pthread_mutex_lock(&cs->mu);
    c->next = cs->list;
    if (cs->list)
        cs->list->prev = c;
    cs->list = c;
    if (cs->live < cs->max_live) {
        cs->live++;
    } else {
        srv_conn *v = conn_victim(cs, c, now, &victim_state);
        if (v) { /* its place is this one's */
            conn_cut(cs, v, SRV_CONN_EVICTED);
            evicted = true;
            cs->live++;
        } else { /* a spare place; past them, the oldest spare gives its place */
            c->spare = true;
            cs->spares++;
            if (cs->spares > cs->max_spares) {
                srv_conn *old = oldest_spare(cs);
                if (old && old != c) {
                    conn_cut(cs, old, SRV_CONN_OVER_LIMIT);
                    spare_cut = true;
                }
            }
        }
    }
    pthread_mutex_unlock(&cs->mu);
    if (evicted) {
        srv_kv kv[] = {SRV_STR("state", victim_state), SRV_INT("max_connections", cs->max_live)};
        srv_log_write(cs->log, "warn", "connection_evicted", kv, 2);
    } else if (spare_cut) {
        srv_kv kv[] = {SRV_INT("max_connections", cs->max_live),
                       SRV_INT("spare_places", cs->max_spares)};
        srv_log_write(cs->log, "warn", "connection_refused", kv, 2);
    }
    return c;
}

void srv_conn_close(srv_conns *cs, srv_conn *c) {
    if (!c)
        return;
    pthread_mutex_lock(&cs->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        cs->list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->cut == SRV_CONN_LIVE && c->spare)
        cs->spares--;
    else if (c->cut == SRV_CONN_LIVE)
        cs->live--;
    double idle_s = c->state == SRV_CONN_IDLE ? srv_now() - c->since : 0;
    pthread_mutex_unlock(&cs->mu);
    /* libmicrohttpd closes a connection silent for --idle-timeout; a client that closed
     * its side, or a shutdown, ends idleness sooner. */
    if (cs->idle_timeout > 0 && idle_s >= (double)cs->idle_timeout - 0.05) {
        srv_kv kv[] = {SRV_NUM("idle_s", idle_s), SRV_INT("idle_timeout_s", cs->idle_timeout)};
        srv_log_write(cs->log, "info", "idle_timeout", kv, 2);
    }
    free(c);
}

void srv_conn_request_line(srv_conns *cs, srv_conn *c) {
    if (!c)
        return;
    pthread_mutex_lock(&cs->mu);
    c->head = true;
    c->served = true;
    c->thread = pthread_self();
    if (c->state == SRV_CONN_IDLE) { /* the request has begun, if the reaper has not seen it */
        c->state = SRV_CONN_READING;
        c->since = srv_now();
    }
    pthread_mutex_unlock(&cs->mu);
}

int srv_conns_take_head(srv_conns *cs) {
    srv_conn *found = NULL;
    bool several = false;
    pthread_mutex_lock(&cs->mu);
    for (srv_conn *c = cs->list; c && !several; c = c->next) {
        if (!c->head || c->cut != SRV_CONN_LIVE || !pthread_equal(c->thread, pthread_self()))
            continue;
        several = found != NULL;
        found = c;
    }
    /* Only the one candidate is marked taken: with two, neither mark changes, or the next call
     * would find the other one alone and charge it with a request that is not its own. */
    int fd = -1;
    if (found && !several) {
        found->head = false;
        fd = found->fd;
    }
    pthread_mutex_unlock(&cs->mu);
    return fd < 0 ? -1 : fd;
}

/* The reaper: a few times per timeout, marks idle connections that have received a byte as
 * reading a request (from now), shuts down every connection whose request is late, and every one
 * whose reply is taken slower than the send rule allows; libmicrohttpd then reads the end of the
 * stream (or fails to write) and closes it. */
static void *reaper_main(void *arg) {
    srv_conns *cs = arg;
    double period = 0.25;
    if (cs->read_timeout > 0 && cs->read_timeout / 8 < period)
        period = cs->read_timeout / 8;
    /* the send rule: a look at least every quarter second, and at most 20 a second however short
     * --send-timeout is (each pass holds the lock that every request takes) */
    double send_period = cs->send_timeout / 8 < 0.05 ? 0.05 : cs->send_timeout / 8;
    if ((cs->min_send_rate > 0 || cs->max_send_time > 0) && send_period < period)
        period = send_period;
    period = period < 0.01 ? 0.01 : period;
    pthread_mutex_lock(&cs->mu);
    while (!cs->reaper_stop) {
        double now = srv_now();
        size_t late = 0, slow = 0;
        for (srv_conn *c = cs->list; c; c = c->next) {
            if (c->cut != SRV_CONN_LIVE || c->fd < 0)
                continue;
            if (c->state == SRV_CONN_IDLE && cs->read_timeout > 0) {
                double last_data_s;
                uint64_t acked, rx = socket_rx(c->fd, &last_data_s, &acked);
                /* when data last came, by the clock read right after the kernel counted */
                double last_data = srv_now() - last_data_s;
                bool begun = c->rx_mark == RX_UNREAD
                                 ? last_data_s >= 0 && last_data > c->since + RX_SLACK
                                 : rx > c->rx_mark;
                if (begun) {
                    c->state = SRV_CONN_READING;
                    c->since = now;
                } else if (c->rx_mark == RX_UNREAD && last_data_s >= 0) {
                    c->rx_mark = rx; /* (when TCP_INFO fails, the next look tries again) */
                }
            } else if (c->state == SRV_CONN_READING && cs->read_timeout > 0 &&
                       now - c->since > cs->read_timeout) {
                conn_cut(cs, c, SRV_CONN_READ_LATE);
                late++;
            } else if (c->state == SRV_CONN_SENDING &&
                       (cs->min_send_rate > 0 || cs->max_send_time > 0)) {
                double last_data_s;
                uint64_t acked;
                socket_rx(c->fd, &last_data_s, &acked);
                if (acked == RX_UNREAD) /* TCP_INFO failed: the next look tries again */
                    continue;
                c->tx_last = acked;
                c->tx_last_at = now;
                if (c->tx_mark == RX_UNREAD) {
                    c->tx_mark = acked;
                    c->since = now;
                    continue;
                }
                double over = now - c->since - cs->send_timeout;
                if (over > 0 && (double)(acked - c->tx_mark) < send_rate(cs, c) * over) {
                    conn_cut(cs, c, SRV_CONN_SEND_SLOW);
                    slow++;
                }
            }
        }
        if (late) {
            srv_kv kv[] = {SRV_INT("connections", late),
                           SRV_NUM("read_timeout_s", cs->read_timeout)};
            srv_log_write(cs->log, "warn", "read_timeout", kv, 2);
        }
        if (slow) {
            srv_kv kv[] = {SRV_INT("connections", slow),
                           SRV_NUM("send_timeout_s", cs->send_timeout),
                           SRV_NUM("min_send_rate", cs->min_send_rate)};
            srv_log_write(cs->log, "warn", "send_timeout", kv, 3);
        }
        srv_cond_wait_for(&cs->reaper_cv, &cs->mu, period);
    }
    pthread_mutex_unlock(&cs->mu);
    return NULL;
}

srv_conns *srv_conns_create(const srv_config *cfg, const srv_log *log, srv_error *err) {
    srv_conns *cs = calloc(1, sizeof *cs);
    if (!cs) {
        srv_fail(err, "out of memory starting HTTP");
        return NULL;
    }
    cs->read_timeout = cfg->read_timeout;
    cs->send_timeout = cfg->send_timeout;
    cs->min_send_rate = (double)cfg->min_send_rate;
    cs->idle_timeout = cfg->idle_timeout;
    cs->max_send_time = cfg->max_send_time;
    cs->max_live = cfg->max_connections;
    cs->max_spares = SRV_CONN_SPARE * cfg->http_threads;
    cs->log = log;
    pthread_mutex_init(&cs->mu, NULL);
    srv_cond_init(&cs->reaper_cv);
    if (cs->read_timeout > 0 || cs->min_send_rate > 0 || cs->max_send_time > 0) {
        int rc = pthread_create(&cs->reaper, NULL, reaper_main, cs);
        if (rc != 0) {
            srv_conns_destroy(cs);
            srv_fail(err, "cannot start the connections' reaper thread: %s", strerror(rc));
            return NULL;
        }
        cs->has_reaper = true;
    }
    return cs;
}

void srv_conns_stop(srv_conns *cs) {
    if (!cs || !cs->has_reaper)
        return;
    pthread_mutex_lock(&cs->mu);
    cs->reaper_stop = true;
    pthread_cond_signal(&cs->reaper_cv);
    pthread_mutex_unlock(&cs->mu);
    pthread_join(cs->reaper, NULL);
    cs->has_reaper = false;
}

void srv_conns_destroy(srv_conns *cs) {
    if (!cs)
        return;
    srv_conns_stop(cs);
    pthread_cond_destroy(&cs->reaper_cv);
    pthread_mutex_destroy(&cs->mu);
    free(cs);
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
