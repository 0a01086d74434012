/* The compiled encode core: pre-tokenize and segment text into token ids.

   An Encoder is built once per version from its tokens' bytes (by id) and its merges
   (left id, right id, made id, in rank order) and then encodes any number of texts, on
   any number of threads at once (it is never changed after it is built; each call
   keeps its own scratch space and cache, and the work runs with the GIL released).

   A text is cut into words by one of the built-in patterns (_pretok.h; the
   character classes come from the classify function, bpestore.text.char_class), or
   the caller cuts it and hands the words over (encode_words). Each word becomes
   ids:
     - a word that is a token (on byte-level versions where that token encodes to
       itself) is that token: one look-up in a hash table of the tokens' bytes;
     - else a word met before is found in the scratch space's bounded caches (words of
       up to 8 bytes and 2 ids in 16-byte slots, longer ones in 64-byte slots);
     - else its initial symbols (its UTF-8 bytes as ids, or its characters with the
       unknown token or byte fallback, with the word markers) are merged:
       MODE_MERGE joins the adjacent pair of lowest merge rank (leftmost first), as
       bpestore.bpe.merge_word does; MODE_RANKS joins the adjacent pair whose
       concatenated bytes have the lowest rank (token id), tiktoken's rule: two bytes
       are looked up in a table of every pair of bytes, a span of 3 or 4 in a table of
       the short tokens that holds their bytes (one read); a longer span's bytes are
       hashed, a bit filter of the tokens' hashes (L2-sized) turns most spans that are
       no token away, the table of tokens tells the rest.
       A word of up to SHORT_SYMBOLS symbols is merged with arrays in place (a bit per
       symbol standing), up to MID_SYMBOLS
       with blocks of 8 pairs' minima; a longer one with a heap and a linked list,
       O(n log n). The look-ups a merge makes are hashed first and their memory
       fetched at once, so that their cache misses overlap. Under token ranks a word
       of more than BACKTRACK_BYTES bytes is not merged but found token by token,
       backtracking (the same ids; backtrack_tables in cores/backtrack_build.h says when).
   The pure-Python encoder (bpestore.encoder) stays the reference; tests compare the
   two, and tiktoken, id for id.
   This file is the binding (arguments, tables built from Python objects, ints and lists,
   threads); the algorithms over the tables are plain C in cores/ (encode_tables.h,
   encode_work.h, merge_word.h, backtrack.h, encode_word.h, backtrack_build.h, rank_file.h,
   scan_text.h, tables_check.h, seam.h, id_codes.h), included here
   as one unit. Tables are allocated with the C library (malloc), never Python's allocators. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_pretok.h"
#include "cores/hash.h"
#include "cores/threads.h"
#include "cores/backtrack_build.h"
#include "cores/rank_file.h"
#include "cores/scan_text.h"
#include "cores/tables_check.h"
#include "cores/seam.h"
#include "cores/id_codes.h"

/* The Python type: a version's tables, and what only the binding uses. */
typedef struct {
    PyObject_HEAD
    Tables t;
    PyObject *classify;
    PyObject **id_objects;  /* each id's int (below t.n_ids), made when the id first comes out */
    struct Work **pool;     /* the scratch spaces (and caches) of finished calls, each reused by a later
                               one: taken and given back with the GIL held, so threads need no lock */
    size_t n_pool, pool_cap;
} Encoder;

#define KEEP_IDS (1u << 18)       /* room a scratch space keeps between calls: ids, */
#define KEEP_UTF8 (1u << 20)      /* UTF-8 bytes, */
#define KEEP_SYMBOLS (1u << 16)   /* and symbols of a word */

/* A scratch space for one call (GIL held): one a finished call gave back, else a new
   one; NULL with MemoryError. */
static Work *
work_take(Encoder *e)
{
    if (e->n_pool)
        return e->pool[--e->n_pool];
    Work *w = calloc(1, sizeof(Work));
    if (w == NULL)
        PyErr_NoMemory();
    return w;
}

/* A call's scratch space given back (GIL held): kept for the next call, its caches
   with it, less what a long text or word grew it to. */
static void
work_give(Encoder *e, Work *w)
{
    w->n_out = 0;
    w->fail = 0;
    if (w->out_cap > KEEP_IDS) {
        free(w->out);
        w->out = NULL;
        w->out_cap = 0;
    }
    if (w->utf8_cap > KEEP_UTF8) {
        free(w->utf8);
        w->utf8 = NULL;
        w->utf8_cap = 0;
    }
    if (w->narrow_cap > KEEP_UTF8) {
        free(w->narrow);
        w->narrow = NULL;
        w->narrow_cap = 0;
    }
    if (w->wide_cap > KEEP_UTF8 / 8) {
        free(w->wide);
        w->wide = NULL;
        w->wide_cap = 0;
    }
    if (w->symbols_cap > KEEP_SYMBOLS || w->heap_cap > KEEP_SYMBOLS) {
        free(w->symbols);
        free(w->positions);
        free(w->next);
        free(w->prev);
        free(w->heap);
        w->symbols = w->positions = w->next = w->prev = NULL;
        w->heap = NULL;
        w->symbols_cap = w->heap_cap = 0;
    }
    if (e->n_pool == e->pool_cap) {
        size_t cap = e->pool_cap ? 2 * e->pool_cap : 4;
        Work **bigger = realloc(e->pool, cap * sizeof(Work *));
        if (bigger == NULL) {
            work_free(w);
            free(w);
            return;
        }
        e->pool = bigger;
        e->pool_cap = cap;
    }
    e->pool[e->n_pool++] = w;
}

/* -- building ------------------------------------------------------------------------------- */


/* Every table of t freed. */
static void
tables_free(Tables *e)
{
    bt_free(e);  /* the table of pairs too, in either mode */
    free(e->tokens);
    free(e->token_bytes);
    free(e->token_offsets);
    free(e->token_bits);
    free(e->char_table);
    if (e->own_classes)
        free(e->classes);
    free(e->byte_pairs);
    free(e->short_tokens);
}

static void
Encoder_dealloc(Encoder *e)
{
    tables_free(&e->t);
    if (e->id_objects != NULL)
        for (size_t i = 0; i < e->t.n_ids; i++)
            Py_XDECREF(e->id_objects[i]);
    PyMem_Free(e->id_objects);
    for (size_t i = 0; i < e->n_pool; i++) {
        work_free(e->pool[i]);
        free(e->pool[i]);
    }
    free(e->pool);
    Py_XDECREF(e->classify);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* A sequence of ints as uint32 (a new malloc array), or NULL with an exception. */
static uint32_t *
uint32s(PyObject *seq, Py_ssize_t *n, const char *what)
{
    Py_buffer view;  /* an array of uint32 (a stored version's columns) is copied as it is */
    if (PyObject_CheckBuffer(seq) && PyObject_GetBuffer(seq, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) == 0) {
        uint32_t *out = NULL;
        if (view.itemsize == 4 && view.format != NULL && strcmp(view.format, "I") == 0) {
            *n = view.len / 4;
            out = malloc((size_t)(*n ? *n : 1) * sizeof(uint32_t));
            if (out == NULL)
                PyErr_NoMemory();
            else
                memcpy(out, view.buf, (size_t)*n * sizeof(uint32_t));
            for (Py_ssize_t i = 0; out != NULL && i < *n; i++)
                if (out[i] == NO_ID) {
                    PyErr_Format(PyExc_ValueError, "%s: id %lu is too large", what, (unsigned long)out[i]);
                    free(out);
                    out = NULL;
                }
            PyBuffer_Release(&view);
            return out;
        }
        PyBuffer_Release(&view);
    }
    PyErr_Clear();
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(fast);
    uint32_t *out = malloc((size_t)(*n ? *n : 1) * sizeof(uint32_t));
    if (out == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < *n; i++) {
        unsigned long v = PyLong_AsUnsignedLong(items[i]);
        if ((v == (unsigned long)-1 && PyErr_Occurred()) || v >= NO_ID) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s: id %lu is too large", what, v);
            free(out);
            Py_DECREF(fast);
            return NULL;
        }
        out[i] = (uint32_t)v;
    }
    Py_DECREF(fast);
    return out;
}

