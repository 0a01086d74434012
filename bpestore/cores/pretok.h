/* The built-in pre-tokenizers (bpestore/text.py PATTERNS: 0 gpt2, 1 cl100k, 2 o200k),
   scanned in C: shared by the counting core (_countcore.c) and the encode core
   (_encodecore.c).

   pretok_end(classes, data, kind, n, i, pattern) is the end of the word that starts
   at i of a text (n code points of PyUnicode kind `kind` at data): what the
   pattern's regex would match there. The character classes are not tables of this
   file: classify(code_point) answers with a category (1 Lu or Lt, 2 Ll, 3 Lm or Lo,
   4 a mark, 5 \p{N}, 6 \s, 7 anything else) plus 16 times the letter of "sdmtlver"
   it matches case-insensitively (0: none), and is asked once per code point
   (classify_text fills a table of N_CODE_POINTS bytes before a scan, so the scans
   cannot fail), so the classes are those of the `regex` module the caller asks,
   whatever its Unicode version. bpestore/text.py's char_class is that function;
   tests/test_count_core.py and tests/test_encode_core.py check the words against
   regex's.

   Each pattern's scan takes, at a position, the regex's alternatives in order (an
   alternative that fails lets the next one try, as a regex engine does, and where an
   alternative could backtrack the scan takes the path the engine would take first);
   the comments at each say which alternative a step is. */
#ifndef BPESTORE_PRETOK_H
#define BPESTORE_PRETOK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef INLINE
#  if defined(__GNUC__) || defined(__clang__)
#define INLINE static inline __attribute__((always_inline))
#  else
#define INLINE static inline
#  endif
#endif

enum { PATTERN_GPT2 = 0, PATTERN_CL100K = 1, PATTERN_O200K = 2 };
enum { CAT_UPPER = 1, CAT_LOWER = 2, CAT_OTHER_LETTER = 3, CAT_MARK = 4, CAT_NUMBER = 5, CAT_SPACE = 6,
       CAT_OTHER = 7 };
enum { FOLD_S = 1, FOLD_D, FOLD_M, FOLD_T, FOLD_L, FOLD_V, FOLD_E, FOLD_R };

#define N_CODE_POINTS 0x110000

/* The code point at i of a text of n code points of `kind` bytes each (1, 2 or 4) at data. */
#define CHAR_AT(kind, data, i) \
    ((kind) == 1 ? (uint32_t)((const uint8_t *)(data))[i] \
     : (kind) == 2 ? (uint32_t)((const uint16_t *)(data))[i] : ((const uint32_t *)(data))[i])

/* classes[0xFF] known means all of the first 256 are (the encode core reads it without
   the GIL): its store ordered after theirs, its load before the reads that trust it. */
#if defined(__GNUC__) || defined(__clang__)
#define CLASSES_RELEASE() __atomic_thread_fence(__ATOMIC_RELEASE)
#define CLASSES_ACQUIRE(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#else  /* MSVC: x86 and x64 keep stores in order */
#define CLASSES_RELEASE() ((void)0)
#define CLASSES_ACQUIRE(p) (*(volatile const uint8_t *)(p))
#endif

/* -- the scans ---------------------------------------------------------------------- */

/* At i (< n) of a text: the character, its category, its case-insensitive letter. */
#define AT(i) CHAR_AT(kind, data, (i))
#define CAT(i) (classes[AT(i)] & 15)
#define FOLD(i) (classes[AT(i)] >> 4)
#define IS_LETTER(k) ((k) <= CAT_OTHER_LETTER)
#define IS_SYMBOL(k) ((k) == CAT_MARK || (k) == CAT_OTHER)  /* [^\s\p{L}\p{N}] */
#define IS_NEWLINE(c) ((c) == '\r' || (c) == '\n')

