/* The encode core's backtracking tables, built from a version's token tables under token
   ranks (by backtrack_tables, once enough long words were merged; without Python, on any
   thread): the trie of the tokens' bytes, each token's last merge and longest prefix token. */
#ifndef BPESTORE_BACKTRACK_BUILD_H
#define BPESTORE_BACKTRACK_BUILD_H

#include "encode_word.h"

/* The merge (token ranks) of one token's bytes p[0..n), n >= 2, with scratch arrays of n + 1
   items: the one id they merge into, the last merge's ids in *left and *right; NO_ID where
   they stay more than one. */
static uint32_t
own_merge(const Tables *e, const uint8_t *p, size_t n, uint32_t *s, uint32_t *pos, uint64_t *pr,
          uint32_t *left, uint32_t *right)
{
    for (size_t i = 0; i < n; i++) {
        s[i] = e->byte_ids[p[i]];
        pos[i] = (uint32_t)i;
    }
    pos[n] = (uint32_t)n;
    for (size_t i = 0; i + 1 < n; i++)
        pr[i] = span_pair(e, p, pos[i], pos[i + 2], span_hash(e, p, pos[i], pos[i + 2]));
    while (n > 1) {
        uint64_t best = NO_PAIR;
        size_t at = 0;
        for (size_t i = 0; i + 1 < n; i++)
            if (pr[i] < best) {
                best = pr[i];
                at = i;
            }
        if (best == NO_PAIR)
            return NO_ID;
        *left = s[at];
        *right = s[at + 1];
        s[at] = (uint32_t)best;
        memmove(s + at + 1, s + at + 2, (n - at - 2) * sizeof(uint32_t));
        memmove(pos + at + 1, pos + at + 2, (n - at - 1) * sizeof(uint32_t));
        memmove(pr + at + 1, pr + at + 2, (n > at + 3 ? n - at - 3 : 0) * sizeof(uint64_t));
        n--;
        if (at > 0)
            pr[at - 1] = span_pair(e, p, pos[at - 1], pos[at + 1], span_hash(e, p, pos[at - 1], pos[at + 1]));
        if (at + 1 < n)
            pr[at] = span_pair(e, p, pos[at], pos[at + 2], span_hash(e, p, pos[at], pos[at + 2]));
    }
    return s[0];
}

/* The tokens' bytes by id, where building the backtracking tables: off[id] and len[id] of
   each token in the table of tokens (len 0: none, or bytes a lower id has). */
typedef struct {
    const uint8_t *bytes;
    uint32_t *off;
    uint8_t *len;
} BtTokens;

static inline int
bt_less(const BtTokens *t, uint32_t a, uint32_t b, size_t depth)
{
    size_t la = t->len[a], lb = t->len[b], m = la < lb ? la : lb;
    int c = m > depth ? memcmp(t->bytes + t->off[a] + depth, t->bytes + t->off[b] + depth, m - depth) : 0;
    return c < 0 || (c == 0 && la < lb);
}

/* ids[0..n) in the order of their bytes, from byte `depth` on (those before are the same):
   a radix sort by byte, tmp of n ids, counts of 258 for each depth below the longest token. */
static void
bt_sort(const BtTokens *t, uint32_t *ids, uint32_t *tmp, uint32_t *counts, size_t n, size_t depth)
{
    if (n < 32) {
        for (size_t i = 1; i < n; i++) {
            uint32_t id = ids[i];
            size_t j = i;
            for (; j > 0 && bt_less(t, id, ids[j - 1], depth); j--)
                ids[j] = ids[j - 1];
            ids[j] = id;
        }
        return;
    }
    uint32_t *start = counts + 258 * depth;  /* key 0: ends at depth; 1 + b: byte b there */
    memset(start, 0, 258 * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++)
        start[1 + (t->len[ids[i]] > depth ? 1 + t->bytes[t->off[ids[i]] + depth] : 0)]++;
    for (int k = 1; k < 258; k++)
        start[k] += start[k - 1];
    for (size_t i = 0; i < n; i++)
        tmp[start[t->len[ids[i]] > depth ? 1 + t->bytes[t->off[ids[i]] + depth] : 0]++] = ids[i];
    memcpy(ids, tmp, n * sizeof(uint32_t));
    for (int k = 1; k < 257; k++)  /* start[k]: the end of key k */
        if (start[k] - start[k - 1] > 1)
            bt_sort(t, ids + start[k - 1], tmp, counts, start[k] - start[k - 1], depth + 1);
}