static int
build_pairs(Tables *e, PyObject *merges)
{
    PyObject *lefts_o, *rights_o, *made_o;
    if (!PyArg_ParseTuple(merges, "OOO:merges", &lefts_o, &rights_o, &made_o))
        return -1;
    Py_ssize_t nl, nr, nm;
    uint32_t *lefts = uint32s(lefts_o, &nl, "merges: left ids"), *rights = NULL, *made = NULL;
    if (lefts)
        rights = uint32s(rights_o, &nr, "merges: right ids");
    if (rights)
        made = uint32s(made_o, &nm, "merges: made ids");
    int rc = -1;
    if (made == NULL)
        goto done;
    if (nl != nr || nl != nm) {
        PyErr_SetString(PyExc_ValueError, "merges: the left, right and made ids differ in number");
        goto done;
    }
    size_t capacity = capacity_for((size_t)nl);
    e->pairs = malloc(capacity * sizeof(PairSlot));
    if (e->pairs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    e->table_bytes += capacity * sizeof(PairSlot);
    for (size_t i = 0; i < capacity; i++)
        e->pairs[i].key = NO_PAIR;
    e->pair_mask = capacity - 1;
    for (Py_ssize_t r = 0; r < nl; r++) {
        uint64_t key = ((uint64_t)lefts[r] << 32) | rights[r];
        size_t j = (size_t)mix64(key) & e->pair_mask;
        while (e->pairs[j].key != NO_PAIR && e->pairs[j].key != key)
            j = (j + 1) & e->pair_mask;
        if (e->pairs[j].key == key)
            continue;  /* a pair merged twice: its lowest rank */
        e->pairs[j].key = key;
        e->pairs[j].rank = (uint32_t)r;
        e->pairs[j].made = made[r];
    }
    rc = 0;
done:
    free(lefts);
    free(rights);
    free(made);
    return rc;
}

/* The table of the tokens' bytes: those with an id in `ids` (a sequence), or every
   token where ids is None; the first id wins where bytes repeat (unique: ValueError). */
static int
build_tokens(Tables *e, PyObject *tokens, PyObject *ids, int unique)
{
    PyObject *fast = PySequence_Fast(tokens, "tokens must be a sequence of bytes (or None) by id");
    if (fast == NULL)
        return -1;
    Py_ssize_t n_tokens = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    uint32_t *wanted = NULL;
    Py_ssize_t n = n_tokens;
    if (ids != Py_None && (wanted = uint32s(ids, &n, "token ids")) == NULL) {
        Py_DECREF(fast);
        return -1;
    }
    size_t total = 0;
    int rc = -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t id = wanted ? (Py_ssize_t)wanted[k] : k;
        if (id >= n_tokens) {
            PyErr_Format(PyExc_ValueError, "token id %zd is not in tokens", id);
            goto done;
        }
        PyObject *t = items[id];
        if (t == Py_None)
            continue;
        if (!PyBytes_Check(t)) {
            PyErr_Format(PyExc_TypeError, "tokens must be bytes or None, not %.100s", Py_TYPE(t)->tp_name);
            goto done;
        }
        total += (size_t)PyBytes_GET_SIZE(t);
    }
    if (total >= ((size_t)1 << 31)) {  /* every length fits TokenSlot.len */
        PyErr_SetString(PyExc_ValueError, "the tokens' bytes exceed 2 GB");
        goto done;
    }
    size_t capacity = capacity_for((size_t)n);
    e->tokens = calloc(capacity, sizeof(TokenSlot));
    e->token_bytes = malloc(total ? total : 1);
    e->token_offsets = calloc(n_tokens ? (size_t)n_tokens : 1, sizeof(uint32_t));
    if (e->tokens == NULL || e->token_bytes == NULL || e->token_offsets == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    e->table_bytes += capacity * sizeof(TokenSlot) + total + (size_t)n_tokens * sizeof(uint32_t);
    e->token_mask = capacity - 1;
    size_t n_bits = 64 * capacity_for(capacity / 16);  /* 16 or more bits a token */
    e->token_shift = 64 - __builtin_ctzll(n_bits);
    if ((e->token_bits = calloc(n_bits / 64, sizeof(uint64_t))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    e->table_bytes += n_bits / 8;
    size_t offset = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t id = wanted ? (Py_ssize_t)wanted[k] : k;
        PyObject *t = items[id];
        if (t == Py_None || PyBytes_GET_SIZE(t) == 0)
            continue;
        const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(t);
        size_t len = (size_t)PyBytes_GET_SIZE(t);
        uint64_t h = hash_bytes(p, len);
        if (token_find(e, p, len, h) != NULL) {
            if (!unique)
                continue;
            PyErr_SetString(PyExc_ValueError, "two tokens have the same bytes");
            goto done;
        }
        size_t j = (size_t)h & e->token_mask;
        while (e->tokens[j].len)
            j = (j + 1) & e->token_mask;
        memcpy(e->token_bytes + offset, p, len);
        e->tokens[j] = (TokenSlot){token_key(p, len, h, offset), (uint32_t)len, 1, (uint32_t)id};
        e->token_offsets[id] = (uint32_t)offset;
        e->token_bits[(h >> e->token_shift) >> 6] |= 1ULL << ((h >> e->token_shift) & 63);  /* token_may_be */
        offset += len;
        if (len > e->max_token_len)
            e->max_token_len = len;
    }
    rc = 0;
done:
    free(wanted);
    Py_DECREF(fast);
    return rc;
}

static int
build_chars(Tables *e, PyObject *chars)
{
    if (!PyDict_Check(chars)) {
        PyErr_SetString(PyExc_TypeError, "chars must be a dict (character -> id)");
        return -1;
    }
    size_t capacity = capacity_for((size_t)PyDict_GET_SIZE(chars));
    e->char_table = malloc(capacity * sizeof(CharSlot));
    if (e->char_table == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    e->table_bytes += capacity * sizeof(CharSlot);
    for (size_t i = 0; i < capacity; i++)
        e->char_table[i].code_point = NO_ID;
    e->char_mask = capacity - 1;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(chars, &pos, &key, &value)) {
        if (!PyUnicode_Check(key) || PyUnicode_GET_LENGTH(key) != 1) {
            PyErr_SetString(PyExc_ValueError, "chars: every key must be one character");
            return -1;
        }
        unsigned long id = PyLong_AsUnsignedLong(value);
        if (id == (unsigned long)-1 && PyErr_Occurred())
            return -1;
        uint32_t c = PyUnicode_READ_CHAR(key, 0);
        size_t j = (size_t)mix64(c) & e->char_mask;
        while (e->char_table[j].code_point != NO_ID)
            j = (j + 1) & e->char_mask;
        e->char_table[j] = (CharSlot){c, (uint32_t)id};
    }
    return 0;
}

/* Plain byte symbols without byte_ids: each byte's id is the lowest id of its one-byte token. */
static int
byte_ids_of_tokens(Tables *e, PyObject *tokens)
{
    PyObject *fast = PySequence_Fast(tokens, "tokens must be a sequence of bytes (or None) by id");
    if (fast == NULL)
        return -1;
    PyObject **items = PySequence_Fast_ITEMS(fast);
    int found = 0;
    for (Py_ssize_t id = 0; id < PySequence_Fast_GET_SIZE(fast); id++)
        if (PyBytes_Check(items[id]) && PyBytes_GET_SIZE(items[id]) == 1) {
            uint8_t b = (uint8_t)PyBytes_AS_STRING(items[id])[0];
            if (e->byte_ids[b] == NO_ID) {
                e->byte_ids[b] = (uint32_t)id;
                found++;
            }
        }
    Py_DECREF(fast);
    if (found < 256) {
        PyErr_Format(PyExc_ValueError, "byte_ids: %d of the 256 bytes have no token", 256 - found);
        return -1;
    }
    e->has_bytes = 1;
    return 0;
}

/* 1 where two of the tokens (bytes, or None: skipped) have the same bytes, 0 where
   none do; -1 with an exception. */
static int
tokens_repeat(PyObject *tokens)
{
    PyObject *fast = PySequence_Fast(tokens, "tokens must be a sequence of bytes (or None) by id");
    if (fast == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    size_t capacity = capacity_for((size_t)n), mask = capacity - 1;
    Py_ssize_t *slots = malloc(capacity * sizeof(Py_ssize_t));
    if (slots == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    memset(slots, 0xFF, capacity * sizeof(Py_ssize_t));
    int found = 0;
    for (Py_ssize_t k = 0; k < n && !found; k++) {
        if (!PyBytes_Check(items[k]))
            continue;
        const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(items[k]);
        size_t len = (size_t)PyBytes_GET_SIZE(items[k]), j = (size_t)hash_bytes(p, len) & mask;
        for (; slots[j] >= 0 && !found; j = (j + 1) & mask) {
            PyObject *o = items[slots[j]];
            found = (size_t)PyBytes_GET_SIZE(o) == len && memcmp(PyBytes_AS_STRING(o), p, len) == 0;
        }
        slots[j] = k;
    }
    free(slots);
    Py_DECREF(fast);
    return found;
}

static uint32_t
optional_id(long v)
{
    return v < 0 ? NO_ID : (uint32_t)v;
}

/* The class tables of the classify functions given (bpestore.text.char_class, the same
   for every version, and a few others), each shared by every encoder of the process given
   that function: a fresh encoder asks no class again. Each is kept, with its function,
   for the process's life; a function beyond the first few gets a table of each encoder's
   own. Filled only with the GIL held, in ascending order over Latin-1, so that
   classes[0xFF] set still means all 256 are known. */
#define N_SHARED_CLASSES 8
static struct {
    PyObject *classify;
    uint8_t *classes;
} shared_classes[N_SHARED_CLASSES];

/* The class table for classify: a shared one, or (*own set) a new one of its own; NULL
   with an exception. */
static uint8_t *
classes_for(PyObject *classify, int *own)
{
    int k = 0;
    while (k < N_SHARED_CLASSES && shared_classes[k].classify != NULL && shared_classes[k].classify != classify)
        k++;
    *own = k == N_SHARED_CLASSES;
    if (!*own && shared_classes[k].classify == classify)
        return shared_classes[k].classes;
    uint8_t *classes = calloc(N_CODE_POINTS, 1);
    if (classes == NULL)
        return (uint8_t *)PyErr_NoMemory();
    if (!*own) {
        Py_INCREF(classify);
        shared_classes[k].classify = classify;
        shared_classes[k].classes = classes;
    }
    return classes;
}

/* The options Encoder_new takes, checked before anything is built; -1 with an exception. */
static int
check_options(int mode, int pattern, PyObject *classify, PyObject *chars, long prefix, long suffix)
{
    if (mode != MODE_MERGE && mode != MODE_RANKS) {
        PyErr_Format(PyExc_ValueError, "mode must be 0 (merge ranks) or 1 (token ranks), not %d", mode);
        return -1;
    }
    if (pattern < PATTERN_NONE || pattern > PATTERN_WHITESPACE) {
        PyErr_Format(PyExc_ValueError, "pattern must be -1 (none), 0 (gpt2), 1 (cl100k), 2 (o200k) or "
                     "3 (whitespace), not %d", pattern);
        return -1;
    }
    if (pattern != PATTERN_NONE && !PyCallable_Check(classify)) {
        PyErr_SetString(PyExc_TypeError, "a pattern needs a classify function");
        return -1;
    }
    if (mode == MODE_RANKS && (chars != Py_None || prefix >= 0 || suffix >= 0)) {
        PyErr_SetString(PyExc_ValueError, "token ranks apply to byte symbols without word markers");
        return -1;
    }
    return 0;
}

/* e->byte_ids: the 256 given, or each byte's token's id on plain byte symbols; 0, or -1
   with an exception. */
static int
set_byte_ids(Tables *e, PyObject *byte_ids, PyObject *tokens)
{
    for (int b = 0; b < 256; b++)
        e->byte_ids[b] = NO_ID;
    if (byte_ids != Py_None) {
        Py_ssize_t n;
        uint32_t *ids = uint32s(byte_ids, &n, "byte_ids");
        if (ids == NULL)
            return -1;
        if (n != 256) {
            free(ids);
            PyErr_SetString(PyExc_ValueError, "byte_ids must hold 256 ids");
            return -1;
        }
        memcpy(e->byte_ids, ids, sizeof e->byte_ids);
        free(ids);
        e->has_bytes = 1;
        return 0;
    }
    if (plain_bytes(e))
        return byte_ids_of_tokens(e, tokens);
    if (!e->chars || e->fallback) {
        PyErr_SetString(PyExc_ValueError, "byte symbols (or byte fallback) need byte_ids");
        return -1;
    }
    return 0;
}

/* The merge rule's pairs, and on plain byte symbols the pair of every two bytes; 0, or
   -1 with an exception. */
static int
build_merge_tables(Tables *e, PyObject *merges)
{
    if (build_pairs(e, merges) < 0)
        return -1;
    if (e->pairs == NULL) {
        PyErr_SetString(PyExc_ValueError, "the merge rule needs merges");
        return -1;
    }
    if (!plain_bytes(e))
        return 0;
    e->byte_pairs = malloc(65536 * sizeof(uint64_t));
    if (e->byte_pairs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    e->table_bytes += 65536 * sizeof(uint64_t);
    for (size_t ab = 0; ab < 65536; ab++)
        e->byte_pairs[ab] = pair_find(e, e->byte_ids[ab >> 8], e->byte_ids[ab & 255]);
    return 0;
}

/* Every table of e past its options: 0, or -1 with an exception. */
static int
build_tables(Tables *e, PyObject *tokens, PyObject *merges, PyObject *byte_ids, PyObject *chars, int whole,
             int unique)
{
    if (set_byte_ids(e, byte_ids, tokens) < 0)
        return -1;
    if (e->mode == MODE_RANKS && merges != Py_None) {
        PyErr_SetString(PyExc_ValueError, "token ranks take no merges");
        return -1;
    }
    if (e->mode == MODE_MERGE && build_merge_tables(e, merges) < 0)
        return -1;
    /* Whole-word look-ups: on plain byte symbols only (a word with markers or of
       characters is not a token's bytes); under the merge rule only the tokens merges
       make (and the bytes) can come out. */
    if (e->mode == MODE_RANKS || plain_bytes(e)) {
        if (build_tokens(e, tokens, e->mode == MODE_MERGE ? PyTuple_GET_ITEM(merges, 2) : Py_None,
                         unique && e->mode == MODE_RANKS) < 0)
            return -1;
        e->whole_lookup = 1;
        if ((e->mode == MODE_MERGE && !whole && check_whole(e) < 0) ||
                (e->mode == MODE_RANKS && build_short_tokens(e) < 0)) {
            PyErr_NoMemory();
            return -1;
        }
    }
    if (e->chars && build_chars(e, chars) < 0)
        return -1;
    return 0;
}

static PyObject *
Encoder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"tokens", "merges", "byte_ids", "mode", "pattern", "classify", "chars", "unk",
                            "fallback", "prefix", "suffix", "whole", "unique", "backtrack_after", NULL};
    PyObject *tokens, *merges, *byte_ids, *classify = Py_None, *chars = Py_None;
    int mode = MODE_MERGE, pattern = PATTERN_NONE, fallback = 0, whole = 0, unique = 0;
    long unk = -1, prefix = -1, suffix = -1;
    Py_ssize_t backtrack_after = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|$iiOOlpllipn:Encoder", names, &tokens, &merges, &byte_ids,
                                     &mode, &pattern, &classify, &chars, &unk, &fallback, &prefix, &suffix,
                                     &whole, &unique, &backtrack_after))
        return NULL;
    int repeat = unique && mode != MODE_RANKS ? tokens_repeat(tokens) : 0;  /* token ranks: build_tokens sees */
    if (repeat != 0)
        return repeat < 0 ? NULL : PyErr_Format(PyExc_ValueError, "two tokens have the same bytes");
    if (check_options(mode, pattern, classify, chars, prefix, suffix) < 0)
        return NULL;
    Py_ssize_t n_tokens = PySequence_Size(tokens);
    if (n_tokens < 0)
        return NULL;
    Encoder *self = (Encoder *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Tables *e = &self->t;
    e->mode = mode;
    e->bt_state = mode == MODE_RANKS ? BT_UNBUILT : BT_NEVER;
    e->bt_after = backtrack_after >= 0 ? (size_t)backtrack_after : (size_t)n_tokens / BT_AFTER_PER_IDS;
    e->pattern = pattern;
    e->n_ids = (size_t)n_tokens;
    e->chars = chars != Py_None;
    e->fallback = fallback;
    e->unk = optional_id(unk);
    e->prefix = optional_id(prefix);
    e->suffix = optional_id(suffix);
    Py_INCREF(classify);
    self->classify = classify;
    if (build_tables(e, tokens, merges, byte_ids, chars, whole, unique) < 0
        || (pattern != PATTERN_NONE && (e->classes = classes_for(classify, &e->own_classes)) == NULL)) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* -- encoding -------------------------------------------------------------------------------- */

/* The table of each id's int (below n_ids), each made when an id first comes out and
   kept by the encoder (a list of a million ids makes no new object; a short text makes
   only its own); 0, or -1 with an exception. */
static int
make_id_objects(Encoder *e)
{
    if (e->id_objects != NULL || e->t.n_ids == 0)
        return 0;
    if ((e->id_objects = PyMem_Calloc(e->t.n_ids, sizeof(PyObject *))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    e->t.table_bytes += e->t.n_ids * sizeof(PyObject *);
    return 0;
}

/* Without the GIL: the ids w->out[start..end) counted (w->counts, the ids counted in
   w->touched); w->missing where one is not below n_ids. */
static void
count_ids(const Encoder *e, Work *w, size_t start, size_t end)
{
    uint32_t *counts = w->counts, *touched = w->touched;
    size_t n_ids = e->t.n_ids, n_touched = w->n_touched;
    for (size_t i = start; i < end; i++) {
        uint32_t id = w->out[i];
        if (id >= n_ids)
            w->missing = 1;
        else if (counts[id]++ == 0)
            touched[n_touched++] = id;
    }
    w->n_touched = n_touched;
}

/* Without the GIL: the ids count_ids counted whose ints were not made yet moved to the
   front of w->touched (w->n_fresh of them). Ints are only ever added to the table (with
   the GIL), so an id read as having one has it. */
static void
find_fresh(const Encoder *e, Work *w)
{
    size_t fresh = 0;
    for (size_t t = 0; t < w->n_touched; t++) {
        uint32_t id = w->touched[t];
        if (e->id_objects[id] == NULL) {
            w->touched[t] = w->touched[fresh];
            w->touched[fresh++] = id;
        }
    }
    w->n_fresh = fresh;
}

/* With the GIL: the ints of find_fresh's ids that have none yet made. 0, or -1 with an
   exception. */
static int
make_ints(Encoder *e, const Work *w)
{
    for (size_t t = 0; t < w->n_fresh; t++) {
        uint32_t id = w->touched[t];
        if (e->id_objects[id] == NULL) {
            if ((e->id_objects[id] = PyLong_FromUnsignedLong(id)) == NULL)
                return -1;
            e->t.table_bytes += 32;
        }
    }
    return 0;
}

/* With the GIL (add): each of ids[0..n) given as many references as its count, for
   the list items the workers then fill without the GIL (an int per id, not per item:
   the increments of one object run back to back); the counts cleared either way. */
static void
add_references(Encoder *e, uint32_t *counts, const uint32_t *ids, size_t n, int add)
{
    for (size_t t = 0; t < n; t++) {
        uint32_t id = ids[t];
        if (add) {
            PyObject *o = e->id_objects[id];
            for (uint32_t k = counts[id]; k != 0; k--)
                Py_INCREF(o);
        }
        counts[id] = 0;
    }
}

/* With the GIL (add): a work's counts (merged ones included) added to the references
   of their ints; every count cleared either way. */
static void
count_references(Encoder *e, Work *w, int add)
{
    add_references(e, w->counts, w->touched, w->n_touched, add);
    add_references(e, w->counts, w->added, w->n_added, add);
    w->n_touched = w->n_added = w->n_fresh = 0;
}

/* -- a call's texts, on its workers ------------------------------------------------------ */

static int encode_text(const Encoder *e, Work *w, PyObject *text);

#define MAX_WORKERS 64
#define WORKER_CHARS 16384   /* a worker thread for each this many characters, at most */


/* The texts of a call and where their ids are: text k's in work[owner[k]]->out, from
   spans[2k] to spans[2k + 1] (SIZE_MAX: None). Workers take the next text not yet
   taken (next), so that uneven texts keep every worker busy to the end; each counts its
   own texts' ids where lists will be made (counted). The same threads then wait (go)
   while the calling one makes the lists with the GIL, and fill their own texts' lists:
   a call starts its threads once. */
typedef struct Batch Batch;

typedef struct {
    Batch *b;
    int id;
} Worker;

struct Batch {
    Encoder *e;
    PyObject *const *texts;
    Py_ssize_t n;
    Py_ssize_t *order;     /* the order texts are taken in (NULL: as given) */
    size_t *spans;
    uint8_t *owner;
    PyObject **lists;
    Py_ssize_t chars;
    int counted;
    int n_work;
    int64_t next;
    Work *work[MAX_WORKERS];
    size_t n_added[MAX_WORKERS];  /* merge_counts: each share's ids new to work 0 */
    Thread threads[MAX_WORKERS];
    int started[MAX_WORKERS];     /* threads[k] runs worker k (else the calling thread runs it) */
    int n_threads;                /* n_work while the threads run (0: none started, or joined) */
    Lock lock;
    Cond cond;
    int encoded;                  /* workers done encoding */
    int go;                       /* 0: wait; 1: fill the lists; -1: stop */
    Worker workers[MAX_WORKERS];
};

/* A worker's texts encoded (and counted), without the GIL. A text with a character whose
   class is not known yet is left to the GIL (spans[2k] = SIZE_MAX); one that gives None
   keeps no ids. Stops at the first failed allocation (w->fail). */
static void
encode_some(Batch *b, int id)
{
    Encoder *e = b->e;
    Work *w = b->work[id];
    size_t *spans = b->spans;
    for (;;) {
        int64_t k = TAKE(&b->next);
        if (k >= b->n)
            break;
        if (b->order != NULL)
            k = b->order[k];
        PyObject *text = b->texts[k];
        int state = text_state(&e->t, PyUnicode_DATA(text), PyUnicode_KIND(text), PyUnicode_GET_LENGTH(text));
        size_t start = w->n_out;
        b->owner[k] = (uint8_t)id;
        spans[2 * k] = start;
        spans[2 * k + 1] = SIZE_MAX;
        if (state == TEXT_UNCLASSIFIED)
            spans[2 * k] = SIZE_MAX;
        else if (state == TEXT_READY && encode_text(e, w, text) == 0) {
            spans[2 * k + 1] = w->n_out;
            if (b->counted)
                count_ids(e, w, start, w->n_out);
        } else if (w->fail == FAIL_UNKNOWN_CHAR) {
            w->fail = 0;
            w->n_out = start;
        } else if (w->fail)
            break;
    }
    if (b->counted)
        find_fresh(e, w);
}

/* Without the GIL: the items of a worker's new lists (untracked, seen by no other
   thread), their references already counted (count_references). An id without an int
   (never, where the caller's ids are the tokens') leaves a NULL. */
static void
fill_some(Batch *b, int id)
{
    PyObject **objects = b->e->id_objects;
    size_t n_ids = b->e->t.n_ids;
    for (Py_ssize_t k = 0; k < b->n; k++) {
        if (b->lists[k] == Py_None || b->owner[k] != id)
            continue;
        PyObject **items = ((PyListObject *)b->lists[k])->ob_item;
        const uint32_t *ids = b->work[id]->out + b->spans[2 * k];
        size_t len = b->spans[2 * k + 1] - b->spans[2 * k];
        for (size_t i = 0; i < len; i++)
            items[i] = ids[i] < n_ids ? objects[ids[i]] : NULL;
    }
}

/* Without the GIL: the counts of the other works (1..) added to work 0's, for the ids of
   one share of the id range (each worker its own: none writes where another does); the
   ids work 0 had not counted listed in its added[] from the share's start. */
static void
merge_counts(Batch *b, int id)
{
    size_t n_ids = b->e->t.n_ids, lo = n_ids * id / b->n_work, hi = n_ids * (id + 1) / b->n_work;
    uint32_t *sum = b->work[0]->counts, *added = b->work[0]->added + lo;
    size_t n_added = 0;
    for (int u = 1; u < b->n_work; u++) {
        Work *w = b->work[u];
        for (size_t t = 0; t < w->n_touched; t++) {
            uint32_t k = w->touched[t];
            if (k < lo || k >= hi)
                continue;
            if (sum[k] == 0)
                added[n_added++] = k;
            sum[k] += w->counts[k];
            w->counts[k] = 0;
        }
    }
    b->n_added[id] = n_added;
}

/* Without the GIL: a worker's share of the filling: its share of the counts merged
   into work 0's, its texts' lists filled. */
static void
fill_share(Batch *b, int id)
{
    if (b->n_work > 1)
        merge_counts(b, id);
    fill_some(b, id);
}

/* A started worker: its texts encoded; where lists are made, it waits for them and fills
   its share. */
static void
run_worker(Worker *worker)
{
    Batch *b = worker->b;
    encode_some(b, worker->id);
    LOCK(&b->lock);
    if (++b->encoded == b->n_threads)
        WAKE_ALL(&b->cond);
    while (b->counted && b->go == 0)
        WAIT(&b->cond, &b->lock);
    int go = b->go;
    UNLOCK(&b->lock);
    if (b->counted && go > 0)
        fill_share(b, worker->id);
}

THREAD_MAIN(worker_main, run_worker, Worker)

/* Without the GIL: workers 1..n_work - 1 started on threads, worker 0 run here, until
   every worker has encoded its texts. A worker whose thread cannot be started is run
   here (and its share of the filling too, later). */
static void
encode_on_threads(Batch *b)
{
    Worker *workers = b->workers;
    LOCK_INIT(&b->lock);
    COND_INIT(&b->cond);
    b->n_threads = b->n_work;
    b->encoded = 1;  /* this thread's */
    b->go = 0;
    for (int k = 0; k < b->n_work; k++)
        workers[k] = (Worker){b, k};
    for (int k = 1; k < b->n_work; k++) {
        b->started[k] = thread_start(&b->threads[k], worker_main, &workers[k]);
        if (!b->started[k]) {
            LOCK(&b->lock);
            b->encoded++;
            UNLOCK(&b->lock);
        }
    }
    encode_some(b, 0);
    for (int k = 1; k < b->n_work; k++)
        if (!b->started[k])
            encode_some(b, k);
    LOCK(&b->lock);
    while (b->encoded < b->n_threads)
        WAIT(&b->cond, &b->lock);
    UNLOCK(&b->lock);
}

/* Without the GIL: the workers told to fill their lists (go 1) or to stop (-1), this
   thread's shares (worker 0's, and those of workers that have no thread) done, the
   threads joined. */
static void
end_threads(Batch *b, int go)
{
    if (b->n_threads == 0)
        return;
    LOCK(&b->lock);
    b->go = go;
    WAKE_ALL(&b->cond);
    UNLOCK(&b->lock);
    if (go > 0)
        for (int k = 0; k < b->n_work; k++)
            if (k == 0 || !b->started[k])
                fill_share(b, k);
    for (int k = 1; k < b->n_work; k++) {
        if (!b->started[k])
            continue;
        thread_join(b->threads[k]);
    }
    LOCK_FREE(&b->lock);
    COND_FREE(&b->cond);
    b->n_threads = 0;
}

/* With the GIL: the NULL items (ids without an int) made; the lists tracked. 0, or -1
   with an exception (every list then complete, so that freeing them is safe). */
static int
finish_lists(Batch *b, int missing)
{
    int rc = 0;
    for (Py_ssize_t k = 0; k < b->n; k++) {
        PyObject *list = b->lists[k];
        if (list == Py_None)
            continue;
        PyObject **items = ((PyListObject *)list)->ob_item;
        const uint32_t *ids = b->work[b->owner[k]]->out + b->spans[2 * k];
        size_t len = missing ? b->spans[2 * k + 1] - b->spans[2 * k] : 0;
        for (size_t i = 0; i < len; i++)
            if (items[i] == NULL && (items[i] = PyLong_FromUnsignedLong(ids[i])) == NULL) {
                items[i] = Py_NewRef(Py_None);
                rc = -1;
            }
        PyObject_GC_Track(list);
    }
    return rc;
}

/* A new list of n items not yet set (PyList_New would zero them with the GIL held; they
   are written by fill_some without it), untracked. Until then freeing it needs
   Py_SET_SIZE(list, 0) first. */
static PyObject *
unfilled_list(Py_ssize_t n)
{
    PyObject *list = PyList_New(0);
    if (list == NULL)
        return NULL;
    PyObject_GC_UnTrack(list);
    if (n == 0)
        return list;
    PyObject **items = PyMem_Malloc((size_t)n * sizeof(PyObject *));
    if (items == NULL) {
        Py_DECREF(list);
        return PyErr_NoMemory();
    }
    ((PyListObject *)list)->ob_item = items;
    ((PyListObject *)list)->allocated = n;
    Py_SET_SIZE(list, n);
    return list;
}

/* Lists of unfilled_list freed before they are filled. */
static void
clear_unfilled(PyObject **lists, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++) {
        if (lists[j] != Py_None) {
            Py_SET_SIZE(lists[j], 0);
            PyObject_GC_Track(lists[j]);
        }
        Py_CLEAR(lists[j]);
    }
}

/* With the GIL: the list of ids[0..n), each item its id's int from the encoder's table
   (made where it has none yet); NULL with an exception. */
static PyObject *
id_list(Encoder *e, const uint32_t *ids, size_t n)
{
    PyObject *list = unfilled_list((Py_ssize_t)n);  /* every item is written below: none zeroed first */
    if (list == NULL)
        return NULL;
    PyObject **items = ((PyListObject *)list)->ob_item, **objects = e->id_objects;
    size_t n_ids = e->t.n_ids;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        PyObject *o = id < n_ids ? objects[id] : NULL;
        if (o == NULL) {
            if ((o = PyLong_FromUnsignedLong(id)) == NULL) {
                Py_SET_SIZE(list, (Py_ssize_t)i);  /* the items written so far */
                PyObject_GC_Track(list);
                Py_DECREF(list);
                return NULL;
            }
            if (id < n_ids) {
                objects[id] = o;
                e->t.table_bytes += 32;
                Py_INCREF(o);
            }
        } else
            Py_INCREF(o);
        items[i] = o;
    }
    PyObject_GC_Track(list);
    return list;
}

/* With the GIL, on one work's texts (no threads): each text's list, or None, in
   out[0..b->n) (id_list). 0, or -1 with an exception (out then holds nothing). */
static int
direct_lists(Batch *b, PyObject **out)
{
    if (make_id_objects(b->e) < 0)
        return -1;
    for (Py_ssize_t k = 0; k < b->n; k++) {
        size_t start = b->spans[2 * k], end = b->spans[2 * k + 1];
        out[k] = end == SIZE_MAX ? Py_NewRef(Py_None)
                 : id_list(b->e, b->work[b->owner[k]]->out + start, end - start);
        if (out[k] == NULL) {
            for (Py_ssize_t j = 0; j < k; j++)
                Py_CLEAR(out[j]);
            return -1;
        }
    }
    return 0;
}

/* With the GIL: each work of b ready to count ids (its counts, as many as the encoder
   has ids). 0, or -1 with MemoryError. */
static int
counts_ready(Batch *b)
{
    Encoder *e = b->e;
    if (make_id_objects(e) < 0)
        return -1;
    for (int t = 0; t < b->n_work; t++) {
        Work *w = b->work[t];
        w->missing = 0;
        if (e->t.n_ids == 0)
            continue;
        if (t == 0 && b->n_work > 1 && w->added == NULL && (w->added = malloc(e->t.n_ids * sizeof(uint32_t))) == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (w->counts != NULL)
            continue;
        w->counts = calloc(e->t.n_ids, sizeof(uint32_t));
        w->touched = malloc(e->t.n_ids * sizeof(uint32_t));
        if (w->counts == NULL || w->touched == NULL) {
            free(w->counts);
            free(w->touched);
            w->counts = w->touched = NULL;
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

/* The ids of each text of b as lists, or (as_bytes) as a bytearray of native uint32, in
   out[0..n). Where threads encoded the texts (b->counted) the lists are filled with the
   GIL released, each thread its own texts' (end_threads): what holds the GIL is a step
   per list and per distinct id of the call, not per id; else here (direct_lists).
   0, or -1 with an exception (out then holds nothing). */
static int
batch_objects(Batch *b, int as_bytes, PyObject **out)
{
    Py_ssize_t k = 0, n = b->n;
    const size_t *spans = b->spans;
    if (!as_bytes && !b->counted)
        return direct_lists(b, out);
    for (; k < n; k++) {
        size_t start = spans[2 * k], end = spans[2 * k + 1];
        if (end == SIZE_MAX)
            out[k] = Py_NewRef(Py_None);
        else if (as_bytes)
            out[k] = PyByteArray_FromStringAndSize((const char *)(b->work[b->owner[k]]->out + start),
                                               (Py_ssize_t)((end - start) * 4));
        else
            out[k] = unfilled_list((Py_ssize_t)(end - start));
        if (out[k] == NULL)
            break;
    }
    if (k < n) {
        if (as_bytes)
            for (Py_ssize_t j = 0; j < k; j++)
                Py_CLEAR(out[j]);
        else
            clear_unfilled(out, k);
        return -1;
    }
    if (as_bytes)
        return 0;
    int rc = 0, missing = 0;
    for (int t = 0; t < b->n_work && rc == 0; t++)
        rc = make_ints(b->e, b->work[t]);
    if (rc < 0) {
        clear_unfilled(out, n);
        return -1;  /* the counts cleared by the caller */
    }
    b->lists = out;
    Py_BEGIN_ALLOW_THREADS
    if (b->n_threads)
        end_threads(b, 1);
    else
        for (int t = 0; t < b->n_work; t++)
            fill_share(b, t);
    Py_END_ALLOW_THREADS
    /* work 0 holds every count now: its own ids, then each share's added ones */
    Work *w0 = b->work[0];
    add_references(b->e, w0->counts, w0->touched, w0->n_touched, 1);
    for (int t = 0; t < b->n_work; t++) {
        missing |= b->work[t]->missing;
        if (b->n_work > 1) {
            size_t lo = b->e->t.n_ids * t / b->n_work;
            add_references(b->e, w0->counts, w0->added + lo, b->n_added[t], 1);
        }
        b->work[t]->n_touched = b->work[t]->n_added = b->work[t]->n_fresh = 0;
    }
    if (finish_lists(b, missing) < 0) {
        for (Py_ssize_t j = 0; j < n; j++)
            Py_CLEAR(out[j]);
        return -1;
    }
    return 0;
}

/* The result of a call of one text's ids (in w->out, or None for an unknown character,
   or MemoryError); its scratch space goes back to the pool. */
static PyObject *
finish(Encoder *e, Work *w, int rc, int as_bytes)
{
    PyObject *out;
    size_t span[2] = {0, w->n_out};
    uint8_t owner = 0;
    Batch b = {.e = e, .n = 1, .spans = span, .owner = &owner, .n_work = 1, .work = {w}};
    if (rc == 0) {
        if (batch_objects(&b, as_bytes, &out) < 0) {
            out = NULL;
            if (w->counts != NULL)
                count_references(e, w, 0);
        }
    } else if (w->fail == FAIL_UNKNOWN_CHAR)
        out = Py_NewRef(Py_None);
    else
        out = PyErr_NoMemory();
    work_give(e, w);
    return out;
}

/* What text_state left to the GIL: TEXT_SURROGATE, or TEXT_READY once every class is
   known; -1 with an exception. */
static int
settle_text(Encoder *e, PyObject *text)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const void *data = PyUnicode_DATA(text);
    int kind = PyUnicode_KIND(text);
    if (!PyUnicode_IS_ASCII(text) && has_surrogate(data, kind, n))
        return TEXT_SURROGATE;
    /* the first 256 before any wider character: text_state takes classes[0xFF] to mean
       all of them are known */
    if (e->t.pattern != PATTERN_NONE && n
            && (classify_text(e->t.classes, NULL, PyUnicode_1BYTE_KIND, 0, e->classify) < 0
                || classify_text(e->t.classes, data, kind, n, e->classify) < 0))
        return -1;
    return TEXT_READY;
}

/* A ready text's ids added to w->out, without the GIL; 0, or -1 (w->fail set). */
static int
encode_text(const Encoder *e, Work *w, PyObject *text)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const void *data = PyUnicode_DATA(text);
    int kind = PyUnicode_KIND(text), ascii = PyUnicode_IS_ASCII(text);
    if (n == 0)
        return 0;
    if (e->t.pattern == PATTERN_NONE)
        return encode_span(&e->t, w, data, kind, ascii, 0, n);
    return scanners[e->t.pattern][kind == 1 ? 0 : kind == 2 ? 1 : 2](&e->t, w, data, ascii, n);
}

/* One text of a call, its ids added to w->out: its state (TEXT_READY: encoded,
   TEXT_SURROGATE or TEXT_NONE: a character the version has no symbol for, its ids
   taken back), or -1 with an exception. The GIL is released while it encodes. */
static int
encode_one(Encoder *e, Work *w, PyObject *text)
{
    const void *data = PyUnicode_DATA(text);
    int kind = PyUnicode_KIND(text), state, rc = 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    size_t before = w->n_out;
    Py_BEGIN_ALLOW_THREADS
    state = text_state(&e->t, data, kind, n);
    if (state == TEXT_READY)
        rc = encode_text(e, w, text);
    Py_END_ALLOW_THREADS
    if (state == TEXT_UNCLASSIFIED) {
        state = settle_text(e, text);
        if (state == TEXT_READY) {
            Py_BEGIN_ALLOW_THREADS
            rc = encode_text(e, w, text);
            Py_END_ALLOW_THREADS
        }
    }
    if (rc < 0 && w->fail == FAIL_UNKNOWN_CHAR) {
        w->fail = 0;
        w->n_out = before;
        return TEXT_NONE;
    }
    if (rc < 0)
        PyErr_NoMemory();
    return rc < 0 ? -1 : state;
}

static PyObject *
Encoder_encode(Encoder *e, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"text", "as_bytes", NULL};
    PyObject *text;
    int as_bytes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|p:encode", names, &text, &as_bytes))
        return NULL;
    Work *w = work_take(e);
    if (w == NULL)
        return NULL;
    cache_init(w, PyUnicode_GET_LENGTH(text));
    int state = encode_one(e, w, text);
    if (state != TEXT_READY) {
        work_give(e, w);
        return state < 0 ? NULL : Py_NewRef(Py_None);
    }
    return finish(e, w, 0, as_bytes);
}

typedef struct {
    Py_ssize_t len, k;
} Sized;

static int
longer_first(const void *a, const void *b)
{
    const Sized *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

/* Where one text is long beside a worker's share (more than a quarter of it), the texts
   taken longest first, so that no long one is left to the end while the other workers
   idle; else in order (texts of even length need no sorting). 0, or -1 with MemoryError. */
static int
order_texts(Batch *b, Py_ssize_t longest)
{
    if (b->n_work < 2 || longest * 4 * b->n_work <= b->chars)
        return 0;
    Sized *sized = malloc((size_t)b->n * sizeof(Sized));
    b->order = malloc((size_t)b->n * sizeof(Py_ssize_t));
    if (sized == NULL || b->order == NULL) {
        free(sized);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < b->n; k++)
        sized[k] = (Sized){PyUnicode_GET_LENGTH(b->texts[k]), k};
    qsort(sized, (size_t)b->n, sizeof(Sized), longer_first);
    for (Py_ssize_t k = 0; k < b->n; k++)
        b->order[k] = sized[k].k;
    free(sized);
    return 0;
}

/* encode_batch's texts encoded into b (its works taken), on `workers` threads: the GIL
   released once for every text ready (text_state), then taken for each that was not
   (texts with characters met for the first time, encoded by work 0). Where lists will be
   made (b->counted), their ids are counted too. 0, or -1 with an exception. */
static int
encode_texts(Batch *b)
{
    for (int t = 0; t < b->n_work; t++)
        cache_init(b->work[t], b->chars / b->n_work);
    Py_BEGIN_ALLOW_THREADS
    if (b->n_work > 1) {
        encode_on_threads(b);
        if (!b->counted)  /* no lists to fill: the threads are done */
            end_threads(b, -1);
    } else
        encode_some(b, 0);
    Py_END_ALLOW_THREADS
    for (int t = 0; t < b->n_work; t++)
        if (b->work[t]->fail) {
            PyErr_NoMemory();
            return -1;
        }
    Work *w = b->work[0];
    int late = 0;
    for (Py_ssize_t k = 0; k < b->n; k++) {
        if (b->spans[2 * k] != SIZE_MAX)
            continue;
        late = 1;
        size_t start = w->n_out;
        int state = encode_one(b->e, w, b->texts[k]);
        if (state < 0)
            return -1;
        b->owner[k] = 0;
        b->spans[2 * k] = start;
        b->spans[2 * k + 1] = state == TEXT_READY ? w->n_out : SIZE_MAX;
        if (b->counted && state == TEXT_READY)
            count_ids(b->e, w, start, w->n_out);
    }
    if (b->counted && late)
        find_fresh(b->e, w);
    return 0;
}

static PyObject *
Encoder_encode_batch(Encoder *e, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"texts", "as_bytes", "workers", NULL};
    PyObject *texts;
    int as_bytes = 0, workers = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|pi:encode_batch", names, &texts, &as_bytes, &workers))
        return NULL;
    PyObject *tuple = PySequence_Tuple(texts);  /* ours: nobody changes it while the GIL is released */
    if (tuple == NULL)
        return NULL;
    Batch b = {.e = e, .texts = &PyTuple_GET_ITEM(tuple, 0), .n = PyTuple_GET_SIZE(tuple)};
    Py_ssize_t longest = 0;
    for (Py_ssize_t k = 0; k < b.n; k++) {
        if (!PyUnicode_Check(b.texts[k])) {
            Py_DECREF(tuple);
            return PyErr_Format(PyExc_TypeError, "texts must be str, not %.100s", Py_TYPE(b.texts[k])->tp_name);
        }
        Py_ssize_t len = PyUnicode_GET_LENGTH(b.texts[k]);
        b.chars += len;
        longest = len > longest ? len : longest;
    }
    /* a thread for each WORKER_CHARS characters at most: a short batch is not worth one */
    Py_ssize_t most = b.chars / WORKER_CHARS + 1;
    most = most < b.n ? most : b.n > 0 ? b.n : 1;
    most = most < MAX_WORKERS ? most : MAX_WORKERS;
    workers = workers < 1 ? 1 : workers < most ? workers : (int)most;
    b.counted = !as_bytes && workers > 1;  /* one worker: its lists made with the GIL (direct_lists) */
    size_t n = (size_t)(b.n ? b.n : 1);
    b.spans = malloc(n * 2 * sizeof(size_t));
    b.owner = malloc(n);
    PyObject *out = NULL;
    int ok = b.spans != NULL && b.owner != NULL;
    if (!ok)
        PyErr_NoMemory();
    for (; ok && b.n_work < workers; b.n_work++)
        ok = (b.work[b.n_work] = work_take(e)) != NULL;
    if (ok && b.counted)
        ok = counts_ready(&b) == 0;
    if (ok)
        ok = order_texts(&b, longest) == 0;
    if (ok && encode_texts(&b) == 0
            && (out = PyList_New(b.n)) != NULL
            && batch_objects(&b, as_bytes, ((PyListObject *)out)->ob_item) < 0)
        Py_CLEAR(out);  /* its items NULL: freed as empty */
    if (b.n_threads) {  /* a failure on the way: the threads stopped before their works go back */
        Py_BEGIN_ALLOW_THREADS
        end_threads(&b, -1);
        Py_END_ALLOW_THREADS
    }
    for (int t = 0; t < b.n_work; t++) {
        Work *w = b.work[t];
        if (w->counts != NULL)  /* counts left by a failure on the way */
            count_references(e, w, 0);
        work_give(e, w);
    }
    free(b.spans);
    free(b.owner);
    free(b.order);
    Py_DECREF(tuple);
    return out;
}

static PyObject *
Encoder_encode_words(Encoder *e, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"words", "as_bytes", NULL};
    PyObject *words;
    int as_bytes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:encode_words", names, &words, &as_bytes))
        return NULL;
    PyObject *tuple = PySequence_Tuple(words);  /* ours: nobody changes it while the GIL is released */
    if (tuple == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *word = PyTuple_GET_ITEM(tuple, k);
        if (!PyUnicode_Check(word)) {
            Py_DECREF(tuple);
            return PyErr_Format(PyExc_TypeError, "words must be str, not %.100s", Py_TYPE(word)->tp_name);
        }
        if (!PyUnicode_IS_ASCII(word) && has_surrogate(PyUnicode_DATA(word), PyUnicode_KIND(word),
                                                      PyUnicode_GET_LENGTH(word))) {
            Py_DECREF(tuple);
            Py_RETURN_NONE;
        }
    }
    Work *w = work_take(e);
    if (w == NULL) {
        Py_DECREF(tuple);
        return NULL;
    }
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    cache_init(w, 8 * n);
    for (Py_ssize_t k = 0; k < n && rc == 0; k++) {
        PyObject *word = PyTuple_GET_ITEM(tuple, k);
        rc = encode_span(&e->t, w, PyUnicode_DATA(word), PyUnicode_KIND(word), PyUnicode_IS_ASCII(word), 0,
                         PyUnicode_GET_LENGTH(word));
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(tuple);
    return finish(e, w, rc, as_bytes);
}

static PyObject *
Encoder_table_bytes(Encoder *e, PyObject *unused)
{
    return PyLong_FromSize_t(e->t.table_bytes);
}

static PyMethodDef Encoder_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))Encoder_encode, METH_VARARGS | METH_KEYWORDS,
     "encode(text, as_bytes=False) -> list[int] | bytearray | None\n\n"
     "The ids of text (cut by the encoder's pattern, or one word where it has none); as_bytes:\n"
     "as a bytearray of native uint32. None where the text holds a surrogate or a character the\n"
     "version has no symbol for."},
    {"encode_batch", (PyCFunction)(void (*)(void))Encoder_encode_batch, METH_VARARGS | METH_KEYWORDS,
     "encode_batch(texts, as_bytes=False, workers=1) -> list[list[int] | bytearray | None]\n\n"
     "encode of each text, in one call, the GIL released while they are encoded: on up to\n"
     "`workers` threads (each with its scratch space and cache; none for less than 16,384\n"
     "characters), each taking the next text not yet taken."},
    {"encode_words", (PyCFunction)(void (*)(void))Encoder_encode_words, METH_VARARGS | METH_KEYWORDS,
     "encode_words(words, as_bytes=False) -> list[int] | bytearray | None\n\n"
     "The ids of words already cut, in order (as encode)."},
    {"table_bytes", (PyCFunction)Encoder_table_bytes, METH_NOARGS,
     "table_bytes() -> int: the memory of the encoder's tables (the class table aside)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpestore._encodecore.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Encoder(tokens, merges, byte_ids, *, mode=0, pattern=-1, classify=None, chars=None, unk=-1,\n"
              "        fallback=False, prefix=-1, suffix=-1, whole=False, unique=False, backtrack_after=-1)\n\n"
              "tokens: each id's bytes (None for none); merges: (left ids, right ids, made ids) in rank\n"
              "order (None for mode 1, token ranks: the rank of a token is its id); byte_ids: the id of\n"
              "each byte; pattern: 0 gpt2, 1 cl100k, 2 o200k, -1 none (the caller cuts words);\n"
              "classify: bpestore.text.char_class; chars: character -> id for a character alphabet,\n"
              "with unk (the unknown token's id) or fallback (unseen characters become bytes);\n"
              "prefix/suffix: the word markers' ids; whole: every token merges make encodes to itself\n"
              "(else each is checked once here); unique: ValueError where two tokens have the same bytes;\n"
              "backtrack_after: under token ranks, the long words with ASCII after their first byte merged\n"
              "before the backtracking tables of every token are built (-1: len(tokens) // 16); words of\n"
              "3-byte UTF-8 characters alone (CJK) wait for backtrack_after // 8 of theirs, then tables of\n"
              "such tokens are built; other words of high bytes are merged (0: every long word backtracks).",
    .tp_methods = Encoder_methods,
    .tp_new = Encoder_new,
};

/* -- rank files ------------------------------------------------------------------------------- */
static PyObject *
rank_tokens(const RankFile *f)
{
    PyObject *tokens = PyList_New((Py_ssize_t)f->max_rank + 1);
    if (tokens == NULL)
        return NULL;
    for (Py_ssize_t r = 0; r <= (Py_ssize_t)f->max_rank; r++)
        PyList_SET_ITEM(tokens, r, Py_NewRef(Py_None));
    for (size_t k = 0; k < f->n; k++) {
        PyObject *t = PyBytes_FromStringAndSize((const char *)f->bytes + f->offsets[k],
                                                (Py_ssize_t)(f->offsets[k + 1] - f->offsets[k]));
        if (t == NULL) {
            Py_DECREF(tokens);
            return NULL;
        }
        Py_SETREF(((PyListObject *)tokens)->ob_item[f->ranks[k]], t);
    }
    return tokens;
}

static PyObject *
read_rank_file(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    RankFile f = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = parse_rank_lines(view.buf, (size_t)view.len, &f);
    if (rc == 0 && (f.n == 0 || f.max_rank >= 4 * f.n + 1024))
        rc = -1;  /* none, or ranks far apart: the caller's reader decides */
    if (rc == 0 && has_repeats(&f) != 0)
        rc = -1;  /* (or no memory to look: the caller's reader looks) */
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *out = NULL;
    if (rc == -2 || (rc == 0 && f.n >= NO_ID))
        PyErr_NoMemory();
    else if (rc == -1)
        out = Py_NewRef(Py_None);
    else
        out = rank_tokens(&f);
    free(f.bytes);
    free(f.offsets);
    free(f.ranks);
    return out;
}

/* A packed vocabulary's tokens (bpestore.store.snapshot.unpack): {ids[k]: the next
   lengths[k] bytes of data from at}, in order; ValueError where data is shorter. */
static PyObject *
token_dict(PyObject *module, PyObject *args)
{
    Py_buffer data, ids, lengths;
    Py_ssize_t at;
    if (!PyArg_ParseTuple(args, "y*ny*y*:token_dict", &data, &at, &ids, &lengths))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = ids.len / 4;
    if (at < 0 || at > data.len || lengths.len != ids.len || ids.len % 4) {
        PyErr_SetString(PyExc_ValueError, "token_dict: ids and lengths differ, or at is outside data");
        goto done;
    }
    if ((out = PyDict_New()) == NULL)
        goto done;
    const char *bytes = (const char *)data.buf;
    for (Py_ssize_t k = 0; k < n; k++) {
        uint32_t id, len;
        memcpy(&id, (const char *)ids.buf + 4 * k, 4);
        memcpy(&len, (const char *)lengths.buf + 4 * k, 4);
        if ((size_t)len > (size_t)(data.len - at)) {
            PyErr_SetString(PyExc_ValueError, "token_dict: the lengths run past the data");
            Py_CLEAR(out);
            goto done;
        }
        PyObject *key = PyLong_FromUnsignedLong(id);
        PyObject *value = key ? PyBytes_FromStringAndSize(bytes + at, (Py_ssize_t)len) : NULL;
        int rc = value ? PyDict_SetItem(out, key, value) : -1;
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (rc < 0) {
            Py_CLEAR(out);
            goto done;
        }
        at += (Py_ssize_t)len;
    }
    if (out != NULL && at != data.len) {
        PyErr_SetString(PyExc_ValueError, "token_dict: the data is longer than the lengths say");
        Py_CLEAR(out);
    }
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&lengths);
    return out;
}

