/* The compiled counting core: GPT-2's pre-tokenizer and a word count in one pass.

   count_gpt2(text, counts, classify) adds every match of GPT-2's pattern

       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+

   in text to the dict counts (the word's UTF-8 bytes -> int) and returns how many
   matches there were: what counting the UTF-8 of each word of
   `regex.findall(PATTERNS["gpt2"], text)` does, without an object for each match.
   Repeated words are found in a table of spans of text; a word's bytes are made
   once per distinct word, when the counts are added.

   The character classes are not tables of this file: classify(code_point) answers
   0 (\p{L}), 1 (\p{N}), 2 (\s) or 3 (anything else), and is asked once per code
   point per process (per classify function), so the classes are those of the `regex` module the caller
   asks, whatever its Unicode version. bpestore/text.py's gpt2_classify is that
   function; tests/test_count_core.py checks the words against regex's.

   The scan, at a position i (the regex's alternatives in order; an alternative
   that fails here lets the next one try, as a regex engine does):
     - an apostrophe followed by s, t, m, d, or ll, ve, re: that contraction;
     - an optional space, then a run of letters, or digits, or "other"
       characters (neither letter, digit nor space): the longest such run;
     - a run of whitespace: all of it at the end of the text, else all but its
       last character (which then starts the next word: " word"), but never
       less than one character. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { C_LETTER = 0, C_NUMBER = 1, C_SPACE = 2, C_OTHER = 3 };

#define N_CODE_POINTS 0x110000

/* The class of each code point plus one, 0 until classify has answered (zeroed by
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
    if (k < C_LETTER || k > C_OTHER) {
        PyErr_Format(PyExc_ValueError, "classify(%u) gave %ld; it must give 0, 1, 2 or 3",
                     (unsigned int)c, k);
        return -1;
    }
    classes[c] = (uint8_t)(k + 1);
    return (int)k;
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

/* -- the scan ----------------------------------------------------------------------- */

#define CLASS_OF(c) (classes[c] ? (int)classes[c] - 1 : ask_class(classify, (c)))

/* One kind's scan, inlined into count_kind1/2/4 with kind a constant. Returns the
   number of words, or -1 with an exception set. */
static inline Py_ssize_t
scan(const void *data, int kind, Py_ssize_t n, PyObject *classify, Table *t)
{
    Py_ssize_t i = 0, words = 0;
#define AT(k) PyUnicode_READ(kind, data, (k))
    while (i < n) {
        Py_UCS4 c = AT(i);
        Py_ssize_t end;
        if (c == '\'' && i + 1 < n) {
            Py_UCS4 d = AT(i + 1);
            if (d == 's' || d == 't' || d == 'm' || d == 'd') {
                end = i + 2;
                goto word;
            }
            if (i + 2 < n) {
                Py_UCS4 e = AT(i + 2);
                if ((d == 'l' && e == 'l') || (d == 'v' && e == 'e') || (d == 'r' && e == 'e')) {
                    end = i + 3;
                    goto word;
                }
            }
        }
        /* " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": the run starts after a space
           that precedes one of them, else here. */
        Py_ssize_t run = i;
        int k;
        if (c == ' ' && i + 1 < n) {
            k = CLASS_OF(AT(i + 1));
            if (k < 0)
                return -1;
            if (k != C_SPACE)
                run = i + 1;
        }
        k = CLASS_OF(AT(run));
        if (k < 0)
            return -1;
        end = run + 1;
        for (; end < n; end++) {
            int k2 = CLASS_OF(AT(end));
            if (k2 < 0)
                return -1;
            if (k2 != k)
                break;
        }
        /* "\s+(?!\S)|\s+": a run of whitespace that stops before a non-space gives
           its last character to what follows, unless that leaves it empty. */
        if (k == C_SPACE && end < n && end - i > 1)
            end--;
    word:
        if (table_add(t, data, kind, i, end - i) < 0)
            return -1;
        words++;
        i = end;
    }
#undef AT
    return words;
}

static Py_ssize_t count_kind1(const void *d, Py_ssize_t n, PyObject *f, Table *t) { return scan(d, 1, n, f, t); }
static Py_ssize_t count_kind2(const void *d, Py_ssize_t n, PyObject *f, Table *t) { return scan(d, 2, n, f, t); }
static Py_ssize_t count_kind4(const void *d, Py_ssize_t n, PyObject *f, Table *t) { return scan(d, 4, n, f, t); }

static PyObject *
count_gpt2(PyObject *self, PyObject *args)
{
    PyObject *text, *counts, *classify;
    if (!PyArg_ParseTuple(args, "UO!O:count_gpt2", &text, &PyDict_Type, &counts, &classify))
        return NULL;
    if (!PyCallable_Check(classify))
        return PyErr_Format(PyExc_TypeError, "classify must be callable, not %.100s", Py_TYPE(classify)->tp_name);
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
    if (n == 0)
        return PyLong_FromLong(0);
    /* Room for every word of a short text (many calls are one short document each),
       at most 1,024 slots to start with. */
    size_t capacity = 16;
    while (capacity < 1024 && (Py_ssize_t)capacity < 2 * n)
        capacity <<= 1;
    Table t;
    if (table_init(&t, capacity) < 0)
        return NULL;
    const void *data = PyUnicode_DATA(text);
    int kind = PyUnicode_KIND(text);
    Py_ssize_t words;
    switch (kind) {
    case PyUnicode_1BYTE_KIND: words = count_kind1(data, n, classify, &t); break;
    case PyUnicode_2BYTE_KIND: words = count_kind2(data, n, classify, &t); break;
    default: words = count_kind4(data, n, classify, &t); break;
    }
    if (words >= 0 && table_flush(&t, data, kind, counts) < 0)
        words = -1;
    PyMem_Free(t.slots);
    if (words < 0)
        return NULL;
    return PyLong_FromSsize_t(words);
}

static PyMethodDef methods[] = {
    {"count_gpt2", count_gpt2, METH_VARARGS,
     "count_gpt2(text, counts, classify) -> int\n\n"
     "Add the words (UTF-8 bytes) of GPT-2's pre-tokenizer in text to the dict counts;\n"
     "return how many there were. "
     "classify(code_point) gives 0 (letter), 1 (number), 2 (space) or 3."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_countcore",
    "GPT-2's pre-tokenizer and a word count in one pass (optional compiled core).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__countcore(void)
{
    return PyModule_Create(&module);
}