/* Over sorted[0..n): each token's longest strict prefix that is a token (prefix, by id), and
   the bytes each shares with the one before it (shared). */
static void
bt_prefixes(const Tables *e, const BtTokens *t, const uint32_t *sorted, size_t n, uint32_t *prefix, uint8_t *shared)
{
    uint32_t stack[256];  /* the tokens that are prefixes of the one before, shortest first */
    size_t depth = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = sorted[i];
        const uint8_t *p = t->bytes + t->off[id];
        size_t same = 0;
        if (i > 0) {
            const uint8_t *q = t->bytes + t->off[sorted[i - 1]];
            size_t most = t->len[sorted[i - 1]] < t->len[id] ? t->len[sorted[i - 1]] : t->len[id];
            while (same < most && p[same] == q[same])
                same++;
        }
        shared[i] = (uint8_t)same;
        while (depth > 0 && t->len[stack[depth - 1]] > same)
            depth--;
        prefix[id] = depth > 0 ? stack[depth - 1] : e->byte_ids[p[0]];
        stack[depth++] = id;
    }
}

/* The id of the token of bytes p[0..n), 1 <= n <= max_token_len, or NO_ID. */
static inline uint32_t
bt_token_of(const Tables *e, const uint8_t *p, size_t n)
{
    if (n == 1)
        return e->byte_ids[p[0]];
    if (n <= SHORT_TOKEN_LEN)
        return short_find(e, short_key(p, n));
    uint64_t h = hash_bytes(p, n);
    const TokenSlot *s = token_may_be(e, h) ? token_find(e, p, n, h) : NULL;
    return s != NULL ? s->id : NO_ID;
}

/* The last merge of token id (its bytes p[0..n), n >= 2), the tables holding every token below
   it: the one pair of a prefix and the rest, both tokens of lower rank made by merges, that
   BPE leaves side by side (bt_valid_pair); NO_PAIR where there is none. */
static uint64_t
bt_find_split(const Tables *e, const BtTables *bt, const uint8_t *p, size_t n, uint32_t id, const BtTokens *t,
              const uint32_t *prefix)
{
    for (uint32_t left = prefix[id]; left != NO_ID; left = prefix[left]) {
        if (left >= id || bt->len[left] == 0)
            continue;
        uint32_t right = bt_token_of(e, p + t->len[left], n - t->len[left]);
        if (right < id && bt->len[right] != 0 && bt_valid_pair(bt, left, right))
            return ((uint64_t)left << 32) | right;
    }
    return NO_PAIR;
}

/* Each token's last merge, in the order of ids (bt_split, bt_len of those made by merges, and
   the table of their pairs): 0, or 1 where a token is made from one of higher rank. */
static int
bt_splits(const Tables *e, BtTables *bt, const BtTokens *t, const uint32_t *prefix, uint32_t *s, uint64_t *pr)
{
    for (size_t id = 0; id < e->n_ids; id++) {
        size_t n = t->len[id];
        if (n < 2)
            continue;
        const uint8_t *p = t->bytes + t->off[id];
        uint64_t split = bt_find_split(e, bt, p, n, (uint32_t)id, t, prefix);
        if (split == NO_PAIR) {  /* rare: BPE does not make it (or makes it from a higher rank) */
            uint32_t left = NO_ID, right = NO_ID;
            if (own_merge(e, p, n, s, s + e->max_token_len + 1, pr, &left, &right) != id)
                continue;
            if (left >= id || right >= id)
                return 1;
            split = ((uint64_t)left << 32) | right;
        }
        bt->split[id] = split;
        bt->len[id] = (uint8_t)n;
        uint64_t h = mix64(split), bit = h >> bt->pair_shift;
        size_t k = (size_t)h & bt->pair_mask;
        while (bt->pairs[k].key != NO_PAIR)
            k = (k + 1) & bt->pair_mask;
        bt->pairs[k] = (PairSlot){split, (uint32_t)id, (uint32_t)id};
        bt->pair_bits[bit >> 6] |= 1ULL << (bit & 63);
    }
    return 0;
}

/* The trie's nodes below the bytes' (257 on) for the tokens made by merges (bt_len set) of
   sorted[0..n), shared as bt_prefixes gives it. */
static size_t
bt_count_nodes(const BtTables *bt, const BtTokens *t, const uint32_t *sorted, const uint8_t *shared, size_t n)
{
    size_t nodes = 257, same = 0;  /* the bytes shared with the last token made by merges */
    for (size_t i = 0; i < n; i++) {
        same = shared[i] < same ? shared[i] : same;
        if (bt->len[sorted[i]] == 0)
            continue;
        nodes += t->len[sorted[i]] - (same > 1 ? same : 1);
        same = 255;
    }
    return nodes;
}

