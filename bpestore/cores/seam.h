/* The seam walk of bpestore.encoder.rank_rule._seam_problem in plain C (its docstring
 * says why it is exact): which merge's token does not encode to itself under the
 * rank rule. A merge's sides are codes: a merge's rank, or -1 - b for the byte b. */
#ifndef BPESTORE_SEAM_H
#define BPESTORE_SEAM_H

#include <stdint.h>
#include <stdlib.h>

#include "hash.h"

#define SEAM_NOT_BELOW (-2)   /* a merge's code is not a rank below its own */
#define SEAM_NO_MEMORY (-3)

/* The rank of the pair of codes (x, y) (the last merge with it, as a dict built in rank order
 * keeps), or -1; the table: open addressing, keys + 1 (0: empty). */
static inline int64_t seam_rank(const uint64_t *keys, const int64_t *ranks, uint64_t mask, int64_t x, int64_t y) {
    uint64_t key = (((uint64_t)(x + 256) << 32) | (uint64_t)(y + 256)) + 1;
    for (uint64_t i = mix_pair_key(key) & mask;; i = (i + 1) & mask) {
        if (keys[i] == key) return ranks[i];
        if (keys[i] == 0) return -1;
    }
}

/* Fill the pair -> rank table of merges lefts/rights[0:n]; 0 or SEAM_NOT_BELOW. */
static int seam_table(const int64_t *lefts, const int64_t *rights, int64_t n, uint64_t *keys, int64_t *ranks,
                      uint64_t mask) {
    for (int64_t k = 0; k < n; k++) {
        if (lefts[k] >= k || rights[k] >= k) return SEAM_NOT_BELOW;  /* (W): a merge joins tokens made before it */
        uint64_t key = (((uint64_t)(lefts[k] + 256) << 32) | (uint64_t)(rights[k] + 256)) + 1;
        uint64_t i = mix_pair_key(key) & mask;
        while (keys[i] != 0 && keys[i] != key) i = (i + 1) & mask;
        keys[i] = key;
        ranks[i] = k;
    }
    return 0;
}

/* The first merge from `checked` on whose token does not encode to itself, or -1; or
 * SEAM_NOT_BELOW, SEAM_NO_MEMORY. Codes must lie in [-256, n). */
static int64_t seam_problem_of(const int64_t *lefts, const int64_t *rights, int64_t n, int64_t checked) {
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n) cap *= 2;
    uint64_t *keys = calloc(cap, sizeof(uint64_t));
    int64_t *ranks = malloc(cap * sizeof(int64_t));
    int64_t failed = -1;
    if (keys == NULL || ranks == NULL) {
        failed = SEAM_NO_MEMORY;
    } else if (seam_table(lefts, rights, n, keys, ranks, cap - 1) < 0) {
        failed = SEAM_NOT_BELOW;
    } else {
        uint64_t mask = cap - 1;
        for (int64_t k = checked < 0 ? 0 : checked; k < n && failed < 0; k++) {
            int64_t x = lefts[k], y = rights[k], limit = k, c = seam_rank(keys, ranks, mask, x, y);
            /* undo the later of the two merges standing at the seam until both sides are bytes */
            while (!(c >= 0 && c < limit) && (x >= 0 || y >= 0)) {
                if (x > y) {
                    limit = x;
                    x = rights[x];
                } else {
                    limit = y + 1;
                    y = lefts[y];
                }
                c = seam_rank(keys, ranks, mask, x, y);
            }
            if (c >= 0 && c < limit) failed = k;
        }
    }
    free(keys);
    free(ranks);
    return failed;
}

#endif
