/* The Python binding of the training merge loop (bpestore/cores/merge_loop.h): the
 * optional compiled core of bpestore.trainer. It parses arguments, converts objects
 * and turns the loop's failures into Python errors. `run` makes a batch of merges
 * with Python's lock released (training's checkpoint writer runs meanwhile), taking
 * it back only to ask `allow_merge`, where one is given.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cores/merge_loop.h"

typedef struct {
    PyObject_HEAD
    MergeLoop loop;
} Trainer;

/* The loop's failure as a Python error (OverflowError or MemoryError); NULL. */
static PyObject *loop_error(MergeLoop *t) {
    if (t->overflow != NULL) {
        PyErr_SetString(PyExc_OverflowError, t->overflow);
        t->overflow = NULL;
        return NULL;
    }
    return PyErr_NoMemory();
}

/* The loop's failure mid-update: its state is unusable from now on; NULL. */
static PyObject *broken(MergeLoop *t) {
    t->broken = 1;
    return loop_error(t);
}

static void Trainer_dealloc(Trainer *self) {
    ml_free(&self->loop);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Add the tokens (bytes) and, for hf, their tie values; 0 or -1. */
static int add_tokens(MergeLoop *t, PyObject *seq, PyObject *ties) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        char *data;
        Py_ssize_t size;
        if (PyBytes_AsStringAndSize(item, &data, &size) < 0) return -1;
        unsigned long value = 0;
        if (ties != NULL) {
            value = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(ties, i));
            if (value == (unsigned long)-1 && PyErr_Occurred()) return -1;
            if (value > UINT32_MAX) { PyErr_SetString(PyExc_OverflowError, "tie value too large"); return -1; }
        }
        if (add_token_bytes(t, (const unsigned char *)data, (uint64_t)size, (uint32_t)value) < 0) {
            loop_error(t);
            return -1;
        }
    }
    return 0;
}

/* Index the ids a merge may take (`ordinary`, a sequence of ids; None: every token, the
 * lowest id of equal bytes first); 0 or -1. */
static int index_ordinary(MergeLoop *t, PyObject *ordinary) {
    if (ordinary == Py_None) {
        for (uint32_t id = 0; id < t->n_tokens; id++)
            if (index_token(t, id) < 0) { loop_error(t); return -1; }
        return 0;
    }
    PyObject *seq = PySequence_Fast(ordinary, "ordinary must be a sequence of ids");
    if (seq == NULL) return -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        unsigned long id = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, i));
        if (id == (unsigned long)-1 && PyErr_Occurred()) { Py_DECREF(seq); return -1; }
        if (id >= t->n_tokens) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_IndexError, "token id out of range");
            return -1;
        }
        if (index_token(t, (uint32_t)id) < 0) { Py_DECREF(seq); loop_error(t); return -1; }
    }
    Py_DECREF(seq);
    return 0;
}

static int Trainer_init(Trainer *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"token_bytes", "tie", "threads", "parallel_min", "first_seen", "ordinary", NULL};
    MergeLoop *t = &self->loop;
    PyObject *tokens, *tie = Py_None, *ordinary = Py_None;
    int threads = 1;
    unsigned int parallel_min = 4096;
    int first_seen = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$iIpO", kwlist, &tokens, &tie, &threads, &parallel_min,
                                     &first_seen, &ordinary))
        return -1;
    if (first_seen && tie != Py_None) {
        PyErr_SetString(PyExc_ValueError, "first_seen takes no tie values");
        return -1;
    }
    if (threads < 1 || threads > MAX_THREADS) {
        PyErr_Format(PyExc_ValueError, "threads must be between 1 and %d", MAX_THREADS);
        return -1;
    }
    if (parallel_min < 1) {
        PyErr_SetString(PyExc_ValueError, "parallel_min must be at least 1");
        return -1;
    }
    if (t->n_tokens || t->slots) {
        PyErr_SetString(PyExc_RuntimeError, "Trainer.__init__ called twice");
        return -1;
    }
    t->hf = tie != Py_None;
    t->first_seen = first_seen;
    t->threads = threads;
    t->parallel_min = parallel_min;
    PyObject *seq = PySequence_Fast(tokens, "token_bytes must be a sequence of bytes");
    if (seq == NULL) return -1;
    PyObject *ties = NULL;
    int rc = -1;
    if (t->hf) {
        ties = PySequence_Fast(tie, "tie must be a sequence of ints");
        if (ties == NULL) goto done;
        if (PySequence_Fast_GET_SIZE(ties) != PySequence_Fast_GET_SIZE(seq)) {
            PyErr_SetString(PyExc_ValueError, "tie must have one value per token");
            goto done;
        }
    }
    if (add_tokens(t, seq, ties) < 0 || index_ordinary(t, ordinary) < 0) goto done;
    rc = rehash(t, 1024);
    if (rc < 0) loop_error(t);
