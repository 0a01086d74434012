/* The compiled counting core: the built-in pre-tokenizers and a word count in one pass.

   count(text, counts, classify, pattern) adds every match of one of bpestore's
   built-in patterns (bpestore/text.py PATTERNS: 0 gpt2, 1 cl100k, 2 o200k) in text to
   the dict counts (the word's UTF-8 bytes -> int) and returns how many matches there
   were: what counting the UTF-8 of each word of `regex.findall(PATTERNS[name], text)`
   does, without an object for each match. Repeated words are found in a table of
   spans of text; a word's bytes are made once per distinct word, when the counts are
   added.

   The character classes are not tables of this file: classify(code_point) answers
   with a category (1 Lu or Lt, 2 Ll, 3 Lm or Lo, 4 a mark, 5 \p{N}, 6 \s, 7 anything
   else) plus 16 times the letter of "sdmtlver" it matches case-insensitively (0:
   none), and is asked once per code point per process (per classify function), so
   the classes are those of the `regex` module the caller asks, whatever its Unicode
   version. bpestore/text.py's char_class is that function; tests/test_count_core.py
   checks the words against regex's.

   Each pattern's scan takes, at a position, the regex's alternatives in order (an
   alternative that fails lets the next one try, as a regex engine does, and where an
   alternative could backtrack the scan takes the path the engine would take first);
   the comments at each say which alternative a step is. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

enum { PATTERN_GPT2 = 0, PATTERN_CL100K = 1, PATTERN_O200K = 2 };
enum { CAT_UPPER = 1, CAT_LOWER = 2, CAT_OTHER_LETTER = 3, CAT_MARK = 4, CAT_NUMBER = 5, CAT_SPACE = 6,
       CAT_OTHER = 7 };
enum { FOLD_S = 1, FOLD_D, FOLD_M, FOLD_T, FOLD_L, FOLD_V, FOLD_E, FOLD_R };

#define N_CODE_POINTS 0x110000

/* The class of each code point (never 0), 0 until classify has answered (zeroed by
   calloc: only the pages of code points met are ever touched, so a forked worker
   shares the rest); a call with another classify function starts it afresh. */
static uint8_t *classes = NULL;
static PyObject *classes_of = NULL;  /* the classify function the table holds answers of */

static int
ask_class(PyObject *classify, Py_UCS4 c)
{
    PyObject *answer = PyObject_CallFunction(classify, "I", (unsigned int)c);
    if (answer == NULL)
        return -1;
    long k = PyLong_AsLong(answer);
    Py_DECREF(answer);
    if (k == -1 && PyErr_Occurred())
        return -1;
    if ((k & 15) < CAT_UPPER || (k & 15) > CAT_OTHER || (k >> 4) > FOLD_R) {
        PyErr_Format(PyExc_ValueError, "classify(%u) gave %ld; it must give a category 1..7 plus 16 times "
                     "a letter 0..8", (unsigned int)c, k);
        return -1;
    }
    classes[c] = (uint8_t)k;
    return 0;
}

/* Ask classify about every code point of text it was not asked about yet: the scans
   then read the table and cannot fail. */
static int
classify_text(const void *data, int kind, Py_ssize_t n, PyObject *classify)
{
    if (kind == PyUnicode_1BYTE_KIND) {  /* all 256 at once, then never again */
        if (classes[0xFF])
            return 0;
        for (Py_UCS4 c = 0; c < 256; c++)
            if (!classes[c] && ask_class(classify, c) < 0)
                return -1;
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (!classes[c] && ask_class(classify, c) < 0)
            return -1;
    }
    return 0;
}

/* -- the table of distinct words: spans of the text, open addressing ---------------- */

typedef struct {
    Py_ssize_t start;  /* -1: empty slot */
    Py_ssize_t len;
    Py_ssize_t count;
    uint64_t hash;
} Entry;

typedef struct {
    Entry *slots;
    size_t mask;   /* capacity - 1, capacity a power of two */
    size_t used;
} Table;

static int
table_init(Table *t, size_t capacity)
{
    t->slots = PyMem_Malloc(capacity * sizeof(Entry));
    if (t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < capacity; i++)
        t->slots[i].start = -1;
    t->mask = capacity - 1;
    t->used = 0;
    return 0;
}

