/* UTF-8 text for the counting core, read where it lies (no str made of it): checked as
   Python's strict decoder checks it, its ASCII stretches scanned as they are (their bytes
   are a kind-1 text), and only the stretches around other characters decoded, each cut
   out at a place where the built-in patterns cut it the same way as the whole text.

   Such a place ("a safe cut", bpestore/text.py _SAFE_CUT) is right before a whitespace
   character that follows a letter or digit and precedes a non-space: no match of the
   built-in patterns runs from a letter or digit into whitespace, none looks behind, and
   the whitespace that starts the next part is no end of the text to `\s++$` or
   `\s+(?!\S)`. Here only cuts whose three characters are ASCII are taken. Plain C. */
#ifndef BPESTORE_UTF8_TEXT_H
#define BPESTORE_UTF8_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pretok.h"

/* How many bytes from p on (at most n) are ASCII and not NUL. */
INLINE ptrdiff_t
utf8_ascii_run(const unsigned char *p, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    const uint64_t ones = 0x0101010101010101ULL, high = ones * 0x80;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, p + i, 8);
        if (((x - ones) & ~x & high) | (x & high))  /* a NUL byte or a byte >= 0x80 */
            break;
    }
    while (i < n && p[i] != 0 && p[i] < 0x80)
        i++;
    return i;
}

/* The code point of the UTF-8 sequence at p (p[0] >= 0x80; at most n bytes there) and its
   length, or 0 where it is not one that Python's strict decoder takes (overlong, a
   surrogate, past U+10FFFF, cut short). */
INLINE int
utf8_decode(const unsigned char *p, ptrdiff_t n, uint32_t *cp)
{
    unsigned char c = p[0];
    if (c >= 0xC2 && c <= 0xDF) {
        if (n < 2 || (p[1] & 0xC0) != 0x80)
            return 0;
        *cp = (uint32_t)(c & 0x1F) << 6 | (p[1] & 0x3F);
        return 2;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (c == 0xE0 && p[1] < 0xA0)
                || (c == 0xED && p[1] > 0x9F))
            return 0;
        *cp = (uint32_t)(c & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80
                || (c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F))
            return 0;
        *cp = (uint32_t)(c & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 | (uint32_t)(p[2] & 0x3F) << 6
              | (p[3] & 0x3F);
        return 4;
    }
    return 0;
}

/* Whether k (0 < k < n - 1) is a safe cut of ASCII characters: p[k - 1] a letter or digit,
   p[k] whitespace, p[k + 1] not (classes: the first 256 code points' known). */
INLINE int
utf8_ascii_cut(const uint8_t *classes, const unsigned char *p, ptrdiff_t k)
{
    if (p[k - 1] >= 0x80 || p[k] >= 0x80 || p[k + 1] >= 0x80)
        return 0;
    int before = classes[p[k - 1]] & 15, at = classes[p[k]] & 15, after = classes[p[k + 1]] & 15;
    return (before <= CAT_OTHER_LETTER || before == CAT_NUMBER) && at == CAT_SPACE && after != CAT_SPACE;
}

/* The last safe cut in (from, to), else from. */
static ptrdiff_t
utf8_cut_before(const uint8_t *classes, const unsigned char *p, ptrdiff_t from, ptrdiff_t to)
{
    for (ptrdiff_t k = to - 1; k > from; k--)
        if (utf8_ascii_cut(classes, p, k))
            return k;
    return from;
}

/* The first safe cut in (from, n - 1): where a stretch holding other characters from
   `from` on may end (and the stretch with them all before it); n where there is none. */
static ptrdiff_t
utf8_cut_after(const uint8_t *classes, const unsigned char *p, ptrdiff_t from, ptrdiff_t n)
{
    for (ptrdiff_t k = from + 1; k + 1 < n; k++)
        if (utf8_ascii_cut(classes, p, k))
            return k;
    return n;
}

/* The code points of the n bytes of checked UTF-8 at p into out (room for n); how many. */
static ptrdiff_t
utf8_widen(const unsigned char *p, ptrdiff_t n, uint32_t *out)
{
    ptrdiff_t m = 0;
    for (ptrdiff_t i = 0; i < n;) {
        uint32_t c = p[i];
        int len = 1;
        if (c >= 0x80)
            len = utf8_decode(p + i, n - i, &c);  /* checked before: never 0 */
        out[m++] = c;
        i += len > 0 ? len : 1;
    }
    return m;
}

#endif
