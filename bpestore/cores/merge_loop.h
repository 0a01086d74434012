/* The training merge loop in plain C (no Python): the state and algorithm of the
 * compiled core of bpestore.trainer; bpestore/_mergecore.c is its Python binding.
 *
 * A `MergeLoop` holds the whole training state:
 *   - words as one flat uint32 array of symbol ids (offset + length per word,
 *     rewritten in place: a merge only shortens a word), counts as int64;
 *   - pair counts in an open-addressing hash table (linear probing, deletion
 *     by backward shift) keyed by the 64-bit pair (left << 32) | right;
 *   - for each pair, the words it may occur in: a compact array of uint32 word
 *     indices (a superset, as in the pure trainer: a word that loses the pair
 *     is skipped when the pair merges; a pair whose count drops to 0 is
 *     forgotten, bucket and all);
 *   - the lazy max-heap of (count, pair) with the tie-breaks of the pure
 *     trainer: "lexicographic" (the greater (left bytes, right bytes) wins),
 *     "hf" (the smaller (tie[left], tie[right]) wins), then the smaller pair, and
 *     "first-seen" (the smaller first occurrence wins: (word << 32) | byte offset,
 *     the words given in the order the text first shows them). A pair's first
 *     occurrence is kept in its slot, exact as occurrences come (each merge's events
 *     carry their byte offsets), FIRST_UNKNOWN once that occurrence goes; it is then
 *     found again (first_of) only when the pair is pushed or comes to the top of the
 *     heap. (The pure trainer forgets it whenever its first word changes: the same
 *     merges, found with fewer searches here.)
 *
 *   - replay stages (resume, extend): stored merges as a pair -> rank table and
 *     the id each rank makes; each word added gets them by per-word BPE with ranks
 *     (bpestore.bpe.merge_word: lowest rank first, leftmost among equals) before
 *     it is stored, so resuming builds no Python list per word.
 *
 * It does exactly what the pure-Python BpeTrainer does (bpestore/trainer.py, the
 * reference), so the merge lists are identical (tests/test_merge_core.py).
 *
 * Errors: a function that fails returns -1 (or NULL) with t->overflow set to the
 * reason when a limit was passed, else (t->overflow NULL) it ran out of memory.
 */
#ifndef BPESTORE_MERGE_LOOP_H
#define BPESTORE_MERGE_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "threads.h"

#define OVERFLOW(t, why) ((t)->overflow = (why))

#define EMPTY UINT64_MAX
#define INLINE_CAP 2

typedef struct {
    uint64_t key;      /* EMPTY when the slot is free */
    int64_t count;
    union {
        uint32_t *ptr;               /* cap > INLINE_CAP */
        uint32_t inl[INLINE_CAP];    /* cap <= INLINE_CAP */
    } w;
    uint32_t n, cap;   /* words indexed under the pair */
} Slot;

typedef struct {
    int64_t count;
    uint64_t key;
    uint64_t first;    /* first-seen: the pair's first occurrence when pushed */
} Entry;

#define FIRST_UNKNOWN UINT64_MAX

/* One replay stage: stored merges in rank order. `ranks` maps a pair to its
 * lowest rank (open addressing, linear probing); made[rank] is the id it makes. */
typedef struct {
    uint64_t key;      /* EMPTY when free */
    uint32_t rank;
} RankSlot;

typedef struct {
    RankSlot *ranks;
    uint64_t mask;
    uint32_t *made;
    uint32_t n;        /* merges; also the rank of a pair that has none */
} Stage;

/* One worker's share of a merge (or of build): a slice of a bucket (of the words),
 * and what it found, for the calling thread to apply in slice order. */
typedef struct Work Work;

typedef struct {
    int hf;                 /* tie-break: 1 hf, 0 lexicographic or first-seen */
    int first_seen;         /* tie-break first-seen (token bytes kept as for lexicographic) */
    int broken;             /* a failed allocation left the state half-updated */
    int built;
    int busy;               /* the caller let go of its lock while this runs: no other call now */
    const char *overflow;   /* why the last call failed when not for memory (else NULL) */
    /* ml_run asks them, with ctx: may (left, right) merge (NULL: all may; 1 yes, 0 no, -1 failed)?
     * stop the batch after this merge (NULL: never; 1 stop)? */
    int (*allow)(void *ctx, uint32_t left, uint32_t right);
    int (*stop)(void *ctx);
    void *ctx;
    /* threads: at most `threads` workers, each with at least `parallel_min` words */
    int threads;
    uint32_t parallel_min;
    int may_dup;            /* a merge reused an id: a bucket may list a word twice */
    Work *work;             /* per worker, kept between merges */
    uint32_t *seen;         /* dedup marks by word (may_dup), with the merge's stamp */
    uint32_t stamp;
    /* a split merge: its bucket in chunks of `chunk` words, taken by the workers in turn;
     * chunk c's events are work[at[c].worker].ev[at[c].begin:at[c].end] */
    struct Chunk { uint32_t worker; uint64_t begin, end; } *at;
    uint64_t cap_at;
    uint32_t n_chunks, chunk, next_chunk;
    uint64_t split_merges, deduplicated;  /* merges split over threads; of them, with a word listed twice */
    int split_build;        /* the initial count was split */
    /* tokens */
    uint32_t n_tokens, cap_tokens;
    uint32_t *tie;          /* hf: tie value by token */
    uint64_t *tok_off;      /* bytes of token t at bytes[tok_off[t]], tok_len[t] */
    uint32_t *tok_len;
    uint64_t *tok_pre;      /* token t's first 8 bytes, big-endian, zeros after its end (cmp_bytes) */
    unsigned char *bytes;
    uint64_t n_bytes, cap_bytes;
    /* the id a merge making some bytes takes: the ordinary token with those bytes (special
     * tokens are not listed), by their hash (open addressing; NONE free) */
    uint32_t *by_bytes;
    uint64_t by_mask, by_used;
    /* ml_run's merges: (left, right, token) each, and its count */
    uint32_t *made;
    int64_t *made_count;
    uint64_t n_made, cap_made, cap_made_count;
    /* words */
    uint32_t *sym;
    uint64_t n_sym, cap_sym;
    uint64_t *off;
    uint32_t *len;
    int64_t *cnt;
    uint32_t n_words, cap_words;
    /* pairs */
    Slot *slots;
    uint64_t mask, used;    /* capacity - 1; slots in use */
    uint64_t *firsts;       /* first-seen: by slot, its pair's first occurrence or FIRST_UNKNOWN (else NULL) */
    /* heap */
    Entry *heap;
    uint64_t n_heap, cap_heap;
    /* pairs that grew during a merge */
    uint64_t *touched;
    uint64_t n_touched, cap_touched;
    /* a pair is listed in `touched` once per merge: mark[2 * other + (token on the left)]
     * holds the stamp of the merge that listed (other, token) or (token, other) */
    uint32_t *mark;
    uint64_t cap_mark;
    uint32_t mark_stamp, merging;  /* merging: the token being made */
    /* replay: stages of stored merges applied to each word as it comes in */
    Stage *stages;
    uint64_t n_stages, cap_stages;
    uint32_t *scratch;      /* per-word BPE: pair ranks (short words) or next/prev links */
    uint64_t cap_scratch;
    uint64_t *wheap;        /* per-word BPE of a long word: (rank << 32) | position */
    uint64_t cap_wheap;
} MergeLoop;

#define NONE UINT32_MAX
#define MAX_THREADS 256

/* A worker's local pair (build): its count and words, in the order first seen. */
typedef struct {
    uint64_t key;
    int64_t count;
    uint32_t *w;
    uint32_t n, cap;
} Local;

