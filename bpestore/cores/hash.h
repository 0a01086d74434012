/* Hashing and short loads for the compiled cores' tables (over plain arrays; no Python). */
#ifndef BPESTORE_HASH_H
#define BPESTORE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)0)
#endif

/* A 64-bit key's bits mixed, so that its low bits index a table. */
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

static inline uint64_t
load16(const uint8_t *p)
{
    uint16_t w;
    memcpy(&w, p, 2);
    return w;
}

/* The n <= 8 bytes at p as one word (little-endian, zero above them), reading none past
   p + n: two loads that overlap (the overlapping bytes are the same, so OR joins them). */
static inline uint64_t
load_upto8(const uint8_t *p, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n >= 8)
        return load64(p);
    if (n >= 4)
        return load32(p) | ((uint64_t)load32(p + n - 4) << (8 * (n - 4)));
    if (n >= 2)
        return load16(p) | (load16(p + n - 2) << (8 * (n - 2)));
    return n ? p[0] : 0;
#else
    uint64_t w = 0;
    for (size_t i = 0; i < n && i < 8; i++)
        w |= (uint64_t)p[i] << (8 * i);
    return w;
#endif
}

/* a[0..n) == b[0..n), for short n, without a call. */
static inline int
same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (n <= 8)
        return load_upto8(a, n) == load_upto8(b, n);
    for (size_t i = 0; i + 8 < n; i += 8)
        if (load64(a + i) != load64(b + i))
            return 0;
    return load64(a + n - 8) == load64(b + n - 8);
}

/* hash_bytes' first step (the length) and last (the last 1..8 bytes as one little-endian word). */
static inline uint64_t
hash_start(size_t n)
{
    return 0x9E3779B97F4A7C15ULL ^ ((uint64_t)n * 0xc4ceb9fe1a85ec53ULL);
}

static inline uint64_t
hash_finish(uint64_t h, uint64_t last)
{
    h = (h ^ last) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 29;
    return h;
}

/* hash_bytes of n <= 8 bytes given already as one little-endian word x (load_upto8). */
static inline uint64_t
hash_upto8(uint64_t x, size_t n)
{
    return hash_finish(hash_start(n), x);
}

static inline uint64_t
hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = hash_start(n);
    /* the last 1..8 bytes (of 8 or more: one load ending at the end) */
    uint64_t w = n >= 8 ? load64(p + n - 8) >> (8 * ((8 - n % 8) % 8)) : load_upto8(p, n);
    while (n > 8) {
        h = (h ^ load64(p)) * 0xff51afd7ed558ccdULL;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    return hash_finish(h, w);
}

/* The merge core's pair keys mixed (another finalizer: its tables were tuned with it). */
static inline uint64_t
mix_pair_key(uint64_t key)
{
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 32;
    return key;
}

#endif
