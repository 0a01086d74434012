/* GPT-2's words in ASCII text, where 64 bytes at a time say where they start: the classes of
   the bytes as bitmasks (cores/byte_class.h: SSE2 on x86-64), and from them, with shifts and
   no loop per character, the mask of the bytes a word starts at (a run of one class starts
   one, unless a space before it joins it; whitespace starts one where it follows another
   class, and again at its last character before another class: "\s+(?!\S)"; a contraction
   is one word and the letter after it starts one). For the counting core's scan of kind-1
   text (_countcore.c); gpt2_end (cores/pretok.h) takes the rest: a word that goes on past
   what a block decides, bytes from 0x80 on (Latin-1 letters, spaces, digits), the last
   bytes of the text. The masks hold the regex module's classes of ASCII characters;
   ascii_classes_standard tells whether the caller's class table agrees (else the scan
   takes gpt2_end alone). */
#ifndef BPESTORE_ASCII_BLOCKS_H
#define BPESTORE_ASCII_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "byte_class.h"
#include "pretok.h"

/* Whether classes' first 128 code points are the categories the masks give them: A-Z and
   a-z letters, 0-9 numbers, \t \n \v \f \r and ' ' whitespace, every other one neither
   (what cores/byte_class.h calls them). */
static int
ascii_classes_standard(const uint8_t *classes)
{
    for (int c = 0; c < 128; c++) {
        int k = classes[c] & 15;
        int letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'), digit = c >= '0' && c <= '9';
        int space = (c >= '\t' && c <= '\r') || c == ' ';
        if (IS_LETTER(k) != letter || (k == CAT_NUMBER) != digit || (k == CAT_SPACE) != space
                || (!letter && !digit && !space && k != CAT_OTHER))
            return 0;
    }
    return 1;
}

#if defined(__GNUC__) || defined(__clang__)  /* elsewhere the scan takes gpt2_end alone */
#define ASCII_BLOCKS 1
#define ASCII_BLOCK 64

/* A block: the 64 bytes from i - 1 on, bit k for the byte at i - 1 + k; the starts of
   bits 1..ASCII_DECIDED are certain (those past it need bytes past the block). */
#define ASCII_DECIDED 60

/* The starts of gpt2's words among the 64 bytes at p (p[1] starts one: the caller knows),
   or 0 where a byte is 0x80 or more (the caller takes gpt2_end). */
static inline uint64_t
gpt2_block_starts(const uint8_t *p)
{
    if (block_mask(p, BC_HIGH))
        return 0;
    uint64_t letter = block_mask(p, BC_LETTER), digit = block_mask(p, BC_DIGIT), space = block_mask(p, BC_SPACE);
    uint64_t other = ~(letter | digit | space), blank = block_eq(p, ' ');
    /* another class than the byte before (whitespace aside) */
    uint64_t change = (letter & ~(letter << 1)) | (digit & ~(digit << 1)) | (other & ~(other << 1));
    /* not whitespace: a change after no whitespace, or after whitespace but ' ' (" ?X+") */
    uint64_t starts = ~space & ((change & ~(space << 1)) | ((space & ~blank) << 1));
    /* whitespace: after another class, or before one ("\s+(?!\S)" leaves the last) */
    starts |= space & (~(space << 1) | ~(space >> 1));
    starts = (starts | 2) & ~(uint64_t)1;  /* bit 0 is the byte before: none of the block's words */
    uint64_t quotes = starts & block_eq(p, '\'');
    if (quotes) {  /* 's 't 'm 'd: two bytes; 're 've 'll: three; the letter after starts a word */
        uint64_t one = quotes & ((block_eq(p, 's') | block_eq(p, 't') | block_eq(p, 'm') | block_eq(p, 'd')) >> 1);
        uint64_t e = block_eq(p, 'e'), l = block_eq(p, 'l');
        uint64_t two = quotes & ~one & ((((block_eq(p, 'r') | block_eq(p, 'v')) & e >> 1) | (l & l >> 1)) >> 1);
        starts = (starts & ~(one << 1) & ~(two << 1) & ~(two << 2)) | one << 2 | two << 3;
    }
    return starts;
}
#endif

#endif
