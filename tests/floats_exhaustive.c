/* floats_exhaustive.c - checks api_float_write on every finite float32 (all 2^32 bit patterns
 * but the infinities and NaNs, both signs, zeros and denormals included): its output reads
 * back as the same float (strtod, then rounded to float, compared bit for bit, so -0 stays
 * -0), is no longer than the reference writer's (tests/float_ref.c, the writer attnd used
 * before), and equals it byte for byte. The same for apip_floats_write, which writes rows (with
 * AVX-512 where the CPU has it): each float is also written in a row of 1024 consecutive ones,
 * which must equal the reference's outputs joined by commas. `make check-floats-exhaustive`;
 * one thread per core.
 *
 * Usage: floats_exhaustive [--threads N] [--from HEX --to HEX] (a range of bit patterns, for a
 * quick look). Exits 1 when any float fails, after printing the first few; 0 with a summary
 * line otherwise. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "codec.h"
#include "float_ref.h"

#define CHUNK ((uint64_t)1 << 22) /* bit patterns a thread takes at a time */

static uint64_t range_from, range_to; /* [from, to) */
static atomic_uint_fast64_t next_chunk;
static atomic_uint_fast64_t checked, failed;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void report(uint32_t u, const char *what, const char *got, const char *ref) {
    if (atomic_fetch_add(&failed, 1) >= 20)
        return;
    pthread_mutex_lock(&print_lock);
    fprintf(stderr, "FAIL 0x%08x: %s (api_float_write \"%s\", reference \"%s\")\n", (unsigned)u,
            what, got, ref);
    pthread_mutex_unlock(&print_lock);
}

#define ROW 1024 /* floats per apip_floats_write call */

static void *work(void *arg) {
    (void)arg;
    char got[64], ref[64];
    static _Thread_local float row[ROW];
    static _Thread_local char out[ROW * 17 + 64];
    for (;;) {
        uint64_t start = range_from + atomic_fetch_add(&next_chunk, 1) * CHUNK;
        if (start >= range_to)
            return NULL;
        uint64_t end = start + CHUNK < range_to ? start + CHUNK : range_to, n = 0;
        for (uint64_t b = start; b < end;) {
            size_t k = 0;
            for (; b < end && k < ROW; b++) {
                uint32_t u = (uint32_t)b;
                if ((u & 0x7F800000u) != 0x7F800000u) /* not infinities and NaNs */
                    memcpy(&row[k++], &u, sizeof u);
            }
            char *e = apip_floats_write(out, row, k), *at = out;
            *e = '\0';
            for (size_t i = 0; i < k; i++) {
                float f = row[i];
                uint32_t u;
                memcpy(&u, &f, sizeof u);
                size_t gn = api_float_write(got, f), rn = ref_float_write(ref, f);
                got[gn] = '\0';
                ref[rn] = '\0';
                float back = (float)strtod(got, NULL);
                if (memcmp(&back, &f, sizeof f) != 0)
                    report(u, "does not read back", got, ref);
                else if (gn > rn)
                    report(u, "is longer than the reference", got, ref);
                else if (gn != rn || memcmp(got, ref, gn) != 0)
                    report(u, "differs from the reference", got, ref);
                else if (memcmp(at, ref, rn) != 0 || at[rn] != (i + 1 < k ? ',' : '\0'))
                    report(u, "differs from the reference in a row (apip_floats_write)", got, ref);
                at += rn + 1;
            }
            n += k;
        }
        atomic_fetch_add(&checked, n);
    }
}

int main(int argc, char **argv) {
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    range_from = 0;
    range_to = (uint64_t)1 << 32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--from") && i + 1 < argc) {
            range_from = strtoull(argv[++i], NULL, 16);
        } else if (!strcmp(argv[i], "--to") && i + 1 < argc) {
            range_to = strtoull(argv[++i], NULL, 16);
        } else {
            fprintf(stderr, "usage: floats_exhaustive [--threads N] [--from HEX --to HEX]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 256 || range_from >= range_to || range_to > (uint64_t)1 << 32) {
        fprintf(stderr, "floats_exhaustive: bad --threads or range\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t th[256];
    long started = 0;
    for (; started < threads; started++)
        if (pthread_create(&th[started], NULL, work, NULL) != 0)
            break;
    if (started == 0)
        work(NULL);
    for (long i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    unsigned long long n = (unsigned long long)atomic_load(&checked),
                       bad = (unsigned long long)atomic_load(&failed);
    printf("floats_exhaustive: %llu finite floats in [0x%08llx, 0x%08llx] checked in %.0f s on "
           "%ld threads: %llu failed\n",
           n, (unsigned long long)range_from, (unsigned long long)(range_to - 1), s,
           started ? started : 1, bad);
    return bad ? 1 : 0;
}
