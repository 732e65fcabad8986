/* dledger._entries: a DLedger member's per-entry work in C, each function the twin of Python in dledger/messages.py
 * or dledger/file_store.py (ROCKETRIO_PURE_PYTHON=1 runs that Python; tests/dledger/test_native_entries.py proves
 * both give the same bytes and values):
 *
 * - push_json(request, group_json, names_json): the leader's push body, as messages.encode_push writes it (orjson's
 *   bytes: sorted keys, each entry's body in Base64); None when a field is not a plain int that fits a Java long or
 *   a body is not a contiguous buffer (the caller then takes the Python way, which gives the body or the error).
 * - decode_entries(entry_type, items): a follower's push decode, a list of entry objects (dicts from orjson) made
 *   into a tuple of entry_type; None when any of them is not the usual shape (every field of its type and width,
 *   canonical Base64, size agreeing), and the caller's Python decodes it all again, raising its MessageError.
 * - write_entries(...): a follower's append of a run of entries into the current data and index segments, each
 *   body then header then index record, as FileLedger._write; it stops (returning how many it wrote) at the first
 *   entry that is not the next one, does not land where the data ends, would need a blank or a new segment, or whose
 *   index record lies past the reserved part of the index segment. The caller's Python takes that entry.
 * - push_request(request_type, entry_type, push_types, data): a follower's decode of the usual push, entries
 *   included, None for any other.
 * - push_answer(response_type, data): the leader's decode of a follower's usual push answer, None for any other.
 * - seal_entry(...): a leader's appended entry, its body written in place by the record encoder, sealed: header
 *   (with the body's CRC) and index record, as FileLedger._append_record's Python does.
 *
 * Nothing here raises for bad input: the bounds of every buffer are checked before a byte is written or read.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#define HEADER_SIZE 48
#define INDEX_UNIT 32
#define CURRENT_MAGIC 1

static PyObject *s_index, *s_term, *s_pos, *s_body, *s_magic, *s_channel, *s_chain_crc, *s_body_crc;
static PyObject *k_body, *k_index, *k_term, *k_pos, *k_magic, *k_channel, *k_chain_crc, *k_body_crc, *k_size;
/* A message's attributes (a_) and JSON keys (j_) */
static PyObject *a_group, *a_remote_id, *a_local_id, *a_leader_id, *a_code, *a_begin_index, *a_end_index, *a_count;
static PyObject *j_remote_id, *j_local_id, *j_leader_id, *j_begin_index, *j_end_index;
static PyObject *a_type, *a_commit_index, *a_entry, *a_batch_entry, *j_commit_index, *j_batch_entry, *k_append;
static PyObject *a_name;

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static int8_t B64_VALUE[256];

/* ---- an entry's fields ------------------------------------------------------------------------------------------ */

typedef struct {
    int64_t index, term, pos, magic, channel, chain_crc, body_crc;
    Py_buffer body;
} Fields;

/* An int attribute that fits 64 bits (plain int only: orjson writes a bool as true); 0 when not, no error set. */
static int attr_i64(PyObject *obj, PyObject *name, int64_t *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = 0;
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (!overflow && !(x == -1 && PyErr_Occurred())) {
            *out = x;
            ok = 1;
        }
        PyErr_Clear();
    }
    Py_DECREF(v);
    return ok;
}

/* Every field of an entry object, its body's buffer held (release it with PyBuffer_Release); 0 when one does not
 * fit, nothing held and no error set. */