/* The end of the run from i on of characters of one class. */
enum { RUN_LETTER, RUN_SYMBOL, RUN_UPPERISH, RUN_LOWERISH };
/* o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}] */
#define IS_UPPERISH(k) ((k) == CAT_UPPER || (k) == CAT_OTHER_LETTER || (k) == CAT_MARK)
#define IS_LOWERISH(k) ((k) == CAT_LOWER || (k) == CAT_OTHER_LETTER || (k) == CAT_MARK)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && (defined(__GNUC__) || defined(__clang__))
#define SWAR_RUNS 1
/* Of the 8 bytes (kind 1) or 4 characters (kind 2) in x, the top bit of each lane's low
   byte set where it is not an ASCII character of the run: A-Z or a-z (RUN_LETTER), A-Z
   (RUN_UPPERISH), a-z (RUN_LOWERISH), all the run's characters below 0x80. */
INLINE uint64_t
not_ascii_run(uint64_t x, int kind, int run)
{
    const uint64_t ones = kind == 1 ? 0x0101010101010101ULL : 0x0001000100010001ULL;
    const uint64_t high = ones * 0x80;
    const uint64_t lo = run == RUN_UPPERISH ? 'A' : 'a', hi = run == RUN_UPPERISH ? 'Z' : 'z';
    uint64_t y = x & (ones * 0x7F);  /* each lane below 0x80: the sums below carry into no other lane */
    if (run == RUN_LETTER)
        y |= ones * 0x20;  /* upper case to lower */
    uint64_t in = (y + ones * (0x80 - lo)) & ~(y + ones * (0x80 - hi - 1)) & high;  /* lo <= y <= hi */
    uint64_t wide;  /* lanes >= 0x80 */
    if (kind == 1)
        wide = x & high;
    else {
        uint64_t t = x & (ones * 0xFF80);
        wide = ((((t & (ones * 0x7FFF)) + ones * 0x7FFF) | t) & (ones * 0x8000)) >> 8;
    }
    return (in & ~wide) ^ high;
}

/* From i on, past whole lanes of the run's ASCII characters (8 bytes or 4 characters a
   step): where the run may end (the caller's loop decides at that character). */
INLINE ptrdiff_t
skip_ascii_run(const void *data, int kind, ptrdiff_t n, ptrdiff_t i, int run)
{
    ptrdiff_t lanes = kind == 1 ? 8 : 4;
    while (i + lanes <= n) {
        uint64_t x;
        memcpy(&x, (const uint8_t *)data + i * kind, 8);
        uint64_t stop = not_ascii_run(x, kind, run);
        if (stop)
            return i + (ptrdiff_t)(__builtin_ctzll(stop) / (8 * kind));
        i += lanes;
    }
    return i;
}
#endif

INLINE ptrdiff_t
run_end(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, ptrdiff_t i, int run)
{
#ifdef SWAR_RUNS
    if (run != RUN_SYMBOL && kind <= 2)
        i = skip_ascii_run(data, kind, n, i, run);
#endif
    for (; i < n; i++) {
        int k = CAT(i);
        if (!(run == RUN_LETTER ? IS_LETTER(k) : run == RUN_SYMBOL ? IS_SYMBOL(k)
              : run == RUN_UPPERISH ? IS_UPPERISH(k) : IS_LOWERISH(k)))
            break;
    }
    return i;
}

#define RUN_END(i, run) run_end(classes, data, kind, n, (i), (run))

/* A run of whitespace from i (a whitespace character) that ends at k: the end of
   "\s+(?!\S)|\s+" (all of it at the end of the text, else all but its last character,
   which then starts the next word, but at least one character). */
INLINE ptrdiff_t
space_end(ptrdiff_t i, ptrdiff_t k, ptrdiff_t n)
{
    return k < n && k - i > 1 ? k - 1 : k;
}

/* The end of "'s|'t|'re|'ve|'m|'ll|'d" at i (matched exactly, or case-insensitively),
   or -1. */
