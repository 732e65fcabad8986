/* The consumer's pull-body decoder in C (remoting/codec/pull_body.py has the contract and the pure-Python twin;
 * docs/protocol.md#51-record-layout for the layout). Included by _speedups.c.
 *
 * decode_pull_records(data, pos, out, extra, tags) -> stop
 *
 * Decodes the well-formed IPv4 records of the bytes `data` from `pos` into MessageExt values appended to the list
 * `out`, exactly as pull_body's Python loop builds them: `extra` (a dict or None) merged into each message's
 * properties, and, when `tags` (a set or frozenset) is not None, only the messages whose TAGS property is in it.
 * It stops before the first record the Python loop would hand to decode_record (too short a tail, an IPv6 host,
 * another magic, any inconsistent length) and returns that record's position, or len(data) when every record
 * was taken: the caller decodes that one record on the general path and calls again after it.
 *
 * MessageExt is an attrs frozen slotted class: the instance is allocated with its type's tp_alloc and its slots
 * are filled directly, as the member descriptors would (the twin uses those descriptors' __set__). Strings that
 * repeat within a body (property names, a name's last value, the topic) and the two hosts are decoded once per
 * call. Raises only for bad arguments or memory; nothing is written to `data`.
 */
#ifndef ROCKETRIO_PULL_DECODE_H
#define ROCKETRIO_PULL_DECODE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define PD_MAGIC_V1 0xDAA320A7u
#define PD_FIXED_V4 88   /* the fixed fields of a record with IPv4 hosts, up to and including the body length */
#define PD_OVERHEAD_V4 91
#define PD_MAX_TOPIC 127
#define PD_HOSTS_V6 0x30
#define PD_NAMES 32      /* distinct property names remembered per call */

/* MessageExt's fields, in its slot order. */
enum { X_STORE_SIZE, X_BODY_CRC, X_QUEUE_ID, X_FLAG, X_QUEUE_OFFSET, X_COMMIT_LOG_OFFSET, X_SYS_FLAG, X_BORN_TS,
       X_BORN_HOST, X_STORE_TS, X_STORE_HOST, X_RECONSUME, X_PREPARED_TX, X_BODY, X_TOPIC, X_PROPERTIES,
       X_STORE_HOST_PACKED, X_COUNT };
static const char *const PD_FIELD_NAMES[X_COUNT] = {
    "store_size", "body_crc", "queue_id", "flag", "queue_offset", "commit_log_offset", "sys_flag", "born_timestamp",
    "born_host", "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset", "body", "topic",
    "properties", "store_host_packed"};

typedef struct {
    PyObject *type;         /* remoting.codec.record_decode.MessageExt */
    PyObject *decoded_host; /* remoting.codec.record_decode.decoded_host: packed bytes -> (ip, port) */
    PyObject *tags_key;     /* "TAGS" */
    Py_ssize_t slot[X_COUNT];
    int ok;                 /* every field is an object slot: decode_pull_records may run */
} PullState;

static PullState PD;

static inline uint32_t pd_get32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline int64_t pd_get64(const unsigned char *p) {
    return (int64_t)((uint64_t)pd_get32(p) << 32 | pd_get32(p + 4));
}

/* A property name seen in this call, with its string and the last value decoded for it. */
typedef struct {
    const unsigned char *name;
    Py_ssize_t name_len;
    PyObject *name_str;
    const unsigned char *value;
    Py_ssize_t value_len;
    PyObject *value_str; /* NULL until a value is decoded */
} NameEntry;

/* One host (8 packed bytes) with its decoded tuple and, for the store host, its bytes object. */
typedef struct {
    unsigned char raw[8];
    PyObject *tuple;
    PyObject *packed;
} HostEntry;

typedef struct {
    NameEntry names[PD_NAMES];
    int n_names;
    HostEntry born, store;
    const unsigned char *topic;
    Py_ssize_t topic_len;
    PyObject *topic_str;
} Decoding;

