/* One encode call's scratch space: the ids it gives, a word's symbols, its cache of words. */
#ifndef BPESTORE_ENCODE_WORK_H
#define BPESTORE_ENCODE_WORK_H

#include "encode_tables.h"

#ifdef __linux__
#include <sys/mman.h>
#define HUGE_PAGE ((size_t)2 << 20)
#endif

/* -- one call's scratch space and cache -------------------------------------------------- */

/* One word the cache remembers: one cache line, the slot its hash picks (the last
   word there stays). */
typedef struct {
    uint8_t len;   /* 0: empty */
    uint8_t n_ids;
    uint8_t key[CACHE_KEY_MAX];
    uint32_t ids[CACHE_IDS_MAX];
} CacheSlot;

/* A word of 1..8 bytes with one or two ids (most words of a text): 16 bytes, four to a
   cache line, so that the short words of a large text stay in the core's own cache
   where the slots of all words would not. key: its bytes as one little-endian word
   (load_upto8); head: its first id, its length above SMALL_LEN_SHIFT and whether it
   has a second id at SMALL_TWO (len 0: empty). A word of three ids, the last two below
   2^16 (a vocabulary trained on other text cuts many short words of code in three), is
   kept with its length plus SMALL_THREE (no look-up of a word of one or two ids finds
   it: theirs stay one check and a copy), its second and third ids in the halves of second. */
typedef struct {
    uint64_t key;
    uint32_t head;
    uint32_t second;
} SmallSlot;

#define SMALL_TWO (1u << 27)
#define SMALL_LEN_SHIFT 28
#define SMALL_THREE 7  /* added to the length (3..8) of a word of three ids: 10..15 */
#define SMALL_SLOTS_MAX (1u << 17)  /* 2 MB: the short words of a large text in L2 */

typedef struct Work {
    uint32_t *out;
    size_t n_out, out_cap;
    uint8_t *utf8;          /* a word's UTF-8 */
    size_t utf8_cap;
    uint8_t *narrow;        /* a text's characters, each below 0x80 as itself, others as a byte of their class (class_text.h) */
    size_t narrow_cap;
    uint8_t *wide;          /* a bit per character of `narrow`: those above 0x7F */
    size_t wide_cap;
    uint32_t *symbols;      /* merging */
    uint32_t *positions;
    uint32_t *next, *prev;
    size_t symbols_cap;
    uint64_t *heap;
    size_t heap_len, heap_cap;
    CacheSlot *cache;      /* NULL: none (a failed allocation only loses speed) */
    size_t cache_mask;
    SmallSlot *smalls;     /* words of <= 8 bytes and <= 2 ids, or 3 (SmallSlot) (NULL: none; they go to `cache`) */
    size_t small_mask;
    size_t cache_chars;    /* characters encoded since the scratch space was made */
    uint8_t ascii[256];    /* the scan's classes of ASCII bytes (scan_text.h), */
    const uint8_t *ascii_of;  /* from these classes (NULL: not yet made) */
    int fail;
    uint32_t *counts;      /* lists of ids: the references to each id's int not yet counted */
    uint32_t *touched;     /* the ids whose counts are not 0 (those without an int first, n_fresh) */
    size_t n_touched, n_fresh;
    uint32_t *added;       /* the ids other works of a call counted that this one did not */
    size_t n_added;
    int missing;           /* an id without an int: its item left NULL */
} Work;

static void
work_free(Work *w)
{
    free(w->out);
    free(w->utf8);
    free(w->narrow);
    free(w->wide);
    free(w->symbols);
    free(w->positions);
    free(w->next);
    free(w->prev);
    free(w->heap);
    free(w->cache);
    free(w->smalls);
    free(w->counts);
    free(w->touched);
    free(w->added);
}

/* Room for `more` items after `len` in an array of `size`-byte items; 0, or -1 (FAIL_MEMORY set). */
static int
grow(Work *w, void **array, size_t *cap, size_t len, size_t more, size_t size)
{
    if (len + more <= *cap)
        return 0;
    size_t want = *cap ? *cap : 64;
    while (want < len + more)
        want *= 2;
    void *bigger = realloc(*array, want * size);
    if (bigger == NULL) {
        w->fail = FAIL_MEMORY;
        return -1;
    }
    *array = bigger;
    *cap = want;
    return 0;
}

/* n ids copied; up to 8 by two overlapping moves of a constant size (no call: most
   words give one or two ids). */
static inline void
copy_ids(uint32_t *to, const uint32_t *from, size_t n)
{
    if (n <= 2) {
        if (n)
            to[0] = from[0];
        if (n == 2)
            to[1] = from[1];
    } else if (n <= 4) {
        memcpy(to, from, 2 * sizeof(uint32_t));
        memcpy(to + n - 2, from + n - 2, 2 * sizeof(uint32_t));
    } else if (n <= 8) {
        memcpy(to, from, 4 * sizeof(uint32_t));
        memcpy(to + n - 4, from + n - 4, 4 * sizeof(uint32_t));
    } else
        memcpy(to, from, n * sizeof(uint32_t));
}

