/* The compiled encode core: pre-tokenize and segment text into token ids.

   An Encoder is built once per version from its tokens' bytes (by id) and its merges
   (left id, right id, made id, in rank order) and then encodes any number of texts, on
   any number of threads at once (it is never changed after it is built; each call
   keeps its own scratch space and cache, and the work runs with the GIL released).

   A text is cut into words by one of the built-in patterns (_pretok.h; the
   character classes come from the classify function, bpestore.text.char_class), or
   the caller cuts it and hands the words over (encode_words). Each word becomes
   ids:
     - a word that is a token (on byte-level versions where that token encodes to
       itself) is that token: one look-up in a hash table of the tokens' bytes;
     - else a word met before in this call is found in a bounded cache;
     - else its initial symbols (its UTF-8 bytes as ids, or its characters with the
       unknown token or byte fallback, with the word markers) are merged:
       MODE_MERGE joins the adjacent pair of lowest merge rank (leftmost first), as
       bpestore.bpe.merge_word does; MODE_RANKS joins the adjacent pair whose
       concatenated bytes have the lowest rank (token id), tiktoken's rule.
       A word of up to SHORT_SYMBOLS symbols is merged with arrays; a longer one with
       a heap and a linked list, O(n log n).
   The pure-Python encoder (bpestore.encoder) stays the reference; tests compare the
   two, and tiktoken, id for id. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_pretok.h"

enum { MODE_MERGE = 0, MODE_RANKS = 1 };
enum { PATTERN_NONE = -1, PATTERN_WHITESPACE = 3 };  /* 0..2: _pretok.h's */
enum { FAIL_NONE = 0, FAIL_MEMORY = 1, FAIL_UNKNOWN_CHAR = 2 };

#define NO_ID 0xFFFFFFFFu
#define NO_PAIR UINT64_MAX
#define SHORT_SYMBOLS 16       /* (2 * SHORT_SYMBOLS + 2 <= 64, the least room of the symbol arrays) */
#define MID_SYMBOLS 256
#define CACHE_KEY_MAX 30        /* bytes of the longest word the cache keeps */
#define CACHE_IDS_MAX 8         /* ids of a word the cache keeps */
#define CACHE_SLOTS_MAX (1u << 13)

/* -- hashing ------------------------------------------------------------------------ */

static inline uint64_t
mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t
load64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint32_t
load32(const uint8_t *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* The n < 8 bytes at p as one word (not their exact bytes where n >= 4: two loads that
   overlap; enough for a hash, whose length is mixed in apart). */
static inline uint64_t
tail_bytes(const uint8_t *p, size_t n)
{
    if (n >= 4)
        return ((uint64_t)load32(p) << 32) | load32(p + n - 4);
    if (n == 0)
        return 0;
    return ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
}

/* a[0..n) == b[0..n), for short n, without a call. */
static inline int
same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8)
            if (load64(a + i) != load64(b + i))
                return 0;
        return load64(a + n - 8) == load64(b + n - 8);
    }
    if (n >= 4)
        return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

static inline uint64_t
hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)n * 0xc4ceb9fe1a85ec53ULL);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t w = tail_bytes(p, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 29;
    return h;
}

/* -- the tables of a version ---------------------------------------------------------- */

typedef struct {
    uint64_t key;    /* (left << 32) | right; NO_PAIR: empty */
    uint32_t rank;
    uint32_t made;
} PairSlot;

/* 16 bytes: four to a cache line. */
typedef struct {
    uint32_t tag;         /* the hash's high half */
    uint32_t offset;      /* of its bytes in Encoder.token_bytes */
    uint32_t len : 31;    /* 0: empty slot */
    uint32_t whole : 1;   /* the token is what a word of exactly its bytes encodes to */
    uint32_t id;
} TokenSlot;

typedef struct {
    uint32_t code_point;  /* NO_ID: empty */
    uint32_t id;
} CharSlot;

typedef struct {
    PyObject_HEAD
    int mode;
    int pattern;
    int chars;             /* symbols are characters (else UTF-8 bytes) */
    int fallback;          /* an unseen character becomes its bytes */
    uint32_t unk;          /* or this token (NO_ID: neither: the call gives None) */
    uint32_t prefix, suffix;  /* word markers (NO_ID: none) */
    uint32_t byte_ids[256];
    int has_bytes;
    PairSlot *pairs;
    size_t pair_mask;
    TokenSlot *tokens;
    size_t token_mask;
    uint8_t *token_bytes;
    size_t max_token_len;
    int whole_lookup;      /* a word that is a token may be looked up whole */
    CharSlot *char_table;
    size_t char_mask;
    uint8_t *classes;      /* the class of each code point (_pretok.h), 0: not asked yet */
    PyObject *classify;
    uint64_t *byte_pairs;   /* plain byte symbols, merge rule: the pair of bytes (a << 8) | b */
    PyObject **id_objects;  /* an int for each id below n_ids, made at the first list of ids */
    size_t n_ids;
    size_t table_bytes;
} Encoder;

/* The pair key = (a << 32) | b, of hash h = mix64(key), in the merge table:
   (rank << 32) | made, or NO_PAIR. */
static inline uint64_t
pair_find_hashed(const Encoder *e, uint64_t key, uint64_t h)
{
    size_t j = (size_t)h & e->pair_mask;
    for (;;) {
        const PairSlot *s = &e->pairs[j];
        if (s->key == key)
            return ((uint64_t)s->rank << 32) | s->made;
        if (s->key == NO_PAIR)
            return NO_PAIR;
        j = (j + 1) & e->pair_mask;
    }
}

static inline uint64_t
pair_find(const Encoder *e, uint32_t a, uint32_t b)
{
    uint64_t key = ((uint64_t)a << 32) | b;
    return pair_find_hashed(e, key, mix64(key));
}

