/* The compiled counting core: the built-in pre-tokenizers and a word count in one pass.

   count(text, counts, classify, pattern) adds every match of one of bpestore's
   built-in patterns (bpestore/text.py PATTERNS: 0 gpt2, 1 cl100k, 2 o200k) in text to
   the dict counts (the word's UTF-8 bytes -> int) and returns how many matches there
   were: what counting the UTF-8 of each word of `regex.findall(PATTERNS[name], text)`
   does, without an object for each match. Repeated words are found in a table of
   spans of text; a word's bytes are made once per distinct word, when the counts are
   added. count_many(pieces, ...) counts many short pieces (small files) with one table
   for all of them, telling each piece's distinct words: their counts go into the dict
   once, not once per piece.

   The scans and the character classes they read are in _pretok.h (shared with the
   encode core). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_pretok.h"
#include "cores/shards.h"

/* The class of each code point (never 0), 0 until classify has answered (zeroed by
   calloc: only the pages of code points met are ever touched, so a forked worker
   shares the rest); a call with another classify function starts it afresh. */
static uint8_t *classes = NULL;
static PyObject *classes_of = NULL;  /* the classify function the table holds answers of */

/* -- the table of distinct words: spans of the text, open addressing ---------------- */

typedef struct {
    const unsigned char *p;  /* the word's first character in its text; NULL: empty slot */
    Py_ssize_t len;  /* in characters */
    Py_ssize_t count;
    uint64_t hash;  /* word_hash: the same in texts of any kind, the text's kind in its top two bits */
} Entry;

static inline int
entry_kind(uint64_t hash)
{
    return 1 << (int)(hash >> 62);
}

typedef struct {
    Entry *slots;
    size_t mask;   /* capacity - 1, capacity a power of two */
    size_t used;
    size_t *order; /* ordinal: the slot of each entry, in the order the entries came (first occurrences) */
} Table;

static int
table_init(Table *t, size_t capacity)
{
    t->slots = PyMem_Malloc(capacity * sizeof(Entry));
    t->order = PyMem_Malloc((capacity / 2 + 1) * sizeof(size_t));  /* a table grows past half full */
    if (t->slots == NULL || t->order == NULL) {
        PyMem_Free(t->slots);
        PyMem_Free(t->order);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < capacity; i++)
        t->slots[i].p = NULL;
    t->mask = capacity - 1;
    t->used = 0;
    return 0;
}

static void
table_free(Table *t)
{
    PyMem_Free(t->slots);
    PyMem_Free(t->order);
}

/* The entries again in a table twice the size, in the order they came. */
static int
table_grow(Table *t)
{
    Table bigger;
    if (table_init(&bigger, (t->mask + 1) * 2) < 0)
        return -1;
    for (size_t k = 0; k < t->used; k++) {
        Entry *e = &t->slots[t->order[k]];
        size_t j = (size_t)e->hash & bigger.mask;
        while (bigger.slots[j].p != NULL)
            j = (j + 1) & bigger.mask;
        bigger.slots[j] = *e;
        bigger.order[k] = j;
    }
    bigger.used = t->used;
    table_free(t);
    *t = bigger;
    return 0;
}

#define KIND_BITS (3ULL << 62)

/* A word's hash, the same whatever the kind of the text it is in (its characters
   are hashed, FNV-1a), with the kind in its top two bits (entry_kind). */
INLINE uint64_t
word_hash(const unsigned char *p, int kind, Py_ssize_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < len; i++)
        h = (h ^ PyUnicode_READ(kind, p, i)) * 1099511628211ULL;
    h ^= h >> 29;
    return (h & ~KIND_BITS) | (uint64_t)(kind >> 1) << 62;  /* kind 1, 2, 4 -> 0, 1, 2 */
}

/* Whether entry e is the word of len characters at p (of kind; hash h): texts of
   another kind hold the same word in other units. */
INLINE int
same_word(const Entry *e, const unsigned char *p, int kind, Py_ssize_t len, uint64_t h)
{
    if (((e->hash ^ h) & ~KIND_BITS) != 0 || e->len != len)
        return 0;
    int other = entry_kind(e->hash);
    if (other == kind)
        return memcmp(e->p, p, (size_t)len * (size_t)kind) == 0;
    for (Py_ssize_t i = 0; i < len; i++)
        if (PyUnicode_READ(other, e->p, i) != PyUnicode_READ(kind, p, i))
            return 0;
    return 1;
}