done:
    Py_DECREF(seq);
    Py_XDECREF(ties);
    return rc;
}

static int usable(MergeLoop *t, int built) {
    if (t->slots == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Trainer not initialised");
        return 0;
    }
    if (t->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the trainer is in use by another thread");
        return 0;
    }
    if (t->broken) {
        PyErr_SetString(PyExc_RuntimeError, "the trainer failed in the middle of a step earlier; its state is unusable");
        return 0;
    }
    if (t->built != built) {
        PyErr_SetString(PyExc_RuntimeError, built ? "call build() first" : "words come before build()");
        return 0;
    }
    return 1;
}


PyDoc_STRVAR(replay_doc,
"replay(merges) -> None\n\n"
"Add a replay stage: merges, in rank order, as (left, right, made) triples (made: the id\n"
"the merge makes; a pair listed twice keeps its first rank). Every word added afterwards\n"
"gets each stage by per-word BPE with ranks (bpestore.bpe.merge_word) before it is stored.\n"
"The ids must be tokens already (the tokens list includes the made ones).");

/* Merge `rank` of the stage from its (left, right, made) triple; 0 or -1. */
static int set_merge(MergeLoop *t, Stage *st, uint32_t rank, PyObject *merge) {
    unsigned long v[3];
    PyObject *item = PySequence_Fast(merge, "each merge must be (left, right, made)");
    if (item == NULL) return -1;
    if (PySequence_Fast_GET_SIZE(item) != 3) {
        Py_DECREF(item);
        PyErr_SetString(PyExc_ValueError, "each merge must be (left, right, made)");
        return -1;
    }
    for (int k = 0; k < 3; k++) {
        v[k] = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(item, k));
        if (v[k] == (unsigned long)-1 && PyErr_Occurred()) { Py_DECREF(item); return -1; }
        if (v[k] >= t->n_tokens) {
            Py_DECREF(item);
            PyErr_SetString(PyExc_IndexError, "token id out of range");
            return -1;
        }
    }
    Py_DECREF(item);
    stage_set(st, rank, (uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2]);
    return 0;
}

static PyObject *Trainer_replay(Trainer *self, PyObject *merges) {
    MergeLoop *t = &self->loop;
    if (!usable(t, 0)) return NULL;
    PyObject *seq = PySequence_Fast(merges, "merges must be a sequence of (left, right, made)");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if ((uint64_t)n >= UINT32_MAX) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_OverflowError, "too many merges");
        return NULL;
    }
    Stage st;
    if (stage_new(&st, (uint32_t)n) < 0) { Py_DECREF(seq); return PyErr_NoMemory(); }
    for (Py_ssize_t r = 0; r < n; r++)
        if (set_merge(t, &st, (uint32_t)r, PySequence_Fast_GET_ITEM(seq, r)) < 0) goto error;
    if (grow((void **)&t->stages, &t->cap_stages, t->n_stages + 1, sizeof(Stage)) < 0) { PyErr_NoMemory(); goto error; }
    t->stages[t->n_stages++] = st;
    Py_DECREF(seq);
    Py_RETURN_NONE;
error:
    Py_DECREF(seq);
    free(st.ranks);
    free(st.made);
    return NULL;
}