/* Fetch early the slot where pair_find(e, a, b) starts looking. */
static inline void
prefetch_pair(const Encoder *e, uint32_t a, uint32_t b)
{
    __builtin_prefetch(&e->pairs[(size_t)mix64(((uint64_t)a << 32) | b) & e->pair_mask]);
}

static inline const TokenSlot *
token_find(const Encoder *e, const uint8_t *p, size_t n, uint64_t h)
{
    size_t j = (size_t)h & e->token_mask;
    for (;;) {
        const TokenSlot *s = &e->tokens[j];
        if (s->len == 0)
            return NULL;
        if (s->tag == (uint32_t)(h >> 32) && s->len == n && same_bytes(e->token_bytes + s->offset, p, n))
            return s;
        j = (j + 1) & e->token_mask;
    }
}

static inline uint32_t
char_find(const Encoder *e, uint32_t c)
{
    size_t j = (size_t)mix64(c) & e->char_mask;
    for (;;) {
        const CharSlot *s = &e->char_table[j];
        if (s->code_point == c)
            return s->id;
        if (s->code_point == NO_ID)
            return NO_ID;
        j = (j + 1) & e->char_mask;
    }
}

static size_t
capacity_for(size_t n)
{
    size_t capacity = 16;
    while (capacity < 2 * n)
        capacity <<= 1;
    return capacity;
}

/* -- one call's scratch space and cache -------------------------------------------------- */

/* One word the cache remembers: one cache line, the slot its hash picks (the last
   word there stays). */
typedef struct {
    uint8_t len;   /* 0: empty */
    uint8_t n_ids;
    uint8_t key[CACHE_KEY_MAX];
    uint32_t ids[CACHE_IDS_MAX];
} CacheSlot;

typedef struct {
    uint32_t *out;
    size_t n_out, out_cap;
    uint8_t *utf8;          /* a word's UTF-8 */
    size_t utf8_cap;
    uint32_t *symbols;      /* merging */
    uint32_t *positions;
    uint32_t *next, *prev;
    size_t symbols_cap;
    uint64_t *heap;
    size_t heap_len, heap_cap;
    CacheSlot *cache;      /* NULL: none (a failed allocation only loses speed) */
    size_t cache_mask;
    int fail;
} Work;

