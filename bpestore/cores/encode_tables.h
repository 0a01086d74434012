/* The encode core's tables of a version (built once, then only read) and their look-ups.
   Plain C over arrays: the binding (_encodecore.c) builds them from Python objects. */
#ifndef BPESTORE_ENCODE_TABLES_H
#define BPESTORE_ENCODE_TABLES_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

enum { MODE_MERGE = 0, MODE_RANKS = 1 };
enum { PATTERN_NONE = -1, PATTERN_WHITESPACE = 3 };  /* 0..2: _pretok.h's */
enum { FAIL_NONE = 0, FAIL_MEMORY = 1, FAIL_UNKNOWN_CHAR = 2 };

#define NO_ID 0xFFFFFFFFu
#define NO_PAIR UINT64_MAX
#define SHORT_SYMBOLS 16       /* (2 * SHORT_SYMBOLS + 2 <= 64, the least room of the symbol arrays) */
#define MID_SYMBOLS 256
#define CACHE_KEY_MAX 30        /* bytes of the longest word the cache keeps */
#define CACHE_IDS_MAX 8         /* ids of a word the cache keeps */
#define CACHE_SLOTS_MAX (1u << 17)

/* -- the tables of a version ---------------------------------------------------------- */

typedef struct {
    uint64_t key;    /* (left << 32) | right; NO_PAIR: empty */
    uint32_t rank;
    uint32_t made;
} PairSlot;

/* 16 bytes: four to a cache line. A token of up to 8 bytes is matched in its slot alone. */
typedef struct {
    uint64_t key;         /* up to 8 bytes: the bytes (load_upto8); longer: the hash's high half
                             << 32 | the offset of its bytes in token_bytes */
    uint32_t len : 31;    /* 0: empty slot */
    uint32_t whole : 1;   /* the token is what a word of exactly its bytes encodes to */
    uint32_t id;
} TokenSlot;

typedef struct {
    uint32_t code_point;  /* NO_ID: empty */
    uint32_t id;
} CharSlot;

/* A version's tables: built once, then only read (by any number of threads). */
typedef struct {
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
    uint32_t *token_offsets;  /* where each id's bytes start in token_bytes */
    uint64_t *token_bits;  /* bit (h >> token_shift) of each token's hash h set: most spans that
                              are no token are told so without reading the (larger) table */
    int token_shift;
    size_t max_token_len;
    int whole_lookup;      /* a word that is a token may be looked up whole */
    CharSlot *char_table;
    size_t char_mask;
    uint8_t *classes;      /* the class of each code point (_pretok.h), 0: not asked yet; the
                              process's shared table where classify is the first one given */
    int own_classes;       /* classes is this encoder's own (another classify function) */
    uint64_t *byte_pairs;   /* plain byte symbols: the pair of bytes (a << 8) | b */
    uint64_t *short_tokens; /* the tokens of 2..SHORT_TOKEN_LEN bytes, their bytes kept in the slot
                               (short_key): one look-up, no filter, no second read; 0: empty */
    int short_shift;
    /* long words under token ranks, encoded by backtracking (backtrack.h; NULL: not built, the
       merges encode them): tables of every token, and of the tokens of 3-byte UTF-8 characters */
    struct BtTables *bt_all, *bt_high;
    int bt_state, bt_high_state;  /* BT_UNBUILT, BT_BUILDING, BT_READY or BT_NEVER (atomic) */
    size_t bt_after;          /* the long words merged before the backtracking tables are built */
    size_t bt_merged, bt_high_merged;  /* the long words merged so far while they were unbuilt (atomic) */
    size_t n_ids;
    size_t table_bytes;
} Tables;


/* The pair key = (a << 32) | b, of hash h = mix64(key), in the merge table:
   (rank << 32) | made, or NO_PAIR. */
static inline uint64_t
pair_find_hashed(const Tables *e, uint64_t key, uint64_t h)
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
pair_find(const Tables *e, uint32_t a, uint32_t b)
{
    uint64_t key = ((uint64_t)a << 32) | b;
    return pair_find_hashed(e, key, mix64(key));
}

/* Fetch early the slot where pair_find(e, a, b) starts looking. */
static inline void
prefetch_pair(const Tables *e, uint32_t a, uint32_t b)
{
    PREFETCH(&e->pairs[(size_t)mix64(((uint64_t)a << 32) | b) & e->pair_mask]);
}

/* The key of a token's slot: n bytes at p of hash h, stored from offset (long tokens). */
static inline uint64_t
token_key(const uint8_t *p, size_t n, uint64_t h, size_t offset)
{
    return n <= 8 ? load_upto8(p, n) : (h >> 32 << 32) | (uint32_t)offset;
}

static inline const TokenSlot *
token_find(const Tables *e, const uint8_t *p, size_t n, uint64_t h)
{
    size_t j = (size_t)h & e->token_mask;
    uint64_t want = n <= 8 ? load_upto8(p, n) : h >> 32;
    for (;;) {
        const TokenSlot *s = &e->tokens[j];
        if (s->len == 0)
            return NULL;
        if (s->len == n && (n <= 8 ? s->key == want
                            : s->key >> 32 == want && same_bytes(e->token_bytes + (uint32_t)s->key, p, n)))
            return s;
        j = (j + 1) & e->token_mask;
    }
}

/* The bytes of a token's slot. */
static inline const uint8_t *
token_bytes_of(const Tables *e, const TokenSlot *s)
{
    return e->token_bytes + e->token_offsets[s->id];
}

static inline uint32_t
char_find(const Tables *e, uint32_t c)
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

/* The tokens of 2..SHORT_TOKEN_LEN bytes: a slot is the key (the bytes, and the
   length from bit 32 on) with the id from bit SHORT_ID_SHIFT on. */
#define SHORT_TOKEN_LEN 4
#define SHORT_ID_SHIFT 35
#define SHORT_KEY_MASK ((1ULL << SHORT_ID_SHIFT) - 1)

static inline uint64_t
short_key(const uint8_t *p, size_t n)
{
    uint32_t bytes = n == 4 ? load32(p) : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (n == 3 ? (uint32_t)p[2] << 16 : 0);
    return (uint64_t)bytes | (uint64_t)n << 32;
}

static inline size_t
short_slot(const Tables *e, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> e->short_shift);
}

/* The id of the token of key's bytes, or NO_ID. */
static inline uint32_t
short_find(const Tables *e, uint64_t key)
{
    size_t mask = ((size_t)1 << (64 - e->short_shift)) - 1;
    for (size_t j = short_slot(e, key);; j = (j + 1) & mask) {
        uint64_t slot = e->short_tokens[j];
        if ((slot & SHORT_KEY_MASK) == key)
            return (uint32_t)(slot >> SHORT_ID_SHIFT);
        if (slot == 0)
            return NO_ID;
    }
}

#endif
