/* mem.c - the job memory cache: large blocks (jobs' arenas, batch workspaces, response bodies,
 * request bodies) kept after use and handed to the next job that fits, so that their pages are
 * not mapped, faulted in and zeroed again by the kernel on every request; a block left unused
 * for idle_s seconds is unmapped by the cache's trimmer thread, so an idle process returns to
 * its size at rest.
 *
 * Why: above glibc's mmap threshold every allocation is a new mapping, and the kernel faults in
 * and zeroes each of its pages on first touch. A W3 job (N 4, L 512, E 768) touches a 32 MiB
 * arena and 8 MiB bodies each way: through the API path it computed in 153 ms against the core
 * benchmark's 71 ms, and parsed in 23 ms against 3.7 ms, until its memory was reused
 * (bench/RESULTS.md).
 *
 * A block is one mapping (mmap) with a 64-byte header before the caller's pointer: the header
 * names the cache and the capacity, so api_mem_free needs only the pointer. Blocks under
 * MEM_MIN_CACHED bytes come from aligned_alloc instead (glibc keeps small chunks itself), with
 * the same header. A request reuses the smallest free block whose capacity is at least the
 * request and at most a quarter more (and at most what the caller allows); a new block is
 * rounded up to 8 sizes per power of two, so that a slightly larger job reuses it. The cache
 * keeps a freed block only while the bytes in use and cached stay within max_bytes: a new block
 * that would pass it first unmaps the oldest cached ones, so the cache never adds memory beyond
 * a bound that the blocks in use respect anyway.
 *
 * Under AddressSanitizer blocks come from aligned_alloc (so that ASan tracks and leak-checks
 * them) and cached ones are poisoned; under valgrind (when its headers are installed) each
 * handed-out block is announced to memcheck as a heap block, so that leaks and stale reads of
 * reused memory are seen as with malloc. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

#if defined(__SANITIZE_ADDRESS__)
#define MEM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEM_ASAN 1
#endif
#endif
#ifdef MEM_ASAN
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define POISON(p, n)   __asan_poison_memory_region((p), (n))
#define UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define MEM_VALGRIND 1
#endif
#endif
#ifndef MEM_VALGRIND
#define VALGRIND_MALLOCLIKE_BLOCK(p, n, rz, zeroed) ((void)(p), (void)(n))
#define VALGRIND_FREELIKE_BLOCK(p, rz)              ((void)(p))
#endif

#define HDR            64                  /* header bytes before the caller's pointer */
#define MEM_MIN_CACHED ((size_t)128 << 10) /* smaller blocks come from aligned_alloc */
/* Most free blocks kept. A flood holds about three blocks per connection (body, arena, reply)
 * and frees them in bursts (a batch at a time): with 32 kept, a W2-small flood over 64
 * connections mapped a third of its blocks anew, and batching ran 0.8x as fast as no batching;
 * with 256, 0.4% were new and batching ran 1.3x (bench/RESULTS.md, "The job memory cache's
 * free list, and batching"). The bytes kept are bounded by max_bytes, not by this. */
#define MAX_FREE   256
#define MAGIC_HEAP 0x6174746e64686561ULL /* "attndhea": from aligned_alloc, not cached */
#define MAGIC_MAP  0x6174746e646d6170ULL /* "attndmap": a mapping, cached when freed */

/* The header of a block, at its start; the caller's pointer is HDR bytes in. */
typedef struct blk {
    uint64_t magic;
    api_mem *mem;     /* the cache a MAGIC_MAP block returns to, or whose budget a charged
                         MAGIC_HEAP block is counted in */
    size_t cap;       /* usable bytes from the caller's pointer on */
    size_t charged;   /* bytes counted in mem's budget (api_mem_alloc_bounded), else 0 */
    size_t mapped;    /* bytes of the mapping, header included */
    double freed_at;  /* monotonic seconds, while cached */
    struct blk *next; /* in the cache's free list, most recently freed first */
} blk;