static void
work_free(Work *w)
{
    free(w->out);
    free(w->utf8);
    free(w->symbols);
    free(w->positions);
    free(w->next);
    free(w->prev);
    free(w->heap);
    free(w->cache);
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

static inline int
emit(Work *w, const uint32_t *ids, size_t n)
{
    if (w->n_out + n > w->out_cap && grow(w, (void **)&w->out, &w->out_cap, w->n_out, n, sizeof(uint32_t)) < 0)
        return -1;
    memcpy(w->out + w->n_out, ids, n * sizeof(uint32_t));
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

/* A cache of about `chars` / 8 words (64..CACHE_SLOTS_MAX) and of `chars` / 4 pairs
   (256..65,536): a short text does not pay for large ones. */
static void
cache_init(Work *w, Py_ssize_t chars)
{
    size_t slots = 64;
    while (slots < CACHE_SLOTS_MAX && (Py_ssize_t)slots * 8 < chars)
        slots <<= 1;
    w->cache = calloc(slots, sizeof(CacheSlot));
    w->cache_mask = slots - 1;
}

/* The cache slot of a word of n <= CACHE_KEY_MAX bytes. */
static inline CacheSlot *
cache_slot(const Work *w, uint64_t h)
{
    return &w->cache[(h >> 17) & w->cache_mask];
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
    memcpy(c->key, key, n);
    memcpy(c->ids, ids, n_ids * sizeof(uint32_t));
}

/* -- merging ---------------------------------------------------------------------------- */

/* The pair of symbols a and b (spanning bytes [start, end) of the word, MODE_RANKS):
   (rank << 32) | the token it makes, or NO_PAIR. */
static inline uint64_t
pair_of(const Encoder *e, Work *w, const uint8_t *bytes, uint32_t a, uint32_t b, size_t start, size_t end)
{
    if (e->mode == MODE_MERGE)
        return pair_find(e, a, b);
    size_t n = end - start;
    if (n > e->max_token_len)
        return NO_PAIR;
    const TokenSlot *t = token_find(e, bytes + start, n, hash_bytes(bytes + start, n));
    return t == NULL ? NO_PAIR : ((uint64_t)t->id << 32) | t->id;
}

/* Merge symbols[0..n), n <= SHORT_SYMBOLS (positions[0..n]: where each starts in bytes,
   MODE_RANKS) with arrays: fine for short words. Returns the number of symbols left. */
static size_t
merge_short(const Encoder *e, Work *w, const uint8_t *bytes, uint32_t *s, uint32_t *pos, size_t n)
{
    uint64_t pr[2 * SHORT_SYMBOLS + 2];  /* the pair at each position: (rank << 32) | made, or NO_PAIR */
    if (e->byte_pairs != NULL) {  /* the symbols are the bytes: their pairs are in a table of 65,536 */
        for (size_t i = 0; i + 1 < n; i++)
            pr[i] = e->byte_pairs[((size_t)bytes[i] << 8) | bytes[i + 1]];
        goto merge;
    }
    if (e->mode == MODE_MERGE)  /* start every first look-up at once: their cache misses overlap */
        for (size_t i = 0; i + 1 < n; i++)
            prefetch_pair(e, s[i], s[i + 1]);
    for (size_t i = 0; i + 1 < n; i++)
        pr[i] = pair_of(e, w, bytes, s[i], s[i + 1], pos[i], pos[i + 2]);
merge:
    while (n > 1) {
        uint64_t best = NO_PAIR;
        size_t at = 0;
        for (size_t i = 0; i + 1 < n; i++)
            if (pr[i] < best) {
                best = pr[i];
                at = i;
            }
        if (best == NO_PAIR)
            break;
        s[at] = (uint32_t)best;
        /* moves of a constant size (past n: the arrays have room) compile to a few
           vector moves, not calls */
        memmove(s + at + 1, s + at + 2, SHORT_SYMBOLS * sizeof(uint32_t));
        memmove(pos + at + 1, pos + at + 2, SHORT_SYMBOLS * sizeof(uint32_t));
        memmove(pr + at + 1, pr + at + 2, SHORT_SYMBOLS * sizeof(uint64_t));
        n--;
        if (e->mode == MODE_MERGE) {  /* both look-ups fetched at once: their cache misses overlap */
            uint64_t left = at > 0 ? ((uint64_t)s[at - 1] << 32) | s[at] : 0;
            uint64_t right = ((uint64_t)s[at] << 32) | (at + 1 < n ? s[at + 1] : 0);
            uint64_t hl = mix64(left), hr = mix64(right);
            __builtin_prefetch(&e->pairs[(size_t)hl & e->pair_mask]);
            __builtin_prefetch(&e->pairs[(size_t)hr & e->pair_mask]);
            if (at > 0)
                pr[at - 1] = pair_find_hashed(e, left, hl);
            if (at + 1 < n)
                pr[at] = pair_find_hashed(e, right, hr);
            continue;
        }
        if (at > 0)
            pr[at - 1] = pair_of(e, w, bytes, s[at - 1], s[at], pos[at - 1], pos[at + 1]);
        if (at + 1 < n)
            pr[at] = pair_of(e, w, bytes, s[at], s[at + 1], pos[at], pos[at + 2]);
    }
    return n;
}

/* The lowest pair value of block b (positions 8b..8b+7) of cur[0..n). */
#define MIN2(a, b) ((a) < (b) ? (a) : (b))
static inline uint64_t
block_min(const uint64_t *cur, size_t b)
{
    const uint64_t *c = cur + (b << 3);
    return MIN2(MIN2(MIN2(c[0], c[1]), MIN2(c[2], c[3])), MIN2(MIN2(c[4], c[5]), MIN2(c[6], c[7])));
}

/* Merge a word of up to MID_SYMBOLS symbols: each position's pair value (rank << 32 |
   made, NO_PAIR where none or dead) in cur, the lowest of every block of 8 in bmin, a
   linked list of the symbols left. A merge finds the lowest block (leftmost among
   equals), its first position of that value, and looks up the two pairs it changes:
   no heap, no stale entries. Returns the symbols left, in s. */
static size_t
merge_mid(const Encoder *e, Work *w, const uint8_t *bytes, size_t n_bytes, uint32_t *s, const uint32_t *pos,
          size_t n)
{
    size_t nb = (n + 7) >> 3;
    if (grow(w, (void **)&w->heap, &w->heap_cap, 0, 9 * nb, sizeof(uint64_t)) < 0)
        return 0;
    uint64_t *cur = w->heap, *bmin = w->heap + 8 * nb;  /* cur: whole blocks, NO_PAIR past n */
    uint32_t *next = w->next, *prev = w->prev;
    for (size_t i = 0; i < n; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = (uint32_t)(i - 1);  /* NO_ID for the first */
    }
#define END_OF(j) (next[j] < n ? pos[next[j]] : n_bytes)
    if (e->byte_pairs != NULL)
        for (size_t i = 0; i + 1 < n; i++)
            cur[i] = e->byte_pairs[((size_t)bytes[i] << 8) | bytes[i + 1]];
    else
        for (size_t i = 0; i + 1 < n; i++)
            cur[i] = pair_of(e, w, bytes, s[i], s[i + 1], pos[i], pos[i + 2]);
    for (size_t i = n - 1; i < 8 * nb; i++)
        cur[i] = NO_PAIR;
    for (size_t b = 0; b < nb; b++)
        bmin[b] = block_min(cur, b);
    for (;;) {
        uint64_t best = NO_PAIR;
        size_t bb = 0;
        for (size_t b = 0; b < nb; b++)
            if (bmin[b] < best) {
                best = bmin[b];
                bb = b;
            }
        if (best == NO_PAIR)
            break;
        size_t i = bb << 3;
        while (cur[i] != best)
            i++;
        uint32_t j = next[i], k = next[j], h = prev[i];
        s[i] = (uint32_t)best;
        s[j] = NO_ID;
        cur[j] = NO_PAIR;
        next[i] = k;
        if (k < n)
            prev[k] = (uint32_t)i;
        if (e->mode == MODE_MERGE) {  /* both look-ups fetched at once: their cache misses overlap */
            uint64_t right = ((uint64_t)s[i] << 32) | (k < n ? s[k] : 0);
            uint64_t left = h != NO_ID ? ((uint64_t)s[h] << 32) | s[i] : 0;
            uint64_t hr = mix64(right), hl = mix64(left);
            __builtin_prefetch(&e->pairs[(size_t)hr & e->pair_mask]);
            __builtin_prefetch(&e->pairs[(size_t)hl & e->pair_mask]);
            cur[i] = k < n ? pair_find_hashed(e, right, hr) : NO_PAIR;
            if (h != NO_ID)
                cur[h] = pair_find_hashed(e, left, hl);
        } else {
            cur[i] = k < n ? pair_of(e, w, bytes, s[i], s[k], pos[i], END_OF(k)) : NO_PAIR;
            if (h != NO_ID)
                cur[h] = pair_of(e, w, bytes, s[h], s[i], pos[h], END_OF(i));
        }
        bmin[i >> 3] = block_min(cur, i >> 3);
        if (j >> 3 != i >> 3)
            bmin[j >> 3] = block_min(cur, j >> 3);
        if (h != NO_ID && h >> 3 != i >> 3)
            bmin[h >> 3] = block_min(cur, h >> 3);
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
merge_long(const Encoder *e, Work *w, const uint8_t *bytes, size_t n_bytes, uint32_t *s, const uint32_t *pos,
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
static Py_ssize_t
symbolize(const Encoder *e, Work *w, const uint8_t *bytes, size_t n)
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
    return (Py_ssize_t)m;
}

/* The hash of a word, and where its look-ups will go fetched early (the scan hashes a
   block of words before it encodes them, so their cache misses overlap). */
static inline uint64_t
hash_and_prefetch(const Encoder *e, const Work *w, const uint8_t *bytes, size_t n)
{
    uint64_t h = hash_bytes(bytes, n);
    if (n <= CACHE_KEY_MAX && w->cache != NULL)
        __builtin_prefetch(cache_slot(w, h));
    if (e->whole_lookup && n <= e->max_token_len)
        __builtin_prefetch(&e->tokens[(size_t)h & e->token_mask]);
    return h;
}

/* A word's ids, added to w->out; 0, or -1 (w->fail set). h: hash_bytes(bytes, n). */
static int
encode_hashed_word(const Encoder *e, Work *w, const uint8_t *bytes, size_t n, uint64_t h)
{
    if (n == 0)
        return 0;
    if (n == 1 && !e->chars && e->prefix == NO_ID && e->suffix == NO_ID)
        return emit_one(w, e->byte_ids[bytes[0]]);
    CacheSlot *c = NULL;
    if (n <= CACHE_KEY_MAX && w->cache != NULL) {
        c = cache_slot(w, h);
        if (cache_holds(c, bytes, n))
            return emit(w, c->ids, c->n_ids);
    }
    if (e->whole_lookup && n <= e->max_token_len) {
        const TokenSlot *t = token_find(e, bytes, n, h);
        if (t != NULL && t->whole) {
            if (c != NULL)
                cache_put(c, bytes, n, &t->id, 1);
            return emit_one(w, t->id);
        }
    }
    Py_ssize_t m = symbolize(e, w, bytes, n);
    if (m < 0)
        return -1;
    size_t left = (size_t)m <= SHORT_SYMBOLS ? merge_short(e, w, bytes, w->symbols, w->positions, (size_t)m)
                  : (size_t)m <= MID_SYMBOLS ? merge_mid(e, w, bytes, n, w->symbols, w->positions, (size_t)m)
                  : merge_long(e, w, bytes, n, w->symbols, w->positions, (size_t)m);
    if (w->fail)
        return -1;
    if (c != NULL)
        cache_put(c, bytes, n, w->symbols, left);
    return emit(w, w->symbols, left);
}

static int
encode_word(const Encoder *e, Work *w, const uint8_t *bytes, size_t n)
{
    return encode_hashed_word(e, w, bytes, n, hash_bytes(bytes, n));
}

/* The UTF-8 of text[start:end] (kind-byte code points at data, no surrogates) in
   w->utf8 from offset `at` on; its length, or -1. */
INLINE Py_ssize_t
utf8_of(Work *w, size_t at, const void *data, int kind, Py_ssize_t start, Py_ssize_t end)
{
    size_t most = (size_t)(end - start) * (kind == 1 ? 2 : kind == 2 ? 3 : 4);
    if (grow(w, (void **)&w->utf8, &w->utf8_cap, at, most, 1) < 0)
        return -1;
    uint8_t *out = w->utf8 + at;
    for (Py_ssize_t i = start; i < end; i++) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* four ASCII characters of a 2-byte text at once */
        while (kind == PyUnicode_2BYTE_KIND && i + 4 <= end) {
            uint64_t x = load64((const uint8_t *)((const Py_UCS2 *)data + i));
            if (x & 0xFF80FF80FF80FF80ULL)
                break;
            x = (x | (x >> 8)) & 0x0000FFFF0000FFFFULL;
            uint32_t four = (uint32_t)(x | (x >> 16));
            memcpy(out, &four, 4);
            out += 4;
            i += 4;
        }
        if (i == end)
            break;
#endif
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x80) {
            *out++ = (uint8_t)c;
        } else if (c < 0x800) {
            *out++ = (uint8_t)(0xC0 | (c >> 6));
            *out++ = (uint8_t)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            *out++ = (uint8_t)(0xE0 | (c >> 12));
            *out++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
            *out++ = (uint8_t)(0x80 | (c & 0x3F));
        } else {
            *out++ = (uint8_t)(0xF0 | (c >> 18));
            *out++ = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
            *out++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
            *out++ = (uint8_t)(0x80 | (c & 0x3F));
        }
    }
    return out - (w->utf8 + at);
}

/* text[start:end] as one word. */
static inline int
encode_span(const Encoder *e, Work *w, const void *data, int kind, int ascii, Py_ssize_t start, Py_ssize_t end)
{
    if (ascii)
        return encode_word(e, w, (const uint8_t *)data + start, (size_t)(end - start));
    Py_ssize_t n = utf8_of(w, 0, data, kind, start, end);
    return n < 0 ? -1 : encode_word(e, w, w->utf8, (size_t)n);
}

/* Every word of a text under the encoder's pattern; 0, or -1. Words are cut and
   hashed BLOCK at a time, then encoded. One function per pattern and kind, each scan
   inlined with both constant. */
#define BLOCK 32
INLINE int
scan(const Encoder *e, Work *w, const void *data, int kind, int ascii, Py_ssize_t n, int pattern)
{
    const uint8_t *classes = e->classes;
    size_t starts[BLOCK], ends[BLOCK];  /* each word's bytes: in data (ASCII) or in w->utf8 */
    uint64_t hashes[BLOCK];
#define IS_SPACE_AT(i) ((classes[PyUnicode_READ(kind, data, (i))] & 15) == CAT_SPACE)
    Py_ssize_t i = 0;
    while (i < n) {
        int k = 0;
        size_t at = 0;
        for (; k < BLOCK && i < n; k++) {
            Py_ssize_t end;
            if (pattern == PATTERN_WHITESPACE) {  /* \S+: the whitespace between words is no word */
                while (i < n && IS_SPACE_AT(i))
                    i++;
                if (i == n)
                    break;
                end = i + 1;
                while (end < n && !IS_SPACE_AT(end))
                    end++;
            } else {
                end = pretok_end(classes, data, kind, n, i, pattern);
                if (end <= i)
                    end = i + 1;  /* never: every alternative takes a character; a bug must not loop */
            }
            if (ascii) {
                starts[k] = (size_t)i;
                ends[k] = (size_t)end;
            } else {
                Py_ssize_t len = utf8_of(w, at, data, kind, i, end);
                if (len < 0)
                    return -1;
                starts[k] = at;
                at += (size_t)len;
                ends[k] = at;
            }
            i = end;
        }
        const uint8_t *base = ascii ? (const uint8_t *)data : w->utf8;
        for (int j = 0; j < k; j++)
            hashes[j] = hash_and_prefetch(e, w, base + starts[j], ends[j] - starts[j]);
        for (int j = 0; j < k; j++)
            if (encode_hashed_word(e, w, base + starts[j], ends[j] - starts[j], hashes[j]) < 0)
                return -1;
    }
#undef IS_SPACE_AT
    return 0;
}

#define SCANNER(name, kind, pattern) \
    static int name(const Encoder *e, Work *w, const void *d, int ascii, Py_ssize_t n) \
    { return scan(e, w, d, kind, ascii, n, pattern); }
SCANNER(gpt2_1, 1, PATTERN_GPT2)
SCANNER(gpt2_2, 2, PATTERN_GPT2)
SCANNER(gpt2_4, 4, PATTERN_GPT2)
SCANNER(cl100k_1, 1, PATTERN_CL100K)
SCANNER(cl100k_2, 2, PATTERN_CL100K)
SCANNER(cl100k_4, 4, PATTERN_CL100K)
SCANNER(o200k_1, 1, PATTERN_O200K)
SCANNER(o200k_2, 2, PATTERN_O200K)
SCANNER(o200k_4, 4, PATTERN_O200K)
SCANNER(whitespace_1, 1, PATTERN_WHITESPACE)
SCANNER(whitespace_2, 2, PATTERN_WHITESPACE)
SCANNER(whitespace_4, 4, PATTERN_WHITESPACE)

typedef int (*Scanner)(const Encoder *, Work *, const void *, int, Py_ssize_t);
static const Scanner scanners[4][3] = {
    {gpt2_1, gpt2_2, gpt2_4}, {cl100k_1, cl100k_2, cl100k_4}, {o200k_1, o200k_2, o200k_4},
    {whitespace_1, whitespace_2, whitespace_4}};

/* -- building ------------------------------------------------------------------------------- */

static void
Encoder_dealloc(Encoder *e)
{
    PyMem_RawFree(e->pairs);
    PyMem_RawFree(e->tokens);
    PyMem_RawFree(e->token_bytes);
    PyMem_RawFree(e->char_table);
    PyMem_RawFree(e->classes);
    PyMem_RawFree(e->byte_pairs);
    if (e->id_objects != NULL)
        for (size_t i = 0; i < e->n_ids; i++)
            Py_XDECREF(e->id_objects[i]);
    PyMem_Free(e->id_objects);
    Py_XDECREF(e->classify);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* A sequence of ints as uint32 (a new PyMem_Raw array), or NULL with an exception. */
static uint32_t *
uint32s(PyObject *seq, Py_ssize_t *n, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(fast);
    uint32_t *out = PyMem_RawMalloc((size_t)(*n ? *n : 1) * sizeof(uint32_t));
    if (out == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < *n; i++) {
        unsigned long v = PyLong_AsUnsignedLong(items[i]);
        if ((v == (unsigned long)-1 && PyErr_Occurred()) || v >= NO_ID) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s: id %lu is too large", what, v);
            PyMem_RawFree(out);
            Py_DECREF(fast);
            return NULL;
        }
        out[i] = (uint32_t)v;
    }
    Py_DECREF(fast);
    return out;
}

static int
build_pairs(Encoder *e, PyObject *merges)
{
    PyObject *lefts_o, *rights_o, *made_o;
    if (!PyArg_ParseTuple(merges, "OOO:merges", &lefts_o, &rights_o, &made_o))
        return -1;
    Py_ssize_t nl, nr, nm;
    uint32_t *lefts = uint32s(lefts_o, &nl, "merges: left ids"), *rights = NULL, *made = NULL;
    if (lefts)
        rights = uint32s(rights_o, &nr, "merges: right ids");
    if (rights)
        made = uint32s(made_o, &nm, "merges: made ids");
    int rc = -1;
    if (made == NULL)
        goto done;
    if (nl != nr || nl != nm) {
        PyErr_SetString(PyExc_ValueError, "merges: the left, right and made ids differ in number");
        goto done;
    }
    size_t capacity = capacity_for((size_t)nl);
    e->pairs = PyMem_RawMalloc(capacity * sizeof(PairSlot));
    if (e->pairs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    e->table_bytes += capacity * sizeof(PairSlot);
    for (size_t i = 0; i < capacity; i++)
        e->pairs[i].key = NO_PAIR;
    e->pair_mask = capacity - 1;
    for (Py_ssize_t r = 0; r < nl; r++) {
        uint64_t key = ((uint64_t)lefts[r] << 32) | rights[r];
        size_t j = (size_t)mix64(key) & e->pair_mask;
        while (e->pairs[j].key != NO_PAIR && e->pairs[j].key != key)
            j = (j + 1) & e->pair_mask;
        if (e->pairs[j].key == key)
            continue;  /* a pair merged twice: its lowest rank */
        e->pairs[j].key = key;
        e->pairs[j].rank = (uint32_t)r;
        e->pairs[j].made = made[r];
    }
    rc = 0;
done:
    PyMem_RawFree(lefts);
    PyMem_RawFree(rights);
    PyMem_RawFree(made);
    return rc;
}

/* The table of the tokens' bytes: those with an id in `ids` (a sequence), or every
   token where ids is None; the first id wins where bytes repeat. */
static int
build_tokens(Encoder *e, PyObject *tokens, PyObject *ids)
{
    PyObject *fast = PySequence_Fast(tokens, "tokens must be a sequence of bytes (or None) by id");
    if (fast == NULL)
        return -1;
    Py_ssize_t n_tokens = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    uint32_t *wanted = NULL;
    Py_ssize_t n = n_tokens;
    if (ids != Py_None && (wanted = uint32s(ids, &n, "token ids")) == NULL) {
        Py_DECREF(fast);
        return -1;
    }
    size_t total = 0;
    int rc = -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t id = wanted ? (Py_ssize_t)wanted[k] : k;
        if (id >= n_tokens) {
            PyErr_Format(PyExc_ValueError, "token id %zd is not in tokens", id);
            goto done;
        }
        PyObject *t = items[id];
        if (t == Py_None)
            continue;
        if (!PyBytes_Check(t)) {
            PyErr_Format(PyExc_TypeError, "tokens must be bytes or None, not %.100s", Py_TYPE(t)->tp_name);
            goto done;
        }
        total += (size_t)PyBytes_GET_SIZE(t);
    }
    if (total >= ((size_t)1 << 31)) {  /* every length fits TokenSlot.len */
        PyErr_SetString(PyExc_ValueError, "the tokens' bytes exceed 2 GB");
        goto done;
    }
    size_t capacity = capacity_for((size_t)n);
    e->tokens = PyMem_RawCalloc(capacity, sizeof(TokenSlot));
    e->token_bytes = PyMem_RawMalloc(total ? total : 1);
    if (e->tokens == NULL || e->token_bytes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    e->table_bytes += capacity * sizeof(TokenSlot) + total;
    e->token_mask = capacity - 1;
    size_t offset = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t id = wanted ? (Py_ssize_t)wanted[k] : k;
        PyObject *t = items[id];
        if (t == Py_None || PyBytes_GET_SIZE(t) == 0)
            continue;
        const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(t);
        size_t len = (size_t)PyBytes_GET_SIZE(t);
        uint64_t h = hash_bytes(p, len);
        if (token_find(e, p, len, h) != NULL)
            continue;
        size_t j = (size_t)h & e->token_mask;
        while (e->tokens[j].len)
            j = (j + 1) & e->token_mask;
        memcpy(e->token_bytes + offset, p, len);
        e->tokens[j] = (TokenSlot){(uint32_t)(h >> 32), (uint32_t)offset, (uint32_t)len, 1, (uint32_t)id};
        offset += len;
        if (len > e->max_token_len)
            e->max_token_len = len;
    }
    rc = 0;
done:
    PyMem_RawFree(wanted);
    Py_DECREF(fast);
    return rc;
}

/* Mark the tokens that a word of their bytes does not encode to (merge rule, where
   the caller could not vouch for every token). */
static int
check_whole(Encoder *e)
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
        if (encode_word(e, &w, e->token_bytes + t->offset, t->len) < 0)
            rc = -1;
        else
            t->whole = w.n_out == 1 && w.out[0] == t->id;
    }
    e->whole_lookup = 1;
    work_free(&w);
    if (rc < 0)
        PyErr_NoMemory();
    return rc;
}

