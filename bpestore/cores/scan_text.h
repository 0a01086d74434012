/* The encode core's scan of a text (its characters, 1, 2 or 4 bytes each, as Python keeps
   them): whether it can be encoded as it is, the characters as UTF-8, cut into words by a
   built-in pattern (pretok.h) and each word encoded (encode_word.h). Plain C: it runs on
   any thread. */
#ifndef BPESTORE_SCAN_TEXT_H
#define BPESTORE_SCAN_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pretok.h"
#include "encode_word.h"
#include "byte_class.h"
#include "ascii_words.h"
#include "text_state.h"
#include "class_text.h"

/* The UTF-8 bytes of text[start:end] into w->utf8 from `at`: their number, or -1. */
INLINE ptrdiff_t
utf8_of(Work *w, size_t at, const void *data, int kind, ptrdiff_t start, ptrdiff_t end)
{
    size_t most = (size_t)(end - start) * (kind == 1 ? 2 : kind == 2 ? 3 : 4);
    if (grow(w, (void **)&w->utf8, &w->utf8_cap, at, most, 1) < 0)
        return -1;
    uint8_t *out = w->utf8 + at;
    for (ptrdiff_t i = start; i < end; i++) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* four characters of a 2-byte text at once: all ASCII, or all of two bytes each */
        while (kind == 2 && i + 4 <= end) {
            uint64_t x = load64((const uint8_t *)((const uint16_t *)data + i));
            if (!(x & 0xFF80FF80FF80FF80ULL)) {
                x = (x | (x >> 8)) & 0x0000FFFF0000FFFFULL;
                uint32_t four = (uint32_t)(x | (x >> 16));
                memcpy(out, &four, 4);
                out += 4;
                i += 4;
            } else if (!(x & 0xF800F800F800F800ULL)
                       && (((x & 0x0780078007800780ULL) + 0x7F807F807F807F80ULL) & 0x8000800080008000ULL)
                              == 0x8000800080008000ULL) {
                /* each of 0x80..0x7FF: its lead byte (0xC0 | c >> 6), then 0x80 | (c & 0x3F) */
                uint64_t two = ((x >> 6) & 0x001F001F001F001FULL) | ((x & 0x003F003F003F003FULL) << 8)
                               | 0x80C080C080C080C0ULL;
                memcpy(out, &two, 8);
                out += 8;
                i += 4;
            } else
                break;
        }
        if (i == end)
            break;
#endif
        uint32_t c = CHAR_AT(kind, data, i);
        if (c < 0x80) {
            *out++ = (uint8_t)c;
        } else if (c < 0x800) {
            *out++ = (uint8_t)(0xC0 | (c >> 6));
            *out++ = (uint8_t)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            *out++ = (uint8_t)(0xE0 | (c >> 12));
            *out++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
            *out++ = (uint8_t)(0x80 | (c & 0x3F));
        } else {
            *out++ = (uint8_t)(0xF0 | (c >> 18));
            *out++ = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
            *out++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
            *out++ = (uint8_t)(0x80 | (c & 0x3F));
        }
    }
    return out - (w->utf8 + at);
}

/* text[start:end] as one word. */
static inline int
encode_span(const Tables *e, Work *w, const void *data, int kind, int ascii, ptrdiff_t start, ptrdiff_t end)
{
    if (ascii)
        return encode_word(e, w, (const uint8_t *)data + start, (size_t)(end - start));
    ptrdiff_t n = utf8_of(w, 0, data, kind, start, end);
    return n < 0 ? -1 : encode_word(e, w, w->utf8, (size_t)n);
}

/* -- ASCII texts under cl100k and o200k ---------------------------------------------- */

/* The classes of the 128 ASCII bytes as bits (from the encoder's classes, so the same as
   pretok.h's scans); bytes from 0x80 on have none. */
enum { A_UP = 1, A_LO = 2, A_LETTER = 3, A_DIGIT = 4, A_SPACE = 8, A_NEWLINE = 16, A_SYMBOL = 32 };

