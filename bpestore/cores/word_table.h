/* The counting core's table of distinct words, which owns their UTF-8 bytes: a text's words
   are looked up where they lie in the text (PyUnicode units of kind 1, 2 or 4) and a word
   new to the table is copied in once, as UTF-8 (a lone surrogate as its three bytes, as
   Python's "surrogatepass" writes it). One table counts any number of texts, of any kinds,
   one after another, with no object per word: bytes objects are made only when the
   counts leave it. Plain C (no Python API).

   Open addressing, at most three quarters full, a slot of 32 bytes: a word of 8 bytes or fewer (most
   are) lies in its slot, so a look-up touches one place in memory; the order the words
   came in (their first occurrences: ordinals) is kept beside. Each word remembers the
   last piece (a number the caller gives) it was counted in, so the caller learns how
   many distinct words each piece held. */
#ifndef BPESTORE_WORD_TABLE_H
#define BPESTORE_WORD_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pretok.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

typedef struct {
    uint64_t hash;     /* wt_hash of its code points */
    int64_t count;     /* 0: an empty slot */
    union {
        unsigned char head[8];  /* its UTF-8, where it is 8 bytes or fewer */
        size_t at;              /* else: at bytes + at */
    } w;
    uint32_t len;      /* its UTF-8 bytes, WT_WIDE added where they are not all ASCII */
    uint32_t piece;    /* the last piece it was counted in */
} Word;

#define WT_WIDE 0x80000000u
#define WT_LEN(w) ((w)->len & ~WT_WIDE)
#define WT_MAX_WORDS ((size_t)1 << 31)
/* The most words n slots hold: three in four (linear probes are short still, and a slot of a
   word that comes often is found at the first). */
#define WT_ROOM(n) ((n) / 4 * 3)

typedef struct {
    Word *slots;      /* open addressing, at most three quarters full (WT_ROOM) */
    size_t mask;      /* the number of slots - 1, a power of two */
    size_t used;
    uint32_t *order;  /* the slot of each word, in the order they came (first occurrences: ordinals) */
    char *bytes;      /* the UTF-8 of the words longer than 8 bytes, end to end */
    size_t n_bytes, bytes_room;
    uint32_t piece;   /* the piece being counted */
    size_t piece_distinct;  /* its distinct words so far */
    int go_on;        /* the next piece is this one still (a source counted in several calls) */
} WordTable;

/* n zeroed slots, or NULL. Where they fill 2 MiB pages or more (Linux), they lie on such
   pages: a look-up goes to a random slot, and with 4 kB pages nearly every one of a large
   table misses the TLB too. */
static Word *
wt_alloc_slots(size_t n)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    size_t bytes = n * sizeof(Word), huge = (size_t)2 << 20;
    if (bytes >= huge) {
        void *p = NULL;
        if (posix_memalign(&p, huge, bytes) != 0)
            return NULL;
        (void)madvise(p, bytes, MADV_HUGEPAGE);  /* a hint: without it the table works the same */
        memset(p, 0, bytes);
        return p;
    }
#endif
    return calloc(n, sizeof(Word));
}

/* 0, or -1 where memory ran out. */
static int
wt_init(WordTable *t, size_t capacity)
{
    memset(t, 0, sizeof *t);
    t->slots = wt_alloc_slots(capacity);
    t->order = malloc((WT_ROOM(capacity) + 1) * sizeof(uint32_t));
    t->bytes_room = 4 * capacity + 64;
    t->bytes = malloc(t->bytes_room);
    if (t->slots == NULL || t->order == NULL || t->bytes == NULL) {
        free(t->slots);
        free(t->order);
        free(t->bytes);
        memset(t, 0, sizeof *t);
        return -1;
    }
    t->mask = capacity - 1;
    return 0;
}

static void
wt_free(WordTable *t)
{
    free(t->slots);
    free(t->order);
    free(t->bytes);
    memset(t, 0, sizeof *t);
}