static void decoding_clear(Decoding *d) {
    for (int i = 0; i < d->n_names; i++) {
        Py_XDECREF(d->names[i].name_str);
        Py_XDECREF(d->names[i].value_str);
    }
    Py_XDECREF(d->born.tuple);
    Py_XDECREF(d->born.packed);
    Py_XDECREF(d->store.tuple);
    Py_XDECREF(d->store.packed);
    Py_XDECREF(d->topic_str);
}

static inline PyObject *pd_str(const unsigned char *p, Py_ssize_t n) {
    return PyUnicode_DecodeUTF8((const char *)p, n, "replace");
}

/* The decoded host of 8 packed bytes, a new reference; *packed (when not NULL) gets its bytes object, new too. */
static PyObject *pd_host(HostEntry *h, const unsigned char *raw, PyObject **packed) {
    if (h->tuple == NULL || memcmp(h->raw, raw, 8) != 0) {
        PyObject *bytes = PyBytes_FromStringAndSize((const char *)raw, 8);
        if (bytes == NULL) return NULL;
        PyObject *tuple = PyObject_CallOneArg(PD.decoded_host, bytes);
        if (tuple == NULL) {
            Py_DECREF(bytes);
            return NULL;
        }
        Py_XDECREF(h->tuple);
        Py_XDECREF(h->packed);
        memcpy(h->raw, raw, 8);
        h->tuple = tuple;
        h->packed = bytes;
    }
    if (packed != NULL) {
        Py_INCREF(h->packed);
        *packed = h->packed;
    }
    Py_INCREF(h->tuple);
    return h->tuple;
}

/* Add one "name\x01value" segment to props, as the twin's partition does: skipped without a separator, an empty
 * name or an empty value. 0, or -1 with an exception. */
static int pd_property(Decoding *d, PyObject *props, const unsigned char *s, const unsigned char *e) {
    const unsigned char *sep = memchr(s, 1, (size_t)(e - s));
    if (sep == NULL || sep == s || sep + 1 == e) return 0;
    Py_ssize_t name_len = sep - s, value_len = e - (sep + 1);
    const unsigned char *value = sep + 1;
    NameEntry *entry = NULL;
    for (int i = 0; i < d->n_names; i++) {
        NameEntry *c = &d->names[i];
        if (c->name_len == name_len && memcmp(c->name, s, (size_t)name_len) == 0) {
            entry = c;
            break;
        }
    }
    PyObject *name, *val;
    if (entry == NULL && d->n_names < PD_NAMES) {
        entry = &d->names[d->n_names];
        if ((entry->name_str = pd_str(s, name_len)) == NULL) return -1;
        entry->name = s;
        entry->name_len = name_len;
        entry->value_str = NULL;
        d->n_names++;
    }
    if (entry == NULL) { /* more distinct names than remembered: decode this one alone */
        if ((name = pd_str(s, name_len)) == NULL) return -1;
        if ((val = pd_str(value, value_len)) == NULL) {
            Py_DECREF(name);
            return -1;
        }
    } else {
        name = entry->name_str;
        Py_INCREF(name);
        if (entry->value_str == NULL || entry->value_len != value_len ||
            memcmp(entry->value, value, (size_t)value_len) != 0) {
            if ((val = pd_str(value, value_len)) == NULL) {
                Py_DECREF(name);
                return -1;
            }
            Py_XDECREF(entry->value_str);
            entry->value_str = val;
            entry->value = value;
            entry->value_len = value_len;
        }
        val = entry->value_str;
        Py_INCREF(val);
    }
    int rc = PyDict_SetItem(props, name, val);
    Py_DECREF(name);
    Py_DECREF(val);
    return rc;
}

/* The properties dict of the region [s, e): segments split on 0x02. A new reference, or NULL. */
static PyObject *pd_properties(Decoding *d, const unsigned char *s, const unsigned char *e) {
    PyObject *props = PyDict_New();
    if (props == NULL) return NULL;
    for (;;) {
        const unsigned char *seg_end = memchr(s, 2, (size_t)(e - s));
        if (seg_end == NULL) seg_end = e;
        if (pd_property(d, props, s, seg_end) < 0) {
            Py_DECREF(props);
            return NULL;
        }
        if (seg_end == e) return props;
        s = seg_end + 1;
    }
}

