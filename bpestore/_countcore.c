/* The compiled counting core: the built-in pre-tokenizers and a word count in one pass.

   count(text, counts, classify, pattern) adds every match of one of bpestore's
   built-in patterns (bpestore/text.py PATTERNS: 0 gpt2, 1 cl100k, 2 o200k) in text to
   the dict counts (the word's UTF-8 bytes -> int) and returns how many matches there
   were: what counting the UTF-8 of each word of `regex.findall(PATTERNS[name], text)`
   does, without an object for each match. Repeated words are found in a table that
   owns each distinct word's UTF-8 (cores/word_table.h); a word's bytes object is made
   once per distinct word, when the counts are added. count_many(pieces, ...) counts
   many short pieces (small files) with one table for all of them, telling each piece's
   distinct words: their counts go into the dict once, not once per piece.

   CountTable is that table as an object: it counts text after text (count, count_each)
   and hands its counts on only at the end, as a dict (take) or packed in shards (shard),
   so that the words of a large source go into no dict while it is counted.

   The scans and the character classes they read are in _pretok.h (shared with the
   encode core). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "_pretok.h"
#include "cores/ascii_blocks.h"
#include "cores/read_files.h"
#include "cores/shards.h"
#include "cores/threads.h"
#include "cores/utf8_text.h"
#include "cores/word_table.h"

/* The class of each code point (never 0), 0 until classify has answered (zeroed by
   calloc: only the pages of code points met are ever touched, so a forked worker
   shares the rest); a call with another classify function starts it afresh. */
static uint8_t *classes = NULL;
static PyObject *classes_of = NULL;  /* the classify function the table holds answers of */
/* Whether the table's ASCII classes are those cores/ascii_blocks.h's masks give (-1: not
   asked yet; asked once the first 256 are known). */
static int ascii_standard = -1;

/* -- counting into a table ---------------------------------------------------------- */

/* A scan's failure that touches no Python object (a scan may run without the GIL): */
#define SCAN_NO_MEMORY (-1)  /* wt_insert's -1 */
#define SCAN_TOO_LARGE (-2)  /* wt_insert's -2 */
#define SCAN_STUCK (-3)      /* no progress: a bug must not loop */

/* A scan's failure (SCAN_*) as an exception; -1. */
static int
table_error(Py_ssize_t rc)
{
    if (rc == SCAN_NO_MEMORY)
        PyErr_NoMemory();
    else if (rc == SCAN_TOO_LARGE)
        PyErr_SetString(PyExc_OverflowError, "counting core: a word of 4 GiB or more, or 2**32 distinct words");
    else
        PyErr_SetString(PyExc_SystemError, "counting core: a scan made no progress");
    return -1;
}

/* Words found, hashed and their slots asked for, then looked up together: the look-ups'
   cache misses overlap (and the scan goes on meanwhile). */
#define BATCH 16

/* A piece of UTF-8 smaller than this is counted on one thread, whatever count_utf8 is given. */
#define SPLIT_MIN_BYTES ((Py_ssize_t)256 << 10)

/* Count every word of one pattern in text (one kind); the number of words, or SCAN_*
   (no exception set: no Python object is touched). */
INLINE Py_ssize_t
scan(const void *data, int kind, Py_ssize_t n, int pattern, WordTable *t)
{
    Py_ssize_t i = 0, words = 0, starts[BATCH + 1];
    uint64_t hashes[BATCH], packs[BATCH];
    int pending = 0;
    while (i < n || pending) {
        if (i < n) {
            Py_ssize_t end = pretok_end(classes, data, kind, n, i, pattern);
            if (end <= i)  /* never: every alternative takes a character; a bug must not loop */
                return SCAN_STUCK;
            starts[pending] = i;
            if (kind == 1 && end - i <= 8) {  /* its bytes read at once: hashed, and compared so */
                packs[pending] = wt_pack_bytes((const unsigned char *)data + i, end - i, n - i);
                hashes[pending] = wt_hash_short(packs[pending], end - i);
            } else {
                packs[pending] = 0;
                hashes[pending] = wt_hash(data, kind, i, end - i);
            }
            wt_prefetch(t, hashes[pending]);
            starts[++pending] = i = end;
            if (pending < BATCH && i < n)
                continue;
        }
        for (int k = 0; k < pending; k++) {  /* in order: the first occurrences stay in order */
            int rc = wt_add(t, data, kind, starts[k], starts[k + 1] - starts[k], hashes[k], packs[k], 1);
            if (rc < 0)
                return rc;
        }
        words += pending;
        pending = 0;
    }
    return words;
}


/* One function per pattern and kind, each scan inlined with both constant. */
#define SCANNER(name, kind, pattern) \
    static Py_ssize_t name(const void *d, Py_ssize_t n, WordTable *t) { return scan(d, kind, n, pattern, t); }
SCANNER(gpt2_1, 1, PATTERN_GPT2)
SCANNER(gpt2_2, 2, PATTERN_GPT2)
SCANNER(gpt2_4, 4, PATTERN_GPT2)
SCANNER(cl100k_1, 1, PATTERN_CL100K)
SCANNER(cl100k_2, 2, PATTERN_CL100K)
SCANNER(cl100k_4, 4, PATTERN_CL100K)
SCANNER(o200k_1, 1, PATTERN_O200K)
SCANNER(o200k_2, 2, PATTERN_O200K)
SCANNER(o200k_4, 4, PATTERN_O200K)

#ifdef ASCII_BLOCKS
/* How many words gpt2_1_blocks finds (and asks for their slots) before it adds the first of
   them: each slot is asked for as long before it is read. */
#define RING 16

/* gpt2's scan of a kind-1 text whose ASCII classes are the standard ones: the words of 64
   bytes at a time found from their classes' masks (cores/ascii_blocks.h), gpt2_end taking
   what a block leaves (a word longer than a block, Latin-1 bytes, the end of the text);
   each word added RING words after it was found, in order; as scan. */
static Py_ssize_t
gpt2_1_blocks(const void *d, Py_ssize_t n, WordTable *t)
{
    const uint8_t *data = d;
    Py_ssize_t i = 0, scalar_until = 0, starts[RING], lens[RING];
    uint64_t hashes[RING], packs[RING];
    size_t words = 0;
    while (i < n) {
        uint64_t found = 0;
        if (i >= 1 && i + ASCII_BLOCK - 1 <= n && i >= scalar_until) {
            /* bit k: a word starts at i - 1 + k; bit 1 (i) is known, bit 0 is no part */
            found = gpt2_block_starts(data + i - 1) & ((((uint64_t)1 << ASCII_DECIDED) - 1) << 1) & ~(uint64_t)3;
            if (found == 0 && block_mask(data + i - 1, BC_HIGH))
                scalar_until = i + ASCII_BLOCK - 1;  /* Latin-1 there: gpt2_end takes those bytes */
        }
        Py_ssize_t base = i - 1;
        do {
            Py_ssize_t end = found ? base + __builtin_ctzll(found) : pretok_end(classes, data, 1, n, i, PATTERN_GPT2);
            found &= found - 1;
            size_t k = words++ % RING;
            if (words > RING) {
                int rc = wt_add(t, data, 1, starts[k], lens[k], hashes[k], packs[k], 1);
                if (rc < 0)
                    return rc;
            }
            starts[k] = i;
            lens[k] = end - i;
            if (end - i <= 8) {
                packs[k] = wt_pack_bytes(data + i, end - i, n - i);
                hashes[k] = wt_hash_short(packs[k], end - i);
            } else {
                packs[k] = 0;
                hashes[k] = wt_hash(data, 1, i, end - i);
            }
            wt_prefetch(t, hashes[k]);
            i = end;
        } while (found);
    }
    for (size_t w = words > RING ? words - RING : 0; w < words; w++) {
        size_t k = w % RING;
        int rc = wt_add(t, data, 1, starts[k], lens[k], hashes[k], packs[k], 1);
        if (rc < 0)
            return rc;
    }
    return (Py_ssize_t)words;
}
#endif

