/* startup.c - the start itself. Files in --models that are not regular files (a FIFO, one whose
 * writer holds it open and writes nothing, a directory, a socket, symlinks to /dev/null and to a
 * FIFO) are refused at once: exit status 2 and one line naming the file and what it is, where a
 * FIFO used to hold the start forever; a symlink to a regular file still loads. And SIGTERM or
 * SIGINT while a long start runs (40,000 models to load, about 2 s here) ends attnd within a
 * second, with a stopped_during_start line and exit status 128 + the signal, where it used to
 * finish the start, then drain and exit 0. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness.h"
#include "reliability.h"

#define MANY_MODELS 40000 /* symlinks to one tiny model: about 2 s of loading on 2 cores */

/* A model file of E = 1, H = 1 (in_proj_weight (3, 1), out_proj.weight (1, 1)) at path. */
static bool write_tiny(const char *path) {
    static const char head[] = "{\"__metadata__\":{\"num_heads\":\"1\"},"
                               "\"in_proj_weight\":{\"dtype\":\"F32\",\"shape\":[3,1],"
                               "\"data_offsets\":[0,12]},"
                               "\"out_proj.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],"
                               "\"data_offsets\":[12,16]}}";
    uint64_t hlen = sizeof head - 1;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)(hlen >> (8 * i));
    const float w[4] = {1, 0, 0, 1}; /* little-endian on every machine attnd runs on */
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(head, 1, hlen, f) == hlen &&
              fwrite(w, sizeof w[0], 4, f) == 4;
    return fclose(f) == 0 && ok;
}

/* A fresh directory work/startup/name (what an earlier run left in it removed, one level deep)
 * into dir. */
static void fresh_dir(const char *name, char *dir, size_t cap) {
    snprintf(dir, cap, "%s/startup/%s", cfg.work, name);
    mkdir(dir, 0755);
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        char path[900];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && unlink(path) != 0)
            rmdir(path);
    }
    if (d)
        closedir(d);
}

/* Polls d's log until it holds needle; false after secs (times the scale). */
static bool wait_log(const attnd *d, const char *needle, double secs) {
    double t0 = now();
    do {
        char *log = slurp(d->log);
        bool found = strstr(log, needle) != NULL;
        free(log);
        if (found)
            return true;
        sleep_s(0.005);
    } while (now() - t0 < secs * cfg.scale);
    return false;
}

/* The lines of text that start with prefix. */
static int count_prefixed(const char *text, const char *prefix) {
    int n = 0;
    size_t k = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        n += strncmp(p, prefix, k) == 0;
    return n;
}

/* attnd --models dir must exit 2 within 5 s, with one error line saying "DIR/FILE is KIND, not a
 * regular file". */
static void expect_refused(const char *what, const char *dir, const char *file, const char *kind) {
    const char *args[] = {"--models", dir, NULL};
    attnd d;
    attnd_launch(&d, "startup-odd", args, NULL);
    double t0 = now();
    int st = attnd_wait(&d, 5.0);
    double secs = now() - t0;
    char *log = slurp(d.log);
    char want[900];
    snprintf(want, sizeof want, "%s/%s is %s, not a regular file", dir, file, kind);
    CHECK(st != -1, "%s: attnd did not exit within 5 s (killed): %.300s", what, log);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2,
          "%s: exit status %d, expected 2 (wait status %d)", what,
          st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, st);
    CHECK(strstr(log, want) && count_prefixed(log, "attnd: error: ") == 1,
          "%s: expected one line \"attnd: error: %s\", got: %.600s", what, want, log);
    CHECK(st == -1 || secs < 2.0 * cfg.scale, "%s: the refusal took %.2f s", what, secs);
    free(log);
}

