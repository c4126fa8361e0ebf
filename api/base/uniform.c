/* uniform.c - the deterministic uniform numbers of api/: a splitmix64 stream turned into float32
 * uniforms. params.init's random weights (models.c) and API v1's seeded input tensors (made by
 * the job when it first runs, job.c) are both this stream, so a client that knows the formula
 * can make either itself. */
#include "base.h"

uint64_t apip_uniform_fill(float *w, size_t n, double a, uint64_t state) {
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (state += APIP_SPLITMIX_GAMMA); /* splitmix64 */
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
        z ^= z >> 31;
        double u = (double)(z >> 40) / 16777216.0; /* [0, 1), 24 bits */
        w[i] = (float)(a * (2.0 * u - 1.0));
    }
    return state;
}
