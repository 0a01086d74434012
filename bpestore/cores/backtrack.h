/* Long words under token ranks, found token by token with backtracking over a trie of the
   tokens' bytes (the tables are built by backtrack_tables once enough such words were merged). */
#ifndef BPESTORE_BACKTRACK_H
#define BPESTORE_BACKTRACK_H

#include "merge_word.h"

/* -- long words under token ranks: backtracking ------------------------------------------------

   A long word (more than BACKTRACK_BYTES bytes) is encoded left to right: at each position the
   longest token there (a walk down the trie of the tokens' bytes) is taken where it may follow
   the token before it, else the longest shorter token that is a prefix of it, and so on; where
   none may, the token before is taken back and its end marked as a position no encoding passes.
   Whether token b may follow token a (bt_valid_pair): undo the merges that made a and b, the
   later one first, and ask at each step whether the merge rule would rather have joined the two
   pieces across the cut (their pair makes a token of lower rank than what was undone). The
   tokens are those a word of their own bytes merges into (others never come out of a merge), each
   with the last merge that made it; the ranks are the ids. */
/* From 17 bytes on backtracking is the faster (CJK words, cl100k and o200k). Below, merging
   is faster though it runs more instructions: a backtracked short word waits on a chain of
   trie and pair-filter reads, where merging fetches its look-ups at once (timed 1.4x on
   english 250 kB documents against backtracking from 3 bytes). */
#define BACKTRACK_BYTES 16
/* The backtracking tables are built once n_ids / BT_AFTER_PER_IDS long words have been merged
   (by default): a text of few long words is merged (an o200k Japanese word ~0.7 us slower than
   backtracked, where the tables take ~50 ms: 0.25 us an id), and the merging done before the
   build costs at most ~1/6 of the build. */
#define BT_AFTER_PER_IDS 16
/* A word of the bytes of 3-byte UTF-8 characters alone (CJK, kana: scripts without spaces) only
   meets tokens of such bytes: their tables (9% of o200k's tokens, 1.8% of cl100k's: a build ~10x
   cheaper) are built apart, after 1/BT_HIGH_SHARE of the words the tables of every token wait for. */
#define BT_HIGH_SHARE 8
enum { BT_UNBUILT = 0, BT_BUILDING = 1, BT_READY = 2, BT_NEVER = 3 };
#define BT_NONE 0x7FFFFFFFu
#define BT_DEEPER 0x80000000u

/* The backtracking tables of a set of tokens (every token, or those of 3-byte characters; by id,
   the others' bt_len 0), with the table of their last merges. */
typedef struct BtTables {
    uint64_t *nodes;      /* a node of the trie of the tokens' bytes: the token ending there (BT_NONE:
                             none), BT_DEEPER set where a longer token goes on from it; above bit 32,
                             where it has one child only: (child << 8) | byte */
    uint32_t *two;        /* the node of two bytes (a << 8) | b, 0: none (node 1 + b: the byte b) */
    uint64_t *edges;      /* a deeper node: slot (child << 32) | ((parent << 8 | byte) + 1), 0: empty */
    int edge_shift;
    uint64_t *split;      /* by id: (left << 32) | right, the last merge of its own bytes; (id, id): a byte */
    uint32_t *prefix;     /* by id: the longest token that is a strict prefix of it, or NO_ID */
    uint8_t *len;         /* by id: its length in bytes (0: not in the set) */
    PairSlot *pairs;      /* the last merges: key (left << 32) | right, made (= rank) */
    size_t pair_mask;
    uint64_t *pair_bits;  /* bit (h >> pair_shift) of each pair's hash h set (as token_bits) */
    int pair_shift;
} BtTables;

static const BtTables *backtrack_tables(const Tables *e, const uint8_t *bytes, size_t n);

static inline uint32_t
bt_child(const BtTables *bt, uint32_t node, uint8_t byte)
{
    uint64_t key = (((uint64_t)node << 8) | byte) + 1;
    size_t mask = ((size_t)1 << (64 - bt->edge_shift)) - 1;
    for (size_t j = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> bt->edge_shift);; j = (j + 1) & mask) {
        uint64_t slot = bt->edges[j];
        if ((uint32_t)slot == key)
            return (uint32_t)(slot >> 32);
        if (slot == 0)
            return 0;
    }
}

