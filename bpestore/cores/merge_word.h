/* A word's symbols merged: the merge rule (lowest merge rank) or the token-rank rule
   (lowest rank of the joined bytes), by arrays, blocks of pairs or a heap. */
#ifndef BPESTORE_MERGE_WORD_H
#define BPESTORE_MERGE_WORD_H

#include "encode_work.h"

/* -- merging ---------------------------------------------------------------------------- */

/* Whether a token's bytes may hash to h (0: surely not, from the bit filter alone). */
static inline int
token_may_be(const Tables *e, uint64_t h)
{
    uint64_t bit = h >> e->token_shift;
    return (int)(e->token_bits[bit >> 6] >> (bit & 63) & 1);
}

/* MODE_RANKS in two steps, so that the memory of several look-ups is fetched at once:
   the hash of bytes [start, end) (0, unused, where no token is that long; the key of a
   short span), its filter word and table slot fetched; then the pair of that span as
   pair_of gives it. */
static inline uint64_t
span_hash(const Tables *e, const uint8_t *bytes, size_t start, size_t end)
{
    size_t n = end - start;
    if (n <= SHORT_TOKEN_LEN && e->short_tokens != NULL) {
        uint64_t key = short_key(bytes + start, n);
        PREFETCH(&e->short_tokens[short_slot(e, key)]);
        return key;
    }
    if (n > e->max_token_len)
        return 0;
    uint64_t h = hash_bytes(bytes + start, n);
    PREFETCH(&e->token_bits[(h >> e->token_shift) >> 6]);
    PREFETCH(&e->tokens[(size_t)h & e->token_mask]);
    return h;
}

static inline uint64_t
span_pair(const Tables *e, const uint8_t *bytes, size_t start, size_t end, uint64_t h)
{
    if (end - start <= SHORT_TOKEN_LEN && e->short_tokens != NULL) {
        uint32_t id = short_find(e, h);
        return id == NO_ID ? NO_PAIR : ((uint64_t)id << 32) | id;
    }
    if (end - start > e->max_token_len || !token_may_be(e, h))
        return NO_PAIR;
    const TokenSlot *t = token_find(e, bytes + start, end - start, h);
    return t == NULL ? NO_PAIR : ((uint64_t)t->id << 32) | t->id;
}

/* The pair of symbols a and b (spanning bytes [start, end) of the word, MODE_RANKS):
   (rank << 32) | the token it makes, or NO_PAIR. */
static inline uint64_t
pair_of(const Tables *e, Work *w, const uint8_t *bytes, uint32_t a, uint32_t b, size_t start, size_t end)
{
    if (e->mode == MODE_MERGE)
        return pair_find(e, a, b);
    return span_pair(e, bytes, start, end, span_hash(e, bytes, start, end));
}

/* Merge symbols[0..n), n <= SHORT_SYMBOLS (positions[0..n]: where each starts in bytes,
   MODE_RANKS) with arrays in place: a bit for each symbol still standing (no moves when one
   is merged into the one before it), the pair of each standing symbol and the next at its
   position. Fine for short words. Returns the number of symbols left, in s. */
