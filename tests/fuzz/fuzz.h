/* fuzz.h - what the libFuzzer targets of tests/fuzz share: the entry points libFuzzer calls
 * (replay_main.c calls them too, without libFuzzer) and FUZZ_CHECK, which turns a broken
 * property into a crash that the fuzzer records as a finding. */
#ifndef ATTND_FUZZ_H
#define ATTND_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Called once before the first input; may be absent (replay_main.c declares it weak). */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Called once per input; returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The sanitizers' report line, when they are linked in: it reaches libFuzzer's log even when
 * the target's stderr is closed (-close_fd_mask=2). */
void __sanitizer_report_error_summary(const char *summary) __attribute__((weak));

/* Aborts with the file, line and message when cond is false: a property the code under test
 * promises does not hold for this input. */
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            char fuzz_msg_[600];                                                                   \
            int fuzz_at_ = snprintf(fuzz_msg_, sizeof fuzz_msg_,                                   \
                                    "FUZZ_CHECK failed at %s:%d: ", __FILE__, __LINE__);           \
            snprintf(fuzz_msg_ + fuzz_at_, sizeof fuzz_msg_ - (size_t)fuzz_at_, __VA_ARGS__);      \
            fprintf(stderr, "%s\n", fuzz_msg_);                                                    \
            if (__sanitizer_report_error_summary)                                                  \
                __sanitizer_report_error_summary(fuzz_msg_);                                       \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A copy of data[0, size) in a buffer of exactly size bytes (at least 1 allocated), so that a
 * read one byte past the end is an AddressSanitizer report, not a silent read of a NUL. */
static inline char *fuzz_copy(const uint8_t *data, size_t size) {
    char *p = malloc(size ? size : 1);
    FUZZ_CHECK(p != NULL, "out of memory copying %zu bytes", size);
    for (size_t i = 0; i < size; i++)
        p[i] = (char)data[i];
    return p;
}

#endif
