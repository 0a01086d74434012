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

/* The 64 bytes at p equal to the letter c (lower case) in either case. */
static inline uint64_t
block_eq_nocase(const uint8_t *p, char c)
{
    return block_eq(p, c) | block_eq(p, (char)(c - 32));
}

/* The bytes q that are '\'' followed by a contraction's letters (either case): `one` those of
   's 'd 'm 't (2 bytes), `two` those of 'll 've 're (3 bytes), among `quotes`. */
static inline void
contractions(const uint8_t *p, uint64_t quotes, uint64_t *one, uint64_t *two)
{
    uint64_t e = block_eq_nocase(p, 'e'), l = block_eq_nocase(p, 'l');
    uint64_t first = block_eq_nocase(p, 's') | block_eq_nocase(p, 'd') | block_eq_nocase(p, 'm')
                     | block_eq_nocase(p, 't');
    uint64_t pair = (l & l >> 1) | ((block_eq_nocase(p, 'v') | block_eq_nocase(p, 'r')) & e >> 1);
    *one = quotes & first >> 1;
    *two = quotes & ~*one & pair >> 1;
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

/* The starts of cl100k's or o200k's words among the 64 bytes at p, where one starts at p[0]:
   bit k for p + k, those of bits 1 up to the returned *limit (exclusive) certain; 0 where a
   byte is 0x80 or more. */
static inline uint64_t
ascii_word_starts(const uint8_t *p, int pattern, int *limit)
{
    *limit = 0;
    if (block_mask(p, BC_HIGH))
        return 0;
    int lim = ASCII_WORDS_DECIDED + 1;
    uint64_t up = block_mask(p, BC_UPPER), lo = block_mask(p, BC_LOWER), letter = up | lo;
    uint64_t digit = block_mask(p, BC_DIGIT), space = block_mask(p, BC_SPACE), newline = block_mask(p, BC_NEWLINE);
    uint64_t other = ~(letter | digit | space), blank = block_eq(p, ' '), quote = block_eq(p, '\'');
    if (space >> 63)  /* a run of whitespace at the end: its words need the bytes after it */
        lim = ~space ? 64 - __builtin_clzll(~space) : 0;
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
        uint64_t slash = newline << 1 & block_eq(p, '/');  /* "[\r\n/]*" after an O: left to the byte steps */
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
