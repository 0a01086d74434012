/* The merge loop's hot work in C: the optional compiled core of bpestore.trainer.
 *
 * It works on the pure trainer's own Python structures (words: list of lists of
 * ints; counts: list of ints; pair_counts: dict pair -> count; pair_words:
 * dict pair -> list of word indices) and does exactly what the pure-Python
 * BpeTrainer._build_stats and the word loop of BpeTrainer._merge do, in the
 * same order, so the merge lists are identical by construction (and tested to
 * be: tests/test_merge_core.py). The heap, tie-breaks and stopping rules stay
 * in Python. A pair (a, b) is the int (a << 32) | b.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define SHIFT 32

typedef unsigned long long u64;

/* The value of an id (a non-negative Python int). */
static int id_of(PyObject *obj, u64 *out) {
    u64 v = PyLong_AsUnsignedLongLong(obj);
    if (v == (u64)-1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

/* counts[key] += delta (the key is created at 0 when absent). */
static int add_count(PyObject *counts, PyObject *key, long long delta) {
    long long value = 0;
    PyObject *old = PyDict_GetItemWithError(counts, key); /* borrowed */
    if (old != NULL) {
        value = PyLong_AsLongLong(old);
        if (value == -1 && PyErr_Occurred()) return -1;
    } else if (PyErr_Occurred()) {
        return -1;
    }
    PyObject *updated = PyLong_FromLongLong(value + delta);
    if (updated == NULL) return -1;
    int rc = PyDict_SetItem(counts, key, updated);
    Py_DECREF(updated);
    return rc;
}

/* Word `index` (the int object `index_obj`) holds pair `key`: add it to the
 * pair's bucket unless it is its last entry already. */
static int index_word(PyObject *pair_words, PyObject *key, PyObject *index_obj, Py_ssize_t index) {
    PyObject *bucket = PyDict_GetItemWithError(pair_words, key); /* borrowed */
    if (bucket == NULL) {
        if (PyErr_Occurred()) return -1;
        PyObject *fresh = PyList_New(1);
        if (fresh == NULL) return -1;
        Py_INCREF(index_obj);
        PyList_SET_ITEM(fresh, 0, index_obj);
        int rc = PyDict_SetItem(pair_words, key, fresh);
        Py_DECREF(fresh);
        return rc;
    }
    if (!PyList_Check(bucket)) {
        PyErr_SetString(PyExc_TypeError, "pair_words values must be lists");
        return -1;
    }
    Py_ssize_t size = PyList_GET_SIZE(bucket);
    if (size > 0) {
        Py_ssize_t last = PyLong_AsSsize_t(PyList_GET_ITEM(bucket, size - 1));
        if (last == -1 && PyErr_Occurred()) return -1;
        if (last == index) return 0;
    }
    return PyList_Append(bucket, index_obj);
}

/* pair_counts[pair] -= n */
static int lose(PyObject *pair_counts, u64 pair, long long n) {
    PyObject *key = PyLong_FromUnsignedLongLong(pair);
    if (key == NULL) return -1;
    int rc = add_count(pair_counts, key, -n);
    Py_DECREF(key);
    return rc;
}

/* pair_counts[pair] += n, the pair marked touched and word `index` indexed under it. */
static int gain(PyObject *pair_counts, PyObject *pair_words, PyObject *touched, u64 pair, long long n,
                PyObject *index_obj, Py_ssize_t index) {
    PyObject *key = PyLong_FromUnsignedLongLong(pair);
    if (key == NULL) return -1;
    int rc = add_count(pair_counts, key, n);
    if (rc == 0) rc = PySet_Add(touched, key);
    if (rc == 0) rc = index_word(pair_words, key, index_obj, index);
    Py_DECREF(key);
    return rc;
}

static PyObject *word_list(PyObject *words, Py_ssize_t index) {
    if (index < 0 || index >= PyList_GET_SIZE(words)) {
        PyErr_SetString(PyExc_IndexError, "word index out of range");
        return NULL;
    }
    PyObject *word = PyList_GET_ITEM(words, index);
    if (!PyList_Check(word)) {
        PyErr_SetString(PyExc_TypeError, "words must be lists of ints");
        return NULL;
    }
    return word;
}

PyDoc_STRVAR(build_stats_doc,
"build_stats(words, counts, pair_counts, pair_words)\n--\n\n"
"Count every adjacent pair of every word (times its count) into pair_counts and\n"
"index the words each pair occurs in into pair_words (as BpeTrainer._build_stats).");

static PyObject *build_stats(PyObject *self, PyObject *args) {
    PyObject *words, *counts, *pair_counts, *pair_words;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyList_Type, &words, &PyList_Type, &counts,
                          &PyDict_Type, &pair_counts, &PyDict_Type, &pair_words))
        return NULL;
    Py_ssize_t n_words = PyList_GET_SIZE(words);
    if (PyList_GET_SIZE(counts) != n_words) {
        PyErr_SetString(PyExc_ValueError, "words and counts differ in length");
        return NULL;
    }
    for (Py_ssize_t index = 0; index < n_words; index++) {
        PyObject *word = word_list(words, index);
        if (word == NULL) return NULL;
        Py_ssize_t len = PyList_GET_SIZE(word);
        if (len < 2) continue;
        long long n = PyLong_AsLongLong(PyList_GET_ITEM(counts, index));
        if (n == -1 && PyErr_Occurred()) return NULL;
        PyObject *index_obj = PyLong_FromSsize_t(index);
        if (index_obj == NULL) return NULL;
        u64 a, b;
        if (id_of(PyList_GET_ITEM(word, 0), &a) < 0) goto fail;
        for (Py_ssize_t i = 1; i < len; i++) {
            if (id_of(PyList_GET_ITEM(word, i), &b) < 0) goto fail;
            PyObject *key = PyLong_FromUnsignedLongLong((a << SHIFT) | b);
            if (key == NULL) goto fail;
            int rc = add_count(pair_counts, key, n);
            if (rc == 0) rc = index_word(pair_words, key, index_obj, index);
            Py_DECREF(key);
            if (rc < 0) goto fail;
            a = b;
        }
        Py_DECREF(index_obj);
        continue;
    fail:
        Py_DECREF(index_obj);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(merge_doc,
"merge(words, counts, pair_counts, pair_words, indices, left, right, token) -> set\n--\n\n"
"Merge (left, right) into token, left to right, in the words listed in indices\n"
"(the pair's bucket, already removed from pair_words), updating pair_counts and\n"
"pair_words as BpeTrainer._merge does; returns the pairs whose count grew.\n"
"A word that held the pair is changed in place.");

static PyObject *merge(PyObject *self, PyObject *args) {
    PyObject *words, *counts, *pair_counts, *pair_words, *indices, *token_obj;
    unsigned long long left, right;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OKKO", &PyList_Type, &words, &PyList_Type, &counts,
                          &PyDict_Type, &pair_counts, &PyDict_Type, &pair_words, &indices, &left, &right,
                          &token_obj))
        return NULL;
    u64 token;
    if (id_of(token_obj, &token) < 0) return NULL;
    PyObject *seq = PySequence_Fast(indices, "indices must be a sequence");
    if (seq == NULL) return NULL;
    PyObject *touched = PySet_New(NULL);
    if (touched == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    PyObject **out = NULL; /* the merged word's items, new references */
    Py_ssize_t out_cap = 0;
    Py_ssize_t n_indices = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t k = 0; k < n_indices; k++) {
        PyObject *index_obj = PySequence_Fast_GET_ITEM(seq, k);
        Py_ssize_t index = PyLong_AsSsize_t(index_obj);
        if (index == -1 && PyErr_Occurred()) goto error;
        PyObject *word = word_list(words, index);
        if (word == NULL) goto error;
        if (index >= PyList_GET_SIZE(counts)) {
            PyErr_SetString(PyExc_IndexError, "word index out of range of counts");
            goto error;
        }
        long long n = PyLong_AsLongLong(PyList_GET_ITEM(counts, index));
        if (n == -1 && PyErr_Occurred()) goto error;
        Py_ssize_t len = PyList_GET_SIZE(word);
        Py_ssize_t copied = 0; /* word[:copied] is in out already (merged) */
        Py_ssize_t n_out = 0;
        int merged = 0;
        Py_ssize_t i = 0;
        while (i + 1 < len) {
            u64 a, b;
            if (id_of(PyList_GET_ITEM(word, i), &a) < 0) goto error;
            if (a != left) {
                i++;
                continue;
            }
            if (id_of(PyList_GET_ITEM(word, i + 1), &b) < 0) goto error;
            if (b != right) {
                i++;
                continue;
            }
            /* (prev, left) becomes (prev, token); prev is the new token when the
             * previous occurrence ends right before this one ("a b a b"). */
            if (i > 0) {
                u64 prev;
                if (merged && copied == i) {
                    prev = token;
                } else if (id_of(PyList_GET_ITEM(word, i - 1), &prev) < 0) {
                    goto error;
                }
                if (lose(pair_counts, (prev << SHIFT) | left, n) < 0) goto error;
                if (gain(pair_counts, pair_words, touched, (prev << SHIFT) | token, n, index_obj, index) < 0)
                    goto error;
            }
            /* (right, next) becomes (token, next); next is as in the word before this merge. */
            if (i + 2 < len) {
                u64 next;
                if (id_of(PyList_GET_ITEM(word, i + 2), &next) < 0) goto error;
                if (lose(pair_counts, (right << SHIFT) | next, n) < 0) goto error;
                if (gain(pair_counts, pair_words, touched, (token << SHIFT) | next, n, index_obj, index) < 0)
                    goto error;
            }
            if (!merged) {
                merged = 1;
                if (out_cap < len) {
                    PyObject **grown = PyMem_Realloc(out, (size_t)len * sizeof(PyObject *));
                    if (grown == NULL) {
                        PyErr_NoMemory();
                        goto error;
                    }
                    out = grown;
                    out_cap = len;
                }
            }
            for (Py_ssize_t j = copied; j < i; j++) {
                out[n_out] = PyList_GET_ITEM(word, j);
                Py_INCREF(out[n_out++]);
            }
            Py_INCREF(token_obj);
            out[n_out++] = token_obj;
            copied = i + 2;
            i += 2;
        }
        if (merged) {
            /* The word becomes out, in place (no new list: nothing for the
             * garbage collector to count). */
            for (Py_ssize_t j = copied; j < len; j++) {
                out[n_out] = PyList_GET_ITEM(word, j);
                Py_INCREF(out[n_out++]);
            }
            for (Py_ssize_t j = 0; j < n_out; j++) {
                PyObject *old = PyList_GET_ITEM(word, j);
                PyList_SET_ITEM(word, j, out[j]); /* steals the reference */
                Py_DECREF(old);
            }
            if (PyList_SetSlice(word, n_out, len, NULL) < 0) goto error;
        }
    }
    PyMem_Free(out);
    Py_DECREF(seq);
    return touched;
error:
    PyMem_Free(out);
    Py_DECREF(seq);
    Py_DECREF(touched);
    return NULL;
}

static PyMethodDef methods[] = {
    {"build_stats", build_stats, METH_VARARGS, build_stats_doc},
    {"merge", merge, METH_VARARGS, merge_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "bpestore._mergecore",
    "The optional compiled core of bpestore.trainer's merge loop (the pure-Python trainer is the reference).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__mergecore(void) { return PyModule_Create(&module); }