static int read_fields(PyObject *e, Fields *f) {
    if (!(attr_i64(e, s_index, &f->index) && attr_i64(e, s_term, &f->term) && attr_i64(e, s_pos, &f->pos) &&
          attr_i64(e, s_magic, &f->magic) && attr_i64(e, s_channel, &f->channel) &&
          attr_i64(e, s_chain_crc, &f->chain_crc) && attr_i64(e, s_body_crc, &f->body_crc)))
        return 0;
    PyObject *body = PyObject_GetAttr(e, s_body);
    if (body == NULL) {
        PyErr_Clear();
        return 0;
    }
    int got = PyObject_GetBuffer(body, &f->body, PyBUF_SIMPLE);
    Py_DECREF(body);
    if (got < 0) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* ---- an entry's JSON --------------------------------------------------------------------------------------------- */

static char *put_i64(char *p, int64_t v) {
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *p++ = '-';
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_lit(char *p, const char *s) {
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

static char *put_b64(char *p, const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *p++ = B64[v >> 18];
        *p++ = B64[v >> 12 & 63];
        *p++ = B64[v >> 6 & 63];
        *p++ = B64[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *p++ = B64[v >> 18];
        *p++ = B64[v >> 12 & 63];
        *p++ = '=';
        *p++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *p++ = B64[v >> 18];
        *p++ = B64[v >> 12 & 63];
        *p++ = B64[v >> 6 & 63];
        *p++ = '=';
    }
    return p;
}

/* One entry's JSON at p (room: 200 + its Base64): the body, then the other members in key order. */
static char *put_entry(char *p, const Fields *f) {
    static const char *const keys[] = {"\",\"bodyCrc\":", ",\"chainCrc\":", ",\"channel\":", ",\"index\":",
                                       ",\"magic\":",    ",\"pos\":",      ",\"size\":",    ",\"term\":"};
    const int64_t values[] = {f->body_crc, f->chain_crc, f->channel, f->index, f->magic,
                              f->pos,      (int64_t)HEADER_SIZE + f->body.len, f->term};
    p = put_lit(p, "{\"body\":\"");
    p = put_b64(p, f->body.buf, f->body.len);
    for (size_t k = 0; k < sizeof values / sizeof values[0]; k++)
        p = put_i64(put_lit(p, keys[k]), values[k]);
    *p++ = '}';
    return p;
}

/* ---- push_json --------------------------------------------------------------------------------------------------- */


/* The bytes of a bytes object, or NULL (no error set) for anything else. */
static const char *bytes_of(PyObject *b, Py_ssize_t *n) {
    if (!PyBytes_CheckExact(b))
        return NULL;
    *n = PyBytes_GET_SIZE(b);
    return PyBytes_AS_STRING(b);
}

/* push_json(request, group_json, names_json): messages.encode_push's bytes for a push request, its batch or single
 * entry included (group_json and names_json: the request's names, as messages._names_json writes them); None when a
 * field is not the usual one (an int past a Java long, a type whose name is not ASCII, a body that is no contiguous
 * buffer). */
static PyObject *push_json(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "push_json(request, group_json, names_json)");
        return NULL;
    }
    PyObject *m = args[0], *out = NULL, *entry = NULL, *batch = NULL, *kind = NULL, *name = NULL;
    Fields *fields = NULL;
    Py_ssize_t held = 0, n = 0, glen, nlen, klen;
    int64_t code, commit, term;
    const char *group = bytes_of(args[1], &glen), *names = bytes_of(args[2], &nlen), *kname;
    if (group == NULL || names == NULL || !attr_i64(m, a_code, &code) ||
        !attr_i64(m, a_commit_index, &commit) || !attr_i64(m, s_term, &term))
        goto unusual;
    entry = PyObject_GetAttr(m, a_entry);
    batch = entry == NULL ? NULL : PyObject_GetAttr(m, a_batch_entry);
    kind = batch == NULL ? NULL : PyObject_GetAttr(m, a_type);
    name = kind == NULL ? NULL : PyObject_GetAttr(kind, a_name);
    if (name == NULL || !PyTuple_CheckExact(batch) || !PyUnicode_CheckExact(name) || !PyUnicode_IS_ASCII(name))
        goto unusual;
    kname = (const char *)PyUnicode_1BYTE_DATA(name);
    klen = PyUnicode_GET_LENGTH(name);
    n = PyTuple_GET_SIZE(batch) + (entry != Py_None);
    fields = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Fields));
    if (fields == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t room = 400 + glen + nlen + klen, total = 0;
    for (; held < n; held++) {
        PyObject *e = held < PyTuple_GET_SIZE(batch) ? PyTuple_GET_ITEM(batch, held) : entry;
        if (!read_fields(e, &fields[held]))
            goto unusual;
        if (fields[held].body.len > (PY_SSIZE_T_MAX / 2 - room) / 2) {
            held++;
            goto unusual;
        }
        room += 201 + (fields[held].body.len + 2) / 3 * 4;
        if (held < PyTuple_GET_SIZE(batch))
            total += HEADER_SIZE + fields[held].body.len;
    }
    Py_ssize_t nb = PyTuple_GET_SIZE(batch);
    Fields *first = nb ? &fields[0] : (entry != Py_None ? &fields[n - 1] : NULL);
    Fields *last = nb ? &fields[nb - 1] : first;
    out = PyBytes_FromStringAndSize(NULL, room);
    if (out == NULL)
        goto done;
    char *start = PyBytes_AS_STRING(out), *p = start;
    p = put_lit(p, nb ? "{\"batch\":true,\"batchEntry\":[" : "{\"batch\":false,\"batchEntry\":[");
    for (Py_ssize_t i = 0; i < nb; i++) {
        if (i)
            *p++ = ',';
        p = put_entry(p, &fields[i]);
    }
    p = put_i64(put_lit(p, "],\"code\":"), code);
    p = put_i64(put_lit(p, ",\"commitIndex\":"), commit);
    p = put_i64(put_lit(p, ",\"count\":"), nb ? nb : (entry != Py_None));
    if (entry != Py_None)
        p = put_entry(put_lit(p, ",\"entry\":"), &fields[n - 1]);
    p = put_i64(put_lit(p, ",\"firstEntryIndex\":"), first ? first->index : -1);
    memcpy(p, group, (size_t)glen);
    p += glen;
    p = put_i64(put_lit(p, ",\"lastEntryIndex\":"), last ? last->index : -1);
    memcpy(p, names, (size_t)nlen);
    p += nlen;
    p = put_i64(put_lit(p, ",\"term\":"), term);
    p = put_i64(put_lit(p, ",\"totalSize\":"), total);
    p = put_lit(p, ",\"type\":\"");
    memcpy(p, kname, (size_t)klen);
    p += klen;
    p = put_lit(p, "\"}");
    if (_PyBytes_Resize(&out, p - start) < 0)
        out = NULL;
    goto done;
unusual:
    PyErr_Clear();
    out = Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < held && fields != NULL; i++)
        PyBuffer_Release(&fields[i].body);
    PyMem_Free(fields);
    Py_XDECREF(entry);
    Py_XDECREF(batch);
    Py_XDECREF(kind);
    Py_XDECREF(name);
    return out;
}