PyDoc_STRVAR(replayed_doc,
"replayed(symbols) -> list[int]\n\n"
"The ids a word (a sequence of ids) becomes under the replay stages added so far, as\n"
"add_words stores it (for tests and inspection; the word is not added).");

static PyObject *Trainer_replayed(Trainer *self, PyObject *symbols) {
    MergeLoop *t = &self->loop;
    if (t->slots == NULL) { PyErr_SetString(PyExc_RuntimeError, "Trainer not initialised"); return NULL; }
    PyObject *seq = PySequence_Fast(symbols, "a word must be a sequence of ids");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if ((uint64_t)n > UINT32_MAX) { Py_DECREF(seq); PyErr_SetString(PyExc_OverflowError, "word too long"); return NULL; }
    uint32_t *s = malloc(((size_t)n + 1) * sizeof(uint32_t));
    if (s == NULL) { Py_DECREF(seq); return PyErr_NoMemory(); }
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long v = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == (unsigned long)-1 && PyErr_Occurred()) goto done;
        if (v >= t->n_tokens) { PyErr_SetString(PyExc_IndexError, "symbol id out of range"); goto done; }
        s[i] = (uint32_t)v;
    }
    for (uint64_t k = 0; k < t->n_stages; k++) {
        int64_t m = merge_word(t, &t->stages[k], s, (uint32_t)n);
        if (m < 0) { PyErr_NoMemory(); goto done; }
        n = (Py_ssize_t)m;
    }
    result = PyList_New(n);
    if (result == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLong(s[i]);
        if (v == NULL) { Py_CLEAR(result); goto done; }
        PyList_SET_ITEM(result, i, v);
    }
done:
    free(s);
    Py_DECREF(seq);
    return result;
}


/* The ids of a word (a bytes object or a sequence of ints) into t->sym + t->n_sym;
 * their number, or -1 with an error set. */
static Py_ssize_t read_symbols(MergeLoop *t, PyObject *symbols) {
    if (PyBytes_Check(symbols)) {
        Py_ssize_t n = PyBytes_GET_SIZE(symbols);
        if (n < 2) return n;  /* no pair, ever */
        if (grow((void **)&t->sym, &t->cap_sym, t->n_sym + (uint64_t)n, sizeof(uint32_t)) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(symbols);
        uint32_t *out = t->sym + t->n_sym;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (data[i] >= t->n_tokens) {
                PyErr_SetString(PyExc_IndexError, "symbol id out of range");
                return -1;
            }
            out[i] = data[i];
        }
        return n;
    }
    PyObject *seq = PySequence_Fast(symbols, "a word must be a sequence of ids");
    if (seq == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 2) { Py_DECREF(seq); return n; }
    if (grow((void **)&t->sym, &t->cap_sym, t->n_sym + (uint64_t)n, sizeof(uint32_t)) < 0) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    uint32_t *out = t->sym + t->n_sym;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long v = PyLong_AsUnsignedLong(items[i]);
        if (v == (unsigned long)-1 && PyErr_Occurred()) { Py_DECREF(seq); return -1; }
        if (v >= t->n_tokens) {
            PyErr_SetString(PyExc_IndexError, "symbol id out of range");
            Py_DECREF(seq);
            return -1;
        }
        out[i] = (uint32_t)v;
    }
    Py_DECREF(seq);
    return n;
}

/* Append one word (its symbols from a bytes object or a sequence of ints). */
static int append_word(MergeLoop *t, PyObject *symbols, int64_t count) {
    Py_ssize_t n = read_symbols(t, symbols);
    if (n < 2) return n < 0 ? -1 : 0;
    if (store_word(t, (uint64_t)n, count) < 0) { loop_error(t); return -1; }
    return 0;
}

PyDoc_STRVAR(add_words_doc,
"add_words(words) -> None\n\n"
"Append (symbols, count) pairs: symbols a bytes object (ids 0-255) or a sequence of ids.\n"
"Words with a count below 1 or fewer than two symbols are left out (they never merge).");