_Static_assert(sizeof(blk) <= HDR, "the block header fits in HDR bytes");

struct api_mem {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* for the trimmer: a block was cached, or stop */
    size_t max_bytes;  /* in use + cached, above which cached blocks are unmapped */
    double idle_s;     /* a cached block unused this long is unmapped; <= 0: never */
    blk *free_list;
    size_t nfree;
    api_mem_stats st;
    size_t budget;      /* most bytes of bounded blocks in use at once; SIZE_MAX = none */
    size_t charged;     /* bytes of bounded blocks in use, of every size */
    size_t heap_blocks; /* charged blocks from aligned_alloc in use (they name the cache too) */
    uint64_t refused;   /* bounded requests refused for the budget */
    api_mem_reclaim_fn reclaim; /* asked to give memory back before a refusal (or NULL) */
    void *reclaim_ctx;
    bool closing;    /* api_mem_destroy was called: blocks are unmapped as they come back */
    bool stop;       /* the trimmer ends */
    bool has_thread; /* the trimmer runs */
    pthread_t thread;
};

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static blk *hdr_of(const void *p) {
    return (blk *)(void *)((char *)(uintptr_t)p - HDR);
}

/* n rounded up to 8 steps per power of two (at most an eighth more); n itself on overflow. */
static size_t size_class(size_t n) {
    if (n < 16)
        return n;
    int top = 63 - __builtin_clzll((unsigned long long)n);
    size_t unit = (size_t)1 << (top - 3), r = 0;
    if (!apip_add(n, unit - 1, &r))
        return n;
    return r / unit * unit;
}

/* A mapping of bytes (a multiple of the page size), or NULL. */
static void *map_bytes(size_t bytes) {
#ifdef MEM_ASAN
    return aligned_alloc(4096, bytes);
#else
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
#endif
}

static void unmap_block(blk *b) {
#ifdef MEM_ASAN
    UNPOISON((char *)b + HDR, b->cap);
    free(b);
#else
    munmap(b, b->mapped);
#endif
}

/* Unmaps a list of blocks (linked by next). */
static void unmap_list(blk *b) {
    while (b) {
        blk *next = b->next;
        unmap_block(b);
        b = next;
    }
}

/* The block handed out, all its capacity usable (for the sanitizers: as new memory); *cap set. */
static void *hand_out(blk *b, size_t *cap) {
    char *p = (char *)b + HDR;
    UNPOISON(p, b->cap);
    VALGRIND_MALLOCLIKE_BLOCK(p, b->cap, 0, 0);
    if (cap)
        *cap = b->cap;
    return p;
}

/* With the lock held: unlinks the oldest cached blocks until in use + cached fit max_bytes,
 * and returns them (to unmap without the lock). */
static blk *evict_locked(api_mem *m) {
    blk *out = NULL;
    while (m->free_list && m->st.in_use_bytes + m->st.cached_bytes > m->max_bytes) {
        blk **pp = &m->free_list;
        while ((*pp)->next) /* the oldest is last */
            pp = &(*pp)->next;
        blk *b = *pp;
        *pp = NULL;
        m->nfree--;
        m->st.cached_bytes -= b->cap;
        m->st.cached_blocks--;
        m->st.evicted++;
        b->next = out;
        out = b;
    }
    return out;
}

/* With the lock held: unlinks the cached blocks freed at least idle_s before now. */
static blk *expired_locked(api_mem *m, double now, double idle_s) {
    blk *out = NULL;
    for (blk **pp = &m->free_list; *pp;) {
        blk *b = *pp;
        if (now - b->freed_at >= idle_s) {
            *pp = b->next;
            m->nfree--;
            m->st.cached_bytes -= b->cap;
            m->st.cached_blocks--;
            m->st.trimmed++;
            b->next = out;
            out = b;
        } else {
            pp = &b->next;
        }
    }
    return out;
}