/* ---- decode_entries ---------------------------------------------------------------------------------------------- */

/* A dict member that is a plain int within [lo, hi] (or absent: dflt); 0 when not. */
static int member_int(PyObject *d, PyObject *key, int64_t dflt, int64_t lo, int64_t hi, int64_t *out) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL) {
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        *out = dflt;
        return 1;
    }
    if (!PyLong_CheckExact(v))
        return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (x < lo || x > hi)
        return 0;
    *out = x;
    return 1;
}

/* Canonical strict Base64 (length a multiple of 4, padding only at the end, unused bits zero) into a new bytes
 * object; NULL with no error set for anything else (the Python way decides it). */
static PyObject *b64_canonical(const unsigned char *s, Py_ssize_t n) {
    if (n % 4)
        return NULL;
    Py_ssize_t pad = 0;
    if (n && s[n - 1] == '=')
        pad = (n >= 2 && s[n - 2] == '=') ? 2 : 1;
    Py_ssize_t outlen = n / 4 * 3 - pad;
    PyObject *out = PyBytes_FromStringAndSize(NULL, outlen);
    if (out == NULL) {
        PyErr_Clear();
        return NULL;
    }
    unsigned char *d = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t full = pad ? n - 4 : n, o = 0;
    for (Py_ssize_t i = 0; i < full; i += 4) {
        int a = B64_VALUE[s[i]], b = B64_VALUE[s[i + 1]], c = B64_VALUE[s[i + 2]], e = B64_VALUE[s[i + 3]];
        if ((a | b | c | e) < 0)
            goto refuse;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)e;
        d[o++] = (unsigned char)(v >> 16);
        d[o++] = (unsigned char)(v >> 8);
        d[o++] = (unsigned char)v;
    }
    if (pad) {
        const unsigned char *q = s + n - 4;
        int a = B64_VALUE[q[0]], b = B64_VALUE[q[1]], c = pad == 1 ? B64_VALUE[q[2]] : 0;
        if ((a | b | c) < 0)
            goto refuse;
        if (pad == 2 ? (b & 15) != 0 : (c & 3) != 0)
            goto refuse;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6;
        d[o++] = (unsigned char)(v >> 16);
        if (pad == 1)
            d[o++] = (unsigned char)(v >> 8);
    }
    return out;