static int
build_chars(Encoder *e, PyObject *chars)
{
    if (!PyDict_Check(chars)) {
        PyErr_SetString(PyExc_TypeError, "chars must be a dict (character -> id)");
        return -1;
    }
    size_t capacity = capacity_for((size_t)PyDict_GET_SIZE(chars));
    e->char_table = PyMem_RawMalloc(capacity * sizeof(CharSlot));
    if (e->char_table == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    e->table_bytes += capacity * sizeof(CharSlot);
    for (size_t i = 0; i < capacity; i++)
        e->char_table[i].code_point = NO_ID;
    e->char_mask = capacity - 1;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(chars, &pos, &key, &value)) {
        if (!PyUnicode_Check(key) || PyUnicode_GET_LENGTH(key) != 1) {
            PyErr_SetString(PyExc_ValueError, "chars: every key must be one character");
            return -1;
        }
        unsigned long id = PyLong_AsUnsignedLong(value);
        if (id == (unsigned long)-1 && PyErr_Occurred())
            return -1;
        uint32_t c = PyUnicode_READ_CHAR(key, 0);
        size_t j = (size_t)mix64(c) & e->char_mask;
        while (e->char_table[j].code_point != NO_ID)
            j = (j + 1) & e->char_mask;
        e->char_table[j] = (CharSlot){c, (uint32_t)id};
    }
    return 0;
}