typedef Py_ssize_t (*Scanner)(const void *, Py_ssize_t, WordTable *);
static const Scanner scanners[3][3] = {
    {gpt2_1, gpt2_2, gpt2_4}, {cl100k_1, cl100k_2, cl100k_4}, {o200k_1, o200k_2, o200k_4}};

/* The scanner of a pattern for a text of kind (1, 2 or 4) whose characters were classified. */
static Scanner
scanner_of(int pattern, int kind)
{
#ifdef ASCII_BLOCKS
    if (pattern == PATTERN_GPT2 && kind == 1) {
        if (ascii_standard < 0)  /* the first 256 are known before any text of kind 1 is scanned */
            ascii_standard = ascii_classes_standard(classes);
        if (ascii_standard)
            return gpt2_1_blocks;
    }
#endif
    return scanners[pattern][kind == 1 ? 0 : kind == 2 ? 1 : 2];
}

/* Check the arguments shared by count and count_many; make the class table ready. */
static int
ready(PyObject *classify, int pattern)
{
    if (!PyCallable_Check(classify)) {
        PyErr_Format(PyExc_TypeError, "classify must be callable, not %.100s", Py_TYPE(classify)->tp_name);
        return -1;
    }
    if (pattern < PATTERN_GPT2 || pattern > PATTERN_O200K) {
        PyErr_Format(PyExc_ValueError, "pattern must be 0 (gpt2), 1 (cl100k) or 2 (o200k), not %d", pattern);
        return -1;
    }
    if (classes == NULL || classify != classes_of) {
        PyMem_RawFree(classes);
        classes = PyMem_RawCalloc(N_CODE_POINTS, 1);
        Py_CLEAR(classes_of);
        if (classes == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        Py_INCREF(classify);
        classes_of = classify;
        ascii_standard = -1;
    }
    return 0;
}

/* Scan one text into table t; the number of words, or -1 with an exception set. */
static Py_ssize_t
scan_text(PyObject *text, PyObject *classify, int pattern, WordTable *t)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const void *data = PyUnicode_DATA(text);
    int kind = PyUnicode_KIND(text);
    if (n == 0)
        return 0;
    if (classify_text(classes, data, kind, n, classify) < 0)
        return -1;
    Py_ssize_t words = scanner_of(pattern, kind)(data, n, t);
    return words < 0 ? table_error(words) : words;
}

/* An index for every word of a short text (many calls are one short document each),
   at most 1,024 slots to start with. */
static size_t
first_capacity(Py_ssize_t n)
{
    size_t capacity = 16;
    while (capacity < 1024 && (Py_ssize_t)capacity < 2 * n)
        capacity <<= 1;
    return capacity;
}

/* The next piece of t: its words are told apart from the pieces' before (go_on: the piece
   being counted goes on instead, once). */
static void
next_piece(WordTable *t)
{
    if (t->go_on) {
        t->go_on = 0;
        return;
    }
    if (++t->piece == 0) {  /* wrapped: no word may keep a number a later piece takes */
        for (size_t k = 0; k < t->used; k++)
            t->slots[t->order[k]].piece = 0;
        t->piece = 1;
    }
    t->piece_distinct = 0;
}

/* Each piece (a list of str: its segments) counted into t as one piece: a list of
   (words, distinct words), or NULL with an exception set. */
static PyObject *
count_pieces(WordTable *t, PyObject *pieces, PyObject *classify, int pattern)
{
    Py_ssize_t n_pieces = PyList_GET_SIZE(pieces);
    PyObject *result = PyList_New(n_pieces);
    for (Py_ssize_t i = 0; i < n_pieces && result != NULL; i++) {
        PyObject *piece = PyList_GET_ITEM(pieces, i);
        Py_ssize_t words = 0;
        next_piece(t);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(piece) && words >= 0; j++) {
            Py_ssize_t more = scan_text(PyList_GET_ITEM(piece, j), classify, pattern, t);
            words = more < 0 ? -1 : words + more;
        }
        PyObject *pair = words < 0 ? NULL : Py_BuildValue("(nn)", words, (Py_ssize_t)t->piece_distinct);
        if (pair == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, pair);
    }
    return result;
}

/* Add the table's counts to the dict counts, the words as UTF-8 bytes, in the order they
   first occurred (a word new to counts goes in after those before it: ordinals). */
