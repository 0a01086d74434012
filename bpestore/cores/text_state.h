/* Whether a text can be encoded as it is, before the encode core scans it (scan_text.h):
   no surrogate, and every character's class known where a pattern is scanned. Plain C:
   it runs on any thread. */
#ifndef BPESTORE_TEXT_STATE_H
#define BPESTORE_TEXT_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pretok.h"
#include "encode_tables.h"
#include "byte_class.h"

/* What text_state finds of a text; TEXT_NONE: the encoder has no symbol for a character. */
enum { TEXT_READY = 0, TEXT_SURROGATE = 1, TEXT_UNCLASSIFIED = 2, TEXT_NONE = 3 };

/* Whether a character of text[start:stop] (kind 2 or 4) above Latin-1 has no class yet:
   16 bytes of characters a step past those all within Latin-1 (8 without SSE2). */
static int
wide_unclassified(const uint8_t *classes, const void *data, int kind, ptrdiff_t start, ptrdiff_t stop)
{
#ifdef BYTE_CLASS_SSE2
    const __m128i above = kind == 2 ? _mm_set1_epi16((short)0xFF00) : _mm_set1_epi32((int)0xFFFFFF00);
    const ptrdiff_t lanes = 16 / kind;
#else
    const uint64_t above = kind == 2 ? 0xFF00FF00FF00FF00ULL : 0xFFFFFF00FFFFFF00ULL;
    const ptrdiff_t lanes = 8 / kind;
#endif
    for (ptrdiff_t i = start; i < stop;) {
        if (i + lanes <= stop) {
#ifdef BYTE_CLASS_SSE2
            __m128i x = _mm_and_si128(_mm_loadu_si128((const __m128i *)((const uint8_t *)data + i * kind)), above);
            int within = _mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_setzero_si128())) == 0xFFFF;
#else
            uint64_t x;
            memcpy(&x, (const uint8_t *)data + i * kind, 8);
            int within = !(x & above);
#endif
            if (within) {
                i += lanes;
                continue;
            }
        }
        for (ptrdiff_t end = i + lanes < stop ? i + lanes : stop; i < end; i++) {
            uint32_t c = CHAR_AT(kind, data, i);
            if (c > 0xFF && !classes[c])
                return 1;
        }
    }
    return 0;
}

/* Whether p[0:n) holds a surrogate (bit 0) or a character above Latin-1 (bit 1): SSE2
   (x86-64's baseline) 8 or 4 characters a step, without a branch; a loop elsewhere. */
#define BLOCK_CHARS 4096
#define BLOCK_FLAGS_LOOP(type, p, from, n)                                    \
    for (ptrdiff_t k = (from); k < (n); k++) {                                \
        surrogates |= (p)[k] - 0xD800u < 0x800u;                              \
        wide |= (p)[k] > 0xFFu;                                               \
    }
static inline uint32_t
block_flags2(const uint16_t *p, ptrdiff_t n)
{
    uint32_t surrogates = 0, wide = 0;
    ptrdiff_t i = 0;
#ifdef BYTE_CLASS_SSE2
    __m128i s = _mm_setzero_si128(), hi = _mm_setzero_si128();
    const __m128i top = _mm_set1_epi16((short)0xF800), sur = _mm_set1_epi16((short)0xD800);
    const __m128i above = _mm_set1_epi16((short)0xFF00);
    for (; i + 8 <= n; i += 8) {
        __m128i x = _mm_loadu_si128((const __m128i *)(p + i));
        s = _mm_or_si128(s, _mm_cmpeq_epi16(_mm_and_si128(x, top), sur));
        hi = _mm_or_si128(hi, _mm_and_si128(x, above));
    }
    surrogates = _mm_movemask_epi8(s) != 0;
    wide = _mm_movemask_epi8(_mm_cmpeq_epi16(hi, _mm_setzero_si128())) != 0xFFFF;
#endif
    BLOCK_FLAGS_LOOP(uint16_t, p, i, n)
    return surrogates | wide << 1;
}
static inline uint32_t
block_flags4(const uint32_t *p, ptrdiff_t n)
{
    uint32_t surrogates = 0, wide = 0;
    ptrdiff_t i = 0;
#ifdef BYTE_CLASS_SSE2
    __m128i s = _mm_setzero_si128(), hi = _mm_setzero_si128();
    const __m128i top = _mm_set1_epi32((int)0xFFFFF800), sur = _mm_set1_epi32(0xD800);
    const __m128i above = _mm_set1_epi32((int)0xFFFFFF00);
    for (; i + 4 <= n; i += 4) {
        __m128i x = _mm_loadu_si128((const __m128i *)(p + i));
        s = _mm_or_si128(s, _mm_cmpeq_epi32(_mm_and_si128(x, top), sur));
        hi = _mm_or_si128(hi, _mm_and_si128(x, above));
    }
    surrogates = _mm_movemask_epi8(s) != 0;
    wide = _mm_movemask_epi8(_mm_cmpeq_epi32(hi, _mm_setzero_si128())) != 0xFFFF;
#endif
    BLOCK_FLAGS_LOOP(uint32_t, p, i, n)
    return surrogates | wide << 1;
}
#undef BLOCK_FLAGS_LOOP

/* Whether text[0:n] holds a surrogate code point. */
static int
has_surrogate(const void *data, int kind, ptrdiff_t n)
{
    for (ptrdiff_t start = 0; kind != 1 && start < n; start += BLOCK_CHARS) {
        ptrdiff_t count = n - start < BLOCK_CHARS ? n - start : BLOCK_CHARS;
        if ((kind == 2 ? block_flags2((const uint16_t *)data + start, count)
                       : block_flags4((const uint32_t *)data + start, count)) & 1)
            return 1;
    }
    return 0;
}

/* Over each block of BLOCK_CHARS characters: the surrogate test (block_flags), then, in a
   block with a character above Latin-1, the class of each such character (those below
   are asked all at once, classify_text) looked up. */
#define TEXT_STATE_LOOP(flags_of, type)                                       \
    for (ptrdiff_t start = 0; start < n; start += BLOCK_CHARS) {              \
        ptrdiff_t stop = n - start < BLOCK_CHARS ? n : start + BLOCK_CHARS;   \
        uint32_t flags = flags_of((const type *)data + start, stop - start);  \
        uint32_t surrogates = flags & 1, wide = flags >> 1;                   \
        if (surrogates)                                                       \
            return TEXT_SURROGATE;                                            \
        if (classes != NULL && state == TEXT_READY && wide                    \
                && wide_unclassified(classes, data, sizeof(type), start, stop))  \
            state = TEXT_UNCLASSIFIED;                                        \
    }

/* Whether a text can be encoded as it is (read on any thread): TEXT_READY (no surrogate,
   and every character's class known where a pattern is scanned), TEXT_SURROGATE, or
   TEXT_UNCLASSIFIED (the binding's settle_text asks the classes, with the GIL).
   Another thread may be filling in classes meanwhile: a class read as unknown is asked. */
static int
text_state(const Tables *e, const void *data, int kind, ptrdiff_t n)
{
    const uint8_t *classes = e->pattern != PATTERN_NONE && n ? e->classes : NULL;
    int state = classes == NULL || CLASSES_ACQUIRE(&classes[0xFF]) ? TEXT_READY : TEXT_UNCLASSIFIED;
    if (kind == 1)
        return state;
    if (kind == 2)
        TEXT_STATE_LOOP(block_flags2, uint16_t)
    else
        TEXT_STATE_LOOP(block_flags4, uint32_t)
    return state;
}

#endif