/* The longest token at p[0..n), n >= 1. */
static inline uint32_t
bt_longest(const Tables *e, const BtTables *bt, const uint8_t *p, size_t n)
{
    uint32_t best = e->byte_ids[p[0]];
    if (n < 2)
        return best;
    uint32_t node = bt->two[((size_t)p[0] << 8) | p[1]];
    for (size_t i = 2; node != 0; i++) {
        uint64_t v = bt->nodes[node];
        best = ((uint32_t)v & BT_NONE) != BT_NONE ? (uint32_t)v & BT_NONE : best;
        if (i == n || !(v & BT_DEEPER))
            break;
        uint32_t only = (uint32_t)(v >> 32);
        if (only != 0 && (only & 255) != p[i])
            break;
        node = only != 0 ? only >> 8 : bt_child(bt, node, p[i]);
    }
    return best;
}

/* Whether BPE leaves token b right after token a (their bytes side by side). */
static inline int
bt_valid_pair(const BtTables *bt, uint32_t a, uint32_t b)
{
    uint32_t limit = NO_ID;  /* the ranks still open to a merge across the cut: below it */
    for (;;) {
        uint64_t key = ((uint64_t)a << 32) | b, h = mix64(key), bit = h >> bt->pair_shift;
        if (bt->pair_bits[bit >> 6] >> (bit & 63) & 1) {
            for (size_t j = (size_t)h & bt->pair_mask;; j = (j + 1) & bt->pair_mask) {
                const PairSlot *s = &bt->pairs[j];
                if (s->key == key) {
                    if (s->made < limit)
                        return 0;
                    break;
                }
                if (s->key == NO_PAIR)
                    break;
            }
        }
        if (a > b) {
            limit = a;
            a = (uint32_t)bt->split[a];
            if (a == limit) {
                limit = b + 1;
                b = (uint32_t)(bt->split[b] >> 32);
                if (b + 1 == limit)
                    return 1;
            }
        } else {
            limit = b + 1;
            b = (uint32_t)(bt->split[b] >> 32);
            if (b + 1 == limit) {
                limit = a;
                a = (uint32_t)bt->split[a];
                if (a == limit)
                    return 1;
            }
        }
    }
}

/* The ids of bytes[0..n) in w->symbols: their number, or -1 (w->fail set). */
static ptrdiff_t
backtrack(const Tables *e, const BtTables *bt, Work *w, const uint8_t *bytes, size_t n)
{
    size_t n_words = (n + 64) / 64;  /* a bit for each position 0..n: 1 while some encoding may pass it */
    if (symbols_room(w, n + 2) < 0 || grow(w, (void **)&w->heap, &w->heap_cap, 0, n_words, sizeof(uint64_t)) < 0)
        return -1;
    uint64_t *open = w->heap;
    memset(open, 0xFF, n_words * sizeof(uint64_t));
    uint32_t *s = w->symbols;
    size_t m = 0, pos = 0;
    uint32_t next = bt_longest(e, bt, bytes, n);
    while (next != NO_ID) {
        uint32_t token = next, last = m ? s[m - 1] : NO_ID;
        for (;;) {
            size_t end = pos + bt->len[token];
            if ((open[end >> 6] >> (end & 63) & 1) && (last == NO_ID || bt_valid_pair(bt, last, token))) {
                s[m++] = token;
                pos = end;
                next = pos < n ? bt_longest(e, bt, bytes + pos, n - pos) : NO_ID;
                break;
            }
            if (bt->prefix[token] != NO_ID) {
                token = bt->prefix[token];
                continue;
            }
            if (m == 0)  /* no encoding at all: the tables do not hold what they should */
                return 0;
            open[pos >> 6] &= ~(1ULL << (pos & 63));
            m--;
            pos -= bt->len[last];
            next = last;
            break;
        }
    }
    return (ptrdiff_t)m;
}

#endif