static int
table_flush(const WordTable *t, PyObject *counts)
{
    int empty = PyDict_GET_SIZE(counts) == 0;
    for (size_t k = 0; k < t->used; k++) {
        if (k + 16 < t->used)
            wt_prefetch_slot(t, t->order[k + 16]);
        const Word *w = &t->slots[t->order[k]];
        PyObject *word = PyBytes_FromStringAndSize((const char *)wt_bytes(t, w), (Py_ssize_t)WT_LEN(w));
        if (word == NULL)
            return -1;
        long long total = w->count;
        PyObject *old = empty ? NULL : PyDict_GetItemWithError(counts, word);  /* borrowed */
        if (old != NULL) {
            long long before = PyLong_AsLongLong(old);
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
        PyObject *value = PyLong_FromLongLong(total);
        int rc = value == NULL ? -1 : PyDict_SetItem(counts, word, value);
        Py_XDECREF(value);
        Py_DECREF(word);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static PyObject *
count(PyObject *self, PyObject *args)
{
    PyObject *text, *counts, *classify;
    int pattern;
    if (!PyArg_ParseTuple(args, "UO!Oi:count", &text, &PyDict_Type, &counts, &classify, &pattern))
        return NULL;
    if (ready(classify, pattern) < 0)
        return NULL;
    WordTable t;
    if (wt_init(&t, first_capacity(PyUnicode_GET_LENGTH(text))) < 0)
        return PyErr_NoMemory();
    Py_ssize_t words = scan_text(text, classify, pattern, &t);
    if (words >= 0 && table_flush(&t, counts) < 0)
        words = -1;
    wt_free(&t);
    return words < 0 ? NULL : PyLong_FromSsize_t(words);
}

/* A copy of pieces, a list of lists of str (utf8: of bytes; the texts stay alive, and the
   lists as they are, while they are counted), or NULL with an exception set. */
static PyObject *
copy_pieces(PyObject *pieces, int utf8)
{
    const char *what = utf8 ? "bytes" : "str";
    pieces = PyList_GetSlice(pieces, 0, PyList_GET_SIZE(pieces));
    if (pieces == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pieces); i++) {
        PyObject *piece = PyList_GET_ITEM(pieces, i), *copy = NULL;
        if (PyList_Check(piece))
            copy = PyList_GetSlice(piece, 0, PyList_GET_SIZE(piece));
        else
            PyErr_Format(PyExc_TypeError, "each piece must be a list of %s, not %.100s", what,
                         Py_TYPE(piece)->tp_name);
        for (Py_ssize_t j = 0; copy != NULL && j < PyList_GET_SIZE(copy); j++)
            if (utf8 ? !PyBytes_Check(PyList_GET_ITEM(copy, j)) : !PyUnicode_Check(PyList_GET_ITEM(copy, j))) {
                PyErr_Format(PyExc_TypeError, "each piece must be a list of %s, not of %.100s", what,
                             Py_TYPE(PyList_GET_ITEM(copy, j))->tp_name);
                Py_CLEAR(copy);
            }
        if (copy == NULL) {
            Py_DECREF(pieces);
            return NULL;
        }
        PyList_SET_ITEM(pieces, i, copy);  /* steals copy; the slice's own reference to piece goes */
        Py_DECREF(piece);
    }
    return pieces;
}

/* -- counting UTF-8 where it lies (cores/utf8_text.h) ----------------------------------------- */

/* Whether the n bytes at p are UTF-8 that Python's strict decoder takes, without a NUL byte
   (1; 0: not), each code point's class asked of classify (-1: it failed). */
static int
check_utf8(const unsigned char *p, Py_ssize_t n, PyObject *classify)
{
    for (Py_ssize_t i = 0; i < n;) {
        i += utf8_ascii_run(p + i, n - i);
        if (i >= n)
            break;
        uint32_t c;
        int len = p[i] == 0 ? 0 : utf8_decode(p + i, n - i, &c);
        if (len == 0)
            return 0;
        if (!classes[c] && ask_class(classes, classify, c) < 0)
            return -1;
        i += len;
    }
    return 1;
}

/* Count the words of n bytes of checked UTF-8 at p into t: its ASCII stretches as they are,
   the stretches between safe cuts around other characters widened into *wide (grown as
   needed, *room code points, PyMem_Raw*); the number of words, or SCAN_* (no Python
   object is touched: it may run without the GIL). */
static Py_ssize_t
scan_utf8(const unsigned char *p, Py_ssize_t n, int pattern, WordTable *t, uint32_t **wide, Py_ssize_t *room)
{
    Py_ssize_t words = 0, pos = 0, more;
    while (pos < n) {
        Py_ssize_t q = pos + utf8_ascii_run(p + pos, n - pos);  /* no NUL: the first byte >= 0x80 */
        Py_ssize_t start = q == n ? n : utf8_cut_before(classes, p, pos, q - 1);
        if (start > pos) {
            if ((more = scanner_of(pattern, 1)(p + pos, start - pos, t)) < 0)
                return more;
            words += more;
        }
        if (q == n)
            break;
        Py_ssize_t end = utf8_cut_after(classes, p, q, n);
        if (end - start > *room) {
            uint32_t *bigger = PyMem_RawRealloc(*wide, (size_t)(end - start) * sizeof(uint32_t));
            if (bigger == NULL)
                return SCAN_NO_MEMORY;
            *wide = bigger;
            *room = end - start;
        }
        Py_ssize_t m = utf8_widen(p + start, end - start, *wide);
        if ((more = scanners[pattern][2](*wide, m, t)) < 0)
            return more;
        words += more;
        pos = end;
    }
    return words;
}

/* Stretches of checked UTF-8 (each a segment, or part of one cut at a safe cut) scanned into a
   table of their own, on a thread of their own. */
typedef struct {
    const unsigned char **starts;
    const Py_ssize_t *sizes;
    Py_ssize_t n;
    int pattern;
    WordTable t;
    Py_ssize_t words;     /* or SCAN_* */
} Share;

static void
scan_share(Share *s)
{
    uint32_t *wide = NULL;
    Py_ssize_t room = 0;
    s->words = 0;
    for (Py_ssize_t j = 0; j < s->n && s->words >= 0; j++) {
        Py_ssize_t more = scan_utf8(s->starts[j], s->sizes[j], s->pattern, &s->t, &wide, &room);
        s->words = more < 0 ? more : s->words + more;
    }
    PyMem_RawFree(wide);
}

THREAD_MAIN(share_main, scan_share, Share)

/* The piece's n segments as n + 1 stretches (starts, sizes) with stretch `*half` the first of the
   later half: the segment holding the middle byte (about) cut at its first safe cut from there on
   (utf8_text.h: both parts scan as the whole), else the later half starting at a segment. */
static void
halves(PyObject **items, Py_ssize_t n, Py_ssize_t total, const unsigned char **starts, Py_ssize_t *sizes,
       Py_ssize_t *half)
{
    /* a little less than half here: this thread checks the whole piece first and merges after */
    Py_ssize_t before = 0, j = 0, middle = total / 2 - total / 32;
    while (j < n - 1 && before + PyBytes_GET_SIZE(items[j]) <= middle)
        before += PyBytes_GET_SIZE(items[j++]);
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(items[j]);
    Py_ssize_t size = PyBytes_GET_SIZE(items[j]), mid = middle - before;
    Py_ssize_t cut = mid >= 1 && mid < size - 1 ? utf8_cut_after(classes, p, mid, size) : size;
    for (Py_ssize_t k = 0, out = 0; k < n; k++, out++) {
        starts[out] = (const unsigned char *)PyBytes_AS_STRING(items[k]);
        sizes[out] = PyBytes_GET_SIZE(items[k]);
        if (k == j) {  /* its two parts (the second empty where there is no cut) */
            sizes[out] = cut;
            starts[++out] = p + cut;
            sizes[out] = size - cut;
        }
    }
    *half = j + 1;
    if (cut == 0 || cut == size)  /* no part of it on the other side */
        *half = cut == 0 ? j : j + 2;
}

/* A piece's segments (checked UTF-8) counted into t, as one after another: where there are
   `threads` (2) and the piece is large enough, the text after about its middle byte is scanned
   by a second thread into a table of its own, the text before here, both without the GIL,
   then that table merged into t (wt_merge: the same counts and order). Words, or SCAN_*. */
static Py_ssize_t
scan_piece(WordTable *t, WordTable *aside, PyObject *piece, int pattern, int threads, uint32_t **wide,
           Py_ssize_t *room)
{
    Py_ssize_t n = PyList_GET_SIZE(piece), total = 0, words = 0;
    if (n == 0)
        return 0;
    PyObject **items = &PyList_GET_ITEM(piece, 0);  /* a copy (copy_pieces): it stays as it is without the GIL */
    for (Py_ssize_t j = 0; j < n; j++)
        total += PyBytes_GET_SIZE(items[j]);
    if (threads < 2 || total < SPLIT_MIN_BYTES) {
        for (Py_ssize_t j = 0; j < n && words >= 0; j++) {
            Py_ssize_t more = scan_utf8((const unsigned char *)PyBytes_AS_STRING(items[j]), PyBytes_GET_SIZE(items[j]),
                                        pattern, t, wide, room);
            words = more < 0 ? more : words + more;
        }
        return words;
    }
    const unsigned char **starts = PyMem_RawMalloc((size_t)(n + 1) * sizeof(*starts));
    Py_ssize_t *sizes = PyMem_RawMalloc((size_t)(n + 1) * sizeof(*sizes)), half;
    Share share = {0};
    /* the second thread's table: kept from call to call (emptied), so that it seldom grows in that thread */
    if (starts == NULL || sizes == NULL || (aside->slots == NULL && wt_init(aside, 1024) < 0)) {
        PyMem_RawFree(starts);
        PyMem_RawFree(sizes);
        return SCAN_NO_MEMORY;
    }
    (void)scanner_of(pattern, 1);  /* its table of ASCII classes asked for once, here */
    halves(items, n, total, starts, sizes, &half);
    share.starts = starts + half;
    share.sizes = sizes + half;
    share.n = n + 1 - half;
    share.pattern = pattern;
    share.t = *aside;
    Thread helper;
    PyThreadState *saved = PyEval_SaveThread();
    int helped = thread_start(&helper, share_main, &share);
    for (Py_ssize_t j = 0; j < half && words >= 0; j++) {
        Py_ssize_t more = scan_utf8(starts[j], sizes[j], pattern, t, wide, room);
        words = more < 0 ? more : words + more;
    }
    if (helped)
        thread_join(helper);
    else
        scan_share(&share);  /* no thread to be had: here, after the first ones */
    if (words >= 0)
        words = share.words < 0 ? share.words : words + share.words;
    if (words >= 0) {
        int rc = wt_merge(t, &share.t);
        if (rc < 0)
            words = rc;
    }
    wt_clear(&share.t);
    *aside = share.t;
    PyEval_RestoreThread(saved);
    PyMem_RawFree(starts);
    PyMem_RawFree(sizes);
    return words;
}

/* Each piece (a list of bytes, copied: copy_pieces) counted into t as one piece, as
   count_pieces does (scan_piece: on `threads` threads); Py_None where a text is not strict
   UTF-8 or holds a NUL byte: then nothing is counted (the caller decodes it, as its errors
   policy says). */
static PyObject *
count_utf8_pieces(WordTable *t, WordTable *aside, PyObject *pieces, PyObject *classify, int pattern, int threads)
{
    Py_ssize_t n_pieces = PyList_GET_SIZE(pieces);
    if (classify_text(classes, "", PyUnicode_1BYTE_KIND, 0, classify) < 0)  /* the first 256 */
        return NULL;
    for (Py_ssize_t i = 0; i < n_pieces; i++) {
        PyObject *piece = PyList_GET_ITEM(pieces, i);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(piece); j++) {
            PyObject *data = PyList_GET_ITEM(piece, j);
            int ok = check_utf8((const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), classify);
            if (ok < 0)
                return NULL;
            if (ok == 0)
                Py_RETURN_NONE;
        }
    }
    PyObject *result = PyList_New(n_pieces);
    uint32_t *wide = NULL;
    Py_ssize_t room = 0;
    for (Py_ssize_t i = 0; i < n_pieces && result != NULL; i++) {
        next_piece(t);
        Py_ssize_t words = scan_piece(t, aside, PyList_GET_ITEM(pieces, i), pattern, threads, &wide, &room);
        PyObject *pair = words < 0 ? NULL : Py_BuildValue("(nn)", words, (Py_ssize_t)t->piece_distinct);
        if (words < 0)
            table_error(words);
        if (pair == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, pair);
    }
    PyMem_RawFree(wide);
    return result;
}

static PyObject *
count_many(PyObject *self, PyObject *args)
{
    PyObject *pieces, *counts, *classify;
    int pattern;
    if (!PyArg_ParseTuple(args, "O!O!Oi:count_many", &PyList_Type, &pieces, &PyDict_Type, &counts, &classify,
                          &pattern))
        return NULL;
    if (ready(classify, pattern) < 0 || (pieces = copy_pieces(pieces, 0)) == NULL)
        return NULL;
    WordTable all;
    if (wt_init(&all, 1024) < 0) {
        Py_DECREF(pieces);
        return PyErr_NoMemory();
    }
    PyObject *result = count_pieces(&all, pieces, classify, pattern);
    if (result != NULL && table_flush(&all, counts) < 0)
        Py_CLEAR(result);
    wt_free(&all);
    Py_DECREF(pieces);
    return result;
}

/* -- ordinals: each word's first occurrence, (task << 32) | its place in the worker's counts -- */

/* A worker's counts are in the order their words first came; segments [(start, task), ...]
   say from which place on the words came from which task. */
typedef struct {
    Py_ssize_t n, at;       /* segments; the one the last place asked for is in */
    Py_ssize_t *starts;
    uint64_t *tasks;
} Ordinals;

static void
ordinals_free(Ordinals *o)
{
    PyMem_Free(o->starts);
    PyMem_Free(o->tasks);
    o->starts = NULL;
    o->tasks = NULL;
    o->n = 0;
}

static int
ordinals_init(Ordinals *o, PyObject *segments)
{
    o->n = o->at = 0;
    o->starts = NULL;
    o->tasks = NULL;
    if (segments == Py_None)
        return 0;
    if (!PyList_Check(segments) || PyList_GET_SIZE(segments) == 0) {
        PyErr_SetString(PyExc_TypeError, "shard: segments must be a non-empty list of (start, task)");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(segments);
    o->starts = PyMem_Malloc((size_t)n * sizeof(Py_ssize_t));
    o->tasks = PyMem_Malloc((size_t)n * sizeof(uint64_t));
    if (o->starts == NULL || o->tasks == NULL) {
        ordinals_free(o);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyList_GET_ITEM(segments, k);
        Py_ssize_t start;
        unsigned long long task;
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "nK", &start, &task))
            goto bad;
        if (start < (k ? o->starts[k - 1] : 0) || (k == 0 && start != 0) || task >= (1ULL << 31))
            goto bad;
        o->starts[k] = start;
        o->tasks[k] = task;
    }
    o->n = n;
    return 0;
bad:
    ordinals_free(o);
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "shard: segments must be (start, task) pairs, starting at 0, in order");
    return -1;
}