static int
table_grow(Table *t)
{
    Table bigger;
    if (table_init(&bigger, (t->mask + 1) * 2) < 0)
        return -1;
    for (size_t i = 0; i <= t->mask; i++) {
        Entry *e = &t->slots[i];
        if (e->start < 0)
            continue;
        size_t j = (size_t)e->hash & bigger.mask;
        while (bigger.slots[j].start >= 0)
            j = (j + 1) & bigger.mask;
        bigger.slots[j] = *e;
    }
    bigger.used = t->used;
    PyMem_Free(t->slots);
    *t = bigger;
    return 0;
}

/* Count the word text[start:start+len] (kind-byte units at data) once more. */
static inline int
table_add(Table *t, const char *data, int kind, Py_ssize_t start, Py_ssize_t len)
{
    const unsigned char *p = (const unsigned char *)data + start * kind;
    size_t nbytes = (size_t)len * (size_t)kind;
    uint64_t h = 1469598103934665603ULL;  /* FNV-1a */
    for (size_t i = 0; i < nbytes; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    h ^= h >> 29;
    size_t j = (size_t)h & t->mask;
    for (;;) {
        Entry *e = &t->slots[j];
        if (e->start < 0)
            break;
        if (e->hash == h && e->len == len
                && memcmp(data + e->start * kind, p, nbytes) == 0) {
            e->count++;
            return 0;
        }
        j = (j + 1) & t->mask;
    }
    Entry *e = &t->slots[j];
    e->start = start;
    e->len = len;
    e->count = 1;
    e->hash = h;
    if (++t->used * 2 > t->mask + 1)
        return table_grow(t);
    return 0;
}

/* text[start:start+len] encoded as UTF-8, a surrogate as its three bytes (Python's
   "surrogatepass"). */
static PyObject *
utf8_word(const void *data, int kind, Py_ssize_t start, Py_ssize_t len)
{
    Py_ssize_t size = 0;
    for (Py_ssize_t i = start; i < start + len; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        size += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    PyObject *word = PyBytes_FromStringAndSize(NULL, size);
    if (word == NULL)
        return NULL;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(word);
    for (Py_ssize_t i = start; i < start + len; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x80) {
            *out++ = (unsigned char)c;
        } else if (c < 0x800) {
            *out++ = (unsigned char)(0xC0 | (c >> 6));
            *out++ = (unsigned char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            *out++ = (unsigned char)(0xE0 | (c >> 12));
            *out++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *out++ = (unsigned char)(0x80 | (c & 0x3F));
        } else {
            *out++ = (unsigned char)(0xF0 | (c >> 18));
            *out++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            *out++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *out++ = (unsigned char)(0x80 | (c & 0x3F));
        }
    }
    return word;
}

/* Add the table's counts to the dict counts, the words as UTF-8 bytes. */
static int
table_flush(Table *t, const void *data, int kind, PyObject *counts)
{
    for (size_t i = 0; i <= t->mask; i++) {
        Entry *e = &t->slots[i];
        if (e->start < 0)
            continue;
        PyObject *word = utf8_word(data, kind, e->start, e->len);
        if (word == NULL)
            return -1;
        PyObject *old = PyDict_GetItemWithError(counts, word);  /* borrowed */
        Py_ssize_t total = e->count;
        if (old != NULL) {
            Py_ssize_t before = PyLong_AsSsize_t(old);
            if (before == -1 && PyErr_Occurred()) {
                Py_DECREF(word);
                return -1;
            }
            total += before;
        }
        else if (PyErr_Occurred()) {
            Py_DECREF(word);
            return -1;
        }
        PyObject *value = PyLong_FromSsize_t(total);
        int rc = value == NULL ? -1 : PyDict_SetItem(counts, word, value);
        Py_XDECREF(value);
        Py_DECREF(word);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* -- the scans ---------------------------------------------------------------------- */

/* At i (< n) of a text: the character, its category, its case-insensitive letter. */
#define AT(i) PyUnicode_READ(kind, data, (i))
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

INLINE Py_ssize_t
run_end(const void *data, int kind, Py_ssize_t n, Py_ssize_t i, int run)
{
    for (; i < n; i++) {
        int k = CAT(i);
        if (!(run == RUN_LETTER ? IS_LETTER(k) : run == RUN_SYMBOL ? IS_SYMBOL(k)
              : run == RUN_UPPERISH ? IS_UPPERISH(k) : IS_LOWERISH(k)))
            break;
    }
    return i;
}

#define RUN_END(i, run) run_end(data, kind, n, (i), (run))

/* A run of whitespace from i (a whitespace character) that ends at k: the end of
   "\s+(?!\S)|\s+" (all of it at the end of the text, else all but its last character,
   which then starts the next word, but at least one character). */
INLINE Py_ssize_t
space_end(Py_ssize_t i, Py_ssize_t k, Py_ssize_t n)
{
    return k < n && k - i > 1 ? k - 1 : k;
}

/* The end of "'s|'t|'re|'ve|'m|'ll|'d" at i (matched exactly, or case-insensitively),
   or -1. */
INLINE Py_ssize_t
contraction_end(const void *data, int kind, Py_ssize_t n, Py_ssize_t i, int fold)
{
    if (i + 1 >= n || AT(i) != '\'')
        return -1;
    Py_UCS4 d = AT(i + 1);
    int f = fold ? FOLD(i + 1) : (d == 's' ? FOLD_S : d == 'd' ? FOLD_D : d == 'm' ? FOLD_M : d == 't' ? FOLD_T
                                  : d == 'l' ? FOLD_L : d == 'v' ? FOLD_V : d == 'r' ? FOLD_R : 0);
    if (f == FOLD_S || f == FOLD_D || f == FOLD_M || f == FOLD_T)
        return i + 2;
    if (i + 2 >= n || !(f == FOLD_L || f == FOLD_V || f == FOLD_R))
        return -1;
    Py_UCS4 e = AT(i + 2);
    int g = fold ? FOLD(i + 2) : (e == 'l' ? FOLD_L : e == 'e' ? FOLD_E : 0);
    if ((f == FOLD_L && g == FOLD_L) || ((f == FOLD_V || f == FOLD_R) && g == FOLD_E))
        return i + 3;
    return -1;
}

/* The end of "\p{N}{1,3}" at i (a digit). */
INLINE Py_ssize_t
digits_end(const void *data, int kind, Py_ssize_t n, Py_ssize_t i)
{
    Py_ssize_t end = i + 1;
    while (end < n && end < i + 3 && CAT(end) == CAT_NUMBER)
        end++;
    return end;
}

/* The end of " ?[^\s\p{L}\p{N}]+[\r\n]*" at i (with slash: "[\r\n/]*"), or -1. */
INLINE Py_ssize_t
symbols_end(const void *data, int kind, Py_ssize_t n, Py_ssize_t i, int slash)
{
    Py_ssize_t run = -1;
    if (AT(i) == ' ' && i + 1 < n && IS_SYMBOL(CAT(i + 1)))
        run = i + 1;
    else if (IS_SYMBOL(CAT(i)))
        run = i;
    if (run < 0)
        return -1;
    Py_ssize_t end = RUN_END(run + 1, RUN_SYMBOL);
    while (end < n && (IS_NEWLINE(AT(end)) || (slash && AT(end) == '/')))
        end++;
    return end;
}

/* The end of a run of whitespace at i under cl100k's and o200k's last alternatives:
   all of it where it reaches the end of the text and whole_at_end (cl100k's
   "\s++$"), else up to its last \r or \n ("\s*[\r\n]" / "\s*[\r\n]+"), else
   "\s+(?!\S)|\s+". */
INLINE Py_ssize_t
newline_space_end(const void *data, int kind, Py_ssize_t n, Py_ssize_t i, int whole_at_end)
{
    Py_ssize_t k = i + 1;
    while (k < n && CAT(k) == CAT_SPACE)
        k++;
    if (k == n && whole_at_end)
        return n;
    for (Py_ssize_t p = k - 1; p >= i; p--)
        if (IS_NEWLINE(AT(p)))
            return p + 1;
    return space_end(i, k, n);
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
INLINE Py_ssize_t
gpt2_end(const void *data, int kind, Py_ssize_t n, Py_ssize_t i)
{
    Py_ssize_t end = contraction_end(data, kind, n, i, 0);
    if (end >= 0)
        return end;
    /* " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": the run starts after a space that
       precedes one of them, else here. */
    Py_ssize_t run = i;
    if (AT(i) == ' ' && i + 1 < n && CAT(i + 1) != CAT_SPACE)
        run = i + 1;
    int k = CAT(run);
    end = run + 1;
    if (IS_LETTER(k))
        while (end < n && IS_LETTER(CAT(end)))
            end++;
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
INLINE Py_ssize_t
cl100k_end(const void *data, int kind, Py_ssize_t n, Py_ssize_t i)
{
    Py_ssize_t end = contraction_end(data, kind, n, i, 1);
    if (end >= 0)
        return end;
    Py_UCS4 c = AT(i);
    int k = CAT(i);
    /* [^\r\n\p{L}\p{N}]?+\p{L}++ */
    if (IS_LETTER(k))
        return RUN_END(i + 1, RUN_LETTER);
    if (k != CAT_NUMBER && !IS_NEWLINE(c) && i + 1 < n && IS_LETTER(CAT(i + 1)))
        return RUN_END(i + 2, RUN_LETTER);
    /* \p{N}{1,3}+ */
    if (k == CAT_NUMBER)
        return digits_end(data, kind, n, i);
    /* " ?[^\s\p{L}\p{N}]++[\r\n]*+" */
    if ((end = symbols_end(data, kind, n, i, 0)) >= 0)
        return end;
    /* Whitespace: \s++$|\s*[\r\n]|\s+(?!\S)|\s */
    return newline_space_end(data, kind, n, i, 1);
}

/* o200k's first alternative from s (after the optional prefix or at it),
   [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?: the end, or -1. */
INLINE Py_ssize_t
o200k_first_end(const void *data, int kind, Py_ssize_t n, Py_ssize_t s)
{
    Py_ssize_t a = RUN_END(s, RUN_UPPERISH), end = -1;
    if (a < n && IS_LOWERISH(CAT(a))) {
        end = RUN_END(a + 1, RUN_LOWERISH);  /* the UPPERISH* took s..a, LOWERISH+ goes on from a */
    } else {
        /* UPPERISH* gives back characters until one is LOWERISH too: that one alone is
           the LOWERISH+ (the one after it is not LOWERISH, else it would have been found). */
        for (Py_ssize_t b = a - 1; b >= s && end < 0; b--)
            if (IS_LOWERISH(CAT(b)))
                end = b + 1;
    }
    if (end < 0)
        return -1;
    Py_ssize_t c = contraction_end(data, kind, n, end, 1);
    return c >= 0 ? c : end;
}

/* o200k's second alternative from s,
   [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?: the end, or -1. */
INLINE Py_ssize_t
o200k_second_end(const void *data, int kind, Py_ssize_t n, Py_ssize_t s)
{
    Py_ssize_t a = RUN_END(s, RUN_UPPERISH);
    if (a == s)
        return -1;
    Py_ssize_t end = RUN_END(a, RUN_LOWERISH);
    Py_ssize_t c = contraction_end(data, kind, n, end, 1);
    return c >= 0 ? c : end;
}

/* [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
   |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
INLINE Py_ssize_t
o200k_end(const void *data, int kind, Py_ssize_t n, Py_ssize_t i)
{
    Py_UCS4 c = AT(i);
    int k = CAT(i);
    Py_ssize_t end;
    /* The first two alternatives, each with the prefix [^\r\n\p{L}\p{N}] first, then
       without it. */
    int prefix = !IS_LETTER(k) && k != CAT_NUMBER && !IS_NEWLINE(c) && i + 1 < n;
    if (prefix && (end = o200k_first_end(data, kind, n, i + 1)) >= 0)
        return end;
    if ((end = o200k_first_end(data, kind, n, i)) >= 0)
        return end;
    if (prefix && (end = o200k_second_end(data, kind, n, i + 1)) >= 0)
        return end;
    if ((end = o200k_second_end(data, kind, n, i)) >= 0)
        return end;
    /* \p{N}{1,3} */
    if (k == CAT_NUMBER)
        return digits_end(data, kind, n, i);
    /* " ?[^\s\p{L}\p{N}]+[\r\n/]*" */
    if ((end = symbols_end(data, kind, n, i, 1)) >= 0)
        return end;
    /* Whitespace: \s*[\r\n]+|\s+(?!\S)|\s+ */
    return newline_space_end(data, kind, n, i, 0);
}

/* Count every word of one pattern in text (one kind); the number of words, or -1
   with an exception set. */
INLINE Py_ssize_t
scan(const void *data, int kind, Py_ssize_t n, int pattern, Table *t)
{
    Py_ssize_t i = 0, words = 0;
    while (i < n) {
        Py_ssize_t end = pattern == PATTERN_GPT2 ? gpt2_end(data, kind, n, i)
                         : pattern == PATTERN_CL100K ? cl100k_end(data, kind, n, i)
                         : o200k_end(data, kind, n, i);
        if (end <= i) {  /* never: every alternative takes a character; a bug must not loop */
            PyErr_Format(PyExc_SystemError, "counting core: no progress at %zd", i);
            return -1;
        }
        if (table_add(t, data, kind, i, end - i) < 0)
            return -1;
        words++;
        i = end;
    }
    return words;
}

#undef AT

/* One function per pattern and kind, each scan inlined with both constant. */
#define SCANNER(name, kind, pattern) \
    static Py_ssize_t name(const void *d, Py_ssize_t n, Table *t) { return scan(d, kind, n, pattern, t); }
SCANNER(gpt2_1, 1, PATTERN_GPT2)
SCANNER(gpt2_2, 2, PATTERN_GPT2)
SCANNER(gpt2_4, 4, PATTERN_GPT2)
SCANNER(cl100k_1, 1, PATTERN_CL100K)
SCANNER(cl100k_2, 2, PATTERN_CL100K)
SCANNER(cl100k_4, 4, PATTERN_CL100K)
SCANNER(o200k_1, 1, PATTERN_O200K)
SCANNER(o200k_2, 2, PATTERN_O200K)
SCANNER(o200k_4, 4, PATTERN_O200K)

typedef Py_ssize_t (*Scanner)(const void *, Py_ssize_t, Table *);
static const Scanner scanners[3][3] = {
    {gpt2_1, gpt2_2, gpt2_4}, {cl100k_1, cl100k_2, cl100k_4}, {o200k_1, o200k_2, o200k_4}};

static PyObject *
count(PyObject *self, PyObject *args)
{
    PyObject *text, *counts, *classify;
    int pattern;
    if (!PyArg_ParseTuple(args, "UO!Oi:count", &text, &PyDict_Type, &counts, &classify, &pattern))
        return NULL;
    if (!PyCallable_Check(classify))
        return PyErr_Format(PyExc_TypeError, "classify must be callable, not %.100s", Py_TYPE(classify)->tp_name);
    if (pattern < PATTERN_GPT2 || pattern > PATTERN_O200K)
        return PyErr_Format(PyExc_ValueError, "pattern must be 0 (gpt2), 1 (cl100k) or 2 (o200k), not %d",
                            pattern);
    if (classes == NULL || classify != classes_of) {
        PyMem_RawFree(classes);
        classes = PyMem_RawCalloc(N_CODE_POINTS, 1);
        Py_CLEAR(classes_of);
        if (classes == NULL)
            return PyErr_NoMemory();
        Py_INCREF(classify);
        classes_of = classify;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const void *data = PyUnicode_DATA(text);
    int kind = PyUnicode_KIND(text);
    if (n == 0)
        return PyLong_FromLong(0);
    if (classify_text(data, kind, n, classify) < 0)
        return NULL;
    /* Room for every word of a short text (many calls are one short document each),
       at most 1,024 slots to start with. */
    size_t capacity = 16;
    while (capacity < 1024 && (Py_ssize_t)capacity < 2 * n)
        capacity <<= 1;
    Table t;
    if (table_init(&t, capacity) < 0)
        return NULL;
    Py_ssize_t words = scanners[pattern][kind == 1 ? 0 : kind == 2 ? 1 : 2](data, n, &t);
    if (words >= 0 && table_flush(&t, data, kind, counts) < 0)
        words = -1;
    PyMem_Free(t.slots);
    if (words < 0)
        return NULL;
    return PyLong_FromSsize_t(words);
}

static PyMethodDef methods[] = {
    {"count", count, METH_VARARGS,
     "count(text, counts, classify, pattern) -> int\n\n"
     "Add the words (UTF-8 bytes) of a built-in pre-tokenizer (0 gpt2, 1 cl100k, 2 o200k) in text\n"
     "to the dict counts; return how many there were. classify(code_point) gives a category\n"
     "1..7 plus 16 times a letter of 'sdmtlver' (see bpestore.text.char_class)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_countcore",
    "The built-in pre-tokenizers and a word count in one pass (optional compiled core).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__countcore(void)
{
    return PyModule_Create(&module);
}
