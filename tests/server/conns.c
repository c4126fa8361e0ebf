/* conns.c - server/conn.c called directly: which connection a refusal that libmicrohttpd makes
 * itself is charged to (srv_conns_take_head). Two connections on this thread between their
 * request line and the end of their head cannot be told apart, and a call that finds both must
 * leave both as they were: once it marked the first taken, and the next call found the second
 * alone and charged it with the other's bad Content-Length (issue 33, finding 5). */
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"
#include "server_test.h"

void test_conns_take_head(void) {
    srv_config sc = {0}; /* no read timeout, no send rule: no reaper thread moves the marks */
    sc.max_connections = 16;
    srv_error err = {0};
    srv_conns *cs = srv_conns_create(&sc, NULL, &err);
    int a[2], b[2];
    if (!CHECK(cs != NULL, "srv_conns_create: %s", err.msg) ||
        !CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, a) == 0 &&
                   socketpair(AF_UNIX, SOCK_STREAM, 0, b) == 0,
               "socketpair")) {
        srv_conns_destroy(cs);
        return;
    }
    srv_conn *ca = srv_conn_open(cs, a[0]), *cb = srv_conn_open(cs, b[0]);
    CHECK(srv_conns_take_head(cs) == -1, "no request line yet: no connection to charge");
    srv_conn_request_line(cs, ca);
    srv_conn_request_line(cs, cb);
    for (int k = 0; k < 3; k++) { /* each call finds both, however often it is asked */
        int got = srv_conns_take_head(cs);
        CHECK(got == -1,
              "call %d with two heads on this thread: -1 (cannot tell them apart), got %d", k + 1,
              got);
    }
    srv_conn_set(cs, ca, SRV_CONN_READING); /* a's headers handed over: b is alone */
    int fd = srv_conns_take_head(cs);
    CHECK(fd == b[0], "b alone: its socket %d, got %d", b[0], fd);
    CHECK(srv_conns_take_head(cs) == -1, "b, once taken, is not charged again");
    srv_conn_request_line(cs, ca); /* a's next request */
    fd = srv_conns_take_head(cs);
    CHECK(fd == a[0], "a's next request line alone: its socket %d, got %d", a[0], fd);
    srv_conn_close(cs, ca);
    srv_conn_close(cs, cb);
    srv_conns_destroy(cs);
    for (int i = 0; i < 2; i++) {
        close(a[i]);
        close(b[i]);
    }
}
