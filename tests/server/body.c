/* body.c - server/body.c called directly: a body of unknown length (chunked, or coded) grows by
 * copying itself into a larger block and holds both for a moment, so SECURITY.md's memory bound
 * counts 1.5 x --max-body-bytes per connection. That holds because a block that may grow again
 * holds at most half the cap; the blocks are read through the job memory cache's count of the
 * bytes in use, as attnd's bodies take them. */
#include <string.h>

#include "server.h"
#include "server_test.h"

void test_body_blocks(void) {
    api_error e = {0};
    api_mem *mem = api_mem_create((size_t)64 << 20, 0, &e);
    /* Not a power of two: doubling from 64 KiB would pass half the cap at 512 KiB. */
    const size_t max = (size_t)768 << 10;
    srv_body *b =
        mem ? srv_body_create(SRV_CODING_IDENTITY, max, (size_t)64 << 10, 0, mem, NULL) : NULL;
    if (!CHECK(b != NULL, "a body of the job memory cache: %s", e.message)) {
        api_mem_destroy(mem);
        return;
    }
    char piece[4096];
    memset(piece, ' ', sizeof piece);
    size_t sent = 0, worst = 0;
    for (; sent + sizeof piece <= max; sent += sizeof piece) {
        srv_body_append(b, piece, sizeof piece);
        size_t held = api_mem_stats_get(mem).in_use_bytes; /* the body's one block */
        if (held < max && held > worst)
            worst = held;
    }
    /* A growing block: half the cap, rounded up by the cache's size classes (an eighth more)
     * and to a page. */
    size_t bound = max / 2 + max / 16 + 4096;
    CHECK(worst <= bound,
          "a body that may still grow held a block of %zu bytes, over half its cap of %zu (%zu "
          "with rounding): its old and new blocks together could pass 1.5 x the cap",
          worst, max, bound);
    size_t len = 0;
    CHECK(srv_body_finish(b) == SRV_BODY_OK && srv_body_data(b, &len) && len == sent,
          "the body grew to its %zu bytes whole (%zu)", sent, len);
    srv_body_destroy(b);
    api_mem_destroy(mem);
}