/* The edge to child from its parent by byte, as the edge table keeps it. */
static inline uint64_t
bt_edge(uint32_t parent, uint8_t byte, uint32_t child)
{
    return ((uint64_t)child << 32) | ((((uint64_t)parent << 8) | byte) + 1);
}

/* The trie of the tokens made by merges, in sorted order (so a node's id is above its
   parent's), and bt_prefix; the edges below nodes of more than one child (below two bytes)
   kept in edges[0..*n_edges), those of the others in the node. */
static void
bt_fill_trie(const Tables *e, BtTables *bt, const BtTokens *t, const uint32_t *sorted, const uint8_t *shared,
             size_t n, uint64_t *edges, size_t *n_edges)
{
    uint32_t path[256], best[256];  /* the node at each depth, the longest token down to it */
    uint32_t next = 257;
    size_t same = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = sorted[i];
        same = shared[i] < same ? shared[i] : same;
        if (bt->len[id] == 0)
            continue;
        const uint8_t *p = t->bytes + t->off[id];
        size_t len = t->len[id];
        path[1] = 1 + p[0];
        best[1] = e->byte_ids[p[0]];
        for (size_t d = (same > 1 ? same : 1) + 1; d <= len; d++) {
            uint32_t node = next++, up = path[d - 1];
            path[d] = node;
            best[d] = best[d - 1];
            if (d == 2) {
                bt->two[((size_t)p[0] << 8) | p[1]] = node;
                continue;
            }
            uint64_t v = bt->nodes[up];
            uint32_t only = (uint32_t)(v >> 32);
            bt->nodes[up] = (uint32_t)v | BT_DEEPER | (v & BT_DEEPER ? 0 : ((uint64_t)node << 8 | p[d - 1]) << 32);
            if (only != 0)  /* its second child: the first one's edge goes to the table too */
                edges[(*n_edges)++] = bt_edge(up, (uint8_t)only, only >> 8);
            if (v & BT_DEEPER)
                edges[(*n_edges)++] = bt_edge(up, p[d - 1], node);
        }
        bt->nodes[path[len]] = (bt->nodes[path[len]] & ~(uint64_t)BT_NONE) | id;
        bt->prefix[id] = best[len - 1];
        best[len] = id;
        same = 255;
    }
}

/* The table of edges[0..n); its capacity, or 0 (no memory). */
static size_t
bt_edge_table(BtTables *bt, const uint64_t *edges, size_t n)
{
    size_t capacity = capacity_for(n), mask = capacity - 1;
    if ((bt->edges = calloc(capacity, sizeof(uint64_t))) == NULL)
        return 0;
    bt->edge_shift = 64 - __builtin_ctzll(capacity);
    for (size_t i = 0; i < n; i++) {
        size_t j = (size_t)(((uint64_t)(uint32_t)edges[i] * 0x9E3779B97F4A7C15ULL) >> bt->edge_shift);
        while (bt->edges[j] != 0)
            j = (j + 1) & mask;
        bt->edges[j] = edges[i];
    }
    return capacity;
}

static void
bt_tables_free(BtTables *bt)
{
    if (bt == NULL)
        return;
    free(bt->split);
    free(bt->prefix);
    free(bt->len);
    free(bt->two);
    free(bt->edges);
    free(bt->nodes);
    free(bt->pairs);
    free(bt->pair_bits);
    free(bt);
}

/* The backtracking tables and the table of pairs (merge rule) freed and forgotten. */
static void
bt_free(Tables *e)
{
    bt_tables_free(e->bt_all);
    bt_tables_free(e->bt_high);
    free(e->pairs);
    e->bt_all = e->bt_high = NULL;
    e->pairs = NULL;
}