/* The ordinal of the word at place i (asked for in increasing order). */
static inline uint64_t
ordinal_at(Ordinals *o, Py_ssize_t i)
{
    if (o->n == 0)
        return 0;
    while (o->at + 1 < o->n && o->starts[o->at + 1] <= i)
        o->at++;
    return o->tasks[o->at] << 32 | (uint64_t)i;
}


/* -- shards: a worker's counts cut by word, and one shard's pieces merged ------------------- */

/* One word of counts to shard: its shard, prefix and ordinal (the i-th word of its counts). */
static void
shard_item(Counted *c, Ordinals *ords, Py_ssize_t i, Py_ssize_t n_shards, Py_ssize_t *sizes)
{
    c->prefix = prefix_of(c->word, c->len);
    c->shard = (Py_ssize_t)(crc32_of((const unsigned char *)c->word, c->len) % (uint32_t)n_shards);
    c->first = ordinal_at(ords, i);
    sizes[5 * c->shard] += 1;
    sizes[5 * c->shard + 1] += c->len;
    sizes[5 * c->shard + 2] += varint_size((uint64_t)c->len);
    sizes[5 * c->shard + 3] += varint_size((uint64_t)c->count);
    sizes[5 * c->shard + 4] += ords->n ? varint_size(c->first) : 0;
}