INLINE ptrdiff_t
contraction_end(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, ptrdiff_t i, int fold)
{
    if (i + 1 >= n || AT(i) != '\'')
        return -1;
    uint32_t d = AT(i + 1);
    int f = fold ? FOLD(i + 1) : (d == 's' ? FOLD_S : d == 'd' ? FOLD_D : d == 'm' ? FOLD_M : d == 't' ? FOLD_T
                                  : d == 'l' ? FOLD_L : d == 'v' ? FOLD_V : d == 'r' ? FOLD_R : 0);
    if (f == FOLD_S || f == FOLD_D || f == FOLD_M || f == FOLD_T)
        return i + 2;
    if (i + 2 >= n || !(f == FOLD_L || f == FOLD_V || f == FOLD_R))
        return -1;
    uint32_t e = AT(i + 2);
    int g = fold ? FOLD(i + 2) : (e == 'l' ? FOLD_L : e == 'e' ? FOLD_E : 0);
    if ((f == FOLD_L && g == FOLD_L) || ((f == FOLD_V || f == FOLD_R) && g == FOLD_E))
        return i + 3;
    return -1;
}

/* The end of "\p{N}{1,3}" at i (a digit). */
INLINE ptrdiff_t
digits_end(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, ptrdiff_t i)
{
    ptrdiff_t end = i + 1;
    while (end < n && end < i + 3 && CAT(end) == CAT_NUMBER)
        end++;
    return end;
}

/* The end of " ?[^\s\p{L}\p{N}]+[\r\n]*" at i (with slash: "[\r\n/]*"), or -1. */
INLINE ptrdiff_t
symbols_end(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, ptrdiff_t i, int slash)
{
    ptrdiff_t run = -1;
    if (AT(i) == ' ' && i + 1 < n && IS_SYMBOL(CAT(i + 1)))
        run = i + 1;
    else if (IS_SYMBOL(CAT(i)))
        run = i;
    if (run < 0)
        return -1;
    ptrdiff_t end = RUN_END(run + 1, RUN_SYMBOL);
    while (end < n && (IS_NEWLINE(AT(end)) || (slash && AT(end) == '/')))
        end++;
    return end;
}

/* The end of a run of whitespace at i under cl100k's and o200k's last alternatives:
   all of it where it reaches the end of the text and whole_at_end (cl100k's
   "\s++$"), else up to its last \r or \n ("\s*[\r\n]" / "\s*[\r\n]+"), else
   "\s+(?!\S)|\s+". */