/* Files that are not regular files, each alone in a --models directory. */
static void test_odd_model_files(void) {
    char dir[700], path[800], tiny[800];
    snprintf(dir, sizeof dir, "%s/startup", cfg.work);
    mkdir(dir, 0755);
    snprintf(tiny, sizeof tiny, "%s/startup/tiny.safetensors", cfg.work);
    if (!CHECK(write_tiny(tiny), "cannot write %s", tiny))
        return;

    /* A FIFO nobody writes to: opening it to read used to block the start forever. */
    fresh_dir("fifo", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    if (CHECK(mkfifo(path, 0644) == 0, "mkfifo %s: %s", path, strerror(errno)))
        expect_refused("a FIFO", dir, "m.safetensors", "a FIFO");

    /* A FIFO whose writer (this process) holds it open and writes nothing. */
    fresh_dir("fifo-writer", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    if (CHECK(mkfifo(path, 0644) == 0, "mkfifo %s: %s", path, strerror(errno))) {
        int w = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC); /* a reader and a writer, at once */
        if (CHECK(w >= 0, "open %s: %s", path, strerror(errno))) {
            expect_refused("a FIFO held open by a writer", dir, "w.safetensors", "a FIFO");
            close(w);
        }
    }

    /* A symlink to that FIFO. */
    fresh_dir("fifo-link", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/l.safetensors", dir);
    if (CHECK(symlink("../fifo/m.safetensors", path) == 0, "symlink %s", path))
        expect_refused("a symlink to a FIFO", dir, "l.safetensors", "a symlink to a FIFO");

    /* A directory named x.safetensors. */
    fresh_dir("dir", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    if (CHECK(mkdir(path, 0755) == 0, "mkdir %s: %s", path, strerror(errno)))
        expect_refused("a directory", dir, "x.safetensors", "a directory");

    /* A Unix socket, bound and listening. */
    fresh_dir("socket", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/s.safetensors", dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (CHECK(strlen(path) < sizeof sa.sun_path, "socket path too long: %s", path) &&
        CHECK(s >= 0, "socket: %s", strerror(errno))) {
        memcpy(sa.sun_path, path, strlen(path) + 1);
        if (CHECK(bind(s, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(s, 1) == 0,
                  "bind %s: %s", path, strerror(errno)))
            expect_refused("a socket", dir, "s.safetensors", "a socket");
    }
    if (s >= 0)
        close(s);

    /* A symlink to /dev/null: a device, empty when read. */
    fresh_dir("devnull", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/n.safetensors", dir);
    if (CHECK(symlink("/dev/null", path) == 0, "symlink %s", path))
        expect_refused("a symlink to /dev/null", dir, "n.safetensors",
                       "a symlink to a character device");

    /* A symlink to a regular file is a model like any other. */
    fresh_dir("link", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/linked.safetensors", dir);
    if (CHECK(symlink("../tiny.safetensors", path) == 0, "symlink %s", path)) {
        const char *args[] = {"--models", dir, NULL};
        attnd d;
        if (attnd_start(&d, "startup-link", args, NULL)) {
            reply r;
            CHECK(get(d.port, "/v1/models/linked", &r) && r.status == 200,
                  "a symlink to a model file: GET /v1/models/linked %ld %.200s", r.status, r.body);
            reply_free(&r);
            CHECK(attnd_stop(&d, SIGTERM) == 0, "a symlink to a model file: exit status");
        }
    }
}

/* Sends sig to an attnd loading MANY_MODELS models, delay s after its log holds after; it must
 * end within 1 s with status 128 + sig, its stopped_during_start line (expect), and no ready
 * line. */
static void stop_during_start(const char *many, int sig, const char *after, double delay, bool json,
                              const char *expect) {
    const char *name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    const char *args[] = {"--models", many, "--log-format", json ? "json" : "text", NULL};
    const char *ready = json ? "\"msg\":\"ready\"" : " info ready";
    attnd d;
    attnd_launch(&d, sig == SIGTERM ? "startup-sigterm" : "startup-sigint", args, NULL);
    if (!CHECK(wait_log(&d, after, 20), "%s: no %s line within 20 s", name, after)) {
        attnd_wait(&d, 0);
        return;
    }
    sleep_s(delay);
    char *log = slurp(d.log);
    CHECK(!strstr(log, ready),
          "%s: the start was over %.1f s after %s; MANY_MODELS is too few to stop it midway", name,
          delay, after);
    free(log);
    kill(d.pid, sig);
    double t0 = now();
    int st = attnd_wait(&d, 5.0);
    double secs = now() - t0;
    log = slurp(d.log);
    CHECK(st != -1 && secs <= 1.0 * cfg.scale,
          "%s during the start: attnd took %.2f s to exit (%s), expected at most 1 s", name, secs,
          st == -1 ? "killed after 5 s" : "exited");
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 128 + sig,
          "%s during the start: exit status %d (wait status %d), expected %d", name,
          st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, st, 128 + sig);
    CHECK(strstr(log, expect) != NULL, "%s during the start: no line with %s in the log: %.400s",
          name, expect, log);
    CHECK(!strstr(log, ready), "%s during the start: attnd got ready before it ended", name);
    free(log);
}

/* A long start, stopped by each signal. */
static void test_stop_during_start(void) {
    char dir[700], many[800], path[900];
    snprintf(dir, sizeof dir, "%s/startup", cfg.work);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/tiny.safetensors", dir);
    if (!CHECK(write_tiny(path), "cannot write %s", path))
        return;
    /* Kept from run to run (symlinks only, created when missing). */
    snprintf(many, sizeof many, "%s/many", dir);
    mkdir(many, 0755);
    for (int i = 0; i < MANY_MODELS; i++) {
        snprintf(path, sizeof path, "%s/m%05d.safetensors", many, i);
        if (symlink("../tiny.safetensors", path) != 0 && errno != EEXIST) {
            CHECK(false, "symlink %s: %s", path, strerror(errno));
            return;
        }
    }
    /* SIGTERM while the models load. */
    stop_during_start(many, SIGTERM, " info listening ", 0.05, false,
                      "warn stopped_during_start signal=SIGTERM exit_status=143");
    /* SIGINT as soon as the handlers are set, in the JSON log. */
    stop_during_start(many, SIGINT, "\"msg\":\"starting\"", 0, true,
                      "\"level\":\"warn\",\"msg\":\"stopped_during_start\",\"signal\":\"SIGINT\","
                      "\"exit_status\":130");
}

void test_startup(void) {
    test_odd_model_files();
    test_stop_during_start();
}