/* The n words of items (shard_item'ed, sizes summed) sorted and packed: shard()'s list, or NULL. */
static PyObject *
pack_shards(Counted *items, Py_ssize_t n, Py_ssize_t n_shards, const Py_ssize_t *sizes, const Ordinals *ords)
{
    PyObject *result = PyList_New(n_shards);
    if (result == NULL)
        return NULL;
    qsort(items, (size_t)n, sizeof(Counted), shard_then_word);
    Counted *next = items;
    for (Py_ssize_t s = 0; s < n_shards; s++) {
        Py_ssize_t words = sizes[5 * s];
        PyObject *data = PyBytes_FromStringAndSize(NULL, sizes[5 * s + 1]);
        PyObject *lengths = PyBytes_FromStringAndSize(NULL, sizes[5 * s + 2]);
        PyObject *tallies = PyBytes_FromStringAndSize(NULL, sizes[5 * s + 3]);
        PyObject *firsts = ords->n ? PyBytes_FromStringAndSize(NULL, sizes[5 * s + 4]) : NULL;
        PyObject *packed = !(data && lengths && tallies && (firsts || !ords->n)) ? NULL
            : ords->n ? PyTuple_Pack(4, data, lengths, tallies, firsts) : PyTuple_Pack(3, data, lengths, tallies);
        Py_XDECREF(data);
        Py_XDECREF(lengths);
        Py_XDECREF(tallies);
        Py_XDECREF(firsts);
        if (packed == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyList_SET_ITEM(result, s, packed);
        char *out = PyBytes_AS_STRING(data), *lout = PyBytes_AS_STRING(lengths), *cout = PyBytes_AS_STRING(tallies);
        char *fout = ords->n ? PyBytes_AS_STRING(firsts) : NULL;
        for (Py_ssize_t w = 0; w < words; w++, next++) {
            memcpy(out, next->word, (size_t)next->len);
            out += next->len;
            lout = varint_put(lout, (uint64_t)next->len);
            cout = varint_put(cout, (uint64_t)next->count);
            if (fout != NULL)
                fout = varint_put(fout, next->first);
        }
    }
    return result;
}

static PyObject *
shard(PyObject *self, PyObject *args)
{
    PyObject *counts, *segments = Py_None;
    Py_ssize_t n_shards;
    if (!PyArg_ParseTuple(args, "O!n|O:shard", &PyDict_Type, &counts, &n_shards, &segments))
        return NULL;
    if (n_shards < 1) {
        PyErr_SetString(PyExc_ValueError, "shard: n_shards must be at least 1");
        return NULL;
    }
    /* ordinal: with segments, each word's ordinal (ordinals.h) packed as a fourth stream */
    Ordinals ords;
    if (ordinals_init(&ords, segments) < 0)
        return NULL;
    Py_ssize_t n = PyDict_GET_SIZE(counts), pos = 0, i = 0;
    Counted *items = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Counted));
    /* words, their bytes, the bytes of their lengths, of their counts */
    Py_ssize_t *sizes = PyMem_Calloc((size_t)n_shards, 5 * sizeof(Py_ssize_t));
    PyObject *result = NULL, *key, *value;
    if (items == NULL || sizes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    while (PyDict_Next(counts, &pos, &key, &value)) {
        if (!PyBytes_CheckExact(key)) {
            PyErr_SetString(PyExc_TypeError, "shard: every word must be bytes");
            goto done;
        }
        Counted *c = &items[i];
        c->word = PyBytes_AS_STRING(key);
        c->len = PyBytes_GET_SIZE(key);
        c->count = PyLong_AsLongLong(value);
        if (c->count == -1 && PyErr_Occurred())
            goto done;
        if (c->count < 0) {
            PyErr_SetString(PyExc_ValueError, "shard: every count must be at least 0");
            goto done;
        }
        shard_item(c, &ords, i++, n_shards, sizes);
    }
    result = pack_shards(items, n, n_shards, sizes, &ords);
    if (result != NULL)
        PyDict_Clear(counts);
done:
    PyMem_Free(items);
    PyMem_Free(sizes);
    ordinals_free(&ords);
    return result;
}

typedef struct {
    const char *data, *data_end;
    const unsigned char *lengths, *lengths_end, *counts, *counts_end;  /* the next word's, and where they end */
    const unsigned char *firsts, *firsts_end;  /* ordinal: NULL without */
    Counted head;
    Py_ssize_t key;  /* merge_shard's keys: the key its piece counts for */
} Cursor;

/* The next word into head (data moved past the one before); 0 at the end, -1 where the piece
   is not well formed. */
static int
cursor_load(Cursor *c)
{
    uint64_t len, count, first = 0;
    if (c->lengths == c->lengths_end)
        return c->counts == c->counts_end && c->data == c->data_end && c->firsts == c->firsts_end ? 0 : -1;
    if (varint_get(&c->lengths, c->lengths_end, &len) < 0 || varint_get(&c->counts, c->counts_end, &count) < 0
            || (c->firsts != NULL && varint_get(&c->firsts, c->firsts_end, &first) < 0)
            || len > (uint64_t)(c->data_end - c->data) || count > (uint64_t)LLONG_MAX)
        return -1;
    c->head.first = first;
    c->head.word = c->data;
    c->head.len = (Py_ssize_t)len;
    c->head.count = (long long)count;
    c->head.prefix = prefix_of(c->data, (Py_ssize_t)len);
    c->data += len;
    return 1;
}

static void
heap_down(Cursor **heap, Py_ssize_t size, Py_ssize_t i)
{
    for (;;) {
        Py_ssize_t least = i, l = 2 * i + 1, r = l + 1;
        if (l < size && word_order(&heap[l]->head, &heap[least]->head) < 0)
            least = l;
        if (r < size && word_order(&heap[r]->head, &heap[least]->head) < 0)
            least = r;
        if (least == i)
            return;
        Cursor *t = heap[i];
        heap[i] = heap[least];
        heap[least] = t;
        i = least;
    }
}

