/* replay_main.c - main() for a fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput once
 * on each file named, or on every file in each directory named, so that the inputs kept under
 * tests/fuzz/regressions replay in `make test` with the ordinary compiler (and under valgrind or
 * the sanitizers when built with them).
 *
 * Usage: fuzz_TARGET-replay PATH... Prints one line per directory or file and exits 0 when every
 * input ran; 2 when one cannot be read. A target that breaks on an input crashes this program
 * (FUZZ_CHECK aborts), which fails the test. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Runs the target on the file at path: 0, or -1 when it cannot be read. */
static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) {
        free(buf);
        return -1;
    }
    /* An exact-size copy, as libFuzzer gives it. */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file in dir, in name order; the number run, or -1. */
static long run_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn)
                break;
            names = nn;
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    long ran = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (names[i] && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(path) != 0) {
                fprintf(stderr, "replay: cannot read %s\n", path);
                ran = -1;
                break;
            }
            ran++;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return ran;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            return 2;
        }
        if (S_ISDIR(st.st_mode)) {
            long n = run_dir(argv[i]);
            if (n < 0)
                return 2;
            printf("replay %s: %ld inputs\n", argv[i], n);
        } else {
            if (run_file(argv[i]) != 0) {
                fprintf(stderr, "replay: cannot read %s\n", argv[i]);
                return 2;
            }
            printf("replay %s: 1 input\n", argv[i]);
        }
    }
    return 0;
}