/* Count the word text[start:start+len] (kind-byte units at data) once more. */
INLINE int
table_add(Table *t, const char *data, int kind, Py_ssize_t start, Py_ssize_t len)
{
    const unsigned char *p = (const unsigned char *)data + start * kind;
    uint64_t h = word_hash(p, kind, len);
    size_t j = (size_t)h & t->mask;
    for (;;) {
        Entry *e = &t->slots[j];
        if (e->p == NULL)
            break;
        if (same_word(e, p, kind, len, h)) {
            e->count++;
            return 0;
        }
        j = (j + 1) & t->mask;
    }
    Entry *e = &t->slots[j];
    e->p = p;
    e->len = len;
    e->count = 1;
    e->hash = h;
    t->order[t->used] = j;
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

/* Add entry e of another table (its text still alive) to table t, with its count. */
static int
table_merge(Table *t, const Entry *e)
{
    size_t j = (size_t)e->hash & t->mask;
    for (;;) {
        Entry *s = &t->slots[j];
        if (s->p == NULL)
            break;
        if (same_word(s, e->p, entry_kind(e->hash), e->len, e->hash)) {
            s->count += e->count;
            return 0;
        }
        j = (j + 1) & t->mask;
    }
    t->slots[j] = *e;
    t->order[t->used] = j;
    if (++t->used * 2 > t->mask + 1)
        return table_grow(t);
    return 0;
}

/* Add one entry's count to the dict counts, its word as UTF-8 bytes. */
static int
flush_entry(Entry *e, PyObject *counts)
{
    PyObject *word = utf8_word(e->p, entry_kind(e->hash), 0, e->len);
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
    return rc < 0 ? -1 : 0;
}

/* Add the table's counts to the dict counts, the words as UTF-8 bytes, in the order they
   first occurred (a word new to counts goes in after those before it: ordinals). */
static int
table_flush(Table *t, PyObject *counts)
{
    int rc = 0;
    for (size_t k = 0; k < t->used && rc == 0; k++)
        rc = flush_entry(&t->slots[t->order[k]], counts);
    return rc;
}

/* Count every word of one pattern in text (one kind); the number of words, or -1
   with an exception set. */
INLINE Py_ssize_t
scan(const void *data, int kind, Py_ssize_t n, int pattern, Table *t)
{
    Py_ssize_t i = 0, words = 0;
    while (i < n) {
        Py_ssize_t end = pretok_end(classes, data, kind, n, i, pattern);
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
    }
    return 0;
}

/* Scan one text into table t (its entries then point into text); the number of
   words, or -1 with an exception set. */
static Py_ssize_t
scan_text(PyObject *text, PyObject *classify, int pattern, Table *t)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const void *data = PyUnicode_DATA(text);
    int kind = PyUnicode_KIND(text);
    if (n == 0)
        return 0;
    if (classify_text(classes, data, kind, n, classify) < 0)
        return -1;
    return scanners[pattern][kind == 1 ? 0 : kind == 2 ? 1 : 2](data, n, t);
}

/* Room for every word of a short text (many calls are one short document each),
   at most 1,024 slots to start with. */
static size_t
first_capacity(Py_ssize_t n)
{
    size_t capacity = 16;
    while (capacity < 1024 && (Py_ssize_t)capacity < 2 * n)
        capacity <<= 1;
    return capacity;
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
    Table t;
    if (table_init(&t, first_capacity(PyUnicode_GET_LENGTH(text))) < 0)
        return NULL;
    Py_ssize_t words = scan_text(text, classify, pattern, &t);
    if (words >= 0 && table_flush(&t, counts) < 0)
        words = -1;
    table_free(&t);
    return words < 0 ? NULL : PyLong_FromSsize_t(words);
}

/* One piece (a list of str) scanned into a table of its own, then added to all;
   (words, distinct words) of the piece, or NULL with an exception set. */
static PyObject *
count_piece(PyObject *piece, PyObject *classify, int pattern, Table *all)
{
    Py_ssize_t n = 0, words = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(piece); i++)
        n += PyUnicode_GET_LENGTH(PyList_GET_ITEM(piece, i));
    Table t;
    if (table_init(&t, first_capacity(n)) < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(piece) && words >= 0; i++) {
        Py_ssize_t more = scan_text(PyList_GET_ITEM(piece, i), classify, pattern, &t);
        words = more < 0 ? -1 : words + more;
    }
    for (size_t k = 0; k < t.used && words >= 0; k++)  /* ordinal: in the order they came */
        if (table_merge(all, &t.slots[t.order[k]]) < 0)
            words = -1;
    table_free(&t);
    return words < 0 ? NULL : Py_BuildValue("(nn)", words, (Py_ssize_t)t.used);
}