static uint32_t
optional_id(long v)
{
    return v < 0 ? NO_ID : (uint32_t)v;
}

static PyObject *
Encoder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"tokens", "merges", "byte_ids", "mode", "pattern", "classify", "chars", "unk",
                            "fallback", "prefix", "suffix", "whole", NULL};
    PyObject *tokens, *merges, *byte_ids, *classify = Py_None, *chars = Py_None;
    int mode = MODE_MERGE, pattern = PATTERN_NONE, fallback = 0, whole = 0;
    long unk = -1, prefix = -1, suffix = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|$iiOOlplli:Encoder", names, &tokens, &merges, &byte_ids,
                                     &mode, &pattern, &classify, &chars, &unk, &fallback, &prefix, &suffix,
                                     &whole))
        return NULL;
    if (mode != MODE_MERGE && mode != MODE_RANKS)
        return PyErr_Format(PyExc_ValueError, "mode must be 0 (merge ranks) or 1 (token ranks), not %d", mode);
    if (pattern < PATTERN_NONE || pattern > PATTERN_WHITESPACE)
        return PyErr_Format(PyExc_ValueError, "pattern must be -1 (none), 0 (gpt2), 1 (cl100k), 2 (o200k) or "
                            "3 (whitespace), not %d", pattern);
    if (pattern != PATTERN_NONE && !PyCallable_Check(classify))
        return PyErr_Format(PyExc_TypeError, "a pattern needs a classify function");
    if (mode == MODE_RANKS && (chars != Py_None || prefix >= 0 || suffix >= 0))
        return PyErr_Format(PyExc_ValueError, "token ranks apply to byte symbols without word markers");
    Encoder *e = (Encoder *)type->tp_alloc(type, 0);
    if (e == NULL)
        return NULL;
    e->mode = mode;
    e->pattern = pattern;
    Py_ssize_t n_tokens = PySequence_Size(tokens);
    if (n_tokens < 0) {
        Py_DECREF(e);
        return NULL;
    }
    e->n_ids = (size_t)n_tokens;
    e->chars = chars != Py_None;
    e->fallback = fallback;
    e->unk = optional_id(unk);
    e->prefix = optional_id(prefix);
    e->suffix = optional_id(suffix);
    Py_INCREF(classify);
    e->classify = classify;
    for (int b = 0; b < 256; b++)
        e->byte_ids[b] = NO_ID;
    if (byte_ids != Py_None) {
        Py_ssize_t n;
        uint32_t *ids = uint32s(byte_ids, &n, "byte_ids");
        if (ids == NULL)
            goto fail;
        if (n != 256) {
            PyMem_RawFree(ids);
            PyErr_SetString(PyExc_ValueError, "byte_ids must hold 256 ids");
            goto fail;
        }
        memcpy(e->byte_ids, ids, sizeof e->byte_ids);
        PyMem_RawFree(ids);
        e->has_bytes = 1;
    } else if (!e->chars || fallback) {
        PyErr_SetString(PyExc_ValueError, "byte symbols (or byte fallback) need byte_ids");
        goto fail;
    }
    if (mode == MODE_MERGE && build_pairs(e, merges) < 0)
        goto fail;
    if (mode == MODE_RANKS && merges != Py_None) {
        PyErr_SetString(PyExc_ValueError, "token ranks take no merges");
        goto fail;
    }
    if (mode == MODE_MERGE && e->pairs == NULL) {
        PyErr_SetString(PyExc_ValueError, "the merge rule needs merges");
        goto fail;
    }
    if (mode == MODE_MERGE && !e->chars && e->prefix == NO_ID && e->suffix == NO_ID) {
        e->byte_pairs = PyMem_RawMalloc(65536 * sizeof(uint64_t));
        if (e->byte_pairs == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        e->table_bytes += 65536 * sizeof(uint64_t);
        for (size_t ab = 0; ab < 65536; ab++)
            e->byte_pairs[ab] = pair_find(e, e->byte_ids[ab >> 8], e->byte_ids[ab & 255]);
    }
    /* Whole-word look-ups: on plain byte symbols only (a word with markers or of
       characters is not a token's bytes); under the merge rule only the tokens merges
       make (and the bytes) can come out. */
    PyObject *made = NULL;
    if (mode == MODE_MERGE)
        made = PyTuple_GET_ITEM(merges, 2);
    int plain = !e->chars && e->prefix == NO_ID && e->suffix == NO_ID;
    if (mode == MODE_RANKS || plain) {
        if (build_tokens(e, tokens, made ? made : Py_None) < 0)
            goto fail;
        e->whole_lookup = 1;
        if (mode == MODE_MERGE && !whole && check_whole(e) < 0)
            goto fail;
    }
    if (e->chars && build_chars(e, chars) < 0)
        goto fail;
    if (pattern != PATTERN_NONE) {
        e->classes = PyMem_RawCalloc(N_CODE_POINTS, 1);
        if (e->classes == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    return (PyObject *)e;
fail:
    Py_DECREF(e);
    return NULL;
}

/* -- encoding -------------------------------------------------------------------------------- */

/* The ids of one call as a list, or (as_bytes) as bytes of native uint32. The ints of
   the ids are made once per encoder (a list of a million ids makes no new object). */
static PyObject *
result(Encoder *e, Work *w, int as_bytes)
{
    if (as_bytes)
        return PyBytes_FromStringAndSize((const char *)w->out, (Py_ssize_t)(w->n_out * sizeof(uint32_t)));
    if (e->id_objects == NULL && e->n_ids) {
        PyObject **objects = PyMem_Calloc(e->n_ids, sizeof(PyObject *));
        if (objects == NULL)
            return PyErr_NoMemory();
        for (size_t i = 0; i < e->n_ids; i++)
            if ((objects[i] = PyLong_FromSize_t(i)) == NULL) {
                for (size_t j = 0; j < i; j++)
                    Py_DECREF(objects[j]);
                PyMem_Free(objects);
                return NULL;
            }
        e->id_objects = objects;
        e->table_bytes += e->n_ids * (sizeof(PyObject *) + 32);
    }
    PyObject *list = PyList_New((Py_ssize_t)w->n_out);
    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < w->n_out; i++) {
        uint32_t id = w->out[i];
        if (id < e->n_ids) {
            Py_INCREF(e->id_objects[id]);
            PyList_SET_ITEM(list, (Py_ssize_t)i, e->id_objects[id]);
            continue;
        }
        PyObject *v = PyLong_FromUnsignedLong(id);
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

static PyObject *
finish(Encoder *e, Work *w, int rc, int as_bytes)
{
    PyObject *out;
    if (rc == 0)
        out = result(e, w, as_bytes);
    else if (w->fail == FAIL_UNKNOWN_CHAR)
        out = Py_NewRef(Py_None);
    else
        out = PyErr_NoMemory();
    work_free(w);
    return out;
}

static int
has_surrogate(const void *data, int kind, Py_ssize_t n)
{
    if (kind == PyUnicode_1BYTE_KIND)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0xD800 && c <= 0xDFFF)
            return 1;
    }
    return 0;
}

/* One pass over a text a pattern scans: 1 where it holds a surrogate (the text is not
   encoded), else its characters are classified (classify_text): 0, or -1 with an
   exception. A surrogate is never classified, so the check costs only at characters
   not classified yet. */
static int
classify_and_check(Encoder *e, const void *data, int kind, Py_ssize_t n)
{
    if (kind == PyUnicode_1BYTE_KIND)
        return n ? classify_text(e->classes, data, kind, n, e->classify) : 0;
    uint8_t *classes = e->classes;
    if (classify_text(classes, NULL, PyUnicode_1BYTE_KIND, 0, e->classify) < 0)  /* the first 256 */
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (kind == PyUnicode_2BYTE_KIND)  /* skip four characters below 256 at once */
            while (i + 4 <= n && !(load64((const uint8_t *)((const Py_UCS2 *)data + i)) & 0xFF00FF00FF00FF00ULL))
                i += 4;
        if (i == n)
            break;
        Py_UCS4 c = kind == PyUnicode_2BYTE_KIND ? ((const Py_UCS2 *)data)[i] : ((const Py_UCS4 *)data)[i];
        if (classes[c])
            continue;
        if (c >= 0xD800 && c <= 0xDFFF)
            return 1;
        if (ask_class(classes, e->classify, c) < 0)
            return -1;
    }
    return 0;
}