static size_t
merge_short(const Tables *e, Work *w, const uint8_t *bytes, uint32_t *s, uint32_t *pos, size_t n)
{
    uint64_t pr[SHORT_SYMBOLS];  /* the pair at each position: (rank << 32) | made, or NO_PAIR */
    if (n < 2)
        return n;
    pr[n - 1] = NO_PAIR;
    if (e->byte_pairs != NULL) {  /* the symbols are the bytes: their pairs are in a table of 65,536 */
        for (size_t i = 0; i + 1 < n; i++)
            pr[i] = e->byte_pairs[((size_t)bytes[i] << 8) | bytes[i + 1]];
    } else if (e->mode == MODE_MERGE) {  /* start every first look-up at once: their cache misses overlap */
        for (size_t i = 0; i + 1 < n; i++)
            prefetch_pair(e, s[i], s[i + 1]);
        for (size_t i = 0; i + 1 < n; i++)
            pr[i] = pair_find(e, s[i], s[i + 1]);
    } else {
        for (size_t i = 0; i + 1 < n; i++)
            pr[i] = span_hash(e, bytes, pos[i], pos[i + 2]);
        for (size_t i = 0; i + 1 < n; i++)
            pr[i] = span_pair(e, bytes, pos[i], pos[i + 2], pr[i]);
    }
    uint32_t live = (uint32_t)((1ULL << n) - 1);  /* bit i: symbol i stands */
    /* the first standing symbol after i, or n (pos[n]: the word's end) */
#define AFTER(i) (live >> (i) >> 1 ? (size_t)__builtin_ctz(live >> (i) >> 1) + (i) + 1 : n)
    while (live & (live - 1)) {
        uint64_t best = NO_PAIR;
        size_t at = 0;
        for (size_t i = 0; i + 1 < n; i++) {  /* without branches: which pair wins is no pattern */
            int lower = pr[i] < best;
            best = lower ? pr[i] : best;
            at = lower ? i : at;
        }
        if (best == NO_PAIR)
            break;
        size_t j = AFTER(at);  /* merged into at */
        s[at] = (uint32_t)best;
        live &= ~(1u << j);
        pr[j] = NO_PAIR;
        size_t k = AFTER(at);  /* the symbol after the merged one, or n */
        uint32_t before = live & ((1u << at) - 1);
        size_t h = before ? 31 - (size_t)__builtin_clz(before) : n;  /* the one before, or n */
        if (e->mode == MODE_MERGE) {  /* both look-ups fetched at once: their cache misses overlap */
            uint64_t left = h < n ? ((uint64_t)s[h] << 32) | s[at] : 0;
            uint64_t right = ((uint64_t)s[at] << 32) | (k < n ? s[k] : 0);
            uint64_t hl = mix64(left), hr = mix64(right);
            PREFETCH(&e->pairs[(size_t)hl & e->pair_mask]);
            PREFETCH(&e->pairs[(size_t)hr & e->pair_mask]);
            if (h < n)
                pr[h] = pair_find_hashed(e, left, hl);
            pr[at] = k < n ? pair_find_hashed(e, right, hr) : NO_PAIR;
            continue;
        }
        size_t end_k = k < n ? pos[AFTER(k)] : 0;
        uint64_t hl = h < n ? span_hash(e, bytes, pos[h], pos[k]) : 0;
        uint64_t hr = k < n ? span_hash(e, bytes, pos[at], end_k) : 0;
        if (h < n)
            pr[h] = span_pair(e, bytes, pos[h], pos[k], hl);
        pr[at] = k < n ? span_pair(e, bytes, pos[at], end_k, hr) : NO_PAIR;
    }
#undef AFTER
    size_t m = 0;
    for (; live; live &= live - 1)
        s[m++] = s[__builtin_ctz(live)];
    return m;
}

/* The lowest pair value of block b (positions 8b..8b+7) of cur[0..n). */
#define MIN2(a, b) ((a) < (b) ? (a) : (b))
static inline uint64_t
block_min(const uint64_t *cur, size_t b)
{
    const uint64_t *c = cur + (b << 3);
    return MIN2(MIN2(MIN2(c[0], c[1]), MIN2(c[2], c[3])), MIN2(MIN2(c[4], c[5]), MIN2(c[6], c[7])));
}

/* A pair value (rank << 32 | made) as merge_mid keeps it: the made id apart, the
   position i in its place, so that the lowest value says where (leftmost among equal
   ranks); NO_PAIR (none) becomes a value above every pair. */
#define NO_RANK 0xFFFFFFFF00000000ULL
static inline uint64_t
at_position(uint64_t pair, uint32_t *made, size_t i)
{
    made[i] = (uint32_t)pair;
    return (pair & NO_RANK) | i;
}

/* Merge a word of up to MID_SYMBOLS symbols: each position's pair value (at_position,
   NO_PAIR where dead) in cur, a lower bound of every block of 8 in bmin (the block's
   lowest, or below where a value of the block rose since), a linked list of the symbols
   left. A merge takes the lowest bound: where that is a value still in cur it is the
   lowest pair (every other is above its block's bound), else its block is looked at
   again. Then it looks up the two pairs it changes: no heap. Returns the symbols left,
   in s. */