refuse:
    Py_DECREF(out);
    return NULL;
}

static int set_i64(PyObject *obj, PyObject *name, int64_t v) {
    PyObject *x = PyLong_FromLongLong(v);
    if (x == NULL)
        return -1;
    int r = PyObject_GenericSetAttr(obj, name, x);
    Py_DECREF(x);
    return r;
}

/* One entry from its JSON object; Py_None (new reference) when it is not the usual shape, NULL on an error. */
static PyObject *decode_one(PyTypeObject *type, PyObject *d) {
    if (!PyDict_CheckExact(d))
        return Py_NewRef(Py_None);
    const int64_t L = INT64_MIN, H = INT64_MAX, l = INT32_MIN, h = INT32_MAX;
    int64_t index, term, pos, magic, channel, chain_crc, body_crc, size;
    if (!(member_int(d, k_index, -1, L, H, &index) && member_int(d, k_term, -1, L, H, &term) &&
          member_int(d, k_pos, -1, L, H, &pos) && member_int(d, k_magic, CURRENT_MAGIC, l, h, &magic) &&
          member_int(d, k_channel, 0, l, h, &channel) && member_int(d, k_chain_crc, 0, l, h, &chain_crc) &&
          member_int(d, k_body_crc, 0, l, h, &body_crc) && member_int(d, k_size, 0, L, H, &size)))
        return Py_NewRef(Py_None);
    PyObject *text = PyDict_GetItemWithError(d, k_body);
    PyObject *body;
    if (text == NULL) {
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return Py_NewRef(Py_None);
        }
        body = PyBytes_FromStringAndSize(NULL, 0);
        if (body == NULL)
            return NULL;
    } else {
        if (!PyUnicode_CheckExact(text) || PyUnicode_READY(text) < 0 || !PyUnicode_IS_ASCII(text)) {
            PyErr_Clear();
            return Py_NewRef(Py_None);
        }
        body = b64_canonical(PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text));
        if (body == NULL)
            return Py_NewRef(Py_None);
    }
    /* "size", when present, must agree with the body. */
    int has_size = PyDict_GetItemWithError(d, k_size) != NULL;
    if (PyErr_Occurred()) {
        Py_DECREF(body);
        return NULL;
    }
    if (has_size && size != HEADER_SIZE + PyBytes_GET_SIZE(body)) {
        Py_DECREF(body);
        return Py_NewRef(Py_None);
    }
    /* The frozen entry's slots set as object.__setattr__ sets them (its __init__ is generated Python). */
    PyObject *e = type->tp_alloc(type, 0);
    if (e == NULL || PyObject_GenericSetAttr(e, s_body, body) < 0 || set_i64(e, s_index, index) < 0 ||
        set_i64(e, s_term, term) < 0 || set_i64(e, s_pos, pos) < 0 || set_i64(e, s_magic, magic) < 0 ||
        set_i64(e, s_channel, channel) < 0 || set_i64(e, s_chain_crc, chain_crc) < 0 ||
        set_i64(e, s_body_crc, body_crc) < 0) {
        Py_XDECREF(e);
        Py_DECREF(body);
        return NULL;
    }
    Py_DECREF(body);
    return e;
}

static PyObject *decode_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "decode_entries(entry_type, items)");
        return NULL;
    }
    if (!PyList_CheckExact(args[1]))
        Py_RETURN_NONE;
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *items = args[1];
    Py_ssize_t n = PyList_GET_SIZE(items);
    PyObject *out = PyTuple_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(items); i++) {
        PyObject *e = decode_one(type, PyList_GET_ITEM(items, i));
        if (e == NULL || e == Py_None) {
            Py_DECREF(out);
            return e;
        }
        PyTuple_SET_ITEM(out, i, e);
    }
    return out;
}