static void mem_free_struct(api_mem *m) {
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* The trimmer: sleeps while nothing is cached; else until the oldest cached block has been idle
 * for idle_s, and unmaps every block that has. */
static void *trimmer_main(void *arg) {
    api_mem *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        if (!m->free_list) {
            pthread_cond_wait(&m->cv, &m->mu);
            continue;
        }
        double now = mono_now();
        blk *gone = expired_locked(m, now, m->idle_s);
        if (gone) {
            pthread_mutex_unlock(&m->mu);
            unmap_list(gone);
            pthread_mutex_lock(&m->mu);
            continue;
        }
        double oldest = now;
        for (blk *b = m->free_list; b; b = b->next)
            oldest = b->freed_at < oldest ? b->freed_at : oldest;
        double at = oldest + m->idle_s + 0.01, left = at - now;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long ns = ts.tv_nsec + (long long)(left * 1e9);
        ts.tv_sec += (time_t)(ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&m->cv, &m->mu, &ts);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

api_mem *api_mem_create(size_t max_bytes, double idle_s, api_error *err) {
    api_mem *m = calloc(1, sizeof *m);
    if (!m) {
        api_fail(err, 500, "out_of_memory", NULL, "out of memory creating the job memory cache");
        return NULL;
    }
    m->max_bytes = max_bytes;
    m->idle_s = idle_s;
    m->budget = SIZE_MAX;
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (idle_s > 0) {
        int rc = pthread_create(&m->thread, NULL, trimmer_main, m);
        if (rc != 0) {
            api_fail(err, 500, "internal", NULL,
                     "cannot start the job memory cache's trimmer thread: %s", strerror(rc));
            mem_free_struct(m);
            return NULL;
        }
        m->has_thread = true;
    }
    return m;
}

void api_mem_destroy(api_mem *m) {
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    m->closing = true;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (m->has_thread)
        pthread_join(m->thread, NULL);
    pthread_mutex_lock(&m->mu);
    blk *gone = m->free_list;
    m->free_list = NULL;
    m->nfree = 0;
    m->st.cached_bytes = 0;
    m->st.cached_blocks = 0;
    bool last = m->st.in_use_blocks == 0 && m->heap_blocks == 0;
    pthread_mutex_unlock(&m->mu);
    unmap_list(gone);
    if (last)
        mem_free_struct(m);
}

void api_mem_set_budget(api_mem *m, size_t budget) {
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->budget = budget;
    pthread_mutex_unlock(&m->mu);
}

/* With the lock held: counts n bytes of a bounded block in the budget; false (nothing counted)
 * when they do not fit. */
static bool charge_locked(api_mem *m, size_t n) {
    if (m->charged > m->budget || n > m->budget - m->charged)
        return false;
    m->charged += n;
    return true;
}

/* A block from aligned_alloc, not cached: for small sizes, and when there is no cache. */
static void *heap_block(size_t bytes, size_t *cap) {
    size_t total = 0;
    if (!apip_add(bytes, HDR + 63, &total))
        return NULL;
    blk *b = aligned_alloc(64, total / 64 * 64);
    if (!b)
        return NULL;
    *b = (blk){.magic = MAGIC_HEAP, .cap = bytes};
    if (cap)
        *cap = bytes;
    return (char *)b + HDR;
}

/* api_mem_alloc and api_mem_alloc_bounded: a bounded block is counted in the budget (a reused
 * or new mapping at its capacity, a small block at its size) and refused (*over set) when it
 * does not fit. */
static void *mem_alloc(api_mem *m, size_t bytes, size_t most, size_t *cap, bool bounded,
                       bool *over) {
    if (over)
        *over = false;
    if (bytes == 0)
        bytes = 1;
    if (most < bytes)
        most = bytes;
    if (!m)
        return heap_block(bytes, cap);
    if (bytes < MEM_MIN_CACHED) {
        if (bounded) {
            pthread_mutex_lock(&m->mu);
            bool fits = charge_locked(m, bytes);
            if (fits)
                m->heap_blocks++;
            pthread_mutex_unlock(&m->mu);
            if (!fits) {
                if (over)
                    *over = true;
                return NULL;
            }
        }
        void *p = heap_block(bytes, cap);
        if (bounded && p) {
            blk *b = hdr_of(p);
            b->mem = m;
            b->charged = bytes;
        } else if (bounded) { /* give the charge back */
            pthread_mutex_lock(&m->mu);
            m->charged -= bytes;
            m->heap_blocks--;
            bool last = m->closing && m->st.in_use_blocks == 0 && m->heap_blocks == 0;
            pthread_mutex_unlock(&m->mu);
            if (last)
                mem_free_struct(m);
        }
        return p;
    }
    /* Reuse: the smallest cached block of at least bytes and at most a quarter more. */
    size_t reuse_max = 0;
    if (!apip_add(bytes, bytes / 4, &reuse_max) || reuse_max > most)
        reuse_max = most;
    pthread_mutex_lock(&m->mu);
    blk **best = NULL;
    for (blk **pp = &m->free_list; *pp; pp = &(*pp)->next)
        if ((*pp)->cap >= bytes && (*pp)->cap <= reuse_max && (!best || (*pp)->cap < (*best)->cap))
            best = pp;
    if (best && bounded && !charge_locked(m, (*best)->cap)) {
        pthread_mutex_unlock(&m->mu);
        if (over)
            *over = true;
        return NULL;
    }
    if (best) {
        blk *b = *best;
        *best = b->next;
        b->next = NULL;
        b->charged = bounded ? b->cap : 0;
        m->nfree--;
        m->st.cached_bytes -= b->cap;
        m->st.cached_blocks--;
        m->st.in_use_bytes += b->cap;
        m->st.in_use_blocks++;
        m->st.hits++;
        pthread_mutex_unlock(&m->mu);
        return hand_out(b, cap);
    }
    /* A new block, rounded up to its size class within what the caller allows. */
    size_t want = size_class(bytes), page = (size_t)sysconf(_SC_PAGESIZE), mapped = 0;
    if (want > most)
        want = most;
    if (!apip_add(want, HDR + page - 1, &mapped)) {
        pthread_mutex_unlock(&m->mu);
        return NULL;
    }
    if (bounded && !charge_locked(m, want)) {
        pthread_mutex_unlock(&m->mu);
        if (over)
            *over = true;
        return NULL;
    }
    mapped = mapped / page * page;
    m->st.in_use_bytes += want;
    m->st.in_use_blocks++;
    m->st.misses++;
    blk *gone = evict_locked(m);
    pthread_mutex_unlock(&m->mu);
    unmap_list(gone);
    blk *b = map_bytes(mapped);
    if (!b) {
        pthread_mutex_lock(&m->mu);
        m->st.in_use_bytes -= want;
        m->st.in_use_blocks--;
        if (bounded)
            m->charged -= want;
        bool last = m->closing && m->st.in_use_blocks == 0 && m->heap_blocks == 0;
        pthread_mutex_unlock(&m->mu);
        if (last)
            mem_free_struct(m);
        return NULL;
    }
    *b = (blk){
        .magic = MAGIC_MAP, .mem = m, .cap = want, .mapped = mapped, .charged = bounded ? want : 0};
    return hand_out(b, cap);
}

void *api_mem_alloc(api_mem *m, size_t bytes, size_t most, size_t *cap) {
    return mem_alloc(m, bytes, most, cap, false, NULL);
}

void api_mem_set_reclaim(api_mem *m, api_mem_reclaim_fn fn, void *ctx) {
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->reclaim = fn;
    m->reclaim_ctx = ctx;
    pthread_mutex_unlock(&m->mu);
}

/* A bounded block that did not fit: what would make room (the bytes of a new block of its size
 * class, less the room left), and the reclaimer is asked for it, without the lock; then the
 * block is asked for once more. Only a final refusal is counted. */
void *api_mem_alloc_bounded(api_mem *m, size_t bytes, size_t most, size_t *cap, bool *over_budget) {
    bool over = false;
    void *p = mem_alloc(m, bytes, most, cap, true, &over);
    if (p || !over || !m) {
        if (over_budget)
            *over_budget = over;
        return p;
    }
    pthread_mutex_lock(&m->mu);
    api_mem_reclaim_fn fn = m->reclaim;
    void *ctx = m->reclaim_ctx;
    size_t want = bytes < MEM_MIN_CACHED ? bytes : size_class(bytes),
           lim = most < bytes ? bytes : most;
    want = want > lim ? lim : want;
    size_t room = m->budget > m->charged ? m->budget - m->charged : 0;
    pthread_mutex_unlock(&m->mu);
    if (fn && want > room && fn(ctx, want - room) > 0)
        p = mem_alloc(m, bytes, most, cap, true, &over);
    if (!p && over) {
        pthread_mutex_lock(&m->mu);
        m->refused++;
        pthread_mutex_unlock(&m->mu);
    }
    if (over_budget)
        *over_budget = !p && over;
    return p;
}

void api_mem_free(void *block) {
    if (!block)
        return;
    blk *b = hdr_of(block);
    if (b->magic == MAGIC_HEAP) {
        api_mem *hm = b->charged ? b->mem : NULL;
        size_t n = b->charged;
        free(b);
        if (hm) {
            pthread_mutex_lock(&hm->mu);
            hm->charged -= n;
            hm->heap_blocks--;
            bool last = hm->closing && hm->st.in_use_blocks == 0 && hm->heap_blocks == 0;
            pthread_mutex_unlock(&hm->mu);
            if (last)
                mem_free_struct(hm);
        }
        return;
    }
    api_mem *m = b->mem;
    VALGRIND_FREELIKE_BLOCK(block, 0);
    POISON(block, b->cap);
    pthread_mutex_lock(&m->mu);
    m->st.in_use_bytes -= b->cap;
    m->st.in_use_blocks--;
    m->charged -= b->charged;
    b->charged = 0;
    bool keep = !m->closing && m->nfree < MAX_FREE &&
                m->st.in_use_bytes + m->st.cached_bytes + b->cap <= m->max_bytes;
    if (keep) {
        b->freed_at = mono_now();
        b->next = m->free_list;
        m->free_list = b;
        m->nfree++;
        m->st.cached_bytes += b->cap;
        m->st.cached_blocks++;
        if (m->nfree == 1)
            pthread_cond_signal(&m->cv); /* the trimmer sleeps while nothing is cached */
    }
    bool last = m->closing && m->st.in_use_blocks == 0 && m->heap_blocks == 0;
    pthread_mutex_unlock(&m->mu);
    if (!keep)
        unmap_block(b);
    if (last)
        mem_free_struct(m);
}

size_t apip_mem_capacity(const void *block) {
    return block ? hdr_of(block)->cap : 0;
}

api_mem *apip_mem_owner(const void *block) {
    if (!block)
        return NULL;
    const blk *b = hdr_of(block);
    return b->magic == MAGIC_MAP ? b->mem : NULL;
}

size_t api_mem_trim(api_mem *m, double idle_s) {
    if (!m)
        return 0;
    pthread_mutex_lock(&m->mu);
    size_t before = m->st.cached_bytes;
    blk *gone = expired_locked(m, mono_now(), idle_s);
    size_t freed = before - m->st.cached_bytes;
    pthread_mutex_unlock(&m->mu);
    unmap_list(gone);
    return freed;
}

api_mem_stats api_mem_stats_get(api_mem *m) {
    api_mem_stats s = {0};
    if (!m)
        return s;
    pthread_mutex_lock(&m->mu);
    s = m->st;
    s.budget_bytes = m->budget;
    s.charged_bytes = m->charged;
    s.refused = m->refused;
    pthread_mutex_unlock(&m->mu);
    return s;
}