/* n <= 32 bytes copied by two overlapping moves of a constant size. */
static inline void
copy_key(uint8_t *to, const uint8_t *from, size_t n)
{
    if (n >= 16) {
        memcpy(to, from, 16);
        memcpy(to + n - 16, from + n - 16, 16);
    } else if (n >= 8) {
        memcpy(to, from, 8);
        memcpy(to + n - 8, from + n - 8, 8);
    } else if (n >= 4) {
        memcpy(to, from, 4);
        memcpy(to + n - 4, from + n - 4, 4);
    } else if (n) {
        to[0] = from[0];
        to[n / 2] = from[n / 2];
        to[n - 1] = from[n - 1];
    }
}

static inline int
emit(Work *w, const uint32_t *ids, size_t n)
{
    if (w->n_out + n > w->out_cap && grow(w, (void **)&w->out, &w->out_cap, w->n_out, n, sizeof(uint32_t)) < 0)
        return -1;
    copy_ids(w->out + w->n_out, ids, n);
    w->n_out += n;
    return 0;
}

/* A cached word's ids (n <= CACHE_IDS_MAX) added to w->out: all CACHE_IDS_MAX copied
   (one fixed-size copy, no call), n of them kept. */
static inline int
emit_cached(Work *w, const uint32_t *ids, size_t n)
{
    if (w->n_out + CACHE_IDS_MAX > w->out_cap
            && grow(w, (void **)&w->out, &w->out_cap, w->n_out, CACHE_IDS_MAX, sizeof(uint32_t)) < 0)
        return -1;
    memcpy(w->out + w->n_out, ids, CACHE_IDS_MAX * sizeof(uint32_t));
    w->n_out += n;
    return 0;
}

static inline int
emit_one(Work *w, uint32_t id)
{
    if (w->n_out == w->out_cap && grow(w, (void **)&w->out, &w->out_cap, w->n_out, 1, sizeof(uint32_t)) < 0)
        return -1;
    w->out[w->n_out++] = id;
    return 0;
}

static int
symbols_room(Work *w, size_t n)
{
    if (n <= w->symbols_cap)
        return 0;
    size_t want = w->symbols_cap ? w->symbols_cap : 64;
    while (want < n)
        want *= 2;
    uint32_t *s = realloc(w->symbols, want * sizeof(uint32_t));
    if (s) w->symbols = s;
    uint32_t *p = realloc(w->positions, (want + 1) * sizeof(uint32_t));
    if (p) w->positions = p;
    uint32_t *nx = realloc(w->next, want * sizeof(uint32_t));
    if (nx) w->next = nx;
    uint32_t *pv = realloc(w->prev, want * sizeof(uint32_t));
    if (pv) w->prev = pv;
    if (!s || !p || !nx || !pv) {
        w->fail = FAIL_MEMORY;
        return -1;
    }
    w->symbols_cap = want;
    return 0;
}

/* Where a word of hash h goes in a cache of mask + 1 slots (bits the token table's index does not use). */
static inline size_t
cache_index(uint64_t h, size_t mask)
{
    return (size_t)(h >> 17) & mask;
}

/* Zeroed room for `size` bytes at `align` (calloc's where 16 will do). On Linux a table
   of 2 MB or more sits on huge pages where the kernel gives them (transparent huge pages
   on request): its slots are read at random, and with 4 kB pages most look-ups would
   miss the TLB. */
static void *
zeroed_alloc(size_t size, size_t align)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (size >= HUGE_PAGE && size % HUGE_PAGE == 0) {
        void *p = aligned_alloc(HUGE_PAGE, size);
        if (p != NULL) {
            madvise(p, size, MADV_HUGEPAGE);
            memset(p, 0, size);
            return p;
        }
    }
#endif
    if (align <= 16)
        return calloc(1, size);
    void *p = aligned_alloc(align, size);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

/* A cache's slots for `slots` of `size` bytes: past 256 kB straight to one huge page,
   where the steps between would fault in 4 kB pages (about 1.7 us each) more memory
   than the huge page takes to clear. */
static size_t
huge_step(size_t slots, size_t size)
{
#ifdef HUGE_PAGE
    if (slots * size > ((size_t)256 << 10) && slots * size < HUGE_PAGE)
        return HUGE_PAGE / size;
#endif
    return slots;
}

/* The slot where a short word hashed h is kept (bits the token table's index does not use). */
static inline SmallSlot *
small_slot(SmallSlot *smalls, size_t mask, uint64_t h)
{
    return &smalls[cache_index(h, mask)];
}

/* Whether slot c holds the word of n <= 8 bytes read as key (load_upto8). */
static inline int
small_holds(const SmallSlot *c, uint64_t key, size_t n)
{
    return c->key == key && (c->head >> SMALL_LEN_SHIFT) == n;
}

/* A held short word's ids written at out (room for two), their number. */
static inline size_t
small_ids(const SmallSlot *c, uint32_t *out)
{
    out[0] = c->head & (SMALL_TWO - 1);
    out[1] = c->second;
    return 1 + ((c->head & SMALL_TWO) != 0);
}