/* ---- write_entries ----------------------------------------------------------------------------------------------- */

static void put_be32(unsigned char *p, int64_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)(u >> 24);
    p[1] = (unsigned char)(u >> 16);
    p[2] = (unsigned char)(u >> 8);
    p[3] = (unsigned char)u;
}

static void put_be64(unsigned char *p, int64_t v) {
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)u;
        u >>= 8;
    }
}

static int fits32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

/* Both buffers exported writable (release both with PyBuffer_Release), or -1 with the error set and neither held. */
static int two_buffers(PyObject *a, Py_buffer *x, PyObject *b, Py_buffer *y) {
    if (PyObject_GetBuffer(a, x, PyBUF_WRITABLE) < 0)
        return -1;
    if (PyObject_GetBuffer(b, y, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(x);
        return -1;
    }
    return 0;
}

/* An entry's 48-byte header at p and its 32-byte index record at r (dledger/entry.py's layouts). */
static void put_entry_head(unsigned char *p, unsigned char *r, const Fields *f, int64_t size) {
    put_be32(p, f->magic);
    put_be32(p + 4, size);
    put_be64(p + 8, f->index);
    put_be64(p + 16, f->term);
    put_be64(p + 24, f->pos);
    put_be32(p + 32, f->channel);
    put_be32(p + 36, f->chain_crc);
    put_be32(p + 40, f->body_crc);
    put_be32(p + 44, size - HEADER_SIZE);
    put_be32(r, f->magic);
    put_be64(r + 4, f->pos);
    put_be32(r + 12, size);
    put_be64(r + 16, f->index);
    put_be64(r + 24, f->term);
}

/* write_entries(entries, start, next_index, data, data_base, data_at, data_limit, index, index_base, index_limit)
 * -> (written, data end): entries[start:] written from next_index on while each one's pos is data_base plus where
 * the data ends, it ends within data_limit (the segment less room for a blank) and its index record ends within
 * index_limit (the reserved part of the index segment starting at index_base). */
static PyObject *write_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "write_entries takes 10 arguments");
        return NULL;
    }
    PyObject *seq = args[0];
    if (!PyTuple_CheckExact(seq) && !PyList_CheckExact(seq)) {
        PyErr_SetString(PyExc_TypeError, "write_entries: entries must be a tuple or a list");
        return NULL;
    }
    long long start = PyLong_AsLongLong(args[1]), next = PyLong_AsLongLong(args[2]);
    long long data_base = PyLong_AsLongLong(args[4]), at = PyLong_AsLongLong(args[5]);
    long long data_limit = PyLong_AsLongLong(args[6]), index_base = PyLong_AsLongLong(args[8]);
    long long index_limit = PyLong_AsLongLong(args[9]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer data, index;
    if (two_buffers(args[3], &data, args[7], &index) < 0)
        return NULL;
    if (data_limit > data.len)
        data_limit = data.len;
    if (index_limit > index.len)
        index_limit = index.len;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    long long written = 0;
    for (Py_ssize_t i = start < 0 ? n : (Py_ssize_t)start; i < n && i < PySequence_Fast_GET_SIZE(seq); i++) {
        Fields f;
        PyObject *item = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        int got = read_fields(item, &f);
        Py_DECREF(item);
        if (!got)
            break;
        int64_t size = HEADER_SIZE + (int64_t)f.body.len;
        int ok = f.index == next + written && f.index >= 0 && f.index <= INT64_MAX / INDEX_UNIT && at >= 0 &&
                 f.pos == data_base + at && size <= data_limit - at && fits32(f.magic) && fits32(f.channel) &&
                 fits32(f.chain_crc) && fits32(f.body_crc) && size <= INT32_MAX;
        int64_t rel = ok ? f.index * INDEX_UNIT - index_base : -1;
        if (!ok || rel < 0 || rel > index_limit - INDEX_UNIT) {
            PyBuffer_Release(&f.body);
            break;
        }
        unsigned char *p = (unsigned char *)data.buf + at;
        /* The body before the header, as FileLedger._write: a torn copy leaves no header. */
        memmove(p + HEADER_SIZE, f.body.buf, (size_t)f.body.len); /* a body may be a view of this very segment */
        PyBuffer_Release(&f.body);
        put_entry_head(p, (unsigned char *)index.buf + rel, &f, size);
        at += size;
        written++;
    }
    PyBuffer_Release(&index);
    PyBuffer_Release(&data);
    return Py_BuildValue("(LL)", written, at);
}

