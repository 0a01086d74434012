/* The encode core's tables checked and completed once the table of tokens is built: which
   tokens a word of their bytes encodes to (merge rule), the short tokens' tables (token
   ranks), and whether symbols are plain bytes. Plain C. */
#ifndef BPESTORE_TABLES_CHECK_H
#define BPESTORE_TABLES_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "encode_word.h"

/* Mark the tokens that a word of their bytes does not encode to (merge rule, where
   the caller could not vouch for every token); 0 or -1 (out of memory). */
static int
check_whole(Tables *e)
{
    Work w;
    memset(&w, 0, sizeof w);
    int rc = 0;
    e->whole_lookup = 0;  /* while checking, merge every token's bytes */
    for (size_t j = 0; j <= e->token_mask && rc == 0; j++) {
        TokenSlot *t = &e->tokens[j];
        if (t->len < 2)
            continue;
        w.n_out = 0;
        if (encode_word(e, &w, token_bytes_of(e, t), t->len) < 0)
            rc = -1;
        else
            t->whole = w.n_out == 1 && w.out[0] == t->id;
    }
    e->whole_lookup = 1;
    work_free(&w);
    return rc;
}

/* Token ranks: the pairs of bytes (the first look-ups of every word) in a table of
   65,536, and the tokens of 2..SHORT_TOKEN_LEN bytes in a table of their own, from the
   table of tokens (so the same id where bytes repeat); 0 or -1 (out of memory). */
static int
build_short_tokens(Tables *e)
{
    size_t count = 0;
    for (size_t j = 0; j <= e->token_mask; j++) {
        const TokenSlot *t = &e->tokens[j];
        if (t->len >= 2 && t->len <= SHORT_TOKEN_LEN) {
            if ((uint64_t)t->id >> (64 - SHORT_ID_SHIFT))
                return 0;  /* an id too large for a slot: spans take the table of tokens */
            count++;
        }
    }
    size_t capacity = capacity_for(count);
    e->byte_pairs = malloc(65536 * sizeof(uint64_t));
    e->short_tokens = calloc(capacity, sizeof(uint64_t));
    if (e->byte_pairs == NULL || e->short_tokens == NULL) {
        return -1;
    }
    e->table_bytes += 65536 * sizeof(uint64_t) + capacity * sizeof(uint64_t);
    e->short_shift = 64 - __builtin_ctzll(capacity);
    for (size_t j = 0; j <= e->token_mask; j++) {
        const TokenSlot *t = &e->tokens[j];
        if (t->len < 2 || t->len > SHORT_TOKEN_LEN)
            continue;
        uint64_t key = short_key(token_bytes_of(e, t), t->len);
        size_t k = short_slot(e, key);
        while (e->short_tokens[k])
            k = (k + 1) & (capacity - 1);
        e->short_tokens[k] = key | (uint64_t)t->id << SHORT_ID_SHIFT;
    }
    for (size_t ab = 0; ab < 65536; ab++) {
        uint8_t pair[2] = {(uint8_t)(ab >> 8), (uint8_t)ab};
        uint32_t id = short_find(e, short_key(pair, 2));
        e->byte_pairs[ab] = id == NO_ID ? NO_PAIR : ((uint64_t)id << 32) | id;
    }
    return 0;
}

/* Plain byte symbols: no character alphabet, no word markers. */
static int
plain_bytes(const Tables *e)
{
    return !e->chars && e->prefix == NO_ID && e->suffix == NO_ID;
}

#endif