/* The tables by id and the table of pairs, as a token of each byte leaves them: 0, or -1. */
static int
bt_tables(const Tables *e, BtTables *bt, size_t n_tokens)
{
    size_t n = e->n_ids, pairs = capacity_for(n_tokens), pair_bits = 64 * capacity_for(pairs / 8);
    bt->split = malloc(n * sizeof(uint64_t));
    bt->prefix = malloc(n * sizeof(uint32_t));
    bt->len = calloc(n, 1);
    bt->two = calloc(65536, sizeof(uint32_t));
    bt->pairs = malloc(pairs * sizeof(PairSlot));
    bt->pair_bits = calloc(pair_bits / 64, sizeof(uint64_t));
    if (!bt->split || !bt->prefix || !bt->len || !bt->two || !bt->pairs || !bt->pair_bits)
        return -1;
    bt->pair_mask = pairs - 1;
    bt->pair_shift = 64 - __builtin_ctzll(pair_bits);
    for (size_t i = 0; i < pairs; i++)
        bt->pairs[i].key = NO_PAIR;
    for (size_t i = 0; i < n; i++)
        bt->prefix[i] = NO_ID;
    for (int b = 0; b < 256; b++) {
        uint32_t id = e->byte_ids[b];
        bt->split[id] = ((uint64_t)id << 32) | id;
        bt->len[id] = 1;
    }
    return 0;
}

/* The trie of the tokens made by merges, from sorted[0..n): its memory in bytes, 0 (too many
   nodes), or -1. */
static ptrdiff_t
bt_trie(const Tables *e, BtTables *bt, const BtTokens *t, const uint32_t *sorted, const uint8_t *shared, size_t n)
{
    size_t n_nodes = bt_count_nodes(bt, t, sorted, shared, n), n_edges = 0, capacity = 0;
    if (n_nodes >= ((size_t)1 << 24))
        return 0;
    uint64_t *edges = malloc(n_nodes * sizeof(uint64_t));
    bt->nodes = malloc(n_nodes * sizeof(uint64_t));
    if (edges != NULL && bt->nodes != NULL) {
        for (size_t i = 0; i < n_nodes; i++)
            bt->nodes[i] = BT_NONE;
        for (int b = 0; b < 256; b++)
            bt->nodes[1 + b] = e->byte_ids[b];
        bt_fill_trie(e, bt, t, sorted, shared, n, edges, &n_edges);
        capacity = bt_edge_table(bt, edges, n_edges);
    }
    free(edges);
    if (capacity == 0)
        return -1;
    size_t pairs = bt->pair_mask + 1;
    return (ptrdiff_t)(e->n_ids * (sizeof(uint64_t) + sizeof(uint32_t) + 1) + 65536 * sizeof(uint32_t) +
                       pairs * sizeof(PairSlot) + 64 * capacity_for(pairs / 8) / 8 +
                       (n_nodes + capacity) * sizeof(uint64_t));
}

/* Whether the bytes p[0..n) are all >= 0x80. */
static inline int
all_high(const uint8_t *p, size_t n)
{
    uint64_t low = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        low |= ~load64(p + i);
    for (; i < n; i++)
        low |= (uint64_t)(uint8_t)~p[i];
    return !(low & 0x8080808080808080ULL);
}

/* Whether the bytes p[0..n) are all those of 3-byte UTF-8 characters (0x80..0xBF, 0xE0..0xEF:
   CJK, kana, hangul, Devanagari, Thai...); the tokens of such bytes alone are a set closed under
   substrings, so a word of such bytes alone meets no other token. */
static inline int
bt_cjk_bytes(const uint8_t *p, size_t n)
{
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= ((p[i] & 0xC0) == 0x80) | ((p[i] & 0xF0) == 0xE0);
    return ok;
}

/* The backtracking tables of token ranks (long words) of every token, or (high) of the tokens
   of 3-byte UTF-8 characters' bytes alone, where the tokens allow: every byte a token of its own (the id byte_ids
   gives), each other token merged from two tokens of lower rank. NULL: none (long words are
   merged). Calls no Python. */
