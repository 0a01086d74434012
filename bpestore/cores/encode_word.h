/* One word to ids: a whole-token look-up, the cache, or its symbols merged (or backtracked). */
#ifndef BPESTORE_ENCODE_WORD_H
#define BPESTORE_ENCODE_WORD_H

#include "backtrack.h"

/* -- one word ----------------------------------------------------------------------------- */

static inline uint32_t
next_code_point(const uint8_t *p, size_t *i)
{
    uint32_t c = p[*i];
    if (c < 0x80) {
        *i += 1;
        return c;
    }
    if (c < 0xE0) {
        c = ((c & 0x1F) << 6) | (p[*i + 1] & 0x3F);
        *i += 2;
    } else if (c < 0xF0) {
        c = ((c & 0x0F) << 12) | ((p[*i + 1] & 0x3F) << 6) | (p[*i + 2] & 0x3F);
        *i += 3;
    } else {
        c = ((c & 0x07) << 18) | ((p[*i + 1] & 0x3F) << 12) | ((p[*i + 2] & 0x3F) << 6) | (p[*i + 3] & 0x3F);
        *i += 4;
    }
    return c;
}

/* A word's initial symbols in w->symbols (and where each starts in positions);
   the number, or -1 (w->fail set). */
static ptrdiff_t
symbolize(const Tables *e, Work *w, const uint8_t *bytes, size_t n)
{
    /* at most one symbol per byte, plus the markers */
    if (symbols_room(w, n + 2) < 0)
        return -1;
    uint32_t *s = w->symbols, *pos = w->positions;
    size_t m = 0;
    if (e->prefix != NO_ID) {
        pos[m] = 0;
        s[m++] = e->prefix;
    }
    if (!e->chars) {
        for (size_t i = 0; i < n; i++) {
            pos[m] = (uint32_t)i;
            s[m++] = e->byte_ids[bytes[i]];
        }
    } else {
        for (size_t i = 0; i < n;) {
            size_t start = i;
            uint32_t id = char_find(e, next_code_point(bytes, &i));
            if (id != NO_ID) {
                pos[m] = (uint32_t)start;
                s[m++] = id;
            } else if (e->fallback) {
                for (size_t b = start; b < i; b++) {
                    pos[m] = (uint32_t)b;
                    s[m++] = e->byte_ids[bytes[b]];
                }
            } else if (e->unk != NO_ID) {
                pos[m] = (uint32_t)start;
                s[m++] = e->unk;
            } else {
                w->fail = FAIL_UNKNOWN_CHAR;
                return -1;
            }
        }
    }
    if (e->suffix != NO_ID) {
        pos[m] = (uint32_t)n;
        s[m++] = e->suffix;
    }
    pos[m] = (uint32_t)n;
    return (ptrdiff_t)m;
}

/* The hash of a word, and where its look-ups will go fetched early (the scan hashes a
   block of words before it encodes them, so their cache misses overlap). */
static inline uint64_t
hash_and_prefetch(const Tables *e, const Work *w, const uint8_t *bytes, size_t n)
{
    uint64_t h = hash_bytes(bytes, n);
    if (n <= 8 && w->smalls != NULL)
        PREFETCH(small_slot(w->smalls, w->small_mask, h));
    else if (n <= CACHE_KEY_MAX && w->cache != NULL)
        PREFETCH(cache_slot(w, h));
    if (e->whole_lookup && n <= e->max_token_len)
        PREFETCH(&e->tokens[(size_t)h & e->token_mask]);
    return h;
}

/* The other slot of sc's pair (16 bytes apart in a 32-byte aligned pair of one cache
   line: the short-word cache is 64-byte aligned). A short word is kept in the slot its
   hash picks or in the other of the pair, so that two words of one slot both stay. */
static inline SmallSlot *
small_pair(const SmallSlot *sc)
{
    return (SmallSlot *)((uintptr_t)sc ^ sizeof(SmallSlot));
}

/* The slot of slot sc's pair that holds the short word key of n bytes, or NULL. */
static inline const SmallSlot *
small_find(const SmallSlot *sc, uint64_t key, size_t n)
{
    if (small_holds(sc, key, n))
        return sc;
    sc = small_pair(sc);
    return small_holds(sc, key, n) ? sc : NULL;
}

