/* The sides of merges given as ids, as the seam walk's codes (bpestore.encoder.rank_rule._id_codes;
 * its pure-Python steps are the reference): each id looked up in a table of every ordinary id's
 * code (a merge's rank, or -1 - b for the byte b; ID_CODE_NONE: no ordinary token has that id),
 * and each code must lie below its own merge's rank. */
#ifndef BPESTORE_ID_CODES_H
#define BPESTORE_ID_CODES_H

#include <stdint.h>

#define ID_CODE_NONE INT64_MIN

/* 0, with out[k] the code of ids[k] for every k < n; -1 where an id lies outside the table,
 * has no code, or has a code not below k. */
static int id_side_codes(const int64_t *ids, int64_t n, const int64_t *code, int64_t size, int64_t *out) {
    for (int64_t k = 0; k < n; k++) {
        int64_t id = ids[k];
        if (id < 0 || id >= size) return -1;
        int64_t c = code[id];
        if (c == ID_CODE_NONE || c >= k) return -1;
        out[k] = c;
    }
    return 0;
}

#endif