static inline void
ascii_classes(const uint8_t *classes, uint8_t *t)
{
    memset(t + 128, 0, 128);
    for (int c = 0; c < 128; c++) {
        int k = classes[c] & 15;
        t[c] = (uint8_t)(k == CAT_UPPER ? A_UP : k == CAT_LOWER ? A_LO : IS_LETTER(k) ? A_LETTER
                         : k == CAT_NUMBER ? A_DIGIT : k == CAT_SPACE ? A_SPACE : A_SYMBOL);
        if (c == '\r' || c == '\n')
            t[c] |= A_NEWLINE;
    }
}

/* The end of the run of bytes of class `bits` from i on (8 bytes a step for letters). */
INLINE ptrdiff_t
ascii_run(const uint8_t *t, const uint8_t *p, ptrdiff_t n, ptrdiff_t i, int bits)
{
#ifdef SWAR_RUNS
    if (bits == A_LETTER || bits == A_UP || bits == A_LO) {
        /* the lanes' test is the letters' classes exactly: where a lane stops the run, it ends */
        int run = bits == A_LETTER ? RUN_LETTER : bits == A_UP ? RUN_UPPERISH : RUN_LOWERISH;
        for (; i + 8 <= n; i += 8) {
            uint64_t stop = not_ascii_run(load64(p + i), 1, run);
            if (stop)
                return i + (ptrdiff_t)(__builtin_ctzll(stop) / 8);
        }
    }
#endif
    while (i < n && (t[p[i]] & bits))
        i++;
    return i;
}

/* The end of o200k's [A-Z]*[a-z]+|[A-Z]+[a-z]* at s (a letter) in ASCII bytes p[0:n). */
INLINE ptrdiff_t
o200k_letters_end(const uint8_t *t, const uint8_t *p, ptrdiff_t n, ptrdiff_t s)
{
#ifdef SWAR_RUNS
    if (s + 8 <= n) {
        /* a word within 8 bytes from one load: its upper-case lanes, then the lower-case ones */
        uint64_t x = load64(p + s), not_up = not_ascii_run(x, 1, RUN_UPPERISH);
        int up = not_up ? __builtin_ctzll(not_up) / 8 : 8;
        if (up < 8) {
            uint64_t not_lo = not_ascii_run(x, 1, RUN_LOWERISH) >> (8 * up);
            ptrdiff_t end = s + up + (not_lo ? __builtin_ctzll(not_lo) / 8 : 8 - up);
            return end < s + 8 ? end : ascii_run(t, p, n, end, A_LO);
        }
        s += 8;  /* 8 upper-case letters: the run goes on */
    }
#endif
    ptrdiff_t end = ascii_run(t, p, n, s, A_UP);
    if (end < n && (t[p[end]] & A_LO))
        end = ascii_run(t, p, n, end + 1, A_LO);
    return end;
}

/* The first position from i on that is no ' ' (8 bytes a step), or where fewer than 8 are left. */
static inline ptrdiff_t
skip_spaces(const uint8_t *p, ptrdiff_t n, ptrdiff_t i)
{
#ifdef SWAR_RUNS
    const uint64_t low = 0x7F7F7F7F7F7F7F7FULL;
    for (; i + 8 <= n; i += 8) {
        uint64_t y = load64(p + i) ^ 0x2020202020202020ULL;
        uint64_t other = (((y & low) + low) | y) & ~low;  /* the top bit of each lane that is no ' ' */
        if (other)
            return i + (ptrdiff_t)(__builtin_ctzll(other) / 8);
    }
#endif
    return i;
}

/* The end of the whitespace word at i (< n) of ASCII bytes p[0:n): newline_space_end's,
   from one pass over the run that notes its last newline. A run cut short at n is left
   to the caller where n is no text end (!whole). */
INLINE ptrdiff_t
ascii_space_end(const uint8_t *t, const uint8_t *p, ptrdiff_t n, ptrdiff_t i, int pattern, int whole)
{
    ptrdiff_t k = i + 1, newline = (t[p[i]] & A_NEWLINE) ? i : -1;
    for (;;) {
        k = skip_spaces(p, n, k);
        if (k == n || !(t[p[k]] & A_SPACE))
            break;
        if (t[p[k]] & A_NEWLINE)
            newline = k;
        k++;
    }
    if (k == n && (!whole || pattern == PATTERN_CL100K))  /* \s++$ (cl100k) */
        return n;
    return newline >= 0 ? newline + 1 : space_end(i, k, n);
}

