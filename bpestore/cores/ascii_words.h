/* cl100k's and o200k's words in 64 ASCII bytes at once, from the bytes' classes as bitmasks
   (cores/byte_class.h: SSE2 on x86-64): the mask of the bytes a word starts at, by shifts
   and no loop per character, for the encode core's scan (scan_text.h), which cuts its words
   by bit scans. A word starts at the block's first byte (the caller knows): the patterns
   look at nothing before a word's start, so the bytes before the block are no part of it.
   The masks hold the regex module's classes of ASCII characters: only where the encoder's
   agree (scan_text.h's ascii_standard). Where a rule needs bytes past the block (a run of
   whitespace at its end) or is one the masks leave to the byte steps (o200k's '/' after a
   newline, two contractions in a row), the starts stop short of it. */
#ifndef BPESTORE_ASCII_WORDS_H
#define BPESTORE_ASCII_WORDS_H

#include <stdint.h>

#include "byte_class.h"
#include "pretok.h"

#if defined(__GNUC__) || defined(__clang__)  /* elsewhere the scan takes its byte steps alone */
#define ASCII_WORDS 1
/* The starts of bits 1..ASCII_WORDS_DECIDED can be certain (a contraction's end looks 3 bytes on). */
#define ASCII_WORDS_DECIDED 60

/* Those of the bytes q of `quotes` (each '\'') followed by a contraction's letters (either
   case): `one` those of 's 'd 'm 't (2 bytes), `two` those of 'll 've 're (3 bytes). A byte
   at a time (quotes are few); those from bit 62 on are none (their letters are past p[63]). */
static inline void
contractions(const uint8_t *p, uint64_t quotes, uint64_t *one, uint64_t *two)
{
    *one = *two = 0;
    for (quotes &= ((uint64_t)1 << 62) - 1; quotes; quotes &= quotes - 1) {
        int q = __builtin_ctzll(quotes), a = p[q + 1] | 0x20, b = p[q + 2] | 0x20;
        if (a == 's' || a == 'd' || a == 'm' || a == 't')
            *one |= (uint64_t)1 << q;
        else if ((a == 'l' && b == 'l') || ((a == 'v' || a == 'r') && b == 'e'))
            *two |= (uint64_t)1 << q;
    }
}

/* The positions of `space` (whitespace) with a newline at or after them in their run
   (doubling steps over the runs). */
static inline uint64_t
newline_ahead(uint64_t space, uint64_t newline)
{
    uint64_t ahead = newline, run = space;
    for (int d = 1; d < 64 && run; d <<= 1) {
        ahead |= (ahead >> d) & run;
        run &= run >> d;
    }
    return ahead;
}

/* The starts of cl100k's or o200k's words among the 64 ASCII bytes at p, where one starts
   at p[0]: bit k for p + k, those of bits 1 up to the returned *limit (exclusive) certain. */
static inline uint64_t
ascii_word_starts(const uint8_t *p, int pattern, int *limit)
{
    int lim = ASCII_WORDS_DECIDED + 1;
    uint64_t up = 0, lo = 0, letter;
    if (pattern == PATTERN_O200K) {
        up = block_mask(p, BC_UPPER);
        lo = block_mask(p, BC_LOWER);
        letter = up | lo;
    } else {
        letter = block_mask(p, BC_LETTER);
    }
    uint64_t digit = block_mask(p, BC_DIGIT), space = block_mask(p, BC_SPACE), newline = block_mask(p, BC_NEWLINE);
    uint64_t other = ~(letter | digit | space), blank = block_eq(p, ' '), quote = block_eq(p, '\'');
    if (space >> 63) {  /* a run of whitespace at the end: its words need the bytes after it */
        int run = ~space ? 64 - __builtin_clzll(~space) : 0;
        lim = run < lim ? run : lim;
    }
    /* an O starts a word but after another O (" ?O+" goes on) or after ' ' (which " ?O+" takes) */
    uint64_t other_start = other & ~(other << 1) & ~(blank << 1), extra = 0, not_start = 0;
    if (quote) {
        uint64_t one, two;
        if (pattern == PATTERN_CL100K) {
            /* a quote that starts a word: 's 'd 'm 't 'll 've 're are one; the letter after starts one */
            contractions(p, quote & other_start, &one, &two);
            extra = one << 2 | two << 3;
        } else {
            /* o200k: a contraction after a word's letters is part of it; the letter after starts one */
            contractions(p, quote & letter << 1, &one, &two);
            uint64_t both = one | two, twice = both & (one << 2 | two << 3);
            if (twice && __builtin_ctzll(twice) < lim)  /* "x's's": the second follows a contraction, no word's letters */
                lim = __builtin_ctzll(twice);
            other_start &= ~both;
            not_start = both << 1 | two << 2;
            extra = one << 2 | two << 3;
        }
    }
    /* whitespace: the newlines right after an O go with it ("[\r\n]*"); a run's first byte
       past those starts a word (to its last newline: "\s*[\r\n]"); the whitespace after its
       last newline (its tail) starts one, and again at its last byte ("\s+(?!\S)") */
    uint64_t after_other = newline & ~(newline << 1) & other << 1;
    uint64_t taken = ((newline + after_other) ^ newline) & newline, own = space & ~taken;
    uint64_t tail = space & ~newline & ~(newline ? newline_ahead(space, newline) : 0);
    uint64_t starts = (own & ~(own << 1)) | (tail & ~(tail << 1)) | (tail & ~(tail >> 1));
    /* letters: a run starts one, but after a byte that starts one before them (W, or an O
       that starts one) */
    uint64_t before_letters = (space & ~newline) | other_start;
    starts |= (letter & ~(letter << 1) & ~(before_letters << 1)) | other_start | extra;
    if (pattern == PATTERN_O200K) {
        starts |= up & lo << 1;  /* [A-Z]*[a-z]+: an upper-case letter after a lower-case one */
        uint64_t slash = newline ? newline << 1 & block_eq(p, '/') : 0;  /* "[\r\n/]*" after an O: left to the byte steps */
        if (slash && __builtin_ctzll(slash) < lim)
            lim = __builtin_ctzll(slash);
    }
    /* digits: a run starts one, and every third digit of it after its first */
    uint64_t chunk = digit & ~(digit << 1), three = digit & digit << 1 & digit << 2 & digit << 3;
    starts |= chunk;
    while ((chunk = chunk << 3 & three))
        starts |= chunk;
    *limit = lim;
    return starts & ~not_start;
}
#endif

#endif