static PyObject *
Encoder_encode(Encoder *e, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"text", "as_bytes", NULL};
    PyObject *text;
    int as_bytes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|p:encode", names, &text, &as_bytes))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const void *data = PyUnicode_DATA(text);
    int kind = PyUnicode_KIND(text);
    int ascii = PyUnicode_IS_ASCII(text);
    int found = e->pattern == PATTERN_NONE ? (!ascii && has_surrogate(data, kind, n))
                : classify_and_check(e, data, kind, n);
    if (found < 0)
        return NULL;
    if (found)
        Py_RETURN_NONE;
    Work w;
    memset(&w, 0, sizeof w);
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    cache_init(&w, n);
    if (n == 0)
        rc = 0;
    else if (e->pattern == PATTERN_NONE)
        rc = encode_span(e, &w, data, kind, ascii, 0, n);
    else
        rc = scanners[e->pattern][kind == 1 ? 0 : kind == 2 ? 1 : 2](e, &w, data, ascii, n);
    Py_END_ALLOW_THREADS
    return finish(e, &w, rc, as_bytes);
}

static PyObject *
Encoder_encode_words(Encoder *e, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"words", "as_bytes", NULL};
    PyObject *words;
    int as_bytes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:encode_words", names, &words, &as_bytes))
        return NULL;
    PyObject *tuple = PySequence_Tuple(words);  /* ours: nobody changes it while the GIL is released */
    if (tuple == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *word = PyTuple_GET_ITEM(tuple, k);
        if (!PyUnicode_Check(word)) {
            Py_DECREF(tuple);
            return PyErr_Format(PyExc_TypeError, "words must be str, not %.100s", Py_TYPE(word)->tp_name);
        }
        if (!PyUnicode_IS_ASCII(word) && has_surrogate(PyUnicode_DATA(word), PyUnicode_KIND(word),
                                                      PyUnicode_GET_LENGTH(word))) {
            Py_DECREF(tuple);
            Py_RETURN_NONE;
        }
    }
    Work w;
    memset(&w, 0, sizeof w);
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    cache_init(&w, 8 * n);
    for (Py_ssize_t k = 0; k < n && rc == 0; k++) {
        PyObject *word = PyTuple_GET_ITEM(tuple, k);
        rc = encode_span(e, &w, PyUnicode_DATA(word), PyUnicode_KIND(word), PyUnicode_IS_ASCII(word), 0,
                         PyUnicode_GET_LENGTH(word));
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(tuple);
    return finish(e, &w, rc, as_bytes);
}

