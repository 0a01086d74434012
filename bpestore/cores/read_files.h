/* Small files read whole, one call for many (bpestore/ingest/pieces.py SmallFiles.read): what
   read_file does for each, without four Python calls and their objects per file.

   read_files(names, stamps) -> (datas, failure): the bytes of each file in turn, up to the
   first that cannot be read (failure: its errno) or was written while read (failure 0: its
   (size, mtime_ns, inode) after reading differ from its stamp, a tuple or None: unchecked);
   failure None: all were read. Each file: open, read to its end (a buffer of its stamp's size
   and a byte more: one read where it is as listed, its falling short the end where fstat
   agrees), fstat, close. */
#ifndef BPESTORE_READ_FILES_H
#define BPESTORE_READ_FILES_H

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_BINARY
#define O_BINARY 0
#endif
#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/* A file's modification time in nanoseconds, as os.stat's st_mtime_ns. */
static long long
stat_mtime_ns(const struct stat *st)
{
#if defined(HAVE_STAT_TV_NSEC)
    return (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
#elif defined(HAVE_STAT_TV_NSEC2)
    return (long long)st->st_mtimespec.tv_sec * 1000000000LL + st->st_mtimespec.tv_nsec;
#else
    return (long long)st->st_mtime * 1000000000LL;
#endif
}

/* The bytes of file `path` into *data (a new bytes object; `size`: the size listed), and its
   stat after reading into *st; 0, or the errno of the call that failed (*data NULL), or -1
   with a Python exception set. */
static int
read_whole_file(const char *path, Py_ssize_t size, PyObject **data, struct stat *st)
{
    *data = NULL;
    int fd;
    do {
        fd = open(path, O_RDONLY | O_BINARY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR && PyErr_CheckSignals() == 0);
    if (fd < 0)
        return PyErr_Occurred() ? -1 : errno;
    Py_ssize_t room = size + 1, got = 0;
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, room);
    int failed = bytes == NULL ? -1 : 0, stated = 0;
    while (failed == 0) {
        if (got == room) {  /* grown since listed: read on to its end */
            room = room < ((Py_ssize_t)1 << 20) ? ((Py_ssize_t)1 << 20) : room * 2;
            if (_PyBytes_Resize(&bytes, room) < 0) {
                failed = -1;
                break;
            }
        }
        ssize_t n = read(fd, PyBytes_AS_STRING(bytes) + got, (size_t)(room - got));
        if (n > 0) {
            got += n;
            if (got == n && got < room) {  /* a first read that fell short: the end, where fstat agrees */
                if (fstat(fd, st) < 0)
                    failed = errno;
                else if ((Py_ssize_t)st->st_size <= got)
                    stated = 1;
                if (failed != 0 || stated)
                    break;
            }
        }
        else if (n == 0)
            break;
        else if (errno != EINTR)
            failed = errno;
        else if (PyErr_CheckSignals() < 0)
            failed = -1;
    }
    if (failed == 0 && !stated && fstat(fd, st) < 0)
        failed = errno;
    close(fd);
    if (failed == 0 && got != room && _PyBytes_Resize(&bytes, got) < 0)
        failed = -1;  /* (bytes is NULL then) */
    if (failed != 0) {
        Py_XDECREF(bytes);
        return failed;
    }
    *data = bytes;
    return 0;
}

/* Whether a file's stat after reading is its stamp (size, mtime_ns, inode): 1, 0, -1 on error. */
static int
same_stamp(PyObject *stamp, const struct stat *st)
{
    PyObject *found = Py_BuildValue("(LLK)", (long long)st->st_size, stat_mtime_ns(st),
                                    (unsigned long long)st->st_ino);
    if (found == NULL)
        return -1;
    int same = PyObject_RichCompareBool(found, stamp, Py_EQ);
    Py_DECREF(found);
    return same;
}

static PyObject *
read_files(PyObject *self, PyObject *args)
{
    PyObject *names, *stamps;
    if (!PyArg_ParseTuple(args, "O!O!:read_files", &PyList_Type, &names, &PyList_Type, &stamps))
        return NULL;
    if (PyList_GET_SIZE(stamps) != PyList_GET_SIZE(names)) {
        PyErr_SetString(PyExc_ValueError, "read_files: one stamp per name");
        return NULL;
    }
    PyObject *datas = PyList_New(0);
    if (datas == NULL)
        return NULL;
    PyObject *failure = Py_None;
    Py_INCREF(failure);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names); i++) {
        PyObject *stamp = PyList_GET_ITEM(stamps, i), *path = NULL, *data = NULL;
        Py_ssize_t size = 0;
        if (stamp != Py_None) {
            if (!PyTuple_Check(stamp) || PyTuple_GET_SIZE(stamp) != 3 ||
                    (size = PyLong_AsSsize_t(PyTuple_GET_ITEM(stamp, 0))) < 0) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "read_files: a stamp is (size, mtime_ns, inode) or None");
                goto error;
            }
        }
        if (!PyUnicode_FSConverter(PyList_GET_ITEM(names, i), &path))
            goto error;
        struct stat st;
        int failed = read_whole_file(PyBytes_AS_STRING(path), size, &data, &st);
        Py_DECREF(path);
        if (failed < 0)
            goto error;
        if (failed == 0 && stamp != Py_None) {
            int same = same_stamp(stamp, &st);
            if (same < 0) {
                Py_DECREF(data);
                goto error;
            }
            if (!same) {
                Py_CLEAR(data);
                failed = -2;
            }
        }
        if (failed != 0) {
            Py_SETREF(failure, PyLong_FromLong(failed == -2 ? 0 : failed));
            if (failure == NULL)
                goto error;
            break;
        }
        int appended = PyList_Append(datas, data);
        Py_DECREF(data);
        if (appended < 0)
            goto error;
    }
    return Py_BuildValue("(NN)", datas, failure);
error:
    Py_DECREF(datas);
    Py_XDECREF(failure);
    return NULL;
}

#endif