static PyObject *Trainer_add_words(Trainer *self, PyObject *words) {
    MergeLoop *t = &self->loop;
    if (!usable(t, 0)) return NULL;
    PyObject *it = PyObject_GetIter(words);
    if (it == NULL) return NULL;
    PyObject *item;
    while ((item = PyIter_Next(it)) != NULL) {
        PyObject *pair = PySequence_Fast(item, "each word must be a (symbols, count) pair");
        Py_DECREF(item);
        if (pair == NULL) goto error;
        if (PySequence_Fast_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_ValueError, "each word must be a (symbols, count) pair");
            Py_DECREF(pair);
            goto error;
        }
        long long count = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(pair, 1));
        if ((count == -1 && PyErr_Occurred()) ||
                (count > 0 && append_word(t, PySequence_Fast_GET_ITEM(pair, 0), count) < 0)) {
            Py_DECREF(pair);
            goto error;
        }
        Py_DECREF(pair);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
error:
    Py_DECREF(it);
    return NULL;
}

PyDoc_STRVAR(build_doc,
"build() -> None\n\nCount every adjacent pair, index the words each occurs in, make the heap.");

static PyObject *Trainer_build(Trainer *self, PyObject *unused) {
    MergeLoop *t = &self->loop;
    if (!usable(t, 0)) return NULL;
    int rc;
    t->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = ml_build(t);
    Py_END_ALLOW_THREADS
    t->busy = 0;
    if (rc < 0) return broken(t);
    Py_RETURN_NONE;
}

/* What run's callbacks need: the saved thread state (Python's lock released), the
 * allow_merge callable, whether it raised, and the batch's deadline. */
typedef struct {
    MergeLoop *t;
    PyThreadState *saved;
    PyObject *allow;
    double deadline;
} Run;

static double monotonic(void) {
#ifdef _WIN32
    return (double)GetTickCount64() / 1e3;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
#endif
}

static int past_deadline(void *ctx) { return monotonic() >= ((Run *)ctx)->deadline; }

/* allow_merge(left bytes, right bytes), Python's lock taken for the call: 1, 0, or -1 (it raised). */
static int ask_allow(void *ctx, uint32_t left, uint32_t right) {
    Run *r = ctx;
    MergeLoop *t = r->t;
    PyEval_RestoreThread(r->saved);
    PyObject *answer = PyObject_CallFunction(r->allow, "y#y#", (const char *)t->bytes + t->tok_off[left],
                                             (Py_ssize_t)t->tok_len[left], (const char *)t->bytes + t->tok_off[right],
                                             (Py_ssize_t)t->tok_len[right]);
    int allowed = answer == NULL ? -1 : PyObject_IsTrue(answer);
    Py_XDECREF(answer);
    r->saved = PyEval_SaveThread();
    return allowed;
}

PyDoc_STRVAR(run_doc,
"run(merges, vocab_size, min_frequency, max_token_length=None, allow_merge=None, seconds=inf)\n"
"    -> (ids, counts)\n\n"
"Merge on, best pair first, until `merges` merges are made, there are `vocab_size` tokens,\n"
"`seconds` have passed (checked after each merge), or no pair has min_frequency. A pair whose\n"
"token would have more than max_token_length bytes, or for which allow_merge(left bytes,\n"
"right bytes) is false, is dropped for good. A merge's token is the ordinary token with its\n"
"bytes, else a new one (the next id). Returns the merges made: their (left, right, token)\n"
"ids as native uint32 triples, and their counts as native int64, each as bytes (an array's).");