static BtTables *
build_backtrack(Tables *e, int high)
{
    if (e->max_token_len > 255 || e->n_ids >= BT_NONE || e->short_tokens == NULL)
        return NULL;
    for (int b = 0; b < 256; b++) {
        uint8_t byte[8] = {(uint8_t)b};
        const TokenSlot *s = token_find(e, byte, 1, hash_bytes(byte, 1));
        if (s == NULL || s->id != e->byte_ids[b])
            return NULL;
    }
    size_t n = e->n_ids, n_tokens = 0, n_long = 0;
    BtTables *bt = calloc(1, sizeof(BtTables));
    BtTokens t = {e->token_bytes, malloc(n * sizeof(uint32_t)), calloc(n, 1)};
    uint32_t *sorted = NULL, *tmp = NULL, *counts = NULL, *prefix = malloc(n * sizeof(uint32_t)), *s = NULL;
    uint8_t *shared = NULL;
    uint64_t *pr = NULL;
    ptrdiff_t made = -1;
    if (bt == NULL || t.off == NULL || t.len == NULL || prefix == NULL)
        goto done;
    for (size_t j = 0; j <= e->token_mask; j++) {
        const TokenSlot *slot = &e->tokens[j];
        if (slot->len == 0)
            continue;
        t.off[slot->id] = e->token_offsets[slot->id];
        t.len[slot->id] = (uint8_t)slot->len;
    }
    for (size_t id = 0; id < n; id++) {  /* in the order of their bytes */
        if (high && t.len[id] >= 2 && !bt_cjk_bytes(t.bytes + t.off[id], t.len[id]))
            t.len[id] = 0;
        n_tokens += t.len[id] != 0;
        n_long += t.len[id] >= 2;
    }
    sorted = malloc((n_long + 1) * sizeof(uint32_t));
    tmp = malloc((n_long + 1) * sizeof(uint32_t));
    counts = malloc(258 * 256 * sizeof(uint32_t));
    shared = malloc(n_long + 1);
    s = malloc(2 * (e->max_token_len + 1) * sizeof(uint32_t));
    pr = malloc((e->max_token_len + 1) * sizeof(uint64_t));
    if (!sorted || !tmp || !counts || !shared || !s || !pr || bt_tables(e, bt, n_tokens) < 0)
        goto done;
    for (size_t id = 0, k = 0; id < n; id++) {
        prefix[id] = NO_ID;
        if (t.len[id] >= 2)
            sorted[k++] = (uint32_t)id;
    }
    bt_sort(&t, sorted, tmp, counts, n_long, 0);
    bt_prefixes(e, &t, sorted, n_long, prefix, shared);
    made = bt_splits(e, bt, &t, prefix, s, pr) == 0 ? bt_trie(e, bt, &t, sorted, shared, n_long) : 0;
done:
    free(t.off);
    free(t.len);
    free(sorted);
    free(tmp);
    free(counts);
    free(prefix);
    free(shared);
    free(s);
    free(pr);
    if (made <= 0) {
        bt_tables_free(bt);
        return NULL;
    }
    __atomic_add_fetch(&e->table_bytes, (size_t)made, __ATOMIC_RELAXED);
    return bt;
}

/* The tables of one set (high: the tokens of 3-byte characters), where built: the long word that comes
   after `after` merged ones builds them (the call that meets it, whatever thread; a word met
   while they are being built is merged). */
static const BtTables *
bt_ready(const Tables *e, int high, size_t after)
{
    Tables *building = (Tables *)e;  /* its only parts ever written: the count, the state, the tables */
    int *state = high ? &building->bt_high_state : &building->bt_state;
    size_t *merged = high ? &building->bt_high_merged : &building->bt_merged;
    int now = __atomic_load_n(state, __ATOMIC_ACQUIRE);
    if (now != BT_UNBUILT)
        return now == BT_READY ? (high ? e->bt_high : e->bt_all) : NULL;
    if (__atomic_load_n(merged, __ATOMIC_RELAXED) < after && __atomic_add_fetch(merged, 1, __ATOMIC_RELAXED) <= after)
        return NULL;
    if (!__atomic_compare_exchange_n(state, &now, BT_BUILDING, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return now == BT_READY ? (high ? e->bt_high : e->bt_all) : NULL;
    BtTables *bt = build_backtrack(building, high);
    *(high ? &building->bt_high : &building->bt_all) = bt;
    __atomic_store_n(state, bt != NULL ? BT_READY : BT_NEVER, __ATOMIC_RELEASE);
    return bt;
}

/* The backtracking tables for the long word bytes[0..n) under token ranks (those of every
   token once built; a word of 3-byte UTF-8 characters alone: those of such tokens), or NULL:
   merge it. Another word of bytes >= 0x80 after its first (" " and Cyrillic, Devanagari...)
   merges as fast as it backtracks (o200k): it counts towards no build, where bt_after > 0. */
static const BtTables *
backtrack_tables(const Tables *e, const uint8_t *bytes, size_t n)
{
    int state = __atomic_load_n(&e->bt_state, __ATOMIC_ACQUIRE);
    if (state == BT_READY)
        return e->bt_all;
    if (state == BT_NEVER)
        return NULL;
    if (bt_cjk_bytes(bytes, n))
        return bt_ready(e, 1, e->bt_after / BT_HIGH_SHARE);
    if (all_high(bytes + 1, n - 1))
        return e->bt_after == 0 ? bt_ready(e, 0, 0) : NULL;
    return bt_ready(e, 0, e->bt_after);
}

#endif