static size_t
merge_mid(const Tables *e, Work *w, const uint8_t *bytes, size_t n_bytes, uint32_t *s, const uint32_t *pos,
          size_t n)
{
    size_t nb = (n + 7) >> 3, nbmin = nb <= 8 ? 8 : nb <= 16 ? 16 : nb;
    if (grow(w, (void **)&w->heap, &w->heap_cap, 0, 8 * nb + nbmin + 4 * nb, sizeof(uint64_t)) < 0)
        return 0;
    uint64_t *cur = w->heap, *bmin = w->heap + 8 * nb;  /* cur: whole blocks, NO_PAIR past n */
    uint32_t *made = (uint32_t *)(bmin + nbmin);
    uint32_t *next = w->next, *prev = w->prev;
    for (size_t i = 0; i < n; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = (uint32_t)(i - 1);  /* NO_ID for the first */
    }
#define END_OF(j) (next[j] < n ? pos[next[j]] : n_bytes)
    if (e->byte_pairs != NULL)
        for (size_t i = 0; i + 1 < n; i++)
            cur[i] = at_position(e->byte_pairs[((size_t)bytes[i] << 8) | bytes[i + 1]], made, i);
    else if (e->mode == MODE_MERGE)
        for (size_t i = 0; i + 1 < n; i++)
            cur[i] = at_position(pair_find(e, s[i], s[i + 1]), made, i);
    else {  /* every first look-up's slot fetched before any is read */
        for (size_t i = 0; i + 1 < n; i++)
            cur[i] = span_hash(e, bytes, pos[i], pos[i + 2]);
        for (size_t i = 0; i + 1 < n; i++)
            cur[i] = at_position(span_pair(e, bytes, pos[i], pos[i + 2], cur[i]), made, i);
    }
    for (size_t i = n - 1; i < 8 * nb; i++)
        cur[i] = NO_PAIR;
    for (size_t b = 0; b < nb; b++)
        bmin[b] = block_min(cur, b);
    for (size_t b = nb; b < nbmin; b++)
        bmin[b] = NO_PAIR;
    for (;;) {
        uint64_t best;
        if (nbmin == 8)  /* a fixed tree of minima: no branch to mispredict */
            best = block_min(bmin, 0);
        else if (nbmin == 16)
            best = MIN2(block_min(bmin, 0), block_min(bmin, 1));
        else {
            best = NO_PAIR;
            for (size_t b = 0; b < nb; b++)
                best = MIN2(best, bmin[b]);
        }
        if (best == NO_PAIR)
            break;
        size_t i = (uint32_t)best;
        if (cur[i] != best) {  /* a bound below its block's values */
            bmin[i >> 3] = block_min(cur, i >> 3);
            continue;
        }
        if (best >= NO_RANK)
            break;
        uint32_t j = next[i], k = next[j], h = prev[i];
        s[i] = made[i];
        s[j] = NO_ID;
        cur[j] = NO_PAIR;
        next[i] = k;
        if (k < n)
            prev[k] = (uint32_t)i;
        uint64_t right, left;
        if (e->mode == MODE_MERGE) {  /* both look-ups fetched at once: their cache misses overlap */
            uint64_t rkey = ((uint64_t)s[i] << 32) | (k < n ? s[k] : 0);
            uint64_t lkey = h != NO_ID ? ((uint64_t)s[h] << 32) | s[i] : 0;
            uint64_t hr = mix64(rkey), hl = mix64(lkey);
            PREFETCH(&e->pairs[(size_t)hr & e->pair_mask]);
            PREFETCH(&e->pairs[(size_t)hl & e->pair_mask]);
            right = k < n ? pair_find_hashed(e, rkey, hr) : NO_PAIR;
            left = h != NO_ID ? pair_find_hashed(e, lkey, hl) : NO_PAIR;
        } else {
            uint64_t hr = k < n ? span_hash(e, bytes, pos[i], END_OF(k)) : 0;
            uint64_t hl = h != NO_ID ? span_hash(e, bytes, pos[h], END_OF(i)) : 0;
            right = k < n ? span_pair(e, bytes, pos[i], END_OF(k), hr) : NO_PAIR;
            left = h != NO_ID ? span_pair(e, bytes, pos[h], END_OF(i), hl) : NO_PAIR;
        }
        cur[i] = k < n ? at_position(right, made, i) : NO_PAIR;
        bmin[i >> 3] = block_min(cur, i >> 3);  /* its lowest was cur[i]: surely stale */
        if (h != NO_ID) {  /* a bound stays one where the value falls; where it rises (and at j), a
                              stale bound is found when it comes out lowest */
            cur[h] = at_position(left, made, h);
            bmin[h >> 3] = MIN2(bmin[h >> 3], cur[h]);
        }
    }
#undef END_OF
    size_t m = 0;
    for (size_t i = 0; i < n; i = next[i])
        s[m++] = s[i];
    return m;
}