static PyObject *Trainer_run(Trainer *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"merges", "vocab_size", "min_frequency", "max_token_length", "allow_merge", "seconds",
                             NULL};
    MergeLoop *t = &self->loop;
    unsigned long long merges, vocab_size;
    long long min_frequency;
    PyObject *max_length = Py_None, *allow = Py_None;
    double seconds = Py_HUGE_VAL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "KKL|OOd", kwlist, &merges, &vocab_size, &min_frequency,
                                     &max_length, &allow, &seconds))
        return NULL;
    if (!usable(t, 1)) return NULL;
    uint64_t max_len = UINT64_MAX;
    if (max_length != Py_None) {
        max_len = PyLong_AsUnsignedLongLong(max_length);
        if (max_len == (uint64_t)-1 && PyErr_Occurred()) return NULL;
    }
    Run r = {t, NULL, allow != Py_None ? allow : NULL, monotonic() + seconds};
    t->allow = r.allow != NULL ? ask_allow : NULL;
    t->stop = past_deadline;
    t->ctx = &r;
    t->busy = 1;
    r.saved = PyEval_SaveThread();
    int rc = ml_run(t, merges, vocab_size, min_frequency, max_len);
    PyEval_RestoreThread(r.saved);
    t->busy = 0;
    t->allow = NULL;
    t->stop = NULL;
    t->ctx = NULL;
    if (rc < 0) {
        /* the merges made before the failure are not handed back: the state is ahead of the caller's */
        if (t->n_made > 0) t->broken = 1;
        if (PyErr_Occurred()) return NULL;  /* allow_merge raised */
        return t->broken ? broken(t) : loop_error(t);
    }
    if (t->n_made == 0) return Py_BuildValue("(y#y#)", "", (Py_ssize_t)0, "", (Py_ssize_t)0);
    return Py_BuildValue("(y#y#)", (const char *)t->made, (Py_ssize_t)(3 * t->n_made * sizeof(uint32_t)),
                         (const char *)t->made_count, (Py_ssize_t)(t->n_made * sizeof(int64_t)));
}

PyDoc_STRVAR(count_doc, "count(pair) -> int\n\nThe pair's current count (0 when absent).");

static PyObject *Trainer_count(Trainer *self, PyObject *arg) {
    MergeLoop *t = &self->loop;
    unsigned long long key = PyLong_AsUnsignedLongLong(arg);
    if (key == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (t->slots == NULL) return PyLong_FromLong(0);
    Slot *s = find(t, key);
    return PyLong_FromLongLong(s != NULL ? s->count : 0);
}

PyDoc_STRVAR(tokens_from_doc,
"tokens_from(start) -> list[bytes]\n\nThe bytes of the tokens from id start on (those the merges made after it), in id order.");

static PyObject *Trainer_tokens_from(Trainer *self, PyObject *arg) {
    MergeLoop *t = &self->loop;
    Py_ssize_t start = PyLong_AsSsize_t(arg);
    if (start == -1 && PyErr_Occurred()) return NULL;
    if (start < 0) start = 0;
    Py_ssize_t n = start < (Py_ssize_t)t->n_tokens ? (Py_ssize_t)t->n_tokens - start : 0;
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t id = (uint32_t)(start + i);
        PyObject *b = PyBytes_FromStringAndSize((const char *)t->bytes + t->tok_off[id], (Py_ssize_t)t->tok_len[id]);
        if (b == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, b);
    }
    return out;
}

PyDoc_STRVAR(stats_doc,
"stats() -> dict\n\nSizes: words, symbols, pairs, heap entries, tokens and bytes allocated (approximate);\n"
"threads; whether the initial count was split over threads, how many merges were, and how\n"
"many of those dropped a word listed twice in the pair's bucket.");

static PyObject *Trainer_stats(Trainer *self, PyObject *unused) {
    MergeLoop *t = &self->loop;
    uint64_t live_symbols;
    uint64_t allocated = ml_allocated(t, &live_symbols);
    return Py_BuildValue("{s:I,s:K,s:K,s:K,s:I,s:K,s:i,s:i,s:K,s:K}", "words", t->n_words, "symbols",
                         (unsigned long long)live_symbols, "pairs", (unsigned long long)t->used, "heap",
                         (unsigned long long)t->n_heap, "tokens", t->n_tokens, "allocated",
                         (unsigned long long)allocated, "threads", t->threads, "split_build", t->split_build,
                         "split_merges", (unsigned long long)t->split_merges, "deduplicated",
                         (unsigned long long)t->deduplicated);
}