struct Work {
    MergeLoop *t;
    uint32_t id;             /* which worker */
    int build;               /* 1: count pairs of words [from, to); 0: merge in bucket[from:to] */
    const uint32_t *words;
    uint32_t from, to;
    uint32_t left, right, token;
    int failed;              /* an allocation failed (workers run without the caller's lock) */
    /* merge: per word holding the pair, (word, occurrences, count low, count high),
     * then (symbol before, symbol after) per occurrence (NONE at the ends) */
    uint32_t *ev;
    uint64_t n_ev, cap_ev;
    /* build: local pairs, and their index (open addressing: key -> position + 1) */
    Local *loc;
    uint64_t n_loc, cap_loc;
    uint64_t *index;         /* (position + 1) << 0, 0 when free; keys compared via loc */
    uint64_t mask;
};

static void free_locals(Work *wk);

/* -- memory ------------------------------------------------------------------ */
/* Grow *p (of elements of `size`) to hold at least `need`; 0 or -1. Workers call it
 * too. */
static int grow_raw(void **p, uint64_t *cap, uint64_t need, size_t size) {
    if (need <= *cap) return 0;
    uint64_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    if (c > (uint64_t)PTRDIFF_MAX / size) return -1;
    void *q = realloc(*p, (size_t)(c * size));
    if (q == NULL) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* grow_raw, for the calling thread. */
static int grow(void **p, uint64_t *cap, uint64_t need, size_t size) {
    return grow_raw(p, cap, need, size);
}

static int grow32(MergeLoop *t, void **p, uint32_t *cap, uint64_t need, size_t size) {
    if (need > UINT32_MAX - 1) { OVERFLOW(t, "too many words or tokens"); return -1; }
    uint64_t c = *cap;
    if (grow(p, &c, need, size) < 0) return -1;
    *cap = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
    return 0;
}

/* -- pair table ---------------------------------------------------------------- */

#define FIRST(t, s) ((t)->firsts[(s) - (t)->slots])

static inline uint32_t *bucket(Slot *s) { return s->cap > INLINE_CAP ? s->w.ptr : s->w.inl; }

static void free_bucket(Slot *s) {
    if (s->cap > INLINE_CAP) free(s->w.ptr);
    s->n = 0;
    s->cap = 0;
}

static Slot *find(MergeLoop *t, uint64_t key) {
    uint64_t i = mix_pair_key(key) & t->mask;
    for (;;) {
        Slot *s = &t->slots[i];
        if (s->key == key) return s;
        if (s->key == EMPTY) return NULL;
        i = (i + 1) & t->mask;
    }
}

static int rehash(MergeLoop *t, uint64_t capacity) {
    Slot *fresh = malloc(capacity * sizeof(Slot));
    uint64_t *firsts = t->first_seen ? malloc(capacity * sizeof(uint64_t)) : NULL;
    if (fresh == NULL || (t->first_seen && firsts == NULL)) {
        free(fresh);
        free(firsts);
        return -1;
    }
    for (uint64_t i = 0; i < capacity; i++) fresh[i].key = EMPTY;
    uint64_t mask = capacity - 1;
    if (t->slots != NULL) {
        for (uint64_t i = 0; i <= t->mask; i++) {
            Slot *s = &t->slots[i];
            if (s->key == EMPTY) continue;
            uint64_t j = mix_pair_key(s->key) & mask;
            while (fresh[j].key != EMPTY) j = (j + 1) & mask;
            fresh[j] = *s;
            if (firsts != NULL) firsts[j] = t->firsts[i];
        }
        free(t->slots);
        free(t->firsts);
    }
    t->slots = fresh;
    t->firsts = firsts;
    t->mask = mask;
    return 0;
}

static Slot *find_or_add(MergeLoop *t, uint64_t key);

/* find_or_add where the table is to be made or grown first (kept out of its inlined path). */
static __attribute__((noinline)) Slot *grow_then_add(MergeLoop *t, uint64_t key) {
    if (rehash(t, t->slots == NULL ? 2 : (t->mask + 1) * 2) < 0) return NULL;
    return find_or_add(t, key);
}

/* The slot of `key`, created (count 0, no words) when absent; NULL when out of memory. */
static inline __attribute__((always_inline)) Slot *find_or_add(MergeLoop *t, uint64_t key) {
    if (t->slots == NULL) return grow_then_add(t, key);
    uint64_t i = mix_pair_key(key) & t->mask;
    for (;;) {
        Slot *s = &t->slots[i];
        if (s->key == key) return s;
        if (s->key == EMPTY) {
            if ((t->used + 1) * 10 > (t->mask + 1) * 7) return grow_then_add(t, key);  /* (only an insertion grows it) */
            s->key = key;
            s->count = 0;
            s->n = 0;
            s->cap = 0;
            if (t->firsts != NULL) t->firsts[i] = FIRST_UNKNOWN;
            t->used++;
            return s;
        }
        i = (i + 1) & t->mask;
    }
}

/* Forget slot `s` (its bucket freed): backward-shift deletion keeps probes short. */
static void delete_slot(MergeLoop *t, Slot *s) {
    free_bucket(s);
    uint64_t i = (uint64_t)(s - t->slots);
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & t->mask;
        Slot *n = &t->slots[j];
        if (n->key == EMPTY) break;
        uint64_t home = mix_pair_key(n->key) & t->mask;
        /* n may move to i unless its home lies cyclically in (i, j] */
        if (i <= j ? (i < home && home <= j) : (i < home || home <= j)) continue;
        t->slots[i] = *n;
        if (t->firsts != NULL) t->firsts[i] = t->firsts[j];
        i = j;
    }
    t->slots[i].key = EMPTY;
    t->used--;
}

/* Room for `cap` words in slot `s`'s bucket (moved off the slot once past INLINE_CAP); -1: no memory. */
static int reserve_words(Slot *s, uint32_t cap) {
    if (cap > INLINE_CAP) {
        uint32_t *q;
        if (s->cap > INLINE_CAP) {
            q = realloc(s->w.ptr, (size_t)cap * sizeof(uint32_t));
            if (q == NULL) return -1;
        } else {
            q = malloc((size_t)cap * sizeof(uint32_t));
            if (q == NULL) return -1;
            memcpy(q, s->w.inl, (size_t)s->n * sizeof(uint32_t));
        }
        s->w.ptr = q;
    }
    s->cap = cap;
    return 0;
}

/* Index word `w` under slot `s` unless it is the bucket's last entry already. */
static int add_word(MergeLoop *t, Slot *s, uint32_t w) {
    uint32_t *b = bucket(s);
    if (s->n > 0 && b[s->n - 1] == w) return 0;
    if (s->n == s->cap) {
        if (s->cap >= UINT32_MAX / 2) { OVERFLOW(t, "too many words"); return -1; }
        if (reserve_words(s, s->cap < INLINE_CAP ? INLINE_CAP : s->cap * 2) < 0) return -1;
        b = bucket(s);
    }
    b[s->n++] = w;
    return 0;
}

/* first-seen: the first occurrence of slot s's pair, (word << 32) | byte offset in it,
 * found in the words of its bucket (a superset, in no set order: each word before the
 * best so far is searched); FIRST_UNKNOWN when none holds it. 0 or -1 (an offset past
 * 32 bits). */
