/* store._appender's AppendResult (store/_append_result.h): where a put landed, as store.results.PyAppendResult.
 *
 * The fields are C values, so the C appends (store/_appender.c) build one with one allocation, no integer objects
 * and no garbage-collector tracking: a slotted Python class, which every heap type is tracked as, cost a sixth of a
 * 128 B single append. Its pure-Python twin store.results.PyAppendResult is used without the extension;
 * tests/store/test_append_result.py holds the two to the same answers. Not tracked by the collector: `phy_offsets`
 * (None, a tuple of ints or packed ConsumeQueue entries) and `store_host` (bytes) cannot refer back to it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include "_append_result.h"

#define CQ_ENTRY 20 /* bytes of one packed ConsumeQueue entry; its first 8 are the big-endian CommitLog offset */

typedef struct {
    PyObject_HEAD
    long long phy_offset, size, queue_offset, store_timestamp;
    PyObject *phy_offsets; /* None: one record at phy_offset; bytes: packed entries, unpacked on first use */
    PyObject *store_host;
} Result;

static long long be64_at(const char *p) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | b[i];
    return (long long)v;
}

static PyObject *result_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    long long phy, size, queue_offset, store_ts;
    PyObject *phy_offsets, *store_host;
    static char *names[] = {"phy_offset", "size", "queue_offset", "store_timestamp", "phy_offsets", "store_host",
                            NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "LLLLOO:AppendResult", names, &phy, &size, &queue_offset, &store_ts,
                                     &phy_offsets, &store_host))
        return NULL;
    if (phy_offsets != Py_None && !PyTuple_CheckExact(phy_offsets) && !PyBytes_CheckExact(phy_offsets)) {
        PyErr_SetString(PyExc_TypeError, "phy_offsets must be None, a tuple or packed bytes");
        return NULL;
    }
    if (!PyBytes_CheckExact(store_host)) {
        PyErr_SetString(PyExc_TypeError, "store_host must be bytes");
        return NULL;
    }
    return append_result(store_host, phy, (Py_ssize_t)size, queue_offset, store_ts, phy_offsets); /* no subclasses */
}

static void result_dealloc(Result *self) {
    Py_XDECREF(self->phy_offsets);
    Py_XDECREF(self->store_host);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t result_count(Result *self) {
    PyObject *o = self->phy_offsets;
    return o == Py_None ? 1 : PyBytes_CheckExact(o) ? PyBytes_GET_SIZE(o) / CQ_ENTRY : PyTuple_GET_SIZE(o);
}

/* phy_offsets: the tuple, made (and kept) on first use from None or the packed entries. */
static PyObject *result_phy_offsets(Result *self, void *closure) {
    PyObject *o = self->phy_offsets;
    if (PyTuple_CheckExact(o)) return Py_NewRef(o);
    Py_ssize_t n = result_count(self);
    PyObject *t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = self->phy_offset;
        if (o != Py_None) v = be64_at(PyBytes_AS_STRING(o) + i * CQ_ENTRY);
        PyObject *item = PyLong_FromLongLong(v);
        if (item == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, item);
    }
    Py_SETREF(self->phy_offsets, Py_NewRef(t));
    return t;
}

static PyObject *result_count_get(Result *self, void *closure) { return PyLong_FromSsize_t(result_count(self)); }

static PyObject *result_end_offset(Result *self, void *closure) {
    return PyLong_FromLongLong(self->phy_offset + self->size);
}

/* msg_id: offset msgIds, comma-joined for a batch: upper-case hex of the store host and the 8-byte offset each. */
static PyObject *result_msg_id(Result *self, void *closure) {
    PyObject *offsets = result_phy_offsets(self, NULL);
    if (offsets == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(offsets), host = PyBytes_GET_SIZE(self->store_host), each = 2 * (host + 8);
    PyObject *text = PyUnicode_New(n * each + (n ? n - 1 : 0), 127);
    if (text == NULL) {
        Py_DECREF(offsets);
        return NULL;
    }
    static const char HEX[] = "0123456789ABCDEF";
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(text);
    const unsigned char *h = (const unsigned char *)PyBytes_AS_STRING(self->store_host);
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long v = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(offsets, i));
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_DECREF(offsets);
            Py_DECREF(text);
            return NULL;
        }
        if (i) *out++ = ',';
        for (Py_ssize_t k = 0; k < host; k++) {
            *out++ = HEX[h[k] >> 4];
            *out++ = HEX[h[k] & 15];
        }
        for (int shift = 60; shift >= 0; shift -= 4) *out++ = HEX[(v >> shift) & 15];
    }
    Py_DECREF(offsets);
    return text;
}

static PyObject *result_repr(Result *self) {
    return PyUnicode_FromFormat("AppendResult(phy_offset=%lld, size=%lld, queue_offset=%lld, count=%zd)",
                                self->phy_offset, self->size, self->queue_offset, result_count(self));
}

static PyMemberDef result_members[] = {
    {"phy_offset", T_LONGLONG, offsetof(Result, phy_offset), READONLY, "CommitLog offset of the first record."},
    {"size", T_LONGLONG, offsetof(Result, size), READONLY, "Bytes of the record(s)."},
    {"queue_offset", T_LONGLONG, offsetof(Result, queue_offset), READONLY, "Queue offset of the first record."},
    {"store_timestamp", T_LONGLONG, offsetof(Result, store_timestamp), READONLY, "The store time given."},
    {"store_host", T_OBJECT, offsetof(Result, store_host), READONLY, "The packed store host."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef result_getset[] = {
    {"phy_offsets", (getter)result_phy_offsets, NULL, "Each record's CommitLog offset.", NULL},
    {"count", (getter)result_count_get, NULL, "The records appended.", NULL},
    {"end_offset", (getter)result_end_offset, NULL, "CommitLog offset just past the last record.", NULL},
    {"msg_id", (getter)result_msg_id, NULL, "Offset msgId(s), comma-joined for a batch.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject AppendResultType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "store._appender.AppendResult",
    .tp_basicsize = sizeof(Result),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "AppendResult(phy_offset, size, queue_offset, store_timestamp, phy_offsets, store_host): where a put "
              "landed (store.results.AppendResult).",
    .tp_new = result_new,
    .tp_dealloc = (destructor)result_dealloc,
    .tp_repr = (reprfunc)result_repr,
    .tp_members = result_members,
    .tp_getset = result_getset,
};

/* ---- built by the C appends ---------------------------------------------------------------------------------- */

/* AppendResult(phy, size, queue_offset, store_ts, phy_offsets, store_host), without its constructor's argument
 * parsing. */
PyObject *append_result(PyObject *store_host, long long phy, Py_ssize_t size, long long queue_offset,
                        int64_t store_ts, PyObject *phy_offsets) {
    Result *r = PyObject_New(Result, &AppendResultType);
    if (r == NULL) return NULL;
    r->phy_offset = phy;
    r->size = size;
    r->queue_offset = queue_offset;
    r->store_timestamp = store_ts;
    r->phy_offsets = Py_NewRef(phy_offsets);
    r->store_host = Py_NewRef(store_host);
    return (PyObject *)r;
}