/* ---- seal_entry -------------------------------------------------------------------------------------------------- */

/* seal_entry(data, at, end, index, term, pos, index_buf, rel) -> body_crc: a leader's entry whose body lies at
 * data[at + 48:end] sealed as FileLedger._append_record does: its header written at `at` (bodyCrc the body's CRC-32
 * masked to 31 bits, as remoting/codec/crc.py's body_crc) and its index record at index_buf[rel:rel + 32]. ValueError,
 * nothing written, for a place outside either buffer or a field that does not fit. */
static PyObject *seal_entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "seal_entry takes 8 arguments");
        return NULL;
    }
    long long at = PyLong_AsLongLong(args[1]), end = PyLong_AsLongLong(args[2]);
    long long index = PyLong_AsLongLong(args[3]), term = PyLong_AsLongLong(args[4]);
    long long pos = PyLong_AsLongLong(args[5]), rel = PyLong_AsLongLong(args[7]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer data, idx;
    if (two_buffers(args[0], &data, args[6], &idx) < 0)
        return NULL;
    long long size = end - at;
    if (at < 0 || size < HEADER_SIZE || end > data.len || size > INT32_MAX || rel < 0 || rel > idx.len - INDEX_UNIT) {
        PyBuffer_Release(&idx);
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "seal_entry: the entry or its index record lies outside its buffer");
        return NULL;
    }
    unsigned char *p = (unsigned char *)data.buf + at;
    uLong crc = crc32(0L, Z_NULL, 0);
    for (long long done = HEADER_SIZE; done < size;) { /* zlib's length is 32-bit */
        uInt chunk = (uInt)(size - done > (1 << 30) ? (1 << 30) : size - done);
        crc = crc32(crc, p + done, chunk);
        done += chunk;
    }
    int64_t body_crc = (int64_t)(crc & 0x7FFFFFFF);
    Fields f = {.index = index, .term = term, .pos = pos, .magic = CURRENT_MAGIC, .body_crc = body_crc};
    put_entry_head(p, (unsigned char *)idx.buf + rel, &f, size);
    PyBuffer_Release(&idx);
    PyBuffer_Release(&data);
    return PyLong_FromLongLong(body_crc);
}

/* ---- push_answer ------------------------------------------------------------------------------------------------- */

#define TERM_MAX (((int64_t)1 << 62) - 1)


/* A member that is None or absent (no value: *out NULL), or a str; 0 for anything else. */
static int member_str(PyObject *d, PyObject *key, PyObject **out) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = v == Py_None ? NULL : v;
    return *out == NULL || PyUnicode_CheckExact(*out);
}

/* A member that is None or absent (dflt), or an int within [lo, hi]; 0 for anything else. */
static int member_int_or_none(PyObject *d, PyObject *key, int64_t dflt, int64_t lo, int64_t hi, int64_t *out,
                              int *present) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *present = v != NULL && v != Py_None;
    if (!*present) {
        *out = dflt;
        return 1;
    }
    return member_int(d, key, dflt, lo, hi, out);
}

/* push_answer(response_type, data): messages.decode_push_response's usual case, the answer from the dict orjson
 * parsed (every field None, absent or of its type and range: strings, a term up to TERM_MAX, Java longs); None for
 * anything else (the Python way gives the answer or its MessageError). The frozen answer's slots set as
 * object.__setattr__ sets them. */