/* A word's UTF-8 (valid until the table changes). */
static inline const unsigned char *
wt_bytes(const WordTable *t, const Word *w)
{
    return WT_LEN(w) <= 8 ? w->w.head : (const unsigned char *)t->bytes + w->w.at;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define WT_LITTLE_ENDIAN 1
#endif

/* The hash of a word of 8 code points or fewer, all below 256, given packed: its i-th code
   point in byte i of x (the rest 0). */
INLINE uint64_t
wt_hash_short(uint64_t x, ptrdiff_t len)
{
    uint64_t h = x * 0x9E3779B97F4A7C15ULL;
    h = (h ^ (h >> 32) ^ (uint64_t)len) * 0xD6E8FEB86659FD93ULL;
    return h ^ (h >> 29);
}

/* The hash of a word's code points (the same in a text of any kind): wt_hash_short where
   it is 8 or fewer, all below 256, else FNV-1a. */
INLINE uint64_t
wt_hash(const void *data, int kind, ptrdiff_t start, ptrdiff_t len)
{
    if (len <= 8) {
        uint64_t x = 0;
        uint32_t any = 0;
        for (ptrdiff_t i = 0; i < len; i++) {
            uint32_t c = CHAR_AT(kind, data, start + i);
            any |= c;
            x |= (uint64_t)(c & 0xFF) << (8 * i);
        }
        if (any < 256)
            return wt_hash_short(x, len);
    }
    uint64_t h = 1469598103934665603ULL;
    for (ptrdiff_t i = start; i < start + len; i++)
        h = (h ^ CHAR_AT(kind, data, i)) * 1099511628211ULL;
    return h ^ (h >> 29);
}

/* The len (1..8) bytes at p packed as wt_hash_short takes them, where n bytes may be read
   from p (reading 8 at once where there are 8). */
INLINE uint64_t
wt_pack_bytes(const unsigned char *p, ptrdiff_t len, ptrdiff_t n)
{
    uint64_t x = 0;
#ifdef WT_LITTLE_ENDIAN
    if (n >= 8) {
        memcpy(&x, p, 8);
        return len < 8 ? x & ((UINT64_C(1) << (8 * len)) - 1) : x;
    }
    memcpy(&x, p, (size_t)len);
#else
    for (ptrdiff_t i = 0; i < len; i++)
        x |= (uint64_t)p[i] << (8 * i);
#endif
    return x;
}

/* The head of a word of 8 bytes or fewer packed as wt_pack_bytes packs (the bytes past its
   length are 0: slots start zeroed and a head is written once). */
INLINE uint64_t
wt_head(const Word *w)
{
#ifdef WT_LITTLE_ENDIAN
    uint64_t x;
    memcpy(&x, w->w.head, 8);
    return x;
#else
    uint64_t x = 0;
    for (int i = 0; i < 8; i++)
        x |= (uint64_t)w->w.head[i] << (8 * i);
    return x;
#endif
}

/* The code point at *p of UTF-8 written by wt_put (well formed), *p moved past it. */
INLINE uint32_t
wt_next(const unsigned char **p)
{
    const unsigned char *s = *p;
    uint32_t c = s[0];
    if (c < 0x80) {
        *p = s + 1;
        return c;
    }
    if (c < 0xE0) {
        *p = s + 2;
        return (c & 0x1F) << 6 | (s[1] & 0x3F);
    }
    if (c < 0xF0) {
        *p = s + 3;
        return (c & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    }
    *p = s + 4;
    return (c & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
}

/* Whether word w is the len code points at start of a text of kind. */
INLINE int
wt_same(const WordTable *t, const Word *w, const void *data, int kind, ptrdiff_t start, ptrdiff_t len)
{
    const unsigned char *p = wt_bytes(t, w);
    if (!(w->len & WT_WIDE)) {  /* ASCII: one byte a code point */
        if (w->len != (uint64_t)len)
            return 0;
        if (kind == 1)
            return memcmp(p, (const unsigned char *)data + start, (size_t)len) == 0;
        for (ptrdiff_t i = 0; i < len; i++)
            if (p[i] != CHAR_AT(kind, data, start + i))
                return 0;
        return 1;
    }
    const unsigned char *end = p + WT_LEN(w);
    ptrdiff_t i = start;
    for (; i < start + len && p < end; i++)
        if (wt_next(&p) != CHAR_AT(kind, data, i))
            return 0;
    return i == start + len && p == end;
}

/* The UTF-8 size of the len code points at start. */
static size_t
wt_utf8_size(const void *data, int kind, ptrdiff_t start, ptrdiff_t len)
{
    if (kind == 1) {
        size_t size = (size_t)len;
        for (ptrdiff_t i = start; i < start + len; i++)
            size += ((const uint8_t *)data)[i] >> 7;
        return size;
    }
    size_t size = 0;
    for (ptrdiff_t i = start; i < start + len; i++) {
        uint32_t c = CHAR_AT(kind, data, i);
        size += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    return size;
}

static void
wt_put(unsigned char *out, const void *data, int kind, ptrdiff_t start, ptrdiff_t len)
{
    for (ptrdiff_t i = start; i < start + len; i++) {
        uint32_t c = CHAR_AT(kind, data, i);
        if (c < 0x80) {
            *out++ = (unsigned char)c;
        } else if (c < 0x800) {
            *out++ = (unsigned char)(0xC0 | (c >> 6));
            *out++ = (unsigned char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            *out++ = (unsigned char)(0xE0 | (c >> 12));
            *out++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *out++ = (unsigned char)(0x80 | (c & 0x3F));
        } else {
            *out++ = (unsigned char)(0xF0 | (c >> 18));
            *out++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            *out++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *out++ = (unsigned char)(0x80 | (c & 0x3F));
        }
    }
}

/* The slots twice as many, the words in them again in the order they came. */
static int
wt_grow(WordTable *t)
{
    size_t size = (t->mask + 1) * 2;
    if (WT_ROOM(size) + 1 > WT_MAX_WORDS)
        return -2;
    Word *slots = wt_alloc_slots(size);
    uint32_t *order = malloc((WT_ROOM(size) + 1) * sizeof(uint32_t));
    if (slots == NULL || order == NULL) {
        free(slots);
        free(order);
        return -1;
    }
    for (size_t k = 0; k < t->used; k++) {
        const Word *w = &t->slots[t->order[k]];
        size_t j = (size_t)w->hash & (size - 1);
        while (slots[j].count != 0)
            j = (j + 1) & (size - 1);
        slots[j] = *w;
        order[k] = (uint32_t)j;
    }
    free(t->slots);
    free(t->order);
    t->slots = slots;
    t->order = order;
    t->mask = size - 1;
    return 0;
}

/* Room for `more` bytes of words: 0, or -1 where memory ran out. */
static int
wt_reserve_bytes(WordTable *t, size_t more)
{
    if (t->bytes_room - t->n_bytes >= more)
        return 0;
    size_t room = t->bytes_room * 2;
    while (room - t->n_bytes < more)
        room *= 2;
    char *bytes = realloc(t->bytes, room);
    if (bytes == NULL)
        return -1;
    t->bytes = bytes;
    t->bytes_room = room;
    return 0;
}

/* A word new to the table into the empty slot j: 0, -1 where memory ran out, -2 where the
   word or the table is too large (2 GiB of UTF-8, 2^31 words). */
static int
wt_insert(WordTable *t, size_t j, uint64_t h, const void *data, int kind, ptrdiff_t start, ptrdiff_t len,
          int64_t count)
{
    size_t size = wt_utf8_size(data, kind, start, len);
    if (size >= WT_WIDE)
        return -2;
    Word *w = &t->slots[j];
    unsigned char *out = w->w.head;
    if (size > 8) {
        if (wt_reserve_bytes(t, size) < 0)
            return -1;
        w->w.at = t->n_bytes;
        out = (unsigned char *)t->bytes + t->n_bytes;
        t->n_bytes += size;
    }
    wt_put(out, data, kind, start, len);
    w->hash = h;
    w->count = count;
    w->len = (uint32_t)size | (size != (size_t)len ? WT_WIDE : 0);
    w->piece = t->piece;
    t->order[t->used++] = (uint32_t)j;
    t->piece_distinct++;
    if (t->used > WT_ROOM(t->mask + 1))
        return wt_grow(t);
    return 0;
}

/* Count the len code points at start of a text of kind (their wt_hash h) `count` times
   more; as wt_insert. packed: where kind is 1 and len is 8 or fewer, the word's bytes as
   wt_pack_bytes packs them (compared with an ASCII head at once); else not read. */
INLINE int
wt_add(WordTable *t, const void *data, int kind, ptrdiff_t start, ptrdiff_t len, uint64_t h, uint64_t packed,
       int64_t count)
{
    for (size_t j = (size_t)h & t->mask;; j = (j + 1) & t->mask) {
        Word *w = &t->slots[j];
        if (w->count == 0)
            return wt_insert(t, j, h, data, kind, start, len, count);
        if (w->hash != h)
            continue;
        int same = kind == 1 && len <= 8 && !(w->len & WT_WIDE)
                   ? w->len == (uint32_t)len && wt_head(w) == packed
                   : wt_same(t, w, data, kind, start, len);
        if (same) {
            w->count += count;
            if (w->piece != t->piece) {
                w->piece = t->piece;
                t->piece_distinct++;
            }
            return 0;
        }
    }
}

/* Slot j, asked for before it is read. */
INLINE void
wt_prefetch_slot(const WordTable *t, size_t j)
{
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(&t->slots[j]);
#else
    (void)t;
    (void)j;
#endif
}

/* Where the word of hash h will be looked for: asked for early, while the scan goes on. */
INLINE void
wt_prefetch(const WordTable *t, uint64_t h)
{
    wt_prefetch_slot(t, (size_t)h & t->mask);
}

/* Count word w of table from (its UTF-8, hash and length as from keeps them) `count` times more
   into t; as wt_insert. */
static int
wt_add_word(WordTable *t, const WordTable *from, const Word *w, int64_t count)
{
    const unsigned char *p = wt_bytes(from, w);
    size_t size = WT_LEN(w);
    for (size_t j = (size_t)w->hash & t->mask;; j = (j + 1) & t->mask) {
        Word *slot = &t->slots[j];
        if (slot->count == 0) {
            unsigned char *out = slot->w.head;
            if (size > 8) {
                if (wt_reserve_bytes(t, size) < 0)
                    return -1;
                slot->w.at = t->n_bytes;
                out = (unsigned char *)t->bytes + t->n_bytes;
                t->n_bytes += size;
            }
            memcpy(out, p, size);
            slot->hash = w->hash;
            slot->count = count;
            slot->len = w->len;
            slot->piece = t->piece;
            t->order[t->used++] = (uint32_t)j;
            t->piece_distinct++;
            return t->used > WT_ROOM(t->mask + 1) ? wt_grow(t) : 0;
        }
        if (slot->hash == w->hash && slot->len == w->len && memcmp(wt_bytes(t, slot), p, size) == 0) {
            slot->count += count;
            if (slot->piece != t->piece) {
                slot->piece = t->piece;
                t->piece_distinct++;
            }
            return 0;
        }
    }
}

/* Every word of table from counted into t, in the order they came to from: t then counts as
   though from's text had been counted into it after its own (first occurrences in order, the
   piece's distinct words told). 0, or as wt_insert. */
static int
wt_merge(WordTable *t, const WordTable *from)
{
    for (size_t k = 0; k < from->used; k++) {
        if (k + 16 < from->used)
            wt_prefetch_slot(from, from->order[k + 16]);
        if (k + 8 < from->used)  /* where that word goes in t: its slot there asked for as early */
            wt_prefetch(t, from->slots[from->order[k + 8]].hash);
        const Word *w = &from->slots[from->order[k]];
        int rc = wt_add_word(t, from, w, w->count);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The table emptied, its memory kept. */
static void
wt_clear(WordTable *t)
{
    memset(t->slots, 0, (t->mask + 1) * sizeof(Word));
    t->used = 0;
    t->n_bytes = 0;
    t->piece_distinct = 0;
    t->go_on = 0;
}

#endif
