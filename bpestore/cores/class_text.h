/* A text's characters as ASCII bytes for the encode core's scans of ASCII (scan_text.h):
   each character below 0x80 as itself, each above as an ASCII byte of its class (a letter
   of its case, a digit, whitespace, a symbol) where cl100k's or o200k's pattern cannot
   tell the two apart, so that words of German or Russian letters are cut by the same bit
   scans as English ones (64 bytes at once, ascii_words.h); else 0x80, which stops those
   scans. A bit per character says which are above 0x7F: a word that holds one is encoded
   from its UTF-8, not from these bytes. Plain C: it runs on any thread. */
#ifndef BPESTORE_CLASS_TEXT_H
#define BPESTORE_CLASS_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pretok.h"
#include "byte_class.h"
#include "hash.h"

/* The byte that stands for a character above 0x7F of class c (classes[]): one whose
   class under the regex module's ASCII classes is c's under every rule of the pattern,
   or 0x80. 0x80 for a letter that matches a contraction's letter case-insensitively (the
   byte would not), for o200k's letters of no case and marks (both [A-Z]-like and
   [a-z]-like there: no ASCII byte is), and for a class not yet known. Whitespace as '\t'
   (' ' and \r \n are the ones the patterns name), symbols as '#' (not '\'' nor '/'). */
static inline uint8_t
class_byte(uint8_t c, int pattern)
{
    if (c >> 4)
        return 0x80;
    switch (c & 15) {
    case CAT_UPPER:
        return 'A';
    case CAT_LOWER:
        return 'a';
    case CAT_OTHER_LETTER:
        return pattern == PATTERN_CL100K ? 'a' : 0x80;
    case CAT_MARK:
        return pattern == PATTERN_CL100K ? '#' : 0x80;
    case CAT_NUMBER:
        return '0';
    case CAT_SPACE:
        return '\t';
    case CAT_OTHER:
        return '#';
    default:
        return 0x80;
    }
}

/* Whether 3 in 4 of the first 1,024 characters of a text have a byte (ASCII, or
   class_byte's): where fewer do, its stretches of bytes are too short to pay for their own
   scan (bytes: class_text's). */
static int
mostly_classed(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, int pattern, int bytes)
{
    ptrdiff_t m = n < 1024 ? n : 1024, count = 0;
    for (ptrdiff_t i = 0; i < m; i++) {
        uint32_t c = CHAR_AT(kind, data, i);
        count += c < 0x80 || (bytes && class_byte(classes[c], pattern) < 0x80);
    }
    return 4 * count >= 3 * m;
}

/* 64 bits of `bits` from bit pos on (9 bytes readable from pos / 8). */
static inline uint64_t
bits_at(const uint8_t *bits, ptrdiff_t pos)
{
    uint64_t lo = load64(bits + pos / 8);
    int s = (int)(pos & 7);
    return s ? lo >> s | (uint64_t)bits[pos / 8 + 8] << (64 - s) : lo;
}

/* Whether any of the low `len` (1 to 64) of bits is set. */
static inline int
any_low_bits(uint64_t bits, ptrdiff_t len)
{
    return (bits & (~0ULL >> (64 - len))) != 0;
}

/* Whether any of bits i..end-1 is set (NULL: none is). */
static inline int
span_wide(const uint8_t *bits, ptrdiff_t i, ptrdiff_t end)
{
    if (bits == NULL)
        return 0;
    for (; end - i > 64; i += 64)
        if (bits_at(bits, i))
            return 1;
    return any_low_bits(bits_at(bits, i), end - i);
}

/* The characters of text[0:n) as bytes into narrow (n + 16 bytes: 16 zero bytes after
   them), a bit per character into wide (where it is above 0x7F; (n + 15) / 16 * 2 + 16
   bytes, zero past n). bytes: whether a class's byte may stand for a character (the
   encoder's ASCII classes are the regex module's), else each above 0x7F is 0x80. */
#define CLASS_TEXT_LOOP(type)                                 \
    for (ptrdiff_t i = 0; i < n; i++) {                       \
        uint32_t c = ((const type *)data)[i];                 \
        narrow[i] = (uint8_t)(c < 0x80 ? c : 0x80);           \
    }
static void
class_text(uint8_t *narrow, uint8_t *wide, const uint8_t *classes, const void *data, int kind, ptrdiff_t n,
           int pattern, int bytes)
{
    uint8_t stand[256];  /* class_byte of each class byte */
    for (int c = 0; c < 256; c++)
        stand[c] = bytes ? class_byte((uint8_t)c, pattern) : 0x80;
    if (kind == 1)
        memcpy(narrow, data, (size_t)n);
    else if (kind == 2)
        CLASS_TEXT_LOOP(uint16_t)
    else
        CLASS_TEXT_LOOP(uint32_t)
    memset(narrow + n, 0, 16);
    ptrdiff_t i = 0;
    for (; i < n; i += 16) {
        uint32_t high = byte_mask(narrow + i, BC_HIGH);
        wide[i / 8] = (uint8_t)high;
        wide[i / 8 + 1] = (uint8_t)(high >> 8);
        for (; high; high &= high - 1) {
            ptrdiff_t k = i + mask_run_end(~high, 0);  /* the lowest bit set */
            narrow[k] = stand[classes[CHAR_AT(kind, data, k)]];
        }
    }
    memset(wide + i / 8, 0, 16);
}
#undef CLASS_TEXT_LOOP

#endif
