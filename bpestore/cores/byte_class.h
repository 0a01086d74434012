/* The classes of 16 bytes of text at once as a bitmask (bit k: the byte at p + k): ASCII
   upper- and lower-case letters, digits, whitespace (\t \n \v \f \r and ' ', the regex
   module's \s below 0x80), \r and \n, '/', and the bytes from 0x80 on. SSE2 on x86-64
   (its baseline), a byte loop elsewhere; the caller has 16 bytes readable at p. For the
   compiled cores' scans (no Python). */
#ifndef BPESTORE_BYTE_CLASS_H
#define BPESTORE_BYTE_CLASS_H

#include <stdint.h>

/* (BPESTORE_NO_SSE2: the byte loop, to test it on x86-64) */
#if !defined(BPESTORE_NO_SSE2) && (defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2))
#include <emmintrin.h>
#define BYTE_CLASS_SSE2 1
#endif

/* The classes byte_mask finds (any OR of them). */
enum { BC_UPPER = 1, BC_LOWER = 2, BC_LETTER = 3, BC_DIGIT = 4, BC_SPACE = 8, BC_NEWLINE = 16, BC_SLASH = 32,
       BC_HIGH = 64 };

#ifdef BYTE_CLASS_SSE2
/* Bytes x with lo <= x <= hi (both below 0x80; bytes from 0x80 on are none: the sum wraps
   them above the signed bound). */
static inline __m128i
byte_range(__m128i x, char lo, char hi)
{
    __m128i shifted = _mm_add_epi8(x, _mm_set1_epi8((char)(-128 - lo)));
    return _mm_cmplt_epi8(shifted, _mm_set1_epi8((char)(-128 + (hi - lo) + 1)));
}
#endif

/* The bytes of p[0:16) of the classes `which` (a constant where inlined: only those are
   computed), as a bitmask. */
static inline uint32_t
byte_mask(const uint8_t *p, int which)
{
#ifdef BYTE_CLASS_SSE2
    __m128i x = _mm_loadu_si128((const __m128i *)p), in = _mm_setzero_si128();
    if ((which & BC_LETTER) == BC_LETTER)  /* upper case to lower: one range */
        in = byte_range(_mm_or_si128(x, _mm_set1_epi8(0x20)), 'a', 'z');
    else if (which & BC_UPPER)
        in = byte_range(x, 'A', 'Z');
    else if (which & BC_LOWER)
        in = byte_range(x, 'a', 'z');
    if (which & BC_DIGIT)
        in = _mm_or_si128(in, byte_range(x, '0', '9'));
    if (which & BC_SPACE)
        in = _mm_or_si128(in, _mm_or_si128(byte_range(x, '\t', '\r'), _mm_cmpeq_epi8(x, _mm_set1_epi8(' '))));
    if (which & BC_NEWLINE)
        in = _mm_or_si128(in, _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\n')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\r'))));
    if (which & BC_SLASH)
        in = _mm_or_si128(in, _mm_cmpeq_epi8(x, _mm_set1_epi8('/')));
    if (which & BC_HIGH)
        in = _mm_or_si128(in, x);
    return (uint32_t)_mm_movemask_epi8(in);
#else
    uint32_t m = 0;
    for (int k = 0; k < 16; k++) {
        uint32_t c = p[k];
        int in = ((which & BC_UPPER) && c >= 'A' && c <= 'Z') || ((which & BC_LOWER) && c >= 'a' && c <= 'z')
                 || ((which & BC_DIGIT) && c >= '0' && c <= '9')
                 || ((which & BC_SPACE) && ((c >= '\t' && c <= '\r') || c == ' '))
                 || ((which & BC_NEWLINE) && (c == '\n' || c == '\r')) || ((which & BC_SLASH) && c == '/')
                 || ((which & BC_HIGH) && c >= 0x80);
        m |= (uint32_t)in << k;
    }
    return m;
#endif
}

/* The position of the highest bit of mask (not 0). */
static inline int
mask_last(uint32_t mask)
{
#if defined(__GNUC__) || defined(__clang__)
    return 31 - __builtin_clz(mask);
#else
    int k = 0;
    while (mask >>= 1)
        k++;
    return k;
#endif
}

/* The first position from `from` on (< 16) where mask has no bit: 16 where the run of
   bits reaches the end of the 16. */
static inline int
mask_run_end(uint32_t mask, int from)
{
    uint32_t rest = ~(mask >> from);
#if defined(__GNUC__) || defined(__clang__)
    return from + __builtin_ctz(rest);
#else
    int k = from;
    while (rest & 1) {
        rest >>= 1;
        k++;
    }
    return k;
#endif
}

/* The bytes of p[0:16) equal to c, as a bitmask. */
static inline uint32_t
byte_eq(const uint8_t *p, char c)
{
#ifdef BYTE_CLASS_SSE2
    return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), _mm_set1_epi8(c)));
#else
    uint32_t m = 0;
    for (int k = 0; k < 16; k++)
        m |= (uint32_t)(p[k] == (uint8_t)c) << k;
    return m;
#endif
}

/* The 64 bytes at p equal to c (the caller has 64 bytes readable at p). */
static inline uint64_t
block_eq(const uint8_t *p, char c)
{
    return (uint64_t)byte_eq(p, c) | (uint64_t)byte_eq(p + 16, c) << 16 | (uint64_t)byte_eq(p + 32, c) << 32
           | (uint64_t)byte_eq(p + 48, c) << 48;
}

/* The 64 bytes at p of the classes `which` (byte_mask's). */
static inline uint64_t
block_mask(const uint8_t *p, int which)
{
    return (uint64_t)byte_mask(p, which) | (uint64_t)byte_mask(p + 16, which) << 16
           | (uint64_t)byte_mask(p + 32, which) << 32 | (uint64_t)byte_mask(p + 48, which) << 48;
}

#endif