static PyObject *
merge_shard(PyObject *self, PyObject *args)
{
    PyObject *pieces, *keys = Py_None;
    if (!PyArg_ParseTuple(args, "O!|O:merge_shard", &PyList_Type, &pieces, &keys))
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(pieces), live = 0, n_keys = 0;
    if (keys != Py_None && (!PyList_Check(keys) || PyList_GET_SIZE(keys) != k)) {
        PyErr_SetString(PyExc_TypeError, "merge_shard: keys must be a list of ints, one per piece");
        return NULL;
    }
    Cursor *cursors = PyMem_Malloc((size_t)(k ? k : 1) * sizeof(Cursor));
    Cursor **heap = PyMem_Malloc((size_t)(k ? k : 1) * sizeof(Cursor *));
    /* keys: each key's distinct words, and the last word (numbered) it was found to hold */
    long long *distinct = NULL, *last = NULL, word_no = 0;
    PyObject *result = PyDict_New(), *firsts = NULL;
    if (keys != Py_None) {
        for (Py_ssize_t p = 0; p < k; p++) {
            Py_ssize_t key = PyLong_AsSsize_t(PyList_GET_ITEM(keys, p));
            if (key == -1 && PyErr_Occurred())
                goto fail;
            if (key < 0 || key >= k) {
                PyErr_SetString(PyExc_ValueError, "merge_shard: each key must be 0 to len(pieces) - 1");
                goto fail;
            }
            if (key >= n_keys)
                n_keys = key + 1;
        }
        distinct = PyMem_Calloc((size_t)(n_keys ? n_keys : 1), sizeof(long long));
        last = PyMem_Calloc((size_t)(n_keys ? n_keys : 1), sizeof(long long));
        if (distinct == NULL || last == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    /* ordinal: pieces with a fourth stream give each word's smallest ordinal too */
    Py_ssize_t width = k && PyTuple_Check(PyList_GET_ITEM(pieces, 0)) ? PyTuple_GET_SIZE(PyList_GET_ITEM(pieces, 0)) : 3;
    if (cursors == NULL || heap == NULL || result == NULL || (width == 4 && (firsts = PyDict_New()) == NULL))
        goto fail;
    for (Py_ssize_t p = 0; p < k; p++) {
        PyObject *piece = PyList_GET_ITEM(pieces, p);
        if (!PyTuple_Check(piece) || (width != 3 && width != 4) || PyTuple_GET_SIZE(piece) != width
                || !PyBytes_Check(PyTuple_GET_ITEM(piece, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(piece, 1))
                || !PyBytes_Check(PyTuple_GET_ITEM(piece, 2)) || !PyBytes_Check(PyTuple_GET_ITEM(piece, width - 1))) {
            PyErr_SetString(PyExc_TypeError, "merge_shard: each piece must be (words, lengths, counts) bytes, "
                            "every one with ordinals or none");
            goto fail;
        }
        Cursor *c = &cursors[p], start;
        PyObject *data = PyTuple_GET_ITEM(piece, 0), *lengths = PyTuple_GET_ITEM(piece, 1);
        PyObject *counts = PyTuple_GET_ITEM(piece, 2);
        c->data = PyBytes_AS_STRING(data);
        c->data_end = c->data + PyBytes_GET_SIZE(data);
        c->lengths = (const unsigned char *)PyBytes_AS_STRING(lengths);
        c->lengths_end = c->lengths + PyBytes_GET_SIZE(lengths);
        c->counts = (const unsigned char *)PyBytes_AS_STRING(counts);
        c->counts_end = c->counts + PyBytes_GET_SIZE(counts);
        c->firsts = c->firsts_end = NULL;
        if (width == 4) {
            PyObject *ordinals = PyTuple_GET_ITEM(piece, 3);
            c->firsts = (const unsigned char *)PyBytes_AS_STRING(ordinals);
            c->firsts_end = c->firsts + PyBytes_GET_SIZE(ordinals);
        }
        c->key = keys == Py_None ? 0 : PyLong_AsSsize_t(PyList_GET_ITEM(keys, p));  /* checked above */
        start = *c;
        /* The words must fill the data exactly, in strictly increasing order. */
        Counted previous = {0};
        int got, first = 1;
        while ((got = cursor_load(c)) > 0) {
            if (!first && word_order(&previous, &c->head) >= 0)
                break;
            previous = c->head;
            first = 0;
        }
        if (got != 0) {
            PyErr_SetString(PyExc_ValueError, "merge_shard: a piece is not distinct words in order");
            goto fail;
        }
        *c = start;
        if (cursor_load(c) > 0)
            heap[live++] = c;
    }
    for (Py_ssize_t i = live / 2 - 1; i >= 0; i--)
        heap_down(heap, live, i);
    while (live) {
        Counted word = heap[0]->head;
        long long sum = 0;
        uint64_t first = UINT64_MAX;
        word_no++;
        while (live && word_order(&heap[0]->head, &word) == 0) {
            Cursor *c = heap[0];
            sum += c->head.count;
            if (distinct != NULL && last[c->key] != word_no) {
                last[c->key] = word_no;
                distinct[c->key]++;
            }
            if (c->head.first < first)
                first = c->head.first;
            if (cursor_load(c) <= 0)  /* checked above: 0, the end */
                heap[0] = heap[--live];
            heap_down(heap, live, 0);
        }
        PyObject *key = PyBytes_FromStringAndSize(word.word, word.len);
        PyObject *value = key ? PyLong_FromLongLong(sum) : NULL;
        int failed = value == NULL || PyDict_SetItem(result, key, value) < 0;
        Py_XDECREF(value);
        if (!failed && firsts != NULL) {
            value = PyLong_FromUnsignedLongLong(first);
            failed = value == NULL || PyDict_SetItem(firsts, key, value) < 0;
            Py_XDECREF(value);
        }
        Py_XDECREF(key);
        if (failed)
            goto fail;
    }
    PyMem_Free(cursors);
    PyMem_Free(heap);
    PyMem_Free(last);
    if (distinct != NULL) {
        PyObject *each = PyList_New(n_keys), *three = NULL;
        for (Py_ssize_t i = 0; each != NULL && i < n_keys; i++) {
            PyObject *n = PyLong_FromLongLong(distinct[i]);
            if (n == NULL)
                Py_CLEAR(each);
            else
                PyList_SET_ITEM(each, i, n);
        }
        PyMem_Free(distinct);
        if (each != NULL)
            three = PyTuple_Pack(3, result, firsts != NULL ? firsts : Py_None, each);
        Py_XDECREF(each);
        Py_DECREF(result);
        Py_XDECREF(firsts);
        return three;
    }
    if (firsts != NULL) {
        PyObject *both = PyTuple_Pack(2, result, firsts);
        Py_DECREF(result);
        Py_DECREF(firsts);
        return both;
    }
    return result;
fail:
    PyMem_Free(cursors);
    PyMem_Free(heap);
    PyMem_Free(distinct);
    PyMem_Free(last);
    Py_XDECREF(result);
    Py_XDECREF(firsts);
    return NULL;
}

/* -- the rows of an upsert ------------------------------------------------------------------ */

/* A word's value in dict d, borrowed (NULL: none, or an error set): the entry after *at where
   it holds the very word (words taken in the dict's own order, as merge_shard makes it: no
   lookup), else looked up. */
static PyObject *
next_value(PyObject *d, Py_ssize_t *at, PyObject *word)
{
    Py_ssize_t place = *at;
    PyObject *key, *value;
    if (PyDict_Next(d, &place, &key, &value) && key == word) {
        *at = place;
        return value;
    }
    return PyDict_GetItemWithError(d, word);
}

/* ordinal + shift, a new reference: in C where both fit a long long (by: shift's value,
   LLONG_MIN where it does not fit) and the sum does, else Python's addition. */
static PyObject *
add_shift(PyObject *ordinal, PyObject *shift, long long by)
{
    int overflow = 0;
    long long value = by == LLONG_MIN || !PyLong_CheckExact(ordinal) ? 0
        : PyLong_AsLongLongAndOverflow(ordinal, &overflow);
    long long sum;
    if (by == LLONG_MIN || !PyLong_CheckExact(ordinal) || overflow || (value == -1 && PyErr_Occurred()) ||
            __builtin_add_overflow(value, by, &sum)) {
        PyErr_Clear();
        return PyNumber_Add(ordinal, shift);
    }
    return PyLong_FromLongLong(sum);
}

static PyObject *
interleave(PyObject *self, PyObject *args)
{
    PyObject *words, *counts, *firsts = Py_None, *shift = NULL;
    Py_ssize_t per, at = 0;
    if (!PyArg_ParseTuple(args, "O!O!n|OO!n:interleave", &PyList_Type, &words, &PyDict_Type, &counts, &per,
                          &firsts, &PyLong_Type, &shift, &at))
        return NULL;
    if (at < 0) {
        PyErr_SetString(PyExc_ValueError, "interleave: at must be at least 0");
        return NULL;
    }
    if (per < 1) {
        PyErr_SetString(PyExc_ValueError, "interleave: rows per tuple must be at least 1");
        return NULL;
    }
    if (firsts != Py_None && !PyDict_Check(firsts)) {
        PyErr_SetString(PyExc_TypeError, "interleave: firsts must be a dict or None");
        return NULL;
    }
    int width = firsts == Py_None ? 2 : 3;
    if (shift != NULL && PyObject_Not(shift) == 1)
        shift = NULL;  /* adding 0: the ordinals as they are */
    Py_ssize_t n = PyList_GET_SIZE(words), groups = (n + per - 1) / per;
    Py_ssize_t at_count = at, at_first = at;  /* next_value's places in counts and firsts */
    int overflow = 0;
    long long by = shift == NULL ? 0 : PyLong_AsLongLongAndOverflow(shift, &overflow);
    if (by == -1 && PyErr_Occurred())
        return NULL;
    if (overflow)
        by = LLONG_MIN;  /* add_shift's mark: the shift in Python's integers */
    PyObject *result = PyList_New(groups);
    if (result == NULL)
        return NULL;
    for (Py_ssize_t g = 0; g < groups; g++) {
        Py_ssize_t first = g * per, rows = n - first < per ? n - first : per;
        PyObject *group = PyTuple_New(width * rows);
        if (group == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyList_SET_ITEM(result, g, group);
        for (Py_ssize_t i = 0; i < rows; i++) {
            PyObject *word = PyList_GET_ITEM(words, first + i);
            PyObject *count = next_value(counts, &at_count, word);
            if (count == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetObject(PyExc_KeyError, word);
                Py_DECREF(result);
                return NULL;
            }
            /* a bytearray: sqlite3 binds it as the same blob without looking for an adapter */
            PyObject *blob = PyBytes_CheckExact(word)
                ? PyByteArray_FromStringAndSize(PyBytes_AS_STRING(word), PyBytes_GET_SIZE(word)) : NULL;
            if (blob == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "interleave: every word must be bytes");
                Py_DECREF(result);
                return NULL;
            }
            Py_INCREF(count);
            PyTuple_SET_ITEM(group, width * i, blob);
            PyTuple_SET_ITEM(group, width * i + 1, count);
            if (width == 3) {
                PyObject *ordinal = next_value(firsts, &at_first, word);
                if (ordinal == NULL) {
                    if (!PyErr_Occurred())
                        PyErr_SetObject(PyExc_KeyError, word);
                    Py_DECREF(result);
                    return NULL;
                }
                if (shift != NULL) {
                    ordinal = add_shift(ordinal, shift, by);
                    if (ordinal == NULL) {
                        Py_DECREF(result);
                        return NULL;
                    }
                } else {
                    Py_INCREF(ordinal);
                }
                PyTuple_SET_ITEM(group, width * i + 2, ordinal);
            }
        }
    }
    return result;
}

/* -- CountTable: a word table as an object, counting text after text ------------------------ */

typedef struct {
    PyObject_HEAD
    WordTable t;
    WordTable aside;  /* count_utf8's second thread's (scan_piece), until the counts are taken */
    int busy;  /* counting without the GIL (count_utf8 on threads): no other call may touch t */
} CountTable;

/* 0, or -1 with RuntimeError where the table is counting in another thread's call. */
static int
table_idle(CountTable *self)
{
    if (!self->busy)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "CountTable: in use by another thread");
    return -1;
}

static PyObject *
table_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "CountTable() takes no arguments");
        return NULL;
    }
    CountTable *self = (CountTable *)type->tp_alloc(type, 0);
    if (self != NULL && wt_init(&self->t, 1024) < 0) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void
