/* The character classes of the built-in pre-tokenizers' scans (cores/pretok.h), asked
   of the caller's classify function (bpestore.text.char_class) once per code point and
   kept in a table, with the GIL held, before a scan: shared by the counting core
   (_countcore.c) and the encode core (_encodecore.c). */
#ifndef BPESTORE_CLASSIFY_H
#define BPESTORE_CLASSIFY_H
#include <Python.h>
#include <stdint.h>

#include "cores/pretok.h"

static int
ask_class(uint8_t *classes, PyObject *classify, Py_UCS4 c)
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
classify_text(uint8_t *classes, const void *data, int kind, Py_ssize_t n, PyObject *classify)
{
    if (kind == PyUnicode_1BYTE_KIND) {  /* all 256 at once (a wider text may have filled only some) */
        for (Py_UCS4 c = 0; c < 256; c++) {
            if (c == 0xFF)  /* seen by a thread reading without the GIL after the others */
                CLASSES_RELEASE();
            if (!classes[c] && ask_class(classes, classify, c) < 0)
                return -1;
        }
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (!classes[c] && ask_class(classes, classify, c) < 0)
            return -1;
    }
    return 0;
}

#endif
