/* The batch send body (remoting/codec/batch_body.py, the contract and the twins; tests/codec/test_batch_split.py).
 *
 * split_stored_entries(body, suffix): a SEND_BATCH_MESSAGE body split into (body, stored properties, flag) tuples,
 * each message's properties with the broker's suffix joined as the store keeps them. The contract and the
 * pure-Python twin are remoting/codec/batch_body.py; both give equal lists (tests/codec/test_batch_split.py).
 * Returns None for a body the twin would refuse (the caller then runs the twin, which raises the error) and for an
 * object without a contiguous buffer (the twin copies it).
 */
#ifndef ROCKETRIO_BATCH_SPLIT_H
#define ROCKETRIO_BATCH_SPLIT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline int32_t bs_get32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]);
}

/* The stored properties: `props` (UTF-8, undecodable bytes replaced) then the suffix, joined by 0x02 unless the
 * properties are empty or already end with it. New reference, NULL on error. */
static PyObject *bs_stored(const unsigned char *props, Py_ssize_t n, PyObject *suffix, const char *suffix_ascii,
                           Py_ssize_t suffix_len) {
    int join = n > 0 && props[n - 1] != 0x02;
    if (suffix_ascii != NULL) {
        int ascii = 1;
        for (Py_ssize_t i = 0; i < n; i++)
            if (props[i] & 0x80) {
                ascii = 0;
                break;
            }
        if (ascii) {
            PyObject *out = PyUnicode_New(n + join + suffix_len, 127);
            if (out == NULL) return NULL;
            Py_UCS1 *w = PyUnicode_1BYTE_DATA(out);
            memcpy(w, props, (size_t)n);
            if (join) w[n] = 0x02;
            memcpy(w + n + join, suffix_ascii, (size_t)suffix_len);
            return out;
        }
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)props, n, "replace");
    if (text == NULL) return NULL;
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    if (len > 0 && PyUnicode_READ_CHAR(text, len - 1) != 0x02) {
        PyObject *sep = PyUnicode_FromOrdinal(0x02);
        PyObject *joined = sep == NULL ? NULL : PyUnicode_Concat(text, sep);
        Py_XDECREF(sep);
        Py_DECREF(text);
        if (joined == NULL) return NULL;
        text = joined;
    }
    PyObject *out = PyUnicode_Concat(text, suffix);
    Py_DECREF(text);
    return out;
}

static PyObject *split_stored_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "split_stored_entries(body, suffix: str)");
        return NULL;
    }
    PyObject *suffix = args[1];
    const char *suffix_ascii = PyUnicode_IS_ASCII(suffix) ? (const char *)PyUnicode_1BYTE_DATA(suffix) : NULL;
    Py_ssize_t suffix_len = PyUnicode_GET_LENGTH(suffix);
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {  /* a non-contiguous view: the twin copies it */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const unsigned char *raw = view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *entries = PyList_New(0);
    if (entries == NULL) goto fail;
    while (pos < end) {
        if (end - pos < 20) goto refuse;
        /* the size word is not read: Java's MessageExtBatchEncoder walks the entry by its lengths */
        int32_t flag = bs_get32(raw + pos + 12), body_len = bs_get32(raw + pos + 16);
        Py_ssize_t p = pos + 20;
        if (body_len < 0 || p + body_len + 2 > end) goto refuse;
        const unsigned char *body = raw + p;
        p += body_len;
        int16_t props_len = (int16_t)((uint16_t)raw[p] << 8 | raw[p + 1]);
        p += 2;
        if (props_len < 0 || p + props_len > end) goto refuse;
        PyObject *data = PyBytes_FromStringAndSize((const char *)body, body_len);
        PyObject *stored = data == NULL ? NULL : bs_stored(raw + p, props_len, suffix, suffix_ascii, suffix_len);
        PyObject *flag_obj = stored == NULL ? NULL : PyLong_FromLong(flag);
        PyObject *entry = flag_obj == NULL ? NULL : PyTuple_Pack(3, data, stored, flag_obj);
        Py_XDECREF(data);
        Py_XDECREF(stored);
        Py_XDECREF(flag_obj);
        if (entry == NULL || PyList_Append(entries, entry) < 0) {
            Py_XDECREF(entry);
            goto fail;
        }
        Py_DECREF(entry);
        pos = p + props_len;
    }
    PyBuffer_Release(&view);
    return entries;
refuse:
    PyBuffer_Release(&view);
    Py_DECREF(entries);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(entries);
    return NULL;
}

/* encode_batch_parts(entries): the client's batch body from (body, encoded properties, flag) tuples, per entry
 * size | magic 0 | crc 0 | flag | bodyLen body | propsLen props. None when an entry is not such a tuple, its flag
 * not an int32 or its properties longer than 32767 bytes (the twin then raises or encodes as it does). */
static PyObject *encode_batch_parts(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1 || !PyList_CheckExact(args[0])) Py_RETURN_NONE;
    PyObject *entries = args[0];
    Py_ssize_t n = PyList_GET_SIZE(entries), total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(entries, i);
        if (!PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 3 || !PyBytes_CheckExact(PyTuple_GET_ITEM(e, 0)) ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(e, 1)) || !PyLong_CheckExact(PyTuple_GET_ITEM(e, 2)))
            Py_RETURN_NONE;
        Py_ssize_t props = PyBytes_GET_SIZE(PyTuple_GET_ITEM(e, 1));
        if (props > 32767) Py_RETURN_NONE;
        int overflow = 0;
        long long flag = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(e, 2), &overflow);
        if (overflow || flag < INT32_MIN || flag > INT32_MAX) Py_RETURN_NONE;
        Py_ssize_t size = 22 + PyBytes_GET_SIZE(PyTuple_GET_ITEM(e, 0)) + props;
        if (size > INT32_MAX || total > PY_SSIZE_T_MAX - size) Py_RETURN_NONE;
        total += size;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) return NULL;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(entries, i);
        PyObject *body = PyTuple_GET_ITEM(e, 0), *props = PyTuple_GET_ITEM(e, 1);
        Py_ssize_t blen = PyBytes_GET_SIZE(body), plen = PyBytes_GET_SIZE(props);
        uint32_t words[5] = {(uint32_t)(22 + blen + plen), 0, 0, (uint32_t)PyLong_AsLong(PyTuple_GET_ITEM(e, 2)),
                             (uint32_t)blen};
        for (int k = 0; k < 5; k++, w += 4) {
            w[0] = (unsigned char)(words[k] >> 24);
            w[1] = (unsigned char)(words[k] >> 16);
            w[2] = (unsigned char)(words[k] >> 8);
            w[3] = (unsigned char)words[k];
        }
        memcpy(w, PyBytes_AS_STRING(body), (size_t)blen);
        w += blen;
        w[0] = (unsigned char)(plen >> 8);
        w[1] = (unsigned char)plen;
        w += 2;
        memcpy(w, PyBytes_AS_STRING(props), (size_t)plen);
        w += plen;
    }
    return out;
}

#endif