static int first_of(MergeLoop *t, Slot *s) {
    if (FIRST(t, s) != FIRST_UNKNOWN) return 0;
    const uint32_t *b = bucket(s);
    const uint32_t l = (uint32_t)(s->key >> 32), r = (uint32_t)s->key;
    uint64_t best = FIRST_UNKNOWN;
    for (uint32_t k = 0; k < s->n; k++) {
        uint32_t w = b[k];
        if (best != FIRST_UNKNOWN && w >= (uint32_t)(best >> 32)) continue;
        const uint32_t *sym = t->sym + t->off[w];
        uint64_t at = 0;
        for (uint32_t i = 0; i + 1 < t->len[w]; i++) {
            if (sym[i] == l && sym[i + 1] == r) {
                if (at > UINT32_MAX) { OVERFLOW(t, "word too long for first-seen"); return -1; }
                best = ((uint64_t)w << 32) | at;
                break;
            }
            at += t->tok_len[sym[i]];
        }
    }
    FIRST(t, s) = best;
    return 0;
}

/* first-seen: slot s's pair lost (gained = 0) or gained an occurrence at `at` ((word << 32) |
 * byte offset: offsets keep their place when tokens merge). A gain keeps the first exact (a
 * pair with no occurrence yet starts there); losing the first one makes it unknown. */
static inline void moved(MergeLoop *t, Slot *s, uint64_t at, int gained) {
    if (!t->first_seen) return;
    if (gained) {
        if (s->count == 0 || (FIRST(t, s) != FIRST_UNKNOWN && at < FIRST(t, s))) FIRST(t, s) = at;
    } else if (at == FIRST(t, s)) {
        FIRST(t, s) = FIRST_UNKNOWN;
    }
}

/* -- heap ----------------------------------------------------------------------- */
/* Compare the bytes of tokens a and b: <0, 0, >0. */
static inline int cmp_bytes(const MergeLoop *t, uint32_t a, uint32_t b) {
    if (a == b) return 0;
    /* The first 8 bytes decide where they differ: at a place past the shorter token's
     * end, its zero is below the longer's byte there, and a prefix comes first too. */
    uint64_t pa = t->tok_pre[a], pb = t->tok_pre[b];
    if (pa != pb) return pa < pb ? -1 : 1;
    uint32_t la = t->tok_len[a], lb = t->tok_len[b];
    int c = memcmp(t->bytes + t->tok_off[a], t->bytes + t->tok_off[b], la < lb ? la : lb);
    if (c) return c;
    return la < lb ? -1 : la > lb;
}

/* Does entry x come out of the heap before entry y? */
static inline int before(const MergeLoop *t, const Entry *x, const Entry *y) {
    if (x->count != y->count) return x->count > y->count;
    uint32_t xl = (uint32_t)(x->key >> 32), xr = (uint32_t)x->key;
    uint32_t yl = (uint32_t)(y->key >> 32), yr = (uint32_t)y->key;
    if (t->first_seen) {
        if (x->first != y->first) return x->first < y->first;
    } else if (t->hf) {
        if (t->tie[xl] != t->tie[yl]) return t->tie[xl] < t->tie[yl];
        if (t->tie[xr] != t->tie[yr]) return t->tie[xr] < t->tie[yr];
    } else {
        int c = cmp_bytes(t, xl, yl);
        if (c) return c > 0;
        c = cmp_bytes(t, xr, yr);
        if (c) return c > 0;
    }
    return x->key < y->key;
}

/* The heap is 4-ary (children of i: 4i+1 .. 4i+4): half the levels of a binary one, and a
 * node's children side by side, so a sift touches fewer cache lines. Which entry comes
 * out first is decided by `before` alone (a total order), as with any heap. */
#define HEAP_ARITY 4

static void sift_down(MergeLoop *t, uint64_t i) {
    Entry *h = t->heap;
    uint64_t n = t->n_heap;
    Entry e = h[i];
    for (;;) {
        uint64_t c = HEAP_ARITY * i + 1;
        if (c >= n) break;
        uint64_t end = c + HEAP_ARITY < n ? c + HEAP_ARITY : n, best = c;
        for (uint64_t k = c + 1; k < end; k++)
            if (before(t, &h[k], &h[best])) best = k;
        if (!before(t, &h[best], &e)) break;
        h[i] = h[best];
        i = best;
    }
    h[i] = e;
}