/* A sequence of codes (a merge's rank, or -1 - b for byte b) as int64s; NULL with an error set. */
static int64_t *codes_of(PyObject *obj, Py_ssize_t *n) {
    PyObject *seq = PySequence_Fast(obj, "codes must be a sequence of ints");
    if (seq == NULL) return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    int64_t *out = malloc(((size_t)*n + 1) * sizeof(int64_t));
    if (out == NULL) { Py_DECREF(seq); PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < *n; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) { free(out); Py_DECREF(seq); return NULL; }
        if (v < -256 || v >= *n) {
            PyErr_SetString(PyExc_ValueError, "a code is a rank below the number of merges or -1 - byte");
            free(out);
            Py_DECREF(seq);
            return NULL;
        }
        out[i] = v;
    }
    Py_DECREF(seq);
    return out;
}

static PyObject *seam_problem(PyObject *self, PyObject *args) {
    PyObject *lefts_arg, *rights_arg;
    Py_ssize_t checked, n, n_right;
    if (!PyArg_ParseTuple(args, "OOn", &lefts_arg, &rights_arg, &checked)) return NULL;
    int64_t *lefts = codes_of(lefts_arg, &n);
    if (lefts == NULL) return NULL;
    int64_t *rights = codes_of(rights_arg, &n_right);
    if (rights == NULL) { free(lefts); return NULL; }
    PyObject *result = NULL;
    int64_t failed = n == n_right ? seam_problem_of(lefts, rights, n, checked) : -1;
    if (n != n_right)
        PyErr_SetString(PyExc_ValueError, "lefts and rights differ in length");
    else if (failed == SEAM_NOT_BELOW)
        PyErr_SetString(PyExc_ValueError, "a merge's code is not a rank below its own");
    else if (failed == SEAM_NO_MEMORY)
        PyErr_NoMemory();
    else
        result = failed >= 0 ? PyLong_FromLongLong(failed) : Py_NewRef(Py_None);
    free(lefts);
    free(rights);
    return result;
}