/* The ids of the word of 3 <= n <= 8 bytes read as key held with three ids in slot c or
   the other of its pair (small_pair), written at out (room for three): 3, or 0 (not held). */
static inline size_t
small_three(const SmallSlot *c, uint64_t key, size_t n, uint32_t *out)
{
    if (!small_holds(c, key, n + SMALL_THREE)) {
        c = (const SmallSlot *)((uintptr_t)c ^ sizeof(SmallSlot));
        if (!small_holds(c, key, n + SMALL_THREE))
            return 0;
    }
    out[0] = c->head & (SMALL_TWO - 1);
    out[1] = c->second & 0xFFFF;
    out[2] = c->second >> 16;
    return 3;
}

/* A word of n <= 8 bytes (key: load_upto8) and its ids kept in slot c; whether they fit
   (one or two ids, each below SMALL_TWO; three: SmallSlot). */
static inline int
small_put(SmallSlot *c, uint64_t key, size_t n, const uint32_t *ids, size_t n_ids)
{
    if (n_ids == 3 && ids[0] < SMALL_TWO && (ids[1] | ids[2]) <= 0xFFFF) {
        c->key = key;
        c->head = ids[0] | (uint32_t)(n + SMALL_THREE) << SMALL_LEN_SHIFT;
        c->second = ids[1] | ids[2] << 16;
        return 1;
    }
    if (n_ids == 0 || n_ids > 2 || ids[0] >= SMALL_TWO)
        return 0;
    c->key = key;
    c->head = ids[0] | (uint32_t)n << SMALL_LEN_SHIFT | (n_ids == 2 ? SMALL_TWO : 0);
    c->second = n_ids == 2 ? ids[1] : 0;
    return 1;
}

/* The short-word cache grown to `slots`, four to a cache line (it keeps its words;
   without memory it stays as it was). */
static void
smalls_init(Work *w, size_t slots)
{
    if (w->smalls != NULL && w->small_mask + 1 >= slots)
        return;
    SmallSlot *bigger = zeroed_alloc(slots * sizeof(SmallSlot), 64);
    if (bigger == NULL)
        return;
    for (size_t k = 0; w->smalls != NULL && k <= w->small_mask; k++) {
        const SmallSlot *c = &w->smalls[k];
        size_t len = c->head >> SMALL_LEN_SHIFT;
        len = len > 8 ? len - SMALL_THREE : len;
        if (len)
            *small_slot(bigger, slots - 1, hash_upto8(c->key, len)) = *c;
    }
    free(w->smalls);
    w->smalls = bigger;
    w->small_mask = slots - 1;
}

/* The caches sized for a call of `chars` more characters: about one slot for every 2
   characters the scratch space has encoded (64..CACHE_SLOTS_MAX, SMALL_SLOTS_MAX; past
   256 kB one huge page: huge_step), so
   that a short text does not pay for large caches and a run of short ones grows them; a
   larger cache takes over what the smaller one held (its words stay true for the
   encoder). Without memory a cache stays as it was (a failure only loses speed). */
static void
cache_init(Work *w, ptrdiff_t chars)
{
    w->cache_chars += (size_t)chars;
    size_t slots = 64;
    while (slots < CACHE_SLOTS_MAX && slots * 2 < w->cache_chars)
        slots <<= 1;
    smalls_init(w, huge_step(slots < SMALL_SLOTS_MAX ? slots : SMALL_SLOTS_MAX, sizeof(SmallSlot)));
    slots = huge_step(slots, sizeof(CacheSlot));
    if (w->cache != NULL && w->cache_mask + 1 >= slots)
        return;
    CacheSlot *bigger = zeroed_alloc(slots * sizeof(CacheSlot), 16);
    if (bigger == NULL)
        return;
    for (size_t k = 0; w->cache != NULL && k <= w->cache_mask; k++) {
        const CacheSlot *c = &w->cache[k];
        if (c->len)
            bigger[cache_index(hash_bytes(c->key, c->len), slots - 1)] = *c;
    }
    free(w->cache);
    w->cache = bigger;
    w->cache_mask = slots - 1;
}

/* The cache slot of a word of n <= CACHE_KEY_MAX bytes. */
static inline CacheSlot *
cache_slot(const Work *w, uint64_t h)
{
    return &w->cache[cache_index(h, w->cache_mask)];
}

static inline int
cache_holds(const CacheSlot *c, const uint8_t *key, size_t n)
{
    return c->len == n && same_bytes(c->key, key, n);
}

static inline void
cache_put(CacheSlot *c, const uint8_t *key, size_t n, const uint32_t *ids, size_t n_ids)
{
    if (n_ids > CACHE_IDS_MAX)
        return;
    c->len = (uint8_t)n;
    c->n_ids = (uint8_t)n_ids;
    copy_key(c->key, key, n);
    copy_ids(c->ids, ids, n_ids);
}

#endif