/* The end of the word at i (< n) of ASCII bytes p[0:n) under cl100k or o200k: what
   cl100k_end and o200k_end find there, with each byte's class one look-up in t.
   whole: n is the text's end. Else n is where its ASCII stops, and an end e is the
   text's only if e + 3 <= n: every position these steps look at is below e + 3, but
   for a whitespace run, which is checked here to stop before n. */
INLINE ptrdiff_t
ascii_end(const uint8_t *classes, const uint8_t *t, const uint8_t *p, ptrdiff_t n, ptrdiff_t i, int pattern,
          int whole)
{
    int c = t[p[i]];
    ptrdiff_t s = i;  /* where the letters start */
    if (c & A_LETTER) {
        /* a letter */
    } else if (pattern == PATTERN_CL100K && p[i] == '\'' && contraction_end(classes, p, 1, n, i, 1) >= 0) {
        return contraction_end(classes, p, 1, n, i, 1);
    } else if (c & A_DIGIT) {
        ptrdiff_t end = i + 1;
        while (end < n && end < i + 3 && (t[p[end]] & A_DIGIT))
            end++;
        return end;
    } else if (!(c & A_NEWLINE) && i + 1 < n && (t[p[i + 1]] & A_LETTER)) {
        s = i + 1;  /* [^\r\n\p{L}\p{N}]? before the letters */
    } else {
        ptrdiff_t run = (c & A_SYMBOL) ? i : p[i] == ' ' && i + 1 < n && (t[p[i + 1]] & A_SYMBOL) ? i + 1 : -1;
        if (run < 0)
            return ascii_space_end(t, p, n, i, pattern, whole);
        ptrdiff_t end = ascii_run(t, p, n, run + 1, A_SYMBOL);
        while (end < n && ((t[p[end]] & A_NEWLINE) || (pattern == PATTERN_O200K && p[end] == '/')))
            end++;
        return end;
    }
    if (pattern == PATTERN_CL100K)
        return ascii_run(t, p, n, s + 1, A_LETTER);
    /* o200k: [A-Z]*[a-z]+ or [A-Z]+[a-z]*, then a contraction (either case) if one follows */
    ptrdiff_t end = o200k_letters_end(t, p, n, s);
    ptrdiff_t k = end < n && p[end] == '\'' ? contraction_end(classes, p, 1, n, end, 1) : -1;
    return k >= 0 ? k : end;
}

/* The classes of the 128 ASCII bytes under the regex module's \s, \p{L} and \p{N}: where
   the encoder's are these (ascii_standard), byte_mask finds them 16 bytes at once. */
#define U A_UP
#define L A_LO
#define D A_DIGIT
#define W A_SPACE
#define N (A_SPACE | A_NEWLINE)
#define S A_SYMBOL
static const uint8_t ASCII_STANDARD[128] = {
    S, S, S, S, S, S, S, S, S, W, N, W, W, N, S, S,
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
    W, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
    D, D, D, D, D, D, D, D, D, D, S, S, S, S, S, S,
    S, U, U, U, U, U, U, U, U, U, U, U, U, U, U, U,
    U, U, U, U, U, U, U, U, U, U, U, S, S, S, S, S,
    S, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L,
    L, L, L, L, L, L, L, L, L, L, L, S, S, S, S, S,
};
#undef U
#undef L
#undef D
#undef W
#undef N
#undef S

static inline int
ascii_standard(const uint8_t *t)
{
    return memcmp(t, ASCII_STANDARD, 128) == 0;
}

/* ascii_end with its runs found from the classes of the 16 bytes at i as bitmasks (the
   caller has them readable; those from n on are no part of the stretch): the same end, a
   run that reaches past the 16 taken on by ascii_end's steps. Where the encoder's classes
   of ASCII are the regex module's (ascii_standard). */