/* A sequence of ints as int64s (None: ID_CODE_NONE); NULL with an error set, or with *bad set
 * (no error) where an item is no int that fits. */
static int64_t *int64s_of(PyObject *obj, Py_ssize_t *n, int *bad) {
    PyObject *seq = PySequence_Fast(obj, "ids must be a sequence");
    if (seq == NULL) return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    int64_t *out = malloc(((size_t)*n + 1) * sizeof(int64_t));
    if (out == NULL) { Py_DECREF(seq); PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < *n && !*bad; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (item == Py_None) { out[i] = ID_CODE_NONE; continue; }
        if (!PyLong_Check(item)) { *bad = 1; break; }
        long long v = PyLong_AsLongLong(item);
        if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); *bad = 1; break; }
        if (v == ID_CODE_NONE) { *bad = 1; break; }
        out[i] = v;
    }
    Py_DECREF(seq);
    return out;
}

static PyObject *list_of_int64s(const int64_t *values, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *v = PyLong_FromLongLong(values[i]);
        if (v == NULL) { Py_CLEAR(out); break; }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

static PyObject *side_codes(PyObject *self, PyObject *args) {
    PyObject *lefts_arg, *rights_arg, *code_arg;
    if (!PyArg_ParseTuple(args, "OOO", &lefts_arg, &rights_arg, &code_arg)) return NULL;
    Py_ssize_t n = 0, n_right = 0, size = 0;
    int bad = 0;
    PyObject *result = NULL;
    int64_t *lefts = NULL, *rights = NULL, *out = NULL;
    int64_t *code = int64s_of(code_arg, &size, &bad);
    if (code == NULL) return NULL;
    if (!bad && (lefts = int64s_of(lefts_arg, &n, &bad)) == NULL) goto done;
    if (!bad && (rights = int64s_of(rights_arg, &n_right, &bad)) == NULL) goto done;
    if (!bad && (out = malloc(2 * ((size_t)n + 1) * sizeof(int64_t))) == NULL) { PyErr_NoMemory(); goto done; }
    if (bad || n != n_right || id_side_codes(lefts, n, code, size, out) < 0 ||
            id_side_codes(rights, n, code, size, out + n) < 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *left_codes = list_of_int64s(out, n);
    PyObject *right_codes = left_codes ? list_of_int64s(out + n, n) : NULL;
    if (right_codes != NULL) result = PyTuple_Pack(2, left_codes, right_codes);
    Py_XDECREF(left_codes);
    Py_XDECREF(right_codes);
done:
    free(code);
    free(lefts);
    free(rights);
    free(out);
    return result;
}

static PyMethodDef module_functions[] = {
    {"token_dict", token_dict, METH_VARARGS,
     "token_dict(data, at, ids, lengths) -> dict[int, bytes]\n\n"
     "{ids[k]: the next lengths[k] bytes of data from at} (ids, lengths: native uint32\n"
     "buffers); ValueError unless the lengths end exactly at data's end."},
    {"read_rank_file", read_rank_file, METH_O,
     "read_rank_file(data) -> list[bytes | None] | None\n\n"
     "The tokens of a tiktoken rank file's bytes (base64 token, rank a line), by rank (None\n"
     "where no token has it); None where a line is not in that plain form, a token or a\n"
     "rank repeats, or the ranks are far apart (the caller's own reader says what)."},
    {"seam_problem", seam_problem, METH_VARARGS,
     "seam_problem(lefts, rights, checked) -> int | None\n\n"
     "bpestore.encoder.rank_rule._seam_problem's walk over the merges' codes (left and right\n"
     "of each merge: a merge's rank, or -1 - b for the byte b): the first merge from `checked`\n"
     "on whose token does not encode to itself, or None."},
    {"side_codes", side_codes, METH_VARARGS,
     "side_codes(lefts, rights, code) -> tuple[list[int], list[int]] | None\n\n"
     "bpestore.encoder.rank_rule._id_codes' last step: each merge's left and right id as its code\n"
     "(code[id]: a merge's rank, or -1 - b for the byte b; None: no ordinary token), or None where\n"
     "an id has none, or one not below its merge's rank, or lefts and rights differ in length."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_encodecore",
    "Pre-tokenize and merge text into token ids (optional compiled core).",
    -1, module_functions,
};

PyMODINIT_FUNC
PyInit__encodecore(void)
{
    if (PyType_Ready(&EncoderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&EncoderType);
    if (PyModule_AddObject(m, "Encoder", (PyObject *)&EncoderType) < 0) {
        Py_DECREF(&EncoderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