table_dealloc(CountTable *self)
{
    wt_free(&self->t);
    wt_free(&self->aside);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
table_len(CountTable *self)
{
    return (Py_ssize_t)self->t.used;
}

/* Emptied: its memory given back (a fresh small table), or only cleared where none is to be had. */
static void
table_reset(CountTable *self)
{
    WordTable fresh;
    wt_free(&self->aside);
    if (wt_init(&fresh, 1024) == 0) {
        wt_free(&self->t);
        self->t = fresh;
    } else {
        wt_clear(&self->t);
    }
}

static PyObject *
table_count(CountTable *self, PyObject *args)
{
    if (table_idle(self) < 0)
        return NULL;
    PyObject *segments, *classify;
    int pattern;
    if (!PyArg_ParseTuple(args, "O!Oi:count", &PyList_Type, &segments, &classify, &pattern))
        return NULL;
    PyObject *pieces = PyList_New(1);
    if (pieces == NULL)
        return NULL;
    Py_INCREF(segments);
    PyList_SET_ITEM(pieces, 0, segments);
    PyObject *copy = ready(classify, pattern) < 0 ? NULL : copy_pieces(pieces, 0);
    Py_DECREF(pieces);
    if (copy == NULL)
        return NULL;
    PyObject *each = count_pieces(&self->t, copy, classify, pattern);
    Py_DECREF(copy);
    if (each == NULL)
        return NULL;
    PyObject *words = PyTuple_GET_ITEM(PyList_GET_ITEM(each, 0), 0);
    Py_INCREF(words);
    Py_DECREF(each);
    return words;
}

/* count_each (pieces of str) and count_utf8 (pieces of UTF-8 bytes): the same arguments. */
static PyObject *
table_count_pieces(CountTable *self, PyObject *args, int utf8)
{
    PyObject *pieces, *classify;
    int pattern, threads = 1;
    if (!PyArg_ParseTuple(args, utf8 ? "O!Oi|i:count_utf8" : "O!Oi:count_each", &PyList_Type, &pieces, &classify,
                          &pattern, &threads))
        return NULL;
    if (threads < 1 || threads > 2) {
        PyErr_SetString(PyExc_ValueError, "count_utf8: threads must be 1 or 2");
        return NULL;
    }
    if (table_idle(self) < 0 || ready(classify, pattern) < 0 || (pieces = copy_pieces(pieces, utf8)) == NULL)
        return NULL;
    self->busy = 1;
    PyObject *result = utf8 ? count_utf8_pieces(&self->t, &self->aside, pieces, classify, pattern, threads)
                            : count_pieces(&self->t, pieces, classify, pattern);
    self->busy = 0;
    Py_DECREF(pieces);
    return result;
}

static PyObject *
table_count_each(CountTable *self, PyObject *args)
{
    return table_count_pieces(self, args, 0);
}

static PyObject *
table_count_utf8(CountTable *self, PyObject *args)
{
    return table_count_pieces(self, args, 1);
}

static PyObject *
table_go_on(CountTable *self, PyObject *unused)
{
    if (table_idle(self) < 0)
        return NULL;
    self->t.go_on = 1;
    Py_RETURN_NONE;
}

static PyObject *
table_piece_distinct(CountTable *self, PyObject *unused)
{
    return PyLong_FromSize_t(self->t.piece_distinct);
}

static PyObject *
table_take(CountTable *self, PyObject *unused)
{
    if (table_idle(self) < 0)
        return NULL;
    PyObject *counts = PyDict_New();
    if (counts == NULL)
        return NULL;
    if (table_flush(&self->t, counts) < 0) {
        Py_DECREF(counts);
        return NULL;
    }
    table_reset(self);
    return counts;
}

static PyObject *
table_shard(CountTable *self, PyObject *args)
{
    if (table_idle(self) < 0)
        return NULL;
    PyObject *segments = Py_None;
    Py_ssize_t n_shards;
    if (!PyArg_ParseTuple(args, "n|O:shard", &n_shards, &segments))
        return NULL;
    if (n_shards < 1) {
        PyErr_SetString(PyExc_ValueError, "shard: n_shards must be at least 1");
        return NULL;
    }
    Ordinals ords;
    if (ordinals_init(&ords, segments) < 0)
        return NULL;
    const WordTable *t = &self->t;
    Py_ssize_t n = (Py_ssize_t)t->used;
    Counted *items = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Counted));
    Py_ssize_t *sizes = PyMem_Calloc((size_t)n_shards, 5 * sizeof(Py_ssize_t));
    PyObject *result = NULL;
    if (items == NULL || sizes == NULL) {
        PyErr_NoMemory();
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            Counted *c = &items[i];
            if (i + 16 < n)  /* the slots are read in the words' order, not the slots': asked for ahead */
                wt_prefetch_slot(t, t->order[i + 16]);
            const Word *w = &t->slots[t->order[i]];
            c->word = (const char *)wt_bytes(t, w);
            c->len = (Py_ssize_t)WT_LEN(w);
            c->count = (long long)w->count;
            shard_item(c, &ords, i, n_shards, sizes);
        }
        result = pack_shards(items, n, n_shards, sizes, &ords);
    }
    PyMem_Free(items);
    PyMem_Free(sizes);
    ordinals_free(&ords);
    if (result != NULL)
        table_reset(self);
    return result;
}