INLINE ptrdiff_t
ascii_end16(const uint8_t *classes, const uint8_t *t, const uint8_t *p, ptrdiff_t n, ptrdiff_t i, int pattern,
            int whole)
{
    const uint8_t *q = p + i;
    const uint32_t valid = n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1;
    int c = t[q[0]], s;  /* s: where the letters start, from q */
    if (c & A_LETTER) {
        s = 0;
    } else if (pattern == PATTERN_CL100K && q[0] == '\'' && contraction_end(classes, p, 1, n, i, 1) >= 0) {
        return contraction_end(classes, p, 1, n, i, 1);
    } else if (c & A_DIGIT) {
        int end = mask_run_end(byte_mask(q, BC_DIGIT) & valid, 1);
        return i + (end < 3 ? end : 3);
    } else if (!(c & A_NEWLINE) && (valid & 2) && (t[q[1]] & A_LETTER)) {
        s = 1;  /* [^\r\n\p{L}\p{N}]? before the letters */
    } else {
        uint32_t symbol = ~byte_mask(q, BC_LETTER | BC_DIGIT | BC_SPACE) & valid;
        int run = (c & A_SYMBOL) ? 0 : q[0] == ' ' && ((symbol >> 1) & 1) ? 1 : -1;
        if (run < 0) {
            int k = mask_run_end(byte_mask(q, BC_SPACE) & valid, 1);
            if (k == 16)
                return ascii_space_end(t, p, n, i, pattern, whole);
            if (i + k == n && (!whole || pattern == PATTERN_CL100K))  /* \s++$ (cl100k) */
                return n;
            uint32_t newline = byte_mask(q, BC_NEWLINE) & ((1u << k) - 1);
            return newline ? i + mask_last(newline) + 1 : space_end(i, i + k, n);
        }
        int end = mask_run_end(symbol, run + 1);
        ptrdiff_t e;
        if (end < 16) {
            end = mask_run_end(byte_mask(q, BC_NEWLINE | (pattern == PATTERN_O200K ? BC_SLASH : 0)) & valid, end);
            if (end < 16)
                return i + end;
            e = i + 16;  /* the [\r\n]* (o200k: [\r\n/]*) goes on */
        } else {
            e = ascii_run(t, p, n, i + 16, A_SYMBOL);
        }
        while (e < n && ((t[p[e]] & A_NEWLINE) || (pattern == PATTERN_O200K && p[e] == '/')))
            e++;
        return e;
    }
    if (pattern == PATTERN_CL100K) {
        int e = mask_run_end(byte_mask(q, BC_LETTER) & valid, s + 1);
        return e < 16 ? i + e : ascii_run(t, p, n, i + 16, A_LETTER);
    }
    /* o200k: [A-Z]*[a-z]+ or [A-Z]+[a-z]*, then a contraction (either case) if one follows */
    ptrdiff_t end;
    int u = mask_run_end(byte_mask(q, BC_UPPER) & valid, s);
    if (u == 16) {
        end = o200k_letters_end(t, p, n, i + s);
    } else {
        uint32_t lo = byte_mask(q, BC_LOWER) & valid;
        int e = (lo >> u) & 1 ? mask_run_end(lo, u + 1) : u;
        end = e < 16 ? i + e : ascii_run(t, p, n, i + 16, A_LO);
    }
    ptrdiff_t k = end < n && p[end] == '\'' ? contraction_end(classes, p, 1, n, end, 1) : -1;
    return k >= 0 ? k : end;
}

/* The first position from i on of a byte from 0x80 on, or n (8 bytes a step). */
static inline ptrdiff_t
ascii_stop(const uint8_t *p, ptrdiff_t n, ptrdiff_t i)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && (defined(__GNUC__) || defined(__clang__))
    for (; i + 8 <= n; i += 8) {
        uint64_t x = load64(p + i) & 0x8080808080808080ULL;
        if (x)
            return i + (ptrdiff_t)(__builtin_ctzll(x) / 8);
    }