/* A word's ids kept: in its short-word slot sc where they fit there (the word there
   before moves to the other slot of the pair), else in its cache slot c (either NULL:
   none). key: the word as load_upto8 reads it (for sc). */
static inline void
remember(SmallSlot *sc, uint64_t key, CacheSlot *c, const uint8_t *bytes, size_t n, const uint32_t *ids,
         size_t n_ids)
{
    SmallSlot before;
    if (sc != NULL && (before = *sc, small_put(sc, key, n, ids, n_ids))) {
        if (before.head >> SMALL_LEN_SHIFT)
            *small_pair(sc) = before;
        return;
    }
    if (c != NULL)
        cache_put(c, bytes, n, ids, n_ids);
}

/* A word's ids, added to w->out; 0, or -1 (w->fail set). h: hash_bytes(bytes, n). */
static int
encode_hashed_word(const Tables *e, Work *w, const uint8_t *bytes, size_t n, uint64_t h)
{
    if (n == 0)
        return 0;
    SmallSlot *sc = NULL;
    uint64_t key = 0;
    if (n <= 8 && w->smalls != NULL) {
        key = load_upto8(bytes, n);
        sc = small_slot(w->smalls, w->small_mask, h);
        const SmallSlot *held = small_find(sc, key, n);
        if (held != NULL) {
            uint32_t ids[2];
            return emit(w, ids, small_ids(held, ids));
        }
        uint32_t three[3];
        if (n >= 3 && small_three(sc, key, n, three))
            return emit(w, three, 3);
    }
    if (n == 1 && !e->chars && e->prefix == NO_ID && e->suffix == NO_ID) {
        /* its byte's id, kept where the scan looks a short word up (it has no test of its own
           for one byte: a branch taken at random in a text) */
        uint32_t id = e->byte_ids[bytes[0]];
        remember(sc, key, NULL, bytes, n, &id, 1);
        return emit_one(w, id);
    }
    /* the word looked up whole before the cache is read (a token's id is what the cache would
       give): a short word's cache slot is not fetched early, and its miss then overlaps the
       token table's */
    CacheSlot *c = NULL;
    if (n <= CACHE_KEY_MAX && w->cache != NULL) {
        c = cache_slot(w, h);
        PREFETCH(c);
    }
    if (e->whole_lookup && n <= e->max_token_len) {
        const TokenSlot *t = token_find(e, bytes, n, h);
        if (t != NULL && t->whole) {
            remember(sc, key, c, bytes, n, &t->id, 1);
            return emit_one(w, t->id);
        }
    }
    if (c != NULL && cache_holds(c, bytes, n))
        return emit_cached(w, c->ids, c->n_ids);
    const BtTables *bt = n > BACKTRACK_BYTES ? backtrack_tables(e, bytes, n) : NULL;
    if (bt != NULL) {
        ptrdiff_t k = backtrack(e, bt, w, bytes, n);
        if (k < 0)
            return -1;
        if (k > 0) {
            remember(sc, key, c, bytes, n, w->symbols, (size_t)k);
            return emit(w, w->symbols, (size_t)k);
        }
    }
    ptrdiff_t m = symbolize(e, w, bytes, n);
    if (m < 0)
        return -1;
    size_t left = (size_t)m <= SHORT_SYMBOLS ? merge_short(e, w, bytes, w->symbols, w->positions, (size_t)m)
                  : (size_t)m <= MID_SYMBOLS ? merge_mid(e, w, bytes, n, w->symbols, w->positions, (size_t)m)
                  : merge_long(e, w, bytes, n, w->symbols, w->positions, (size_t)m);
    if (w->fail)
        return -1;
    remember(sc, key, c, bytes, n, w->symbols, left);
    return emit(w, w->symbols, left);
}

static int
encode_word(const Tables *e, Work *w, const uint8_t *bytes, size_t n)
{
    return encode_hashed_word(e, w, bytes, n, hash_bytes(bytes, n));
}

/* The UTF-8 of text[start:end] (kind-byte code points at data, no surrogates) in
   w->utf8 from offset `at` on; its length, or -1. */

#endif