static int
heap_push(Work *w, uint64_t v)
{
    if (w->heap_len == w->heap_cap && grow(w, (void **)&w->heap, &w->heap_cap, w->heap_len, 1, sizeof(uint64_t)) < 0)
        return -1;
    uint64_t *h = w->heap;
    size_t i = w->heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h[parent] <= v)
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = v;
    return 0;
}

static uint64_t
heap_pop(Work *w)
{
    uint64_t *h = w->heap;
    uint64_t top = h[0], last = h[--w->heap_len];
    size_t n = w->heap_len, i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && h[child + 1] < h[child])
            child++;
        if (h[child] >= last)
            break;
        h[i] = h[child];
        i = child;
    }
    if (n)
        h[i] = last;
    return top;
}

/* Merge a long word with a heap of (rank << 32 | position) and a linked list: the
   lowest rank first, the leftmost among equals (equal ranks are one pair); a stale
   entry is known by looking at the pair again. Returns the symbols left, in s. */
static size_t
merge_long(const Tables *e, Work *w, const uint8_t *bytes, size_t n_bytes, uint32_t *s, const uint32_t *pos,
           size_t n)
{
    uint32_t *next = w->next, *prev = w->prev;
    w->heap_len = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = (uint32_t)(i - 1);  /* NO_ID for the first */
    }
#define END_OF(j) (next[j] < n ? pos[next[j]] : n_bytes)
    for (size_t i = 0; i + 1 < n; i++) {
        uint64_t p = e->byte_pairs != NULL ? e->byte_pairs[((size_t)bytes[i] << 8) | bytes[i + 1]]
                     : pair_of(e, w, bytes, s[i], s[i + 1], pos[i], END_OF(i + 1));
        if (p != NO_PAIR && heap_push(w, (p & 0xFFFFFFFF00000000ULL) | i) < 0)
            return 0;
    }
    while (w->heap_len) {
        uint64_t top = heap_pop(w);
        uint32_t i = (uint32_t)top, j;
        if (s[i] == NO_ID || (j = next[i]) >= n)
            continue;
        uint64_t p = pair_of(e, w, bytes, s[i], s[j], pos[i], END_OF(j));
        if (p == NO_PAIR || (p >> 32) != (top >> 32))
            continue;  /* stale */
        s[i] = (uint32_t)p;
        s[j] = NO_ID;
        uint32_t k = next[j];
        next[i] = k;
        if (k < n) {
            prev[k] = i;
            uint64_t q = pair_of(e, w, bytes, s[i], s[k], pos[i], END_OF(k));
            if (q != NO_PAIR && heap_push(w, (q & 0xFFFFFFFF00000000ULL) | i) < 0)
                return 0;
        }
        uint32_t h = prev[i];
        if (h != NO_ID) {
            uint64_t q = pair_of(e, w, bytes, s[h], s[i], pos[h], END_OF(i));
            if (q != NO_PAIR && heap_push(w, (q & 0xFFFFFFFF00000000ULL) | h) < 0)
                return 0;
        }
    }
#undef END_OF
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != NO_ID)
            s[m++] = s[i];
    return m;
}

#endif