#endif
    while (i < n && p[i] < 0x80)
        i++;
    return i;
}

/* A text not all ASCII as bytes (class_text.h) into w->narrow, with its bits of characters
   above 0x7F in w->wide: 0, or -1. */
static int
narrow_text(Work *w, const uint8_t *classes, const void *data, int kind, ptrdiff_t n, int pattern, int bytes)
{
    if (grow(w, (void **)&w->narrow, &w->narrow_cap, 0, (size_t)n + 16, 1) < 0
            || grow(w, (void **)&w->wide, &w->wide_cap, 0, ((size_t)n + 15) / 16 * 2 + 16, 1) < 0)
        return -1;
    class_text(w->narrow, w->wide, classes, data, kind, n, pattern, bytes);
    return 0;
}

/* Every word of a text under the encoder's pattern; 0, or -1. Words are cut and
   hashed BLOCK at a time, then encoded: the cut, the hashing and the look-ups each run
   as a long loop of their own (256 words: 4-8% faster than 32 on cached words). One
   function per pattern and kind, each scan inlined with both constant. */
#define BLOCK 256
INLINE int
scan(const Tables *e, Work *w, const void *data, int kind, int ascii, ptrdiff_t n, int pattern)
{
    const uint8_t *classes = e->classes;
    const uint8_t *ptrs[BLOCK];  /* each word's bytes: in `direct`, or (those of in_utf8) in w->utf8 */
    uint32_t lens[BLOCK];
    size_t utf8_at[BLOCK];  /* where a word of in_utf8 starts in w->utf8 (it may move while a block is cut) */
    uint16_t in_utf8[BLOCK];
    uint64_t hashes[BLOCK], words[BLOCK];  /* a word of <= 8 bytes read as one (load_upto8) */
    /* cl100k and o200k: the stretches of ASCII characters scanned as bytes, 64 at a time
       (ascii_word_starts) where 64 are left and the classes are the standard ones, else a
       word at a time (ascii_end16, ascii_end), their words read where they lie (kind 1) or
       in w->narrow (a text mostly ASCII) */
    const int fast = pattern == PATTERN_CL100K || pattern == PATTERN_O200K;
    const uint8_t *direct = (const uint8_t *)data;
    const uint8_t *t = w->ascii;
    const uint8_t *wide = NULL;  /* the characters above 0x7F of `direct` (NULL: none) */
    ptrdiff_t stop = 0;  /* where the stretch of bytes below 0x80 that holds i ends (i < stop) */
    int stretches = 0, standard = 0;
    if (fast) {
        if (w->ascii_of != classes) {  /* the ASCII classes never change: built once a scratch space */
            ascii_classes(classes, w->ascii);
            w->ascii_of = classes;
        }
        standard = ascii_standard(t);
        stretches = ascii || kind == 1 || mostly_classed(classes, data, kind, n, pattern, standard);
        if (ascii) {
            stop = n;
        } else if (stretches) {
            if (narrow_text(w, classes, data, kind, n, pattern, standard) < 0)
                return -1;
            direct = w->narrow;
            wide = w->wide;
        }
    }
#define IS_SPACE_AT(i) ((classes[CHAR_AT(kind, data, (i))] & 15) == CAT_SPACE)
    ptrdiff_t i = 0;
    int fetch_tokens = 1;  /* whether a word of the last block missed the caches */
#ifdef ASCII_WORDS
    uint64_t pending = 0;  /* the starts after i a block found (ascii_word_starts), bit k for base + k */
    uint64_t base_wide = 0;  /* the characters above 0x7F of the block, bit k for base + k */
    ptrdiff_t base = 0;
#endif
    /* what each look-up needs, read once: the loops below store to arrays the compiler
       cannot tell apart from *e and *w */
    static _Alignas(64) SmallSlot no_smalls[2];  /* without a short-word cache: a pair that holds none */
    SmallSlot *const smalls = w->smalls != NULL ? w->smalls : no_smalls;
    const size_t small_mask = w->smalls != NULL ? w->small_mask : 0;
    /* a word of `direct` up to 8 bytes before this: 8 bytes readable (narrow_text's 8 more) */
    const uintptr_t direct_end = (uintptr_t)direct + (size_t)n + (direct == data ? 0 : 8);
    const TokenSlot *const tokens = e->tokens;
    const size_t token_mask = e->token_mask, token_len = e->whole_lookup ? e->max_token_len : 0;
    while (i < n) {
        int k = 0, n_utf8 = 0;
        size_t at = 0;
        for (; k < BLOCK && i < n; k++) {
#ifdef ASCII_WORDS
            /* the words a block found: each ends where the next starts */
            for (; pending && k < BLOCK; k++) {
                ptrdiff_t end = base + __builtin_ctzll(pending);
                pending &= pending - 1;
                if (base_wide && any_low_bits(base_wide >> (i - base), end - i)) {
                    ptrdiff_t len = utf8_of(w, at, data, kind, i, end);
                    if (len < 0)
                        return -1;
                    utf8_at[k] = at;
                    in_utf8[n_utf8++] = (uint16_t)k;
                    at += (size_t)len;
                    lens[k] = (uint32_t)len;
                } else {
                    ptrs[k] = direct + i;
                    lens[k] = (uint32_t)(end - i);
                }
                i = end;
            }
            if (k == BLOCK)
                break;
#endif
            ptrdiff_t end = 0;
            int here = ascii;  /* the word's bytes are direct[i:end] */
            if (pattern == PATTERN_WHITESPACE) {  /* \S+: the whitespace between words is no word */
                while (i < n && IS_SPACE_AT(i))
                    i++;
                if (i == n)
                    break;
                end = i + 1;
                while (end < n && !IS_SPACE_AT(end))
                    end++;
            } else {
                int found = 0;
                if (stretches && i >= stop && direct[i] < 0x80)
                    stop = ascii_stop(direct, n, i);
#ifdef ASCII_WORDS
                if (standard && i + 64 <= stop) {
                    int limit;
                    uint64_t starts = ascii_word_starts(direct + i, pattern, &limit);
                    pending = limit > 1 ? starts & (((uint64_t)1 << limit) - 2) : 0;
                    base = i;
                    base_wide = wide != NULL ? bits_at(wide, i) : 0;
                }
                if (pending) {  /* the word ends where the block's next one starts */
                    end = base + __builtin_ctzll(pending);
                    pending &= pending - 1;
                    found = 1;
                    here = !any_low_bits(base_wide >> (i - base), end - i);
                }
#endif
                if (stretches && !found && i < stop) {
                    end = standard && i + 16 <= n ? ascii_end16(classes, t, direct, stop, i, pattern, stop == n)
                          : ascii_end(classes, t, direct, stop, i, pattern, stop == n);
                    found = stop == n || end + 3 <= stop;
                    here = found && !span_wide(wide, i, end);
                }
                if (!found) {
                    end = pretok_end(classes, data, kind, n, i, pattern);
                    if (end <= i)
                        end = i + 1;  /* never: every alternative takes a character; a bug must not loop */
                }
            }
            if (here) {
                ptrs[k] = direct + i;
                lens[k] = (uint32_t)(end - i);
            } else {
                ptrdiff_t len = utf8_of(w, at, data, kind, i, end);
                if (len < 0)
                    return -1;
                utf8_at[k] = at;
                in_utf8[n_utf8++] = (uint16_t)k;
                at += (size_t)len;
                lens[k] = (uint32_t)len;
            }
            i = end;
        }
        for (int u = 0; u < n_utf8; u++)
            ptrs[in_utf8[u]] = w->utf8 + utf8_at[in_utf8[u]];
        for (int j = 0; j < k; j++) {
            const uint8_t *p = ptrs[j];
            size_t len = lens[j];
            if (len <= 8) {
                /* (a word of one byte too: the short-word cache keeps its id, a test the fewer) */
                /* one load for the hash and the cache's check (8 bytes where they are readable:
                   a word of the text itself or its narrowed copy, not one of w->utf8) */
                uint64_t x = (uintptr_t)p >= (uintptr_t)direct && (uintptr_t)p + 8 <= direct_end
                                 ? load64(p) & (~0ULL >> (64 - 8 * len))
                                 : load_upto8(p, len);
                uint64_t h = hash_upto8(x, len);
                words[j] = x;
                hashes[j] = h;
                PREFETCH(small_slot(smalls, small_mask, h));
                /* the token table's line only where a word of the last block missed the caches
                   (where none did, as in a text whose words are all cached, its lines would
                   only push the caches' out; a miss without it costs more than the fetches,
                   1 in 32 words missing was 5-10% slower on German documents seen once) */
                if (fetch_tokens && len <= token_len)
                    PREFETCH(&tokens[(size_t)h & token_mask]);
            } else {
                hashes[j] = hash_and_prefetch(e, w, p, len);
            }
        }
        /* room for every word's ids from the cache, so that a hit is one check and a copy */
        if (w->n_out + (size_t)k * CACHE_IDS_MAX > w->out_cap
                && grow(w, (void **)&w->out, &w->out_cap, w->n_out, (size_t)k * CACHE_IDS_MAX, sizeof(uint32_t)) < 0)
            return -1;
        /* the caches' hits written through locals (w->out and w->n_out again after a miss) */
        uint32_t *out = w->out;
        size_t n_out = w->n_out;
        int misses = 0;
        for (int j = 0; j < k; j++) {
            const uint8_t *p = ptrs[j];
            size_t len = lens[j];
            if (len <= 8) {
                const SmallSlot *c = small_find(small_slot(smalls, small_mask, hashes[j]), words[j], len);
                if (c != NULL) {
                    n_out += small_ids(c, out + n_out);
                    continue;
                }
            } else if (len <= CACHE_KEY_MAX && w->cache != NULL) {
                const CacheSlot *c = cache_slot(w, hashes[j]);
                if (cache_holds(c, p, len)) {
                    memcpy(out + n_out, c->ids, CACHE_IDS_MAX * sizeof(uint32_t));
                    n_out += c->n_ids;
                    continue;
                }
            }
            misses++;
            w->n_out = n_out;
            if (encode_hashed_word(e, w, p, len, hashes[j]) < 0
                    || (w->n_out + (size_t)(k - j) * CACHE_IDS_MAX > w->out_cap
                        && grow(w, (void **)&w->out, &w->out_cap, w->n_out, (size_t)(k - j) * CACHE_IDS_MAX,
                                sizeof(uint32_t)) < 0))
                return -1;
            out = w->out;
            n_out = w->n_out;
        }
        w->n_out = n_out;
        fetch_tokens = misses > 0;
    }
#undef IS_SPACE_AT
    return 0;
}