/* The record's MessageExt (a new reference), or NULL with an exception. r: the record; size: its length. */
static PyObject *pd_message(Decoding *d, const unsigned char *r, int32_t size, int32_t body_len, Py_ssize_t tlen) {
    PyTypeObject *type = (PyTypeObject *)PD.type;
    PyObject *v[X_COUNT] = {NULL};
    const unsigned char *topic = r + PD_FIXED_V4 + body_len + 1;
    const unsigned char *props = topic + tlen + 2;
    v[X_STORE_SIZE] = PyLong_FromLong(size);
    v[X_BODY_CRC] = PyLong_FromLong((int32_t)pd_get32(r + 8));
    v[X_QUEUE_ID] = PyLong_FromLong((int32_t)pd_get32(r + 12));
    v[X_FLAG] = PyLong_FromLong((int32_t)pd_get32(r + 16));
    v[X_QUEUE_OFFSET] = PyLong_FromLongLong(pd_get64(r + 20));
    v[X_COMMIT_LOG_OFFSET] = PyLong_FromLongLong(pd_get64(r + 28));
    v[X_SYS_FLAG] = PyLong_FromLong((int32_t)pd_get32(r + 36));
    v[X_BORN_TS] = PyLong_FromLongLong(pd_get64(r + 40));
    v[X_BORN_HOST] = pd_host(&d->born, r + 48, NULL);
    v[X_STORE_TS] = PyLong_FromLongLong(pd_get64(r + 56));
    v[X_STORE_HOST] = pd_host(&d->store, r + 64, &v[X_STORE_HOST_PACKED]);
    v[X_RECONSUME] = PyLong_FromLong((int32_t)pd_get32(r + 72));
    v[X_PREPARED_TX] = PyLong_FromLongLong(pd_get64(r + 76));
    v[X_BODY] = PyBytes_FromStringAndSize((const char *)r + PD_FIXED_V4, body_len);
    if (d->topic_str == NULL || d->topic_len != tlen || memcmp(d->topic, topic, (size_t)tlen) != 0) {
        Py_XDECREF(d->topic_str);
        d->topic_str = pd_str(topic, tlen);
        d->topic = topic;
        d->topic_len = tlen;
    }
    Py_XINCREF(d->topic_str);
    v[X_TOPIC] = d->topic_str;
    v[X_PROPERTIES] = pd_properties(d, props, r + size);
    PyObject *msg = NULL;
    for (int k = 0; k < X_COUNT; k++)
        if (v[k] == NULL) goto fail;
    if ((msg = type->tp_alloc(type, 0)) == NULL) goto fail;
    for (int k = 0; k < X_COUNT; k++) *(PyObject **)((char *)msg + PD.slot[k]) = v[k]; /* steals */
    return msg;
fail:
    for (int k = 0; k < X_COUNT; k++) Py_XDECREF(v[k]);
    return NULL;
}

/* Whether msg passes the tags check (1), not (0), or -1 on error. */
static int pd_tags_match(PyObject *msg, PyObject *tags) {
    PyObject *props = *(PyObject **)((char *)msg + PD.slot[X_PROPERTIES]);
    PyObject *tag = PyDict_GetItemWithError(props, PD.tags_key);
    if (tag == NULL && PyErr_Occurred()) return -1;
    if (tag == NULL) tag = Py_None;
    return PyAnySet_Check(tags) ? PySet_Contains(tags, tag) : PySequence_Contains(tags, tag);
}