static PyMethodDef Trainer_methods[] = {
    {"add_words", (PyCFunction)Trainer_add_words, METH_O, add_words_doc},
    {"replay", (PyCFunction)Trainer_replay, METH_O, replay_doc},
    {"replayed", (PyCFunction)Trainer_replayed, METH_O, replayed_doc},
    {"build", (PyCFunction)Trainer_build, METH_NOARGS, build_doc},
    {"run", (PyCFunction)(void (*)(void))Trainer_run, METH_VARARGS | METH_KEYWORDS, run_doc},
    {"count", (PyCFunction)Trainer_count, METH_O, count_doc},
    {"stats", (PyCFunction)Trainer_stats, METH_NOARGS, stats_doc},
    {"tokens_from", (PyCFunction)Trainer_tokens_from, METH_O, tokens_from_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(Trainer_doc,
"Trainer(token_bytes, tie=None, *, threads=1, parallel_min=4096, first_seen=False, ordinary=None)\n\n"
"The merge loop's state in C. token_bytes: the initial tokens by id; tie: None for the\n"
"lexicographic tie-break (the greater (left bytes, right bytes) wins), else the hf\n"
"tie value of each token (the smaller (tie[left], tie[right]) wins; a new token's is its id).\n"
"first_seen: the pair whose first occurrence comes first wins (the words added in the\n"
"order the text first shows them). ordinary: the ids a merge making their bytes takes (the\n"
"ordinary tokens; default: every token, the lowest id where bytes repeat).");

static PyTypeObject TrainerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpestore._mergecore.Trainer",
    .tp_basicsize = sizeof(Trainer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = Trainer_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Trainer_init,
    .tp_dealloc = (destructor)Trainer_dealloc,
    .tp_methods = Trainer_methods,
};

/* Decimal digits of v at p; returns the end. */
static char *put_u32(char *p, uint32_t v) {
    char digits[10];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = digits[--n];
    return p;
}

/* A buffer of uint32 (an array('I')): 0, or -1 with TypeError (the view released). */
static int u32_view(PyObject *obj, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != 4 || view->format == NULL || strcmp(view->format, "I") != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "merges_text takes array('I') columns");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(merges_text_doc,
"merges_text(lefts, rights, tokens) -> bytes\n\n"
"The merges as spec.fingerprint hashes them: b'left,right,token;' for each, in order\n"
"(the columns: array('I') of one length).");

static PyObject *merges_text(PyObject *module, PyObject *args) {
    PyObject *objs[3];
    if (!PyArg_ParseTuple(args, "OOO:merges_text", &objs[0], &objs[1], &objs[2])) return NULL;
    Py_buffer views[3];
    int got = 0;
    PyObject *out = NULL;
    for (; got < 3; got++)
        if (u32_view(objs[got], &views[got]) < 0) goto done;
    Py_ssize_t n = views[0].len / 4;
    if (views[1].len / 4 != n || views[2].len / 4 != n) {
        PyErr_SetString(PyExc_ValueError, "merges_text takes columns of one length");
        goto done;
    }
    if (n > (PY_SSIZE_T_MAX - 1) / 33) {
        PyErr_NoMemory();
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, n * 33);  /* 3 x 10 digits, 2 commas, 1 semicolon */
    if (out == NULL) goto done;
    char *start = PyBytes_AS_STRING(out), *p = start;
    const uint32_t *l = views[0].buf, *r = views[1].buf, *k = views[2].buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        p = put_u32(p, l[i]);
        *p++ = ',';
        p = put_u32(p, r[i]);
        *p++ = ',';
        p = put_u32(p, k[i]);
        *p++ = ';';
    }
    if (_PyBytes_Resize(&out, p - start) < 0) out = NULL;
done:
    while (got > 0) PyBuffer_Release(&views[--got]);
    return out;
}

static PyMethodDef module_methods[] = {
    {"merges_text", merges_text, METH_VARARGS, merges_text_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bpestore._mergecore",
    "The optional compiled merge loop of bpestore.trainer (the pure-Python trainer is the reference).",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__mergecore(void) {
    if (PyType_Ready(&TrainerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&TrainerType);
    if (PyModule_AddObject(m, "Trainer", (PyObject *)&TrainerType) < 0) {
        Py_DECREF(&TrainerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}