static PyObject *push_answer(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "push_answer(response_type, data)");
        return NULL;
    }
    PyObject *d = args[1];
    if (!PyDict_CheckExact(d))
        Py_RETURN_NONE;
    const int64_t L = INT64_MIN, H = INT64_MAX;
    PyObject *group, *remote, *local, *leader;
    int64_t term, code, index, begin, end, count;
    int has_index, unused;
    if (!(member_str(d, a_group, &group) && member_str(d, j_remote_id, &remote) && member_str(d, j_local_id, &local) &&
          member_str(d, j_leader_id, &leader) && member_int_or_none(d, s_term, -1, L, TERM_MAX, &term, &unused) &&
          member_int_or_none(d, a_code, 200, L, H, &code, &unused) &&
          member_int_or_none(d, s_index, 0, L, H, &index, &has_index) &&
          member_int_or_none(d, j_begin_index, -1, L, H, &begin, &unused) &&
          member_int_or_none(d, j_end_index, -1, L, H, &end, &unused) &&
          member_int_or_none(d, a_count, 0, L, H, &count, &unused)))
        Py_RETURN_NONE;
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *r = type->tp_alloc(type, 0);
    if (r == NULL)
        return NULL;
    PyObject *names[] = {a_group, a_remote_id, a_local_id, a_leader_id};
    PyObject *strs[] = {group, remote, local, leader};
    for (int i = 0; i < 4; i++)
        if (PyObject_GenericSetAttr(r, names[i], strs[i] == NULL ? Py_None : strs[i]) < 0)
            goto fail;
    if (set_i64(r, s_term, term) < 0 || set_i64(r, a_code, code) < 0 || set_i64(r, a_begin_index, begin) < 0 ||
        set_i64(r, a_end_index, end) < 0 || set_i64(r, a_count, count) < 0)
        goto fail;
    if (has_index ? set_i64(r, s_index, index) < 0 : PyObject_GenericSetAttr(r, s_index, Py_None) < 0)
        goto fail;
    return r;
fail:
    Py_DECREF(r);
    return NULL;
}

/* ---- push_request ------------------------------------------------------------------------------------------------ */


/* push_request(request_type, entry_type, push_types, data): messages.decode_push's usual case, the request from the
 * dict orjson parsed (the base fields as push_answer takes them, a known push type by name, entries as
 * decode_entries takes them); None for anything else (the Python way gives the request or its MessageError). */
static PyObject *push_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyType_Check(args[0]) || !PyType_Check(args[1]) || !PyDict_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "push_request(request_type, entry_type, push_types, data)");
        return NULL;
    }
    PyObject *d = args[3], *types = args[2];
    if (!PyDict_CheckExact(d))
        Py_RETURN_NONE;
    const int64_t L = INT64_MIN, H = INT64_MAX;
    PyObject *group, *remote, *local, *leader, *kind;
    int64_t term, code, commit;
    int unused;
    if (!(member_str(d, a_group, &group) && member_str(d, j_remote_id, &remote) && member_str(d, j_local_id, &local) &&
          member_str(d, j_leader_id, &leader) && member_str(d, a_type, &kind) &&
          member_int_or_none(d, s_term, -1, L, TERM_MAX, &term, &unused) &&
          member_int_or_none(d, a_code, 200, L, H, &code, &unused) &&
          member_int_or_none(d, j_commit_index, -1, L, H, &commit, &unused)))
        Py_RETURN_NONE;
    PyObject *push_type = PyDict_GetItemWithError(types, kind == NULL ? k_append : kind);
    if (push_type == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyTypeObject *entry_type = (PyTypeObject *)args[1];
    PyObject *entry = NULL, *batch = NULL, *r = NULL;
    PyObject *one = PyDict_GetItemWithError(d, a_entry), *many = PyDict_GetItemWithError(d, j_batch_entry);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    entry = one == NULL || one == Py_None ? Py_NewRef(Py_None) : decode_one(entry_type, one);
    if (entry == NULL || (entry == Py_None && one != NULL && one != Py_None))
        goto done; /* an error, or an unusual entry: None below */
    if (many == NULL || many == Py_None) {
        batch = PyTuple_New(0);
    } else if (PyList_CheckExact(many)) {
        PyObject *call[] = {args[1], many};
        batch = decode_entries(self, call, 2);
    } else {
        batch = Py_NewRef(Py_None);
    }
    if (batch == NULL || batch == Py_None)
        goto done;
    PyTypeObject *type = (PyTypeObject *)args[0];
    r = type->tp_alloc(type, 0);
    if (r == NULL)
        goto done;
    PyObject *names[] = {a_group, a_remote_id, a_local_id, a_leader_id, a_type, a_entry, a_batch_entry};
    PyObject *values[] = {group, remote, local, leader, push_type, entry, batch};
    for (int i = 0; i < 7; i++)
        if (PyObject_GenericSetAttr(r, names[i], values[i] == NULL ? Py_None : values[i]) < 0)
            Py_CLEAR(r);
    if (r != NULL && (set_i64(r, s_term, term) < 0 || set_i64(r, a_code, code) < 0 ||
                      set_i64(r, a_commit_index, commit) < 0))
        Py_CLEAR(r);
done:
    if (r == NULL && !PyErr_Occurred())
        r = Py_NewRef(Py_None);
    Py_XDECREF(entry);
    Py_XDECREF(batch);
    return r;
}

