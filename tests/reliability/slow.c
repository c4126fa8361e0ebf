/* slow.c - slow clients: headers and bodies trickled (slowloris) beside a good client, idle
 * connections (--idle-timeout), requests stalled soon after a reply, and a drain on SIGTERM that
 * waits for a late reader. */
#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness.h"
#include "reliability.h"

#define SLOWLORIS 200 /* connections trickling headers */

void test_slow(void) {
    attnd d;
    const char *args[] = {
        "--threads", "1", "--pool-threads", "0", "--idle-timeout", "1", "--read-timeout",
        "2",         NULL};
    if (!attnd_start(&d, "slow", args, NULL))
        return;
    /* One idle connection, and SLOWLORIS connections sending a header byte every 100 ms. */
    int idle = tcp_connect(d.port);
    int fds[SLOWLORIS];
    size_t at[SLOWLORIS] = {0};
    bool cut[SLOWLORIS] = {false};
    double cut_at[SLOWLORIS] = {0};
    static const char head[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
                               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    int opened = 0;
    for (int i = 0; i < SLOWLORIS; i++) {
        fds[i] = tcp_connect(d.port);
        opened += fds[i] >= 0;
    }
    CHECK(opened == SLOWLORIS, "only %d of %d slow connections opened", opened, SLOWLORIS);
    /* Meanwhile a good client sends 100 jobs on one kept-alive connection. */
    CURL *c = curl_easy_init();
    double t0 = now(), worst = 0, next_trickle = t0, idle_closed = -1;
    int good = 0, sent = 0;
    while (now() - t0 < 3.5 * cfg.scale) {
        if (now() >= next_trickle) {
            for (int i = 0; i < SLOWLORIS; i++) {
                if (fds[i] < 0 || cut[i])
                    continue;
                /* A reset or EOF from the server means it closed the connection. */
                char b;
                ssize_t rr = recv(fds[i], &b, 1, MSG_DONTWAIT);
                bool gone = rr == 0 || (rr < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
                if (!gone && at[i] < sizeof head - 1)
                    gone = send(fds[i], head + at[i], 1, MSG_NOSIGNAL) != 1;
                if (gone) {
                    cut[i] = true;
                    cut_at[i] = now() - t0;
                } else {
                    at[i]++;
                }
            }
            next_trickle += 0.1;
        }
        if (idle_closed < 0 && idle >= 0) {
            char b;
            ssize_t rr = recv(idle, &b, 1, MSG_DONTWAIT);
            if (rr == 0 || (rr < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
                idle_closed = now() - t0;
        }
        if (sent < 100) {
            reply r;
            post(c, d.port, "/v1/sdpa", SDPA_SMALL, 0, &r);
            sent++;
            good += r.status == 200;
            if (r.secs > worst)
                worst = r.secs;
            reply_free(&r);
        } else {
            sleep_s(0.01);
        }
    }
    curl_easy_cleanup(c);
    CHECK(good == 100, "%d of 100 jobs answered 200 during the slowloris", good);
    CHECK(worst < 0.25 * cfg.scale, "the slowest job took %.3f s during the slowloris", worst);
    CHECK(idle_closed > 0.5 && idle_closed < 1.8 * cfg.scale,
          "the idle connection was closed after %.2f s (--idle-timeout 1)", idle_closed);
    int ncut = 0;
    double first = 1e9, last = 0;
    for (int i = 0; i < SLOWLORIS; i++) {
        if (cut[i]) {
            ncut++;
            first = cut_at[i] < first ? cut_at[i] : first;
            last = cut_at[i] > last ? cut_at[i] : last;
        }
        if (fds[i] >= 0)
            close(fds[i]);
    }
    CHECK(ncut == SLOWLORIS && first > 1.9 && last < 3.0 * cfg.scale,
          "%d of %d trickling connections closed by --read-timeout 2, between %.2f and %.2f s",
          ncut, SLOWLORIS, ncut ? first : 0, last);
    if (idle >= 0)
        close(idle);

    /* A body trickled past the read timeout: the connection is closed (libmicrohttpd cannot
     * answer before the body ends), and the log says why. */
    {
        int fd = tcp_connect(d.port);
        str q = {0};
        post_head(&q, "/v1/sdpa", strlen(SDPA_SMALL));
        send_all(fd, q.p, q.n);
        double t1 = now(), closed_at = -1;
        for (size_t i = 0; i < strlen(SDPA_SMALL) && now() - t1 < 6 * cfg.scale; i++) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, 150) > 0 || !send_all(fd, SDPA_SMALL + i, 1)) {
                closed_at = now() - t1;
                break;
            }
        }
        CHECK(closed_at > 1.9 && closed_at < 3.0 * cfg.scale,
              "a body trickled past --read-timeout 2: closed after %.2f s", closed_at);
        close(fd);
        free(q.p);
    }
    CHECK(healthy(&d), "the daemon after slow clients");
    char *log = slurp(d.log);
    CHECK(strstr(log, "read_timeout connections=") != NULL, "the log tells the cut connections");
    CHECK(count_lines_with(log, "path=/v1/sdpa", "end=read_timeout") == 1,
          "the access line of the trickled body should say end=read_timeout");
    free(log);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "slow daemon: exit status after SIGTERM");
}