static int push(MergeLoop *t, int64_t count, uint64_t key, uint64_t first) {
    if (grow((void **)&t->heap, &t->cap_heap, t->n_heap + 1, sizeof(Entry)) < 0) return -1;
    Entry e = {count, key, first};
    Entry *h = t->heap;
    uint64_t i = t->n_heap++;
    while (i > 0) {
        uint64_t p = (i - 1) / HEAP_ARITY;
        if (!before(t, &e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
    return 0;
}

static void pop_top(MergeLoop *t) {
    t->n_heap--;
    if (t->n_heap > 0) {
        t->heap[0] = t->heap[t->n_heap];
        sift_down(t, 0);
    }
}

/* -- tokens --------------------------------------------------------------------- */
/* Append a token: its bytes and its tie value (hf). With data NULL the bytes are in
 * place already at the end of t->bytes (a merge copies them there). */
static int add_token_bytes(MergeLoop *t, const unsigned char *data, uint64_t size, uint32_t tie) {
    uint32_t old_cap = t->cap_tokens;
    if (grow32(t, (void **)&t->tie, &t->cap_tokens, (uint64_t)t->n_tokens + 1, sizeof(uint32_t)) < 0) return -1;
    if (t->cap_tokens != old_cap || t->tok_off == NULL) {
        /* the token arrays share cap_tokens: grow the others to match */
        uint32_t cap = t->cap_tokens;
        uint64_t *off = realloc(t->tok_off, (size_t)cap * sizeof(uint64_t));
        if (off == NULL) { t->cap_tokens = old_cap; return -1; }
        t->tok_off = off;
        uint32_t *len = realloc(t->tok_len, (size_t)cap * sizeof(uint32_t));
        if (len == NULL) { t->cap_tokens = old_cap; return -1; }
        t->tok_len = len;
        uint64_t *pre = realloc(t->tok_pre, (size_t)cap * sizeof(uint64_t));
        if (pre == NULL) { t->cap_tokens = old_cap; return -1; }
        t->tok_pre = pre;
    }
    if (size > UINT32_MAX) { OVERFLOW(t, "token too long"); return -1; }
    if (grow((void **)&t->bytes, &t->cap_bytes, t->n_bytes + size + 1, 1) < 0) return -1;
    if (data != NULL) memcpy(t->bytes + t->n_bytes, data, (size_t)size);
    t->tok_off[t->n_tokens] = t->n_bytes;
    t->tok_len[t->n_tokens] = (uint32_t)size;
    uint64_t pre = 0;
    for (uint64_t i = 0; i < 8; i++) pre = pre << 8 | (i < size ? t->bytes[t->n_bytes + i] : 0);
    t->tok_pre[t->n_tokens] = pre;
    t->n_bytes += size;
    t->tie[t->n_tokens] = tie;
    t->n_tokens++;
    return 0;
}

/* The slot of bytes p[0:n] in the by-bytes index: the place of its id, or the free place for it. */
static uint32_t *by_bytes_slot(const MergeLoop *t, const unsigned char *p, uint64_t n) {
    uint64_t i = hash_bytes(p, (size_t)n) & t->by_mask;
    for (;;) {
        uint32_t *slot = &t->by_bytes[i];
        if (*slot == NONE || (t->tok_len[*slot] == n && memcmp(t->bytes + t->tok_off[*slot], p, (size_t)n) == 0))
            return slot;
        i = (i + 1) & t->by_mask;
    }
}

/* List token `id` as the one a merge making its bytes takes, unless some token is already; 0 or -1. */
static int index_token(MergeLoop *t, uint32_t id) {
    if ((t->by_used + 1) * 10 > (t->by_mask + 1) * 7 || t->by_bytes == NULL) {
        uint64_t cap = t->by_bytes == NULL ? 1024 : (t->by_mask + 1) * 2;
        uint32_t *old = t->by_bytes;
        uint64_t old_cap = old == NULL ? 0 : t->by_mask + 1;
        t->by_bytes = malloc(cap * sizeof(uint32_t));
        if (t->by_bytes == NULL) { t->by_bytes = old; return -1; }
        memset(t->by_bytes, 0xff, cap * sizeof(uint32_t));
        t->by_mask = cap - 1;
        for (uint64_t k = 0; k < old_cap; k++)
            if (old[k] != NONE) *by_bytes_slot(t, t->bytes + t->tok_off[old[k]], t->tok_len[old[k]]) = old[k];
        free(old);
    }
    uint32_t *slot = by_bytes_slot(t, t->bytes + t->tok_off[id], t->tok_len[id]);
    if (*slot == NONE) {
        *slot = id;
        t->by_used++;
    }
    return 0;
}

/* -- replay: per-word BPE with ranks ------------------------------------------------ */
/* The rank of pair `key` in stage `st`, or st->n when it has none. */
static inline uint32_t rank_of(const Stage *st, uint64_t key) {
    uint64_t i = mix_pair_key(key) & st->mask;
    for (;;) {
        const RankSlot *r = &st->ranks[i];
        if (r->key == key) return r->rank;
        if (r->key == EMPTY) return st->n;
        i = (i + 1) & st->mask;
    }
}

/* Words longer than this use the heap (n log n); shorter ones the rank array. */
#define LONG_WORD 48
#define DEAD UINT32_MAX

static inline void wheap_push(uint64_t *h, uint64_t *n, uint64_t e) {
    uint64_t i = (*n)++;
    while (i > 0) {
        uint64_t p = (i - 1) / 2;
        if (h[p] <= e) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

/* Put e at place i of the heap h[0:m] (its place is free), moving it down to where it belongs. */
static inline void wheap_sift(uint64_t *h, uint64_t m, uint64_t i, uint64_t e) {
    for (;;) {
        uint64_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1] < h[c]) c++;
        if (h[c] >= e) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = e;
}

static inline uint64_t wheap_pop(uint64_t *h, uint64_t *n) {
    uint64_t top = h[0], e = h[--(*n)];
    if (*n > 0) wheap_sift(h, *n, 0, e);
    return top;
}

/* bpe.merge_word on s[0:n] in place, with stage `st`: again and again merge the
 * adjacent pair of lowest rank (the leftmost among equal ranks) into made[rank].
 * Returns the new length, or -1 (out of memory). */
static int64_t merge_word(MergeLoop *t, const Stage *st, uint32_t *s, uint32_t n) {
    if (n < 2 || st->n == 0) return n;
    const uint32_t missing = st->n;
    if (n <= LONG_WORD) {
        if (grow((void **)&t->scratch, &t->cap_scratch, n, sizeof(uint32_t)) < 0) return -1;
        uint32_t *pr = t->scratch, m = n - 1;
        for (uint32_t i = 0; i < m; i++) pr[i] = rank_of(st, ((uint64_t)s[i] << 32) | s[i + 1]);
        while (m > 0) {
            uint32_t best = missing, at = 0;
            for (uint32_t i = 0; i < m; i++)
                if (pr[i] < best) { best = pr[i]; at = i; }
            if (best == missing) break;
            uint32_t made = st->made[best];
            s[at] = made;
            memmove(s + at + 1, s + at + 2, (size_t)(n - at - 2) * sizeof(uint32_t));
            n--;
            memmove(pr + at, pr + at + 1, (size_t)(m - at - 1) * sizeof(uint32_t));
            m--;
            if (at > 0) pr[at - 1] = rank_of(st, ((uint64_t)s[at - 1] << 32) | made);
            if (at < m) pr[at] = rank_of(st, ((uint64_t)made << 32) | s[at + 1]);
        }
        return n;
    }
    /* bpe._merge_long_word: a heap of (rank << 32) | position over a linked list;
     * an entry is stale when the pair at its position no longer has its rank. */
    if (grow((void **)&t->scratch, &t->cap_scratch, 2 * (uint64_t)n, sizeof(uint32_t)) < 0 ||
            grow((void **)&t->wheap, &t->cap_wheap, 2 * (uint64_t)n, sizeof(uint64_t)) < 0) return -1;
    uint32_t *nxt = t->scratch, *prv = t->scratch + n;
    uint64_t *h = t->wheap, nh = 0;
    for (uint32_t i = 0; i < n; i++) {
        nxt[i] = i + 1;
        prv[i] = i ? i - 1 : DEAD;
    }
    for (uint32_t i = 0; i + 1 < n; i++) {
        uint32_t r = rank_of(st, ((uint64_t)s[i] << 32) | s[i + 1]);
        if (r != missing) h[nh++] = ((uint64_t)r << 32) | i;
    }
    for (uint64_t k = nh / 2; k-- > 0;) wheap_sift(h, nh, k, h[k]);  /* heapify */
    /* Each merge removes a symbol and pushes at most two entries: the heap stays
     * within n + 2 (n - 1) entries; grow as it needs. */
    while (nh > 0) {
        uint64_t e = wheap_pop(h, &nh);
        uint32_t r = (uint32_t)(e >> 32), i = (uint32_t)e;
        if (s[i] == DEAD) continue;
        uint32_t j = nxt[i];
        if (j >= n || rank_of(st, ((uint64_t)s[i] << 32) | s[j]) != r) continue;  /* stale */
        uint32_t made = st->made[r];
        s[i] = made;
        s[j] = DEAD;
        uint32_t k = nxt[j];
        nxt[i] = k;
        if (nh + 2 > t->cap_wheap) {
            if (grow((void **)&t->wheap, &t->cap_wheap, nh + 2, sizeof(uint64_t)) < 0) return -1;
            h = t->wheap;
        }
        if (k < n) {
            prv[k] = i;
            uint32_t rk = rank_of(st, ((uint64_t)made << 32) | s[k]);
            if (rk != missing) wheap_push(h, &nh, ((uint64_t)rk << 32) | i);
        }
        uint32_t p = prv[i];
        if (p != DEAD) {
            uint32_t rp = rank_of(st, ((uint64_t)s[p] << 32) | made);
            if (rp != missing) wheap_push(h, &nh, ((uint64_t)rp << 32) | p);
        }
    }
    uint32_t out = 0;
    for (uint32_t i = 0; i < n; i++)
        if (s[i] != DEAD) s[out++] = s[i];
    return out;
}
/* -- workers: build and merge split over threads ------------------------------------------
 * A worker reads and writes only its own slice (its words' symbols, its Work); the
 * calling thread then applies what each found, slice after slice, in the order one
 * thread would have: the pair table, buckets and heap end exactly as with one thread,
 * so the thread count cannot change a merge. */

/* The pair `key` of a worker's local table, added (count 0, no words) when absent; NULL when out of memory. */
static Local *local_pair(Work *wk, uint64_t key) {
    if ((wk->n_loc + 1) * 10 > (wk->mask + 1) * 7 || wk->index == NULL) {
        uint64_t cap = wk->index == NULL ? 256 : (wk->mask + 1) * 2;
        uint64_t *fresh = calloc(cap, sizeof(uint64_t));
        if (fresh == NULL) return NULL;
        for (uint64_t k = 0; k < wk->n_loc; k++) {
            uint64_t i = mix_pair_key(wk->loc[k].key) & (cap - 1);
            while (fresh[i]) i = (i + 1) & (cap - 1);
            fresh[i] = k + 1;
        }
        free(wk->index);
        wk->index = fresh;
        wk->mask = cap - 1;
    }
    uint64_t i = mix_pair_key(key) & wk->mask;
    for (;;) {
        uint64_t at = wk->index[i];
        if (at == 0) break;
        if (wk->loc[at - 1].key == key) return &wk->loc[at - 1];
        i = (i + 1) & wk->mask;
    }
    if (grow_raw((void **)&wk->loc, &wk->cap_loc, wk->n_loc + 1, sizeof(Local)) < 0) return NULL;
    Local *l = &wk->loc[wk->n_loc++];
    l->key = key;
    l->count = 0;
    l->w = NULL;
    l->n = l->cap = 0;
    wk->index[i] = wk->n_loc;
    return l;
}

static void free_locals(Work *wk) {
    for (uint64_t k = 0; k < wk->n_loc; k++) free(wk->loc[k].w);
    free(wk->loc);
    free(wk->index);
    wk->loc = NULL;
    wk->index = NULL;
    wk->n_loc = wk->cap_loc = wk->mask = 0;
}

/* build: count the pairs of words [from, to) and list the words of each (ascending). */
static void count_words(Work *wk) {
    MergeLoop *t = wk->t;
    for (uint32_t w = wk->from; w < wk->to; w++) {
        const uint32_t *s = t->sym + t->off[w];
        uint32_t n = t->len[w];
        int64_t c = t->cnt[w];
        for (uint32_t i = 0; i + 1 < n; i++) {
            Local *l = local_pair(wk, ((uint64_t)s[i] << 32) | s[i + 1]);
            if (l == NULL) { wk->failed = 1; return; }
            l->count += c;
            if (l->n > 0 && l->w[l->n - 1] == w) continue;
            if (l->n == l->cap) {
                if (l->cap >= UINT32_MAX / 2) { wk->failed = 1; return; }
                uint32_t cap = l->cap ? l->cap * 2 : 4;
                uint32_t *q = realloc(l->w, (size_t)cap * sizeof(uint32_t));
                if (q == NULL) { wk->failed = 1; return; }
                l->w = q;
                l->cap = cap;
            }
            l->w[l->n++] = w;
        }
    }
}

/* merge: in each word of bucket[from:to] holding (left, right), merge it into `token`,
 * left to right, and note each occurrence's neighbours for the pair counts. */
static void scan_words(Work *wk, uint32_t from, uint32_t to) {
    MergeLoop *t = wk->t;
    const uint32_t *words = wk->words;
    const uint32_t left = wk->left, right = wk->right, token = wk->token;
    for (uint32_t k = from; k < to; k++) {
        /* The words lie anywhere in memory: ask for them ahead (their place, then their symbols). */
        if (k + 16 < to) {
            uint32_t f = words[k + 16];
            PREFETCH(&t->off[f]);
            PREFETCH(&t->len[f]);
            PREFETCH(&t->cnt[f]);
        }
        if (k + 8 < to) PREFETCH(t->sym + t->off[words[k + 8]]);
        uint32_t w = words[k];
        uint32_t *s = t->sym + t->off[w];
        uint32_t n = t->len[w];
        uint32_t i = 0;
        while (i + 1 < n && !(s[i] == left && s[i + 1] == right)) i++;
        if (i + 1 >= n) continue;  /* lost the pair since it was indexed */
        /* at most n / 2 occurrences, two entries each (three with first-seen), after a header of four */
        if (grow_raw((void **)&wk->ev, &wk->cap_ev, wk->n_ev + 4 + (uint64_t)n + (t->first_seen ? n / 2 : 0),
                     sizeof(uint32_t)) < 0) {
            wk->failed = 1;
            return;
        }
        uint64_t at = 0;  /* first-seen: the byte offset of s[i] in the word */
        if (t->first_seen)
            for (uint32_t q = 0; q < i; q++) at += t->tok_len[s[q]];
        uint32_t *e = wk->ev + wk->n_ev, *head = e;
        e += 4;
        uint64_t c = (uint64_t)t->cnt[w];
        uint32_t j = i, occurrences = 0;  /* s[:j] is the word's merged start */
        if (!t->first_seen) {
            while (i < n) {
                if (i + 1 < n && s[i] == left && s[i + 1] == right) {
                    *e++ = j > 0 ? s[j - 1] : NONE;
                    *e++ = i + 2 < n ? s[i + 2] : NONE;
                    occurrences++;
                    s[j++] = token;
                    i += 2;
                } else {
                    s[j++] = s[i++];
                }
            }
        } else {
            const uint64_t both = t->tok_len[left] + (uint64_t)t->tok_len[right];
            while (i < n) {
                if (i + 1 < n && s[i] == left && s[i + 1] == right) {
                    if (at > UINT32_MAX) { wk->failed = 1; return; }  /* a word past 4 GiB: not reached */
                    *e++ = j > 0 ? s[j - 1] : NONE;
                    *e++ = i + 2 < n ? s[i + 2] : NONE;
                    *e++ = (uint32_t)at;
                    at += both;
                    occurrences++;
                    s[j++] = token;
                    i += 2;
                } else {
                    at += t->tok_len[s[i]];
                    s[j++] = s[i++];
                }
            }
        }
        t->len[w] = j;
        head[0] = w;
        head[1] = occurrences;
        head[2] = (uint32_t)c;
        head[3] = (uint32_t)(c >> 32);
        wk->n_ev = (uint64_t)(e - wk->ev);
    }
}

static void run_work(Work *wk) {
    wk->failed = 0;
    if (wk->build) {
        count_words(wk);
        return;
    }
    /* merge: take the next chunk until none is left (a worker the system holds back
     * takes fewer; the events stay in bucket order by chunk) */
    MergeLoop *t = wk->t;
    wk->n_ev = 0;
    for (;;) {
        uint32_t c = TAKE(&t->next_chunk);
        if (c >= t->n_chunks) break;
        uint32_t from = wk->from + c * t->chunk;
        uint32_t to = wk->to - from > t->chunk ? from + t->chunk : wk->to;
        uint64_t begin = wk->n_ev;
        scan_words(wk, from, to);
        if (wk->failed) break;
        t->at[c].worker = wk->id;
        t->at[c].begin = begin;
        t->at[c].end = wk->n_ev;
    }
}

THREAD_MAIN(work_main, run_work, Work)

/* Run t->work[0:n]: n - 1 threads and the calling one (the caller's lock released). A
 * thread that cannot be started has its share run here instead. */
static void run_workers(MergeLoop *t, int n) {
    Thread threads[MAX_THREADS];
    int started[MAX_THREADS];
    for (int k = 1; k < n; k++) {
        started[k] = thread_start(&threads[k], work_main, &t->work[k]);
        if (!started[k]) run_work(&t->work[k]);
    }
    run_work(&t->work[0]);
    for (int k = 1; k < n; k++) {
        if (!started[k]) continue;
        thread_join(threads[k]);
    }
}

/* How many workers share `n` items: each at least parallel_min of them, at most `threads`. */
static int workers_for(const MergeLoop *t, uint64_t n) {
    if (t->threads <= 1 || n < 2 * (uint64_t)t->parallel_min) return 1;
    uint64_t k = n / t->parallel_min;
    return k < (uint64_t)t->threads ? (int)k : t->threads;
}

/* The Work of each worker, made once; 0 or -1 (out of memory). */
static int ensure_work(MergeLoop *t) {
    if (t->work != NULL) return 0;
    t->work = calloc((size_t)t->threads, sizeof(Work));
    if (t->work == NULL) { return -1; }
    for (int k = 0; k < t->threads; k++) {
        t->work[k].t = t;
        t->work[k].id = (uint32_t)k;
    }
    return 0;
}

/* Split [0, n) into `workers` contiguous slices. */
static void split(MergeLoop *t, int workers, uint32_t n) {
    for (int k = 0; k < workers; k++) {
        t->work[k].t = t;
        t->work[k].from = (uint32_t)((uint64_t)n * k / workers);
        t->work[k].to = (uint32_t)((uint64_t)n * (k + 1) / workers);
    }
}

/* Run the workers; -1 (out of memory) when one failed. */
static int run_split(MergeLoop *t, int workers) {
    run_workers(t, workers);
    for (int k = 0; k < workers; k++)
        if (t->work[k].failed) { return -1; }
    return 0;
}

/* Append src[0:m] to the words of slot `s`, as m add_word calls would (same capacity). */
static int append_words(MergeLoop *t, Slot *s, const uint32_t *src, uint32_t m) {
    uint64_t n = (uint64_t)s->n + m;
    if (n >= UINT32_MAX / 2) { OVERFLOW(t, "too many words"); return -1; }
    if (n > s->cap) {
        uint32_t cap = s->cap <= INLINE_CAP ? INLINE_CAP : s->cap;
        while (cap < n) cap *= 2;
        if (reserve_words(s, cap) < 0) return -1;
    }
    memcpy(bucket(s) + s->n, src, (size_t)m * sizeof(uint32_t));
    s->n = (uint32_t)n;
    return 0;
}

/* build with `workers` threads: each counts a slice of the words; their pairs go into the
 * table slice after slice, each slice's in the order it first saw them, which is the
 * order one thread adds them in (so even the table's layout is the same). */
static int build_split(MergeLoop *t, int workers) {
    split(t, workers, t->n_words);
    for (int k = 0; k < workers; k++) t->work[k].build = 1;
    int rc = run_split(t, workers);
    for (int k = 0; rc == 0 && k < workers; k++) {
        Work *wk = &t->work[k];
        for (uint64_t i = 0; i < wk->n_loc; i++) {
            Local *l = &wk->loc[i];
            Slot *slot = find_or_add(t, l->key);
            if (slot == NULL || append_words(t, slot, l->w, l->n) < 0) { rc = -1; break; }
            slot->count += l->count;
            free(l->w);
            l->w = NULL;
        }
    }
    for (int k = 0; k < workers; k++) {
        free_locals(&t->work[k]);
        t->work[k].build = 0;
    }
    return rc;
}
static inline int lose(MergeLoop *t, uint64_t key, int64_t n, uint64_t merged, uint64_t at) {
    Slot *s = find(t, key);
    if (s == NULL) {  /* not reached (the pair is there); keeps the arithmetic */
        s = find_or_add(t, key);
        if (s == NULL) return -1;
    }
    moved(t, s, at, 0);
    s->count -= n;
    if (s->count == 0 && key != merged) delete_slot(t, s);
    return 0;
}

static inline int gain(MergeLoop *t, uint64_t key, int64_t n, uint32_t w, uint64_t at) {
    Slot *s = find_or_add(t, key);
    if (s == NULL) return -1;
    moved(t, s, at, 1);
    s->count += n;
    if (add_word(t, s, w) < 0) return -1;
    uint32_t l = (uint32_t)(key >> 32);
    uint32_t *m = &t->mark[l == t->merging ? 2 * (uint64_t)(uint32_t)key + 1 : 2 * (uint64_t)l];
    if (*m == t->mark_stamp) return 0;  /* listed already */
    *m = t->mark_stamp;
    if (grow((void **)&t->touched, &t->cap_touched, t->n_touched + 1, sizeof(uint64_t)) < 0) return -1;
    t->touched[t->n_touched++] = key;
    return 0;
}

/* What scan_words found, applied as one thread merging word by word does it: per
 * occurrence, (before, left) loses and (before, token) gains, then (right, after); with
 * first-seen, each where it starts (the occurrence's byte offset is its third entry). */
static int apply_events(MergeLoop *t, const uint32_t *e, const uint32_t *end, uint64_t key, uint32_t token) {
    const uint32_t left = (uint32_t)(key >> 32), right = (uint32_t)key;
    const uint64_t token_left = (uint64_t)token << 32, right_left = (uint64_t)right << 32;
    const int stride = t->first_seen ? 3 : 2;
    while (e < end) {
        uint32_t w = e[0], occurrences = e[1];
        int64_t c = (int64_t)((uint64_t)e[2] | ((uint64_t)e[3] << 32));
        e += 4;
        for (uint32_t o = 0; o < occurrences; o++, e += stride) {
            uint64_t at = t->first_seen ? ((uint64_t)w << 32) | e[2] : 0;
            if (e[0] != NONE) {
                uint64_t prev = (uint64_t)e[0] << 32, before = at - (t->first_seen ? t->tok_len[e[0]] : 0);
                if (lose(t, prev | left, c, key, before) < 0 || gain(t, prev | token, c, w, before) < 0) return -1;
            }
            if (e[1] != NONE) {
                uint64_t after = at + (t->first_seen ? t->tok_len[left] : 0);
                if (lose(t, right_left | e[1], c, key, after) < 0 || gain(t, token_left | e[1], c, w, at) < 0)
                    return -1;
            }
        }
    }
    return 0;
}

/* Keep each word's first place in words[0:n] (a word listed again is merged already
 * when one thread comes to it: nothing to do), so that no two threads share a word. */
static uint32_t first_visits(MergeLoop *t, uint32_t *words, uint32_t n) {
    if (t->seen == NULL) {
        t->seen = calloc((size_t)t->n_words + 1, sizeof(uint32_t));
        if (t->seen == NULL) { return n; }
    }
    if (++t->stamp == 0) {
        memset(t->seen, 0, ((size_t)t->n_words + 1) * sizeof(uint32_t));
        t->stamp = 1;
    }
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t w = words[k];
        if (t->seen[w] != t->stamp) {
            t->seen[w] = t->stamp;
            words[m++] = w;
        }
    }
    return m;
}

/* -- the loop's steps -------------------------------------------------------------- */
static void ml_free(MergeLoop *t) {
    if (t->slots != NULL) {
        for (uint64_t i = 0; i <= t->mask; i++)
            if (t->slots[i].key != EMPTY) free_bucket(&t->slots[i]);
        free(t->slots);
    }
    free(t->firsts);
    free(t->tie);
    free(t->tok_off);
    free(t->tok_len);
    free(t->tok_pre);
    free(t->bytes);
    free(t->sym);
    free(t->off);
    free(t->len);
    free(t->cnt);
    free(t->heap);
    free(t->touched);
    free(t->mark);
    for (uint64_t i = 0; i < t->n_stages; i++) {
        free(t->stages[i].ranks);
        free(t->stages[i].made);
    }
    free(t->stages);
    free(t->scratch);
    free(t->wheap);
    if (t->work != NULL) {
        for (int k = 0; k < t->threads; k++) {
            free(t->work[k].ev);
            free_locals(&t->work[k]);
        }
        free(t->work);
    }
    free(t->seen);
    free(t->at);
    free(t->by_bytes);
    free(t->made);
    free(t->made_count);
}

/* An empty stage for n merges (ranks 0..n-1); 0 or -1 (out of memory: nothing to free). */
static int stage_new(Stage *st, uint32_t n) {
    uint64_t cap = 16;
    while (cap * 7 < (uint64_t)n * 10 + 10) cap *= 2;
    st->n = n;
    st->mask = cap - 1;
    st->ranks = malloc(cap * sizeof(RankSlot));
    st->made = malloc(((size_t)n + 1) * sizeof(uint32_t));
    if (st->ranks == NULL || st->made == NULL) {
        free(st->ranks);
        free(st->made);
        return -1;
    }
    for (uint64_t i = 0; i < cap; i++) st->ranks[i].key = EMPTY;
    return 0;
}

/* Merge `rank` of stage `st`: (left, right) makes `made`; a pair listed before keeps its first rank. */
static void stage_set(Stage *st, uint32_t rank, uint32_t left, uint32_t right, uint32_t made) {
    st->made[rank] = made;
    uint64_t key = ((uint64_t)left << 32) | right;
    uint64_t i = mix_pair_key(key) & st->mask;
    while (st->ranks[i].key != EMPTY && st->ranks[i].key != key) i = (i + 1) & st->mask;
    if (st->ranks[i].key == EMPTY) {
        st->ranks[i].key = key;
        st->ranks[i].rank = rank;
    }
}

/* Store the word whose n symbols are in place at t->sym + t->n_sym, after the replay
 * stages (a word left with one token has no pair, ever: not stored); 0 or -1. */
static int store_word(MergeLoop *t, uint64_t n, int64_t count) {
    if (n > UINT32_MAX) { OVERFLOW(t, "word too long"); return -1; }
    for (uint64_t k = 0; k < t->n_stages; k++) {
        int64_t m = merge_word(t, &t->stages[k], t->sym + t->n_sym, (uint32_t)n);
        if (m < 0) return -1;
        n = (uint64_t)m;
    }
    if (n < 2) return 0;
    uint64_t need = (uint64_t)t->n_words + 1;
    uint32_t cap = t->cap_words;
    if (grow32(t, (void **)&t->off, &cap, need, sizeof(uint64_t)) < 0) return -1;
    if (cap != t->cap_words) {
        uint32_t *len = realloc(t->len, (size_t)cap * sizeof(uint32_t));
        if (len == NULL) return -1;
        t->len = len;
        int64_t *cnt = realloc(t->cnt, (size_t)cap * sizeof(int64_t));
        if (cnt == NULL) return -1;
        t->cnt = cnt;
        t->cap_words = cap;
    }
    t->off[t->n_words] = t->n_sym;
    t->len[t->n_words] = (uint32_t)n;
    t->cnt[t->n_words] = count;
    t->n_words++;
    t->n_sym += n;
    return 0;
}

/* Count every adjacent pair, index the words each occurs in, make the heap; 0 or -1. */
/* Shrink the words' arrays to what they hold (they grew by doubling as words came; none
 * comes after build). A failed shrink keeps the larger block. */
static void fit_words(MergeLoop *t) {
    if (t->n_sym > 0 && t->n_sym < t->cap_sym) {
        uint32_t *sym = realloc(t->sym, (size_t)t->n_sym * sizeof(uint32_t));
        if (sym != NULL) { t->sym = sym; t->cap_sym = t->n_sym; }
    }
    if (t->n_words > 0 && t->n_words < t->cap_words) {
        uint64_t *off = realloc(t->off, (size_t)t->n_words * sizeof(uint64_t));
        uint32_t *len = off != NULL ? realloc(t->len, (size_t)t->n_words * sizeof(uint32_t)) : NULL;
        int64_t *cnt = len != NULL ? realloc(t->cnt, (size_t)t->n_words * sizeof(int64_t)) : NULL;
        if (off != NULL) t->off = off;
        if (len != NULL) t->len = len;
        if (cnt != NULL) { t->cnt = cnt; t->cap_words = t->n_words; }
    }
}

static int ml_build(MergeLoop *t) {
    fit_words(t);
    int workers = workers_for(t, t->n_words);
    if (workers > 1) {
        if (ensure_work(t) < 0 || build_split(t, workers) < 0) return -1;
        t->split_build = 1;
    } else {
        for (uint32_t w = 0; w < t->n_words; w++) {
            const uint32_t *s = t->sym + t->off[w];
            uint32_t n = t->len[w];
            int64_t c = t->cnt[w];
            for (uint32_t i = 0; i + 1 < n; i++) {
                Slot *slot = find_or_add(t, ((uint64_t)s[i] << 32) | s[i + 1]);
                if (slot == NULL || add_word(t, slot, w) < 0) return -1;
                slot->count += c;
            }
        }
    }
    if (grow((void **)&t->heap, &t->cap_heap, t->used + 1, sizeof(Entry)) < 0) return -1;
    for (uint64_t i = 0; i <= t->mask; i++) {
        Slot *s = &t->slots[i];
        if (s->key != EMPTY) {
            if (t->first_seen && first_of(t, s) < 0) return -1;
            t->heap[t->n_heap].count = s->count;
            t->heap[t->n_heap].key = s->key;
            t->heap[t->n_heap].first = t->first_seen ? FIRST(t, s) : 0;
            t->n_heap++;
        }
    }
    for (uint64_t i = t->n_heap / HEAP_ARITY + 1; i-- > 0;) sift_down(t, i);  /* every node with a child */
    t->built = 1;
    return 0;
}

/* Take the most frequent pair off the heap (stale entries refreshed on the way) into
 * *key, *count: 1; or 0 when none is left or the best is below min_frequency (it stays);
 * -1 when a first occurrence could not be found (first_of). */
static int ml_pop(MergeLoop *t, int64_t min_frequency, uint64_t *key, int64_t *count) {
    while (t->n_heap > 0) {
        Entry *top = &t->heap[0];
        Slot *s = find(t, top->key);
        int64_t current = s != NULL ? s->count : 0;
        if (t->first_seen && current > 0 && first_of(t, s) < 0) return -1;
        if (current != top->count || (t->first_seen && current > 0 && FIRST(t, s) != top->first)) {
            /* stale: its count dropped (or, first-seen, its first occurrence moved) since it was pushed */
            if (current > 0) {
                top->count = current;
                top->first = t->first_seen ? FIRST(t, s) : 0;
                sift_down(t, 0);
            } else {
                pop_top(t);
            }
            continue;
        }
        if (current < min_frequency) return 0;
        *key = top->key;
        *count = current;
        pop_top(t);
        return 1;
    }
    return 0;
}

/* The token a merge of (left, right) makes, into *token: the ordinary token with their
 * bytes joined, else a new one (its id n_tokens, its tie value its id); and the marks of
 * the merge made ready. 0 or -1. */
static int begin_merge(MergeLoop *t, uint32_t left, uint32_t right, uint32_t *token) {
    if (ensure_work(t) < 0) return -1;
    uint64_t ll = t->tok_len[left], rl = t->tok_len[right];
    /* joined at the end of the bytes (the buffer may move: grow first), counted once new */
    if (grow((void **)&t->bytes, &t->cap_bytes, t->n_bytes + ll + rl + 1, 1) < 0) return -1;
    unsigned char *joined = t->bytes + t->n_bytes;
    memcpy(joined, t->bytes + t->tok_off[left], (size_t)ll);
    memcpy(joined + ll, t->bytes + t->tok_off[right], (size_t)rl);
    uint32_t found = *by_bytes_slot(t, joined, ll + rl);
    if (found != NONE) {
        *token = found;
        t->may_dup = 1;  /* its pairs may be indexed already: a word may come twice */
    } else {
        *token = t->n_tokens;
        if (add_token_bytes(t, NULL, ll + rl, *token) < 0 || index_token(t, *token) < 0) return -1;
    }
    uint64_t had = t->cap_mark;
    if (grow((void **)&t->mark, &t->cap_mark, 2 * (uint64_t)t->n_tokens, sizeof(uint32_t)) < 0) return -1;
    if (t->cap_mark != had) memset(t->mark + had, 0, (size_t)(t->cap_mark - had) * sizeof(uint32_t));
    if (++t->mark_stamp == 0) {
        memset(t->mark, 0, (size_t)t->cap_mark * sizeof(uint32_t));
        t->mark_stamp = 1;
    }
    t->merging = *token;
    return 0;
}

/* Rewrite words[0:n_words] (split over the workers it earns), then apply what they found
 * chunk by chunk; 0 or -1. */
static int scan_and_apply(MergeLoop *t, uint32_t *words, uint32_t n_words, uint64_t key, uint32_t token) {
    int workers = workers_for(t, n_words);
    if (workers > 1 && t->may_dup) {
        uint32_t before = n_words;
        n_words = first_visits(t, words, n_words);
        t->deduplicated += n_words != before;
    }
    if (workers > 1 && n_words < 2 * (uint64_t)t->parallel_min) workers = 1;
    if (workers > 1 && t->may_dup && t->seen == NULL) return -1;  /* first_visits found no memory */
    t->chunk = workers > 1 ? (t->parallel_min < 1024 ? t->parallel_min : 1024) : (n_words ? n_words : 1);
    t->n_chunks = (uint32_t)(((uint64_t)n_words + t->chunk - 1) / t->chunk);
    t->next_chunk = 0;
    if (grow((void **)&t->at, &t->cap_at, (uint64_t)t->n_chunks + 1, sizeof(*t->at)) < 0) return -1;
    for (int k = 0; k < workers; k++) {
        Work *wk = &t->work[k];
        wk->build = 0;
        wk->words = words;
        wk->from = 0;
        wk->to = n_words;
        wk->left = (uint32_t)(key >> 32);
        wk->right = (uint32_t)key;
        wk->token = token;
    }
    if (workers > 1) {
        /* Room made here, so that the workers seldom allocate (what a thread allocates
         * stays with its own malloc arena): a share of the bucket at 8 entries a word. */
        uint64_t share = ((uint64_t)n_words / workers + t->chunk) * 8;
        for (int k = 0; k < workers; k++)
            if (grow((void **)&t->work[k].ev, &t->work[k].cap_ev, share, sizeof(uint32_t)) < 0) return -1;
    }
    /* the words are rewritten (in threads), then the counts and index updated here, chunk by chunk */
    if (run_split(t, workers) < 0) return -1;
    t->split_merges += workers > 1;
    for (uint32_t c = 0; c < t->n_chunks; c++) {
        const uint32_t *ev = t->work[t->at[c].worker].ev;
        if (apply_events(t, ev + t->at[c].begin, ev + t->at[c].end, key, token) < 0) return -1;
    }
    return 0;
}

/* After begin_merge: merge pair `key` into `token` in every word that holds it, left to
 * right, updating the pair counts and index; push the pairs that grew. 0 or -1 (then
 * the state is half-updated). */
static int ml_merge(MergeLoop *t, uint64_t key, uint32_t token) {
    Slot *slot = find(t, key);
    uint32_t *words = NULL, n_words = 0;
    uint32_t inl[INLINE_CAP];
    if (slot != NULL) {
        n_words = slot->n;
        if (slot->cap > INLINE_CAP) {
            words = slot->w.ptr;
        } else {
            memcpy(inl, slot->w.inl, sizeof(inl));
            words = inl;
        }
        slot->n = slot->cap = 0;  /* detached: ours to free */
    }
    t->n_touched = 0;
    int rc = scan_and_apply(t, words, n_words, key, token);
    if (words != inl) free(words);
    if (rc < 0) return -1;
    /* every occurrence of the pair is gone */
    slot = find(t, key);
    if (slot != NULL) delete_slot(t, slot);
    for (uint64_t k = 0; k < t->n_touched; k++) {  /* each listed once, in the order first gained */
        uint64_t pair = t->touched[k];
        Slot *p = find(t, pair);
        if (p == NULL) continue;
        if (p->count > 0) {
            if (t->first_seen && first_of(t, p) < 0) return -1;
            if (push(t, p->count, pair, t->first_seen ? FIRST(t, p) : 0) < 0) return -1;
        } else {
            delete_slot(t, p);
        }
    }
    t->n_touched = 0;
    return 0;
}

/* Merge on: take the best pair (ml_pop), skip it for good where its token would pass
 * max_len bytes or t->allow forbids it, else merge it (begin_merge, ml_merge), appending
 * (left, right, token) to t->made and its count to t->made_count; until max_merges merges
 * are made, there are max_tokens tokens, t->stop says so after a merge, or no pair is left
 * with min_frequency. 1: stopped at a limit or by t->stop; 0: no pair left; -1 failed
 * (t->broken where the state is left half-updated). */
static int ml_run(MergeLoop *t, uint64_t max_merges, uint64_t max_tokens, int64_t min_frequency, uint64_t max_len) {
    t->n_made = 0;
    while (t->n_made < max_merges && t->n_tokens < max_tokens) {
        uint64_t key;
        int64_t count;
        int found = ml_pop(t, min_frequency, &key, &count);
        if (found <= 0) return found;
        uint32_t left = (uint32_t)(key >> 32), right = (uint32_t)key, token;
        if ((uint64_t)t->tok_len[left] + t->tok_len[right] > max_len) continue;  /* dropped for good */
        if (t->allow != NULL) {
            int allowed = t->allow(t->ctx, left, right);
            if (allowed < 0) return -1;
            if (!allowed) continue;  /* dropped for good: its count only goes down, it is never pushed again */
        }
        if (grow((void **)&t->made, &t->cap_made, 3 * (t->n_made + 1), sizeof(uint32_t)) < 0 ||
                grow((void **)&t->made_count, &t->cap_made_count, t->n_made + 1, sizeof(int64_t)) < 0 ||
                begin_merge(t, left, right, &token) < 0)
            return -1;
        if (ml_merge(t, key, token) < 0) {
            t->broken = 1;
            return -1;
        }
        t->made[3 * t->n_made] = left;
        t->made[3 * t->n_made + 1] = right;
        t->made[3 * t->n_made + 2] = token;
        t->made_count[t->n_made++] = count;
        if (t->stop != NULL && t->stop(t->ctx)) break;
    }
    return 1;
}

/* Bytes allocated (approximate); *live_symbols: the symbols of the words now. */
static uint64_t ml_allocated(const MergeLoop *t, uint64_t *live_symbols) {
    uint64_t bucket_bytes = 0;
    *live_symbols = 0;
    if (t->slots != NULL)
        for (uint64_t i = 0; i <= t->mask; i++)
            if (t->slots[i].key != EMPTY && t->slots[i].cap > INLINE_CAP)
                bucket_bytes += (uint64_t)t->slots[i].cap * sizeof(uint32_t);
    for (uint32_t w = 0; w < t->n_words; w++) *live_symbols += t->len[w];
    return t->cap_sym * 4 + (uint64_t)t->cap_words * 20 + (t->slots ? (t->mask + 1) * sizeof(Slot) : 0)
           + bucket_bytes + t->cap_heap * sizeof(Entry) + (uint64_t)t->cap_tokens * 16 + t->cap_bytes
           + t->cap_touched * 8;
}

#endif