static PyObject *
count_many(PyObject *self, PyObject *args)
{
    PyObject *pieces, *counts, *classify;
    int pattern;
    if (!PyArg_ParseTuple(args, "O!O!Oi:count_many", &PyList_Type, &pieces, &PyDict_Type, &counts, &classify,
                          &pattern))
        return NULL;
    if (ready(classify, pattern) < 0)
        return NULL;
    /* A copy: the texts stay alive (and in place) while the table points into them. */
    pieces = PyList_GetSlice(pieces, 0, PyList_GET_SIZE(pieces));
    if (pieces == NULL)
        return NULL;
    Py_ssize_t n_pieces = PyList_GET_SIZE(pieces);
    for (Py_ssize_t i = 0; i < n_pieces; i++) {
        PyObject *piece = PyList_GET_ITEM(pieces, i), *copy = NULL;
        if (PyList_Check(piece))
            copy = PyList_GetSlice(piece, 0, PyList_GET_SIZE(piece));
        else
            PyErr_Format(PyExc_TypeError, "each piece must be a list of str, not %.100s", Py_TYPE(piece)->tp_name);
        for (Py_ssize_t j = 0; copy != NULL && j < PyList_GET_SIZE(copy); j++)
            if (!PyUnicode_Check(PyList_GET_ITEM(copy, j))) {
                PyErr_Format(PyExc_TypeError, "each piece must be a list of str, not of %.100s",
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
    PyObject *result = PyList_New(n_pieces);
    Table all;
    if (result == NULL || table_init(&all, 1024) < 0) {
        Py_XDECREF(result);
        Py_DECREF(pieces);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n_pieces && result != NULL; i++) {
        PyObject *pair = count_piece(PyList_GET_ITEM(pieces, i), classify, pattern, &all);
        if (pair == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, pair);
    }
    if (result != NULL && table_flush(&all, counts) < 0)
        Py_CLEAR(result);
    table_free(&all);
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
    PyObject *result = PyList_New(n_shards), *key, *value;
    if (items == NULL || sizes == NULL || result == NULL)
        goto fail;
    while (PyDict_Next(counts, &pos, &key, &value)) {
        if (!PyBytes_CheckExact(key)) {
            PyErr_SetString(PyExc_TypeError, "shard: every word must be bytes");
            goto fail;
        }
        Counted *c = &items[i++];
        c->word = PyBytes_AS_STRING(key);
        c->len = PyBytes_GET_SIZE(key);
        c->count = PyLong_AsLongLong(value);
        if (c->count == -1 && PyErr_Occurred())
            goto fail;
        if (c->count < 0) {
            PyErr_SetString(PyExc_ValueError, "shard: every count must be at least 0");
            goto fail;
        }
        c->prefix = prefix_of(c->word, c->len);
        c->shard = (Py_ssize_t)(crc32_of((const unsigned char *)c->word, c->len) % (uint32_t)n_shards);
        c->first = ordinal_at(&ords, i - 1);
        sizes[5 * c->shard] += 1;
        sizes[5 * c->shard + 1] += c->len;
        sizes[5 * c->shard + 2] += varint_size((uint64_t)c->len);
        sizes[5 * c->shard + 3] += varint_size((uint64_t)c->count);
        sizes[5 * c->shard + 4] += ords.n ? varint_size(c->first) : 0;
    }
    qsort(items, (size_t)n, sizeof(Counted), shard_then_word);
    Counted *next = items;
    for (Py_ssize_t s = 0; s < n_shards; s++) {
        Py_ssize_t words = sizes[5 * s];
        PyObject *data = PyBytes_FromStringAndSize(NULL, sizes[5 * s + 1]);
        PyObject *lengths = PyBytes_FromStringAndSize(NULL, sizes[5 * s + 2]);
        PyObject *tallies = PyBytes_FromStringAndSize(NULL, sizes[5 * s + 3]);
        PyObject *firsts = ords.n ? PyBytes_FromStringAndSize(NULL, sizes[5 * s + 4]) : NULL;
        PyObject *packed = !(data && lengths && tallies && (firsts || !ords.n)) ? NULL
            : ords.n ? PyTuple_Pack(4, data, lengths, tallies, firsts) : PyTuple_Pack(3, data, lengths, tallies);
        Py_XDECREF(data);
        Py_XDECREF(lengths);
        Py_XDECREF(tallies);
        Py_XDECREF(firsts);
        if (packed == NULL)
            goto fail;
        PyList_SET_ITEM(result, s, packed);
        char *out = PyBytes_AS_STRING(data), *lout = PyBytes_AS_STRING(lengths), *cout = PyBytes_AS_STRING(tallies);
        char *fout = ords.n ? PyBytes_AS_STRING(firsts) : NULL;
        for (Py_ssize_t w = 0; w < words; w++, next++) {
            memcpy(out, next->word, (size_t)next->len);
            out += next->len;
            lout = varint_put(lout, (uint64_t)next->len);
            cout = varint_put(cout, (uint64_t)next->count);
            if (fout != NULL)
                fout = varint_put(fout, next->first);
        }
    }
    PyMem_Free(items);
    PyMem_Free(sizes);
    ordinals_free(&ords);
    PyDict_Clear(counts);
    return result;
fail:
    PyMem_Free(items);
    PyMem_Free(sizes);
    ordinals_free(&ords);
    Py_XDECREF(result);
    return NULL;
}

typedef struct {
    const char *data, *data_end;
    const unsigned char *lengths, *lengths_end, *counts, *counts_end;  /* the next word's, and where they end */
    const unsigned char *firsts, *firsts_end;  /* ordinal: NULL without */
    Counted head;
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
    PyObject *pieces;
    if (!PyArg_ParseTuple(args, "O!:merge_shard", &PyList_Type, &pieces))
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(pieces), live = 0;
    Cursor *cursors = PyMem_Malloc((size_t)(k ? k : 1) * sizeof(Cursor));
    Cursor **heap = PyMem_Malloc((size_t)(k ? k : 1) * sizeof(Cursor *));
    PyObject *result = PyDict_New(), *firsts = NULL;
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
        while (live && word_order(&heap[0]->head, &word) == 0) {
            Cursor *c = heap[0];
            sum += c->head.count;
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
    Py_XDECREF(result);
    Py_XDECREF(firsts);
    return NULL;
}

/* -- the rows of an upsert ------------------------------------------------------------------ */

static PyObject *
interleave(PyObject *self, PyObject *args)
{
    PyObject *words, *counts, *firsts = Py_None, *shift = NULL;
    Py_ssize_t per;
    if (!PyArg_ParseTuple(args, "O!O!n|OO!:interleave", &PyList_Type, &words, &PyDict_Type, &counts, &per,
                          &firsts, &PyLong_Type, &shift))
        return NULL;
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
            PyObject *count = PyDict_GetItemWithError(counts, word);
            if (count == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetObject(PyExc_KeyError, word);
                Py_DECREF(result);
                return NULL;
            }
            Py_INCREF(word);
            Py_INCREF(count);
            PyTuple_SET_ITEM(group, width * i, word);
            PyTuple_SET_ITEM(group, width * i + 1, count);
            if (width == 3) {
                PyObject *ordinal = PyDict_GetItemWithError(firsts, word);
                if (ordinal == NULL) {
                    if (!PyErr_Occurred())
                        PyErr_SetObject(PyExc_KeyError, word);
                    Py_DECREF(result);
                    return NULL;
                }
                if (shift != NULL) {
                    ordinal = PyNumber_Add(ordinal, shift);
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
     "merge_shard(pieces) -> dict[bytes, int] | (dict[bytes, int], dict[bytes, int])\n\n"
     "Packed pieces of one shard (each as shard() makes them: distinct words in order) merged:\n"
     "each word once with its counts summed, in word order; pieces with ordinals: and each word's\n"
     "smallest ordinal."},
    {"interleave", interleave, METH_VARARGS,
     "interleave(words, counts, per, firsts=None, shift=0) -> list[tuple]\n\n"
     "The parameters of multi-row statements: tuples (w0, counts[w0], w1, counts[w1], ...) of\n"
     "per words each, the last one shorter where per does not divide len(words); with the dict\n"
     "firsts, each word's firsts[w] + shift after its count."},
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
