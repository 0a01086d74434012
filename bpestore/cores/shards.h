/* The count core's shards: a worker's counts cut by zlib's crc32 of each word, in word
   order, their lengths and counts LEB128-packed. Plain C; the binding (_countcore.c) reads
   the counts from the dict and makes the bytes objects. */
#ifndef BPESTORE_SHARDS_H
#define BPESTORE_SHARDS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* zlib's crc32 (the shard of a word is the same in every process and in pool.shard_of). */
static uint32_t crc_table[256];

static uint32_t
crc32_of(const unsigned char *p, ptrdiff_t n)
{
    if (crc_table[1] == 0) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            crc_table[i] = c;
        }
    }
    uint32_t c = 0xFFFFFFFFu;
    for (ptrdiff_t i = 0; i < n; i++)
        c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

typedef struct {
    const char *word;
    ptrdiff_t len;
    long long count;
    uint64_t prefix;  /* the first 8 bytes big-endian, zeros past the end: most comparisons stop here */
    ptrdiff_t shard;
    uint64_t first;   /* ordinal: where the word first occurred (0 without ordinals) */
} Counted;

static uint64_t
prefix_of(const char *word, ptrdiff_t len)
{
    uint64_t prefix = 0;
    for (int k = 0; k < 8; k++)
        prefix = prefix << 8 | (k < len ? (unsigned char)word[k] : 0);
    return prefix;
}

static int
word_order(const Counted *x, const Counted *y)
{
    if (x->prefix != y->prefix)
        return x->prefix < y->prefix ? -1 : 1;
    int c = memcmp(x->word, y->word, (size_t)(x->len < y->len ? x->len : y->len));
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static int
shard_then_word(const void *a, const void *b)
{
    const Counted *x = a, *y = b;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    return word_order(x, y);
}

/* LEB128: seven bits a byte, low first, the high bit set on every byte but the last. */
static ptrdiff_t
varint_size(uint64_t v)
{
    ptrdiff_t n = 1;
    for (; v >= 0x80; v >>= 7)
        n++;
    return n;
}

static char *
varint_put(char *out, uint64_t v)
{
    for (; v >= 0x80; v >>= 7)
        *out++ = (char)((v & 0x7F) | 0x80);
    *out++ = (char)v;
    return out;
}

/* The next number at *p (moved past it); -1 where it runs past end or past 64 bits. */
static int
varint_get(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    uint64_t r = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char b = *(*p)++;
        r |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

#endif
