/* tiktoken's rank files parsed: a line per token, its bytes in base64 and its rank.
   Plain C over the file's bytes; the binding makes the list of tokens by rank. */
#ifndef BPESTORE_RANK_FILE_H
#define BPESTORE_RANK_FILE_H

#include "encode_tables.h"

#define RANK_LINE_MAX (1u << 20)
#define RANK_MAX 0x7FFFFFFFu

static inline int
base64_value(uint8_t c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* The bytes of p[0..n), strict base64 with its padding, at out; their number, or -1. */
static ptrdiff_t
base64_decode(const uint8_t *p, size_t n, uint8_t *out)
{
    if (n == 0 || n % 4)
        return -1;
    size_t pad = p[n - 1] == '=' ? (p[n - 2] == '=' ? 2 : 1) : 0;
    uint8_t *o = out;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++) {
            v[j] = i + j >= n - pad ? 0 : base64_value(p[i + j]);
            if (v[j] < 0)
                return -1;
        }
        uint32_t x = ((uint32_t)v[0] << 18) | ((uint32_t)v[1] << 12) | ((uint32_t)v[2] << 6) | (uint32_t)v[3];
        *o++ = (uint8_t)(x >> 16);
        if (i + 4 < n || pad < 2)
            *o++ = (uint8_t)(x >> 8);
        if (i + 4 < n || pad < 1)
            *o++ = (uint8_t)x;
    }
    return o - out;
}

static inline int
is_blank(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

typedef struct {
    uint8_t *bytes;       /* every token's bytes, in file order */
    uint32_t *offsets;    /* token k: bytes[offsets[k]..offsets[k + 1]) */
    uint32_t *ranks;
    size_t n;
    uint32_t max_rank;
} RankFile;

/* The tokens and ranks of a rank file in its plainest form (each line a base64 token,
   blanks, a decimal rank); 0, or -1 where anything else is met (the caller's reader
   then says what), or -2 out of memory. Run without the GIL. */
static int
parse_rank_lines(const uint8_t *p, size_t size, RankFile *f)
{
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += p[i] == '\n';
    f->bytes = malloc(size ? size : 1);
    f->offsets = malloc((lines + 1) * sizeof(uint32_t));
    f->ranks = malloc(lines * sizeof(uint32_t));
    if (f->bytes == NULL || f->offsets == NULL || f->ranks == NULL || size >= NO_ID)
        return size >= NO_ID ? -1 : -2;
    size_t at = 0;
    f->offsets[0] = 0;
    for (size_t i = 0; i < size;) {
        const uint8_t *end = memchr(p + i, '\n', size - i);
        size_t stop = end ? (size_t)(end - p) : size, next = stop + 1;
        if (stop - i >= RANK_LINE_MAX)
            return -1;
        while (i < stop && is_blank(p[i]))
            i++;
        while (stop > i && is_blank(p[stop - 1]))
            stop--;
        if (i == stop) {
            i = next;
            continue;
        }
        size_t token_end = i;
        while (token_end < stop && !is_blank(p[token_end]))
            token_end++;
        size_t digits = token_end;
        while (digits < stop && is_blank(p[digits]))
            digits++;
        if (digits == token_end || digits == stop)
            return -1;
        uint64_t rank = 0;
        for (size_t j = digits; j < stop; j++) {
            if (p[j] < '0' || p[j] > '9' || (rank = rank * 10 + (p[j] - '0')) > RANK_MAX)
                return -1;
        }
        ptrdiff_t len = base64_decode(p + i, token_end - i, f->bytes + at);
        if (len <= 0)
            return -1;
        at += (size_t)len;
        f->ranks[f->n] = (uint32_t)rank;
        f->offsets[++f->n] = (uint32_t)at;
        if (rank > f->max_rank)
            f->max_rank = (uint32_t)rank;
        i = next;
    }
    return 0;
}

/* Whether two tokens of the file are the same bytes, or two have one rank; -1 out of memory. */
static int
has_repeats(const RankFile *f)
{
    size_t capacity = capacity_for(f->n);
    uint32_t *slots = malloc(capacity * sizeof(uint32_t));
    uint8_t *seen = calloc((size_t)f->max_rank / 8 + 1, 1);
    int found = 0;
    if (slots == NULL || seen == NULL) {
        free(slots);
        free(seen);
        return -1;
    }
    memset(slots, 0xFF, capacity * sizeof(uint32_t));
    for (size_t k = 0; k < f->n && !found; k++) {
        uint32_t r = f->ranks[k];
        found = (seen[r >> 3] >> (r & 7)) & 1;
        seen[r >> 3] |= (uint8_t)(1u << (r & 7));
        const uint8_t *t = f->bytes + f->offsets[k];
        size_t len = f->offsets[k + 1] - f->offsets[k];
        size_t j = (size_t)hash_bytes(t, len) & (capacity - 1);
        for (; slots[j] != NO_ID && !found; j = (j + 1) & (capacity - 1)) {
            uint32_t o = slots[j];
            found = f->offsets[o + 1] - f->offsets[o] == len && memcmp(f->bytes + f->offsets[o], t, len) == 0;
        }
        slots[j] = (uint32_t)k;
    }
    free(slots);
    free(seen);
    return found;
}

#endif