/* Seconds from t0 until the server closes fd (EOF or reset), waiting at most secs; -1 if it
 * stays open. Sends one byte of text (may be NULL) every 100 ms meanwhile, from its start. */
static double closed_after(int fd, double t0, double secs, const char *text) {
    size_t at = 0;
    double next = now();
    while (now() - t0 < secs) {
        char b;
        ssize_t rr = recv(fd, &b, 1, MSG_DONTWAIT);
        if (rr == 0 || (rr < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return now() - t0;
        if (text && text[at] && now() >= next) {
            if (send(fd, text + at, 1, MSG_NOSIGNAL) != 1)
                return now() - t0;
            at++;
            next += 0.1;
        }
        sleep_s(0.01);
    }
    return -1;
}

/* Between requests a connection is idle: --idle-timeout closes it, not --read-timeout, which
 * times a request from its first byte. */
void test_idle(void) {
    attnd d;
    const char *args[] = {
        "--threads", "1", "--pool-threads", "0", "--idle-timeout", "3", "--read-timeout",
        "1",         NULL};
    if (!attnd_start(&d, "idle", args, NULL))
        return;
    static const char get[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    /* A kept-alive connection after a reply, and one that never sends a byte. */
    int kept = tcp_connect(d.port), fresh = tcp_connect(d.port);
    send_all(kept, get, sizeof get - 1);
    char buf[512];
    struct pollfd p = {kept, POLLIN, 0};
    poll(&p, 1, (int)(5000 * cfg.scale));
    CHECK(recv(kept, buf, sizeof buf, 0) > 0 && !strncmp(buf, "HTTP/1.1 200", 12),
          "the kept-alive connection's first reply");
    double t0 = now();
    double kept_at = closed_after(kept, t0, 6 * cfg.scale, NULL);
    double fresh_at = closed_after(fresh, t0, 6 * cfg.scale, NULL);
    CHECK(kept_at > 2.5 && kept_at < 4.5 * cfg.scale,
          "an idle kept-alive connection closed after %.2f s (--idle-timeout 3, --read-timeout "
          "1)",
          kept_at);
    CHECK(fresh_at > 2.5 && fresh_at < 4.5 * cfg.scale,
          "a connection that sent nothing closed after %.2f s (--idle-timeout 3, --read-timeout "
          "1)",
          fresh_at);
    close(kept);
    close(fresh);

    /* A request begun after 1.5 s of idleness and trickled: cut 1 s after its first byte. */
    int fd = tcp_connect(d.port);
    send_all(fd, get, sizeof get - 1);
    poll(&(struct pollfd){fd, POLLIN, 0}, 1, (int)(5000 * cfg.scale));
    CHECK(recv(fd, buf, sizeof buf, 0) > 0, "the second connection's first reply");
    sleep_s(1.5);
    double cut = closed_after(fd, now(), 6 * cfg.scale,
                              "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaa"
                              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n");
    CHECK(cut > 0.9 && cut < 2.0 * cfg.scale,
          "a request trickled after 1.5 s of idleness was cut %.2f s after its first byte "
          "(--read-timeout 1)",
          cut);
    close(fd);
    CHECK(healthy(&d), "the daemon after idle connections");
    CHECK(attnd_stop(&d, SIGTERM) == 0, "idle daemon: exit status after SIGTERM");
    char *log = slurp(d.log);
    CHECK(count_lines_with(log, "info idle_timeout ", NULL) >= 2,
          "the log should say idle_timeout for the two idle connections");
    CHECK(count_lines_with(log, "read_timeout connections=1", NULL) == 1,
          "the log should say read_timeout only for the trickled request");
    free(log);
}

/* Requests begun soon after a reply on a kept-alive connection, then stalled: the read timeout
 * cuts them, as it cuts one begun later. The byte count at which idleness began is read by the
 * reaper (every 0.25 s here), so on most connections it looks only after the next request's
 * first bytes have come, and must still tell them from the last request's. First, part of a
 * request line sent 120 ms after the reply (seen by the byte count: fails with a reaper that
 * takes its first count as the baseline); then a whole request line and part of the headers
 * sent at once (seen by the request line, within the 20 ms the byte count cannot tell). */
static void stalled_after_reply(int port, const char *part, double gap, const char *what) {
    static const char get[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    enum { CONNS = 10 };
    int fd[CONNS];
    double first[CONNS], closed[CONNS];
    for (int i = 0; i < CONNS; i++) {
        fd[i] = tcp_connect(port);
        send_all(fd[i], get, sizeof get - 1);
        char buf[512];
        poll(&(struct pollfd){fd[i], POLLIN, 0}, 1, (int)(5000 * cfg.scale));
        CHECK(recv(fd[i], buf, sizeof buf, 0) > 0 && !strncmp(buf, "HTTP/1.1 200", 12),
              "%s, connection %d: the first reply", what, i);
        if (gap > 0)
            sleep_s(gap);
        first[i] = now();
        send_all(fd[i], part, strlen(part));
        closed[i] = -1;
    }
    for (int open = CONNS; open > 0 && now() - first[0] < 12 * cfg.scale;) {
        for (int i = 0; i < CONNS; i++) {
            char b;
            ssize_t r = closed[i] < 0 ? recv(fd[i], &b, 1, MSG_DONTWAIT) : 1;
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                closed[i] = now() - first[i];
                open--;
            }
        }
        sleep_s(0.01);
    }
    for (int i = 0; i < CONNS; i++) {
        CHECK(closed[i] > 1.9 && closed[i] < 3.0 * cfg.scale,
              "%s, connection %d: closed %.2f s after its first byte (--read-timeout 2, "
              "--idle-timeout 6)",
              what, i, closed[i]);
        close(fd[i]);
    }
}

void test_begun_after_reply(void) {
    attnd d;
    const char *args[] = {
        "--threads", "1", "--pool-threads", "0", "--idle-timeout", "6", "--read-timeout",
        "2",         NULL};
    if (!attnd_start(&d, "after_reply", args, NULL))
        return;
    stalled_after_reply(d.port, "GET /healthz HTT", 0.12,
                        "part of a request line 120 ms after a reply, stalled");
    stalled_after_reply(d.port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Stalled: 1", 0,
                        "a request line at once after a reply, its headers stalled");
    CHECK(healthy(&d), "the daemon after requests stalled after a reply");
    CHECK(attnd_stop(&d, SIGTERM) == 0, "after_reply daemon: exit status after SIGTERM");
}

/* SIGTERM while a large reply is still on its way to a client that reads it late: the drain
 * waits for the reply within --drain-timeout (not a fixed grace of a few seconds), the client
 * gets it whole, and attnd exits 0. */
void test_drain_reader(void) {
    attnd d;
    const char *args[] = {"--threads", "1", "--pool-threads", "0", "--drain-timeout", "30", NULL};
    if (!attnd_start(&d, "drain-reader", args, NULL))
        return;
    char *big = weights_body(700); /* a reply of about 6.4 MB */
    size_t big_len = strlen(big);
    int fd = tcp_connect(d.port);
    /* A small receive buffer, so that most of the reply waits on attnd's side of the socket. */
    int rcv = 32 << 10;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
    str q = {0}, got = {0};
    post_head(&q, "/v1/sdpa", big_len);
    str_add(&q, big, big_len);
    CHECK(fd >= 0 && send_all(fd, q.p, q.n), "drain-reader: the request was not sent");
    struct pollfd p = {fd, POLLIN, 0};
    CHECK(poll(&p, 1, (int)(20000 * cfg.scale)) == 1, "drain-reader: no reply began");
    kill(d.pid, SIGTERM);
    sleep_s(7.0); /* longer than the 5 s attnd gave replies after its workers went idle */
    CHECK(read_to_end(fd, 30 * cfg.scale, &got), "drain-reader: the reply did not end");
    const char *cl = got.p ? strstr(got.p, "Content-Length: ") : NULL;
    const char *body = got.p ? strstr(got.p, "\r\n\r\n") : NULL;
    size_t want = cl ? strtoull(cl + 16, NULL, 10) : 0;
    size_t have = body ? got.n - (size_t)(body + 4 - got.p) : 0;
    CHECK(want > 6000000 && have == want,
          "drain-reader: %zu of the reply's %zu body bytes arrived after the drain", have, want);
    /* It exits by itself once the reply is out (a second SIGTERM would cut the drain short). */
    int st = -1;
    for (double t0 = now(); now() - t0 < 10 * cfg.scale; sleep_s(0.01)) {
        int ws;
        if (waitpid(d.pid, &ws, WNOHANG) == d.pid) {
            d.pid = 0;
            st = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            break;
        }
    }
    if (d.pid > 0)
        attnd_stop(&d, SIGTERM);
    CHECK(st == 0, "drain-reader: exit status %d after a drain that sent every reply", st);
    close(fd);
    free(q.p), free(got.p), free(big);
}
