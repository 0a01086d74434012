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

/* Whether text[0:n] holds a surrogate code point. */
static int
has_surrogate(const void *data, int kind, ptrdiff_t n)
{
    if (kind == 1)
        return 0;
    for (ptrdiff_t i = 0; i < n; i++) {
        uint32_t c = CHAR_AT(kind, data, i);
        if (c >= 0xD800 && c <= 0xDFFF)
            return 1;
    }
    return 0;
}

/* What text_state finds of a text; TEXT_NONE: the encoder has no symbol for a character. */
enum { TEXT_READY = 0, TEXT_SURROGATE = 1, TEXT_UNCLASSIFIED = 2, TEXT_NONE = 3 };

/* Whether a character of text[start:stop] (kind 2 or 4) above Latin-1 has no class yet:
   4 (kind 2) or 2 (kind 4) characters a step past those all within Latin-1. */
static int
wide_unclassified(const uint8_t *classes, const void *data, int kind, ptrdiff_t start, ptrdiff_t stop)
{
    const uint64_t above = kind == 2 ? 0xFF00FF00FF00FF00ULL : 0xFFFFFF00FFFFFF00ULL;
    const ptrdiff_t lanes = 8 / kind;
    for (ptrdiff_t i = start; i < stop;) {
        if (i + lanes <= stop) {
            uint64_t x;
            memcpy(&x, (const uint8_t *)data + i * kind, 8);
            if (!(x & above)) {
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

/* Over each block of 4,096 characters: the surrogate test without a branch (the
   compiler may vectorize it), then, in a block with a character above Latin-1, the class
   of each such character (those below are asked all at once, classify_text) looked up. */
#define TEXT_STATE_LOOP(type)                                                 \
    for (ptrdiff_t start = 0; start < n; start += 4096) {                     \
        ptrdiff_t stop = n - start < 4096 ? n : start + 4096;                 \
        uint32_t surrogates = 0, wide = 0;                                    \
        for (ptrdiff_t i = start; i < stop; i++) {                            \
            surrogates |= ((const type *)data)[i] - 0xD800u < 0x800u;         \
            wide |= ((const type *)data)[i] > 0xFFu;                          \
        }                                                                     \
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
        TEXT_STATE_LOOP(uint16_t)
    else
        TEXT_STATE_LOOP(uint32_t)
    return state;
}

#endif