INLINE ptrdiff_t
newline_space_end(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, ptrdiff_t i, int whole_at_end)
{
    ptrdiff_t k = i + 1;
    while (k < n && CAT(k) == CAT_SPACE)
        k++;
    if (k == n && whole_at_end)
        return n;
    for (ptrdiff_t p = k - 1; p >= i; p--)
        if (IS_NEWLINE(AT(p)))
            return p + 1;
    return space_end(i, k, n);
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
INLINE ptrdiff_t
gpt2_end(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, ptrdiff_t i)
{
    ptrdiff_t end = contraction_end(classes, data, kind, n, i, 0);
    if (end >= 0)
        return end;
    /* " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": the run starts after a space that
       precedes one of them, else here. */
    ptrdiff_t run = i;
    if (AT(i) == ' ' && i + 1 < n && CAT(i + 1) != CAT_SPACE)
        run = i + 1;
    int k = CAT(run);
    end = run + 1;
    if (IS_LETTER(k))
        end = RUN_END(end, RUN_LETTER);
    else if (IS_SYMBOL(k))
        while (end < n && IS_SYMBOL(CAT(end)))
            end++;
    else
        while (end < n && CAT(end) == k)
            end++;
    return k == CAT_SPACE ? space_end(i, end, n) : end;
}

/* '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+
   |\s++$|\s*[\r\n]|\s+(?!\S)|\s */
INLINE ptrdiff_t
cl100k_end(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, ptrdiff_t i)
{
    ptrdiff_t end = contraction_end(classes, data, kind, n, i, 1);
    if (end >= 0)
        return end;
    uint32_t c = AT(i);
    int k = CAT(i);
    /* [^\r\n\p{L}\p{N}]?+\p{L}++ */
    if (IS_LETTER(k))
        return RUN_END(i + 1, RUN_LETTER);
    if (k != CAT_NUMBER && !IS_NEWLINE(c) && i + 1 < n && IS_LETTER(CAT(i + 1)))
        return RUN_END(i + 2, RUN_LETTER);
    /* \p{N}{1,3}+ */
    if (k == CAT_NUMBER)
        return digits_end(classes, data, kind, n, i);
    /* " ?[^\s\p{L}\p{N}]++[\r\n]*+" */
    if ((end = symbols_end(classes, data, kind, n, i, 0)) >= 0)
        return end;
    /* Whitespace: \s++$|\s*[\r\n]|\s+(?!\S)|\s */
    return newline_space_end(classes, data, kind, n, i, 1);
}

/* o200k's first alternative from s (after the optional prefix or at it),
   [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?: the end, or -1. */
INLINE ptrdiff_t
o200k_first_end(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, ptrdiff_t s)
{
    ptrdiff_t a = RUN_END(s, RUN_UPPERISH), end = -1;
    if (a < n && IS_LOWERISH(CAT(a))) {
        end = RUN_END(a + 1, RUN_LOWERISH);  /* the UPPERISH* took s..a, LOWERISH+ goes on from a */
    } else {
        /* UPPERISH* gives back characters until one is LOWERISH too: that one alone is
           the LOWERISH+ (the one after it is not LOWERISH, else it would have been found). */
        for (ptrdiff_t b = a - 1; b >= s && end < 0; b--)
            if (IS_LOWERISH(CAT(b)))
                end = b + 1;
    }
    if (end < 0)
        return -1;
    ptrdiff_t c = contraction_end(classes, data, kind, n, end, 1);
    return c >= 0 ? c : end;
}

/* o200k's second alternative from s,
   [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?: the end, or -1. */
INLINE ptrdiff_t
o200k_second_end(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, ptrdiff_t s)
{
    ptrdiff_t a = RUN_END(s, RUN_UPPERISH);
    if (a == s)
        return -1;
    ptrdiff_t end = RUN_END(a, RUN_LOWERISH);
    ptrdiff_t c = contraction_end(classes, data, kind, n, end, 1);
    return c >= 0 ? c : end;
}

/* [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
   |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
INLINE ptrdiff_t
o200k_end(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, ptrdiff_t i)
{
    uint32_t c = AT(i);
    int k = CAT(i);
    ptrdiff_t end;
    /* The first two alternatives, each with the prefix [^\r\n\p{L}\p{N}] first, then
       without it. */
    int prefix = !IS_LETTER(k) && k != CAT_NUMBER && !IS_NEWLINE(c) && i + 1 < n;
    if (prefix && (end = o200k_first_end(classes, data, kind, n, i + 1)) >= 0)
        return end;
    if ((end = o200k_first_end(classes, data, kind, n, i)) >= 0)
        return end;
    if (prefix && (end = o200k_second_end(classes, data, kind, n, i + 1)) >= 0)
        return end;
    if ((end = o200k_second_end(classes, data, kind, n, i)) >= 0)
        return end;
    /* \p{N}{1,3} */
    if (k == CAT_NUMBER)
        return digits_end(classes, data, kind, n, i);
    /* " ?[^\s\p{L}\p{N}]+[\r\n/]*" */
    if ((end = symbols_end(classes, data, kind, n, i, 1)) >= 0)
        return end;
    /* Whitespace: \s*[\r\n]+|\s+(?!\S)|\s+ */
    return newline_space_end(classes, data, kind, n, i, 0);
}

/* The end of the word of `pattern` that starts at i (< n). */
INLINE ptrdiff_t
pretok_end(const uint8_t *classes, const void *data, int kind, ptrdiff_t n, ptrdiff_t i, int pattern)
{
    return pattern == PATTERN_GPT2 ? gpt2_end(classes, data, kind, n, i)
           : pattern == PATTERN_CL100K ? cl100k_end(classes, data, kind, n, i)
           : o200k_end(classes, data, kind, n, i);
}

#endif