/* ---- the module -------------------------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"push_json", (PyCFunction)(void (*)(void))push_json, METH_FASTCALL,
     "A push request's JSON body; None when a field is unusual (the Python way decides)."},
    {"decode_entries", (PyCFunction)(void (*)(void))decode_entries, METH_FASTCALL,
     "A tuple of entries from their JSON objects; None when one is unusual (the Python way decides)."},
    {"write_entries", (PyCFunction)(void (*)(void))write_entries, METH_FASTCALL,
     "Write a follower's run of entries into the current segments: (written, data end)."},
    {"push_answer", (PyCFunction)(void (*)(void))push_answer, METH_FASTCALL,
     "A push answer from its JSON object; None when a field is unusual (the Python way decides)."},
    {"push_request", (PyCFunction)(void (*)(void))push_request, METH_FASTCALL,
     "A push request from its JSON object; None when a field is unusual (the Python way decides)."},
    {"seal_entry", (PyCFunction)(void (*)(void))seal_entry, METH_FASTCALL,
     "Write a leader's entry header (its body CRC computed) and index record: the body CRC."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_entries", NULL, -1, methods, NULL, NULL, NULL, NULL};

static int intern(PyObject **slot, const char *name) {
    *slot = PyUnicode_InternFromString(name);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__entries(void) {
    memset(B64_VALUE, -1, sizeof B64_VALUE);
    for (int i = 0; i < 64; i++)
        B64_VALUE[(unsigned char)B64[i]] = (int8_t)i;
    if (intern(&s_index, "index") || intern(&s_term, "term") || intern(&s_pos, "pos") || intern(&s_body, "body") ||
        intern(&s_magic, "magic") || intern(&s_channel, "channel") || intern(&s_chain_crc, "chain_crc") ||
        intern(&s_body_crc, "body_crc") || intern(&k_chain_crc, "chainCrc") || intern(&k_body_crc, "bodyCrc") ||
        intern(&k_size, "size") || intern(&a_group, "group") || intern(&a_remote_id, "remote_id") ||
        intern(&a_local_id, "local_id") || intern(&a_leader_id, "leader_id") || intern(&a_code, "code") ||
        intern(&a_begin_index, "begin_index") || intern(&a_end_index, "end_index") || intern(&a_count, "count") ||
        intern(&j_remote_id, "remoteId") || intern(&j_local_id, "localId") || intern(&j_leader_id, "leaderId") ||
        intern(&j_begin_index, "beginIndex") || intern(&j_end_index, "endIndex") || intern(&a_type, "type") ||
        intern(&a_commit_index, "commit_index") || intern(&a_entry, "entry") || intern(&a_batch_entry, "batch_entry") ||
        intern(&j_commit_index, "commitIndex") || intern(&j_batch_entry, "batchEntry") || intern(&k_append, "APPEND") ||
        intern(&a_name, "_name_"))
        return NULL;
    k_body = s_body, k_index = s_index, k_term = s_term, k_pos = s_pos, k_magic = s_magic, k_channel = s_channel;
    return PyModule_Create(&module);
}