static PyObject *decode_pull_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "decode_pull_records takes 5 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PD.ok) {
        PyErr_SetString(PyExc_TypeError, "decode_pull_records: MessageExt is not the slotted class it expects");
        return NULL;
    }
    PyObject *data = args[0], *out = args[2], *extra = args[3], *tags = args[4];
    if (!PyBytes_CheckExact(data) || !PyList_Check(out) || (extra != Py_None && !PyDict_Check(extra))) {
        PyErr_SetString(PyExc_TypeError, "decode_pull_records(bytes, int, list, dict | None, set | None)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t end = PyBytes_GET_SIZE(data);
    if (pos < 0) pos = end; /* nothing the loop would decode */
    int merge = extra != Py_None && PyDict_GET_SIZE(extra) > 0;
    Decoding d;
    memset(&d, 0, sizeof d);
    int failed = 0;
    while (pos < end) {
        const unsigned char *r = b + pos;
        if (end - pos < PD_FIXED_V4) break;
        int32_t size = (int32_t)pd_get32(r);
        int32_t sys_flag = (int32_t)pd_get32(r + 36);
        if (sys_flag & PD_HOSTS_V6 || pd_get32(r + 4) != PD_MAGIC_V1) break;
        int32_t body_len = (int32_t)pd_get32(r + 84);
        Py_ssize_t rec_end = pos + size;
        Py_ssize_t topic_at = pos + PD_FIXED_V4 + (Py_ssize_t)body_len;
        if (size < PD_OVERHEAD_V4 || rec_end > end || body_len < 0 || topic_at + 3 > rec_end) break;
        Py_ssize_t tlen = b[topic_at];
        Py_ssize_t props_at = topic_at + 1 + tlen;
        if (tlen > PD_MAX_TOPIC || props_at + 2 > rec_end) break;
        int16_t props_len = (int16_t)((uint16_t)b[props_at] << 8 | b[props_at + 1]);
        if (props_at + 2 + props_len != rec_end) break;
        PyObject *msg = pd_message(&d, r, size, body_len, tlen);
        if (msg == NULL) {
            failed = 1;
            break;
        }
        pos = rec_end;
        if (tags != Py_None) {
            int keep = pd_tags_match(msg, tags);
            if (keep <= 0) {
                Py_DECREF(msg);
                if (keep < 0) {
                    failed = 1;
                    break;
                }
                continue;
            }
        }
        if (merge && PyDict_Update(*(PyObject **)((char *)msg + PD.slot[X_PROPERTIES]), extra) < 0) {
            Py_DECREF(msg);
            failed = 1;
            break;
        }
        int rc = PyList_Append(out, msg);
        Py_DECREF(msg);
        if (rc < 0) {
            failed = 1;
            break;
        }
    }
    decoding_clear(&d);
    return failed ? NULL : PyLong_FromSsize_t(pos);
}

/* Fill PD at the extension's import. -1 on error; a MessageExt without the expected slots leaves PD.ok 0. */
static inline int pull_decode_init(void) {
    PyObject *m = PyImport_ImportModule("remoting.codec.record_decode");
    if (m == NULL) return -1;
    PD.type = PyObject_GetAttrString(m, "MessageExt");
    PD.decoded_host = PyObject_GetAttrString(m, "decoded_host");
    Py_DECREF(m);
    if (PD.type == NULL || PD.decoded_host == NULL || (PD.tags_key = PyUnicode_InternFromString("TAGS")) == NULL)
        return -1;
    if (!PyType_Check(PD.type)) return 0;
    PD.ok = 1;
    for (int k = 0; k < X_COUNT; k++) {
        PyObject *name = PyUnicode_FromString(PD_FIELD_NAMES[k]);
        if (name == NULL) return -1;
        PyObject *descr = PyDict_GetItemWithError(((PyTypeObject *)PD.type)->tp_dict, name);
        Py_DECREF(name);
        if (descr == NULL && PyErr_Occurred()) return -1;
        PD.slot[k] = -1;
        if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
            if (member->type == T_OBJECT_EX) PD.slot[k] = member->offset;
        }
        if (PD.slot[k] < 0) PD.ok = 0;
    }
    return 0;
}

#endif /* ROCKETRIO_PULL_DECODE_H */