#define SCANNER(name, kind, pattern) \
    static int name(const Tables *e, Work *w, const void *d, int ascii, ptrdiff_t n) \
    { return scan(e, w, d, kind, ascii, n, pattern); }
SCANNER(gpt2_1, 1, PATTERN_GPT2)
SCANNER(gpt2_2, 2, PATTERN_GPT2)
SCANNER(gpt2_4, 4, PATTERN_GPT2)
SCANNER(cl100k_1, 1, PATTERN_CL100K)
SCANNER(cl100k_2, 2, PATTERN_CL100K)
SCANNER(cl100k_4, 4, PATTERN_CL100K)
SCANNER(o200k_1, 1, PATTERN_O200K)
SCANNER(o200k_2, 2, PATTERN_O200K)
SCANNER(o200k_4, 4, PATTERN_O200K)
SCANNER(whitespace_1, 1, PATTERN_WHITESPACE)
SCANNER(whitespace_2, 2, PATTERN_WHITESPACE)
SCANNER(whitespace_4, 4, PATTERN_WHITESPACE)

typedef int (*Scanner)(const Tables *, Work *, const void *, int, ptrdiff_t);
static const Scanner scanners[4][3] = {
    {gpt2_1, gpt2_2, gpt2_4}, {cl100k_1, cl100k_2, cl100k_4}, {o200k_1, o200k_2, o200k_4},
    {whitespace_1, whitespace_2, whitespace_4}};

#endif