static PyObject *
Encoder_table_bytes(Encoder *e, PyObject *unused)
{
    return PyLong_FromSize_t(e->table_bytes);
}

static PyMethodDef Encoder_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))Encoder_encode, METH_VARARGS | METH_KEYWORDS,
     "encode(text, as_bytes=False) -> list[int] | bytes | None\n\n"
     "The ids of text (cut by the encoder's pattern, or one word where it has none); as_bytes:\n"
     "as native uint32 bytes. None where the text holds a surrogate or a character the\n"
     "version has no symbol for."},
    {"encode_words", (PyCFunction)(void (*)(void))Encoder_encode_words, METH_VARARGS | METH_KEYWORDS,
     "encode_words(words, as_bytes=False) -> list[int] | bytes | None\n\n"
     "The ids of words already cut, in order (as encode)."},
    {"table_bytes", (PyCFunction)Encoder_table_bytes, METH_NOARGS,
     "table_bytes() -> int: the memory of the encoder's tables (the class table aside)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpestore._encodecore.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Encoder(tokens, merges, byte_ids, *, mode=0, pattern=-1, classify=None, chars=None, unk=-1,\n"
              "        fallback=False, prefix=-1, suffix=-1, whole=False)\n\n"
              "tokens: each id's bytes (None for none); merges: (left ids, right ids, made ids) in rank\n"
              "order (None for mode 1, token ranks: the rank of a token is its id); byte_ids: the id of\n"
              "each byte; pattern: 0 gpt2, 1 cl100k, 2 o200k, -1 none (the caller cuts words);\n"
              "classify: bpestore.text.char_class; chars: character -> id for a character alphabet,\n"
              "with unk (the unknown token's id) or fallback (unseen characters become bytes);\n"
              "prefix/suffix: the word markers' ids; whole: every token merges make encodes to itself\n"
              "(else each is checked once here).",
    .tp_methods = Encoder_methods,
    .tp_new = Encoder_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_encodecore",
    "Pre-tokenize and merge text into token ids (optional compiled core).",
    -1, NULL,
};

PyMODINIT_FUNC
PyInit__encodecore(void)
{
    if (PyType_Ready(&EncoderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&EncoderType);
    if (PyModule_AddObject(m, "Encoder", (PyObject *)&EncoderType) < 0) {
        Py_DECREF(&EncoderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