static PyMethodDef table_methods[] = {
    {"count", (PyCFunction)table_count, METH_VARARGS,
     "count(segments, classify, pattern) -> int\n\n"
     "Count the words of a built-in pre-tokenizer (0 gpt2, 1 cl100k, 2 o200k) in each str of the\n"
     "list segments; how many there were (classify: as for the module's count)."},
    {"count_each", (PyCFunction)table_count_each, METH_VARARGS,
     "count_each(pieces, classify, pattern) -> list[(int, int)]\n\n"
     "count() of each piece (a list of str); each piece's words and distinct words."},
    {"count_utf8", (PyCFunction)table_count_utf8, METH_VARARGS,
     "count_utf8(pieces, classify, pattern) -> list[(int, int)] | None\n\n"
     "count_each() of pieces of UTF-8 (lists of bytes), read where they lie; None, and nothing\n"
     "counted, where one is not UTF-8 as Python's strict decoder takes it or holds a NUL byte."},
    {"go_on", (PyCFunction)table_go_on, METH_NOARGS,
     "go_on() -> None\n\n"
     "The next count's first piece is the last piece still: its distinct words add up (a source\n"
     "counted in several calls)."},
    {"piece_distinct", (PyCFunction)table_piece_distinct, METH_NOARGS,
     "piece_distinct() -> int\n\n"
     "The distinct words of the last piece counted (all its calls, go_on)."},
    {"take", (PyCFunction)table_take, METH_NOARGS,
     "take() -> dict[bytes, int]\n\n"
     "The counts, UTF-8 words in the order they first occurred; the table is emptied."},
    {"shard", (PyCFunction)table_shard, METH_VARARGS,
     "shard(n_shards, segments=None) -> list[(bytes, bytes, bytes[, bytes])]\n\n"
     "The module's shard() of take(), without the dict; the table is emptied."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods table_as_sequence = {.sq_length = (lenfunc)table_len};

static PyTypeObject CountTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpestore._countcore.CountTable",
    .tp_doc = "CountTable()\n\nDistinct words (their UTF-8 owned by the table) and their counts, "
              "in the order they first occurred.",
    .tp_basicsize = sizeof(CountTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = table_new,
    .tp_dealloc = (destructor)table_dealloc,
    .tp_methods = table_methods,
    .tp_as_sequence = &table_as_sequence,
};

static PyMethodDef methods[] = {
    {"count", count, METH_VARARGS,
     "count(text, counts, classify, pattern) -> int\n\n"
     "Add the words (UTF-8 bytes) of a built-in pre-tokenizer (0 gpt2, 1 cl100k, 2 o200k) in text\n"
     "to the dict counts; return how many there were. classify(code_point) gives a category\n"
     "1..7 plus 16 times a letter of 'sdmtlver' (see bpestore.text.char_class)."},
    {"count_many", count_many, METH_VARARGS,
     "count_many(pieces, counts, classify, pattern) -> list[(int, int)]\n\n"
     "count() of each piece (a list of str: its segments) into counts; each piece's words and\n"
     "distinct words. The words of all pieces are added to the dict once, not once per piece."},
    {"shard", shard, METH_VARARGS,
     "shard(counts, n_shards, segments=None) -> list[(bytes, bytes, bytes[, bytes])]\n\n"
     "The counts (bytes words) cut into n_shards by zlib.crc32(word) % n_shards, each shard packed\n"
     "as its words end to end, their lengths and their counts (each LEB128), in word order; counts is\n"
     "emptied. segments [(start, task), ...]: the words of counts from place start on first came in\n"
     "that task; each word's ordinal (task << 32 | its place in counts) is packed fourth."},
    {"merge_shard", merge_shard, METH_VARARGS,
     "merge_shard(pieces, keys=None) -> dict[bytes, int] | (dict[bytes, int], dict[bytes, int])\n\n"
     "Packed pieces of one shard (each as shard() makes them: distinct words in order) merged:\n"
     "each word once with its counts summed, in word order; pieces with ordinals: and each word's\n"
     "smallest ordinal. keys (a list of ints 0 to len(pieces) - 1, one per piece, the key each\n"
     "piece counts for): (counts, ordinals or None, [the distinct words of each key 0, 1, ...])."},
    {"interleave", interleave, METH_VARARGS,
     "interleave(words, counts, per, firsts=None, shift=0, at=0) -> list[tuple]\n\n"
     "The parameters of multi-row statements: tuples (w0, counts[w0], w1, counts[w1], ...) of\n"
     "per words each, the last one shorter where per does not divide len(words); with the dict\n"
     "firsts, each word's firsts[w] + shift after its count. Each word (bytes) comes as a bytearray:\n"
     "sqlite3 binds that as the same blob without looking for an adapter. Words in the dicts'\n"
     "own order from their entry at on (a dict never deleted from) are taken without a lookup."},
    {"read_files", read_files, METH_VARARGS,
     "read_files(names, stamps) -> (list[bytes], int | None)\n\n"
     "Small files read whole in turn (cores/read_files.h), each checked unchanged against its stamp\n"
     "(size, mtime_ns, inode) or None; up to the first that fails: its errno, or 0 where it changed."},
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
    if (PyType_Ready(&CountTableType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&CountTableType);
    if (PyModule_AddObject(m, "CountTable", (PyObject *)&CountTableType) < 0) {
        Py_DECREF(&CountTableType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
