/* remoting/codec/record_encoder.h: the CommitLog record encoder shared by the C extensions
 * (docs/protocol.md#51-record-layout, docs/protocol.md#63-consumequeue).
 *
 * Reading a record's fields (a MessageRecord's slots, or getattr), prepare_batch's checks in its order, the body CRC
 * and the tags code, and writing the record in the layout of docs/protocol.md#51-record-layout. Included by
 * remoting/codec/_speedups.c (the encoders record_batch uses) and store/_appender.c (MessageStore.append's
 * single-record path); each extension keeps its own copy of this state, filled by record_encoder_init() at import.
 * Everything is static: no symbol is exported. Sans-IO: no system calls, the caller owns the buffer.
 */
#ifndef ROCKETRIO_RECORD_ENCODER_H
#define ROCKETRIO_RECORD_ENCODER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#define MAGIC_V1 0xDAA320A7u
#define MAX_TOPIC_BYTES 127
#define MAX_PROPERTIES_BYTES 32767
#define SYSFLAG_BORNHOST_V6 0x10
#define SYSFLAG_STOREHOST_V6 0x20
#define CQ_UNIT 20
/* Bytes of a record besides its hosts, body, topic and properties (record_layout: 75 + hosts + ...). */
#define RECORD_FIXED 75
/* Records (or entries) a batch may have for the encoders to keep their work arrays on the stack (about 20 KiB):
 * the calloc/free pairs of a few KiB each were ~8 % of a 32-message batch of 128 B bodies. */
#define STACK_RECORDS 64

typedef struct {
    PyObject *body_error;       /* BodyTooLongError */
    PyObject *props_error;      /* PropertiesTooLongError */
    PyObject *encode_error;     /* MessageEncodeError */
    PyObject *mixed_error;      /* MixedBatchError */
    PyObject *struct_error;     /* struct.error, for fields out of range (as struct.pack raises) */
    PyObject *isal_crc32;       /* remoting.codec.crc.isal_crc32 */
    PyObject *tags_code_of_raw; /* remoting.codec.message_properties.tags_code_of_raw */
    PyObject *record_type;      /* remoting.codec.message.MessageRecord */
    Py_ssize_t isal_from;       /* bodies of at least this many bytes take ISA-L's CRC */
    Py_ssize_t slot[11];        /* MessageRecord's slot offsets, or -1 (then getattr) */
    int all_slots;              /* every field is a slot */
} State;

static State S;

enum { F_TOPIC, F_BODY, F_QUEUE_ID, F_FLAG, F_PROPERTIES, F_SYS_FLAG, F_BORN_TS, F_BORN_HOST, F_STORE_HOST,
       F_RECONSUME, F_PREPARED_TX, F_COUNT };
static const char *const FIELD_NAMES[F_COUNT] = {
    "topic", "body", "queue_id", "flag", "properties", "sys_flag", "born_timestamp", "born_host", "store_host",
    "reconsume_times", "prepared_transaction_offset"};
static PyObject *field_names[F_COUNT];

/* The shared (template) fields of a record, resolved to C values. */
typedef struct {
    const char *topic;
    Py_ssize_t topic_len;
    int32_t sys_flag;
    int32_t queue_id;
    int64_t born_ts;
    const char *born_host;
    Py_ssize_t born_len;
    const char *store_host;
    Py_ssize_t store_len;
    int32_t reconsume;
    int64_t prepared_tx;
} Template;

/* One record being written: its own fields plus its template. */
typedef struct {
    Py_buffer view;      /* body; view.obj is NULL when body is a bytes object (then body points into it) */
    const char *body;
    Py_ssize_t body_len;
    const char *props;
    Py_ssize_t props_len;
    int32_t flag;
    int32_t crc;
    int64_t tags;
    Py_ssize_t size;
    const Template *tpl;
} Item;

/* ---- big-endian writers ------------------------------------------------------------------------------------ */

#if defined(__GNUC__) || defined(__clang__)
#define BE32(v) (PY_LITTLE_ENDIAN ? __builtin_bswap32(v) : (v))
#define BE64(v) (PY_LITTLE_ENDIAN ? __builtin_bswap64(v) : (v))
#else
static inline uint32_t BE32(uint32_t v) {
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                          (unsigned char)v};
    memcpy(&v, b, 4);
    return v;
}
static inline uint64_t BE64(uint64_t v) {
    uint32_t hi = BE32((uint32_t)(v >> 32)), lo = BE32((uint32_t)v);
    unsigned char b[8];
    memcpy(b, &hi, 4);
    memcpy(b + 4, &lo, 4);
    memcpy(&v, b, 8);
    return v;
}
#endif

static inline char *put32(char *p, uint32_t v) {
    v = BE32(v);
    memcpy(p, &v, 4);
    return p + 4;
}

static inline char *put64(char *p, uint64_t v) {
    v = BE64(v);
    memcpy(p, &v, 8);
    return p + 8;
}

/* ---- field conversion: out-of-range values raise struct.error as struct.pack would --------------------------- */

static inline int as_int32(PyObject *o, int32_t *out, const char *what) {
    if (!PyLong_Check(o)) {
        PyErr_Format(S.struct_error, "required argument is not an integer (%s)", what);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(S.struct_error, "'i' format requires -2147483648 <= number <= 2147483647 (%s)", what);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

static inline int as_int64(PyObject *o, int64_t *out, const char *what) {
    if (!PyLong_Check(o)) {
        PyErr_Format(S.struct_error, "required argument is not an integer (%s)", what);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
        PyErr_Format(S.struct_error, "argument out of range (%s)", what);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

static inline int as_host(PyObject *o, const char **ptr, Py_ssize_t *len) {
    if (!PyBytes_Check(o)) {
        PyErr_SetString(S.struct_error, "argument for 's' must be a bytes object");
        return -1;
    }
    *ptr = PyBytes_AS_STRING(o);
    *len = PyBytes_GET_SIZE(o);
    return 0;
}

/* message._check_template's host rule: each host 8 or 20 bytes, 20 sets its sysFlag bit. */
static inline int check_hosts(Template *t, int64_t raw_sys_flag) {
    int32_t flag = (int32_t)(raw_sys_flag & ~(int64_t)(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6));
    Py_ssize_t lens[2] = {t->born_len, t->store_len};
    int bits[2] = {SYSFLAG_BORNHOST_V6, SYSFLAG_STOREHOST_V6};
    for (int i = 0; i < 2; i++) {
        if (lens[i] == 20) {
            flag |= bits[i];
        } else if (lens[i] != 8) {
            PyErr_Format(S.encode_error, "a packed host is 8 or 20 bytes, got %zd", lens[i]);
            return -1;
        }
    }
    t->sys_flag = flag;
    return 0;
}

static inline int check_topic(PyObject *topic, Template *t) {
    if (!PyUnicode_Check(topic)) {
        PyErr_SetString(PyExc_TypeError, "topic must be a str");
        return -1;
    }
    t->topic = PyUnicode_AsUTF8AndSize(topic, &t->topic_len);
    if (t->topic == NULL) return -1;
    if (t->topic_len < 1 || t->topic_len > MAX_TOPIC_BYTES) {
        PyErr_Format(S.encode_error, "topic must be 1..%d bytes, got %zd", MAX_TOPIC_BYTES, t->topic_len);
        return -1;
    }
    return 0;
}

/* ---- CRC and tags code --------------------------------------------------------------------------------------- */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_CLMUL_CRC 1

/* CRC-32 (zlib's reflected polynomial) by carry-less multiplication folding: Intel's "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ", with the constants Linux's crc32-pclmul and Chromium's zlib use. `len` is a
 * multiple of 16 and at least 64; `crc` is the pre-inverted running value. Several times zlib's table loop, and no
 * Python call as ISA-L's would cost (its call overhead alone is ~130 ns). */
__attribute__((target("pclmul,sse4.1"))) static inline uint32_t crc32_clmul(const unsigned char *buf, size_t len,
                                                                      uint32_t crc) {
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8;

    x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    x0 = k1k2;
    buf += 64;
    len -= 64;
    while (len >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), _mm_loadu_si128((const __m128i *)(buf + 0x00)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), _mm_loadu_si128((const __m128i *)(buf + 0x10)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), _mm_loadu_si128((const __m128i *)(buf + 0x20)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), _mm_loadu_si128((const __m128i *)(buf + 0x30)));
        buf += 64;
        len -= 64;
    }
    /* fold the four lanes into one */
    x0 = k3k4;
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
    while (len >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        len -= 16;
    }
    /* 128 -> 64 bits */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    x0 = k5k0;
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    /* Barrett reduction to 32 bits */
    x0 = poly;
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

static int have_clmul;

/* zlib.crc32(data) */
static inline uint32_t crc32_of(const unsigned char *buf, size_t len) {
    uint32_t crc = 0;
#ifdef HAVE_CLMUL_CRC
    if (have_clmul && len >= 64) {
        size_t chunk = len & ~(size_t)15;
        crc = ~crc32_clmul(buf, chunk, ~crc);
        buf += chunk;
        len -= chunk;
    }
#endif
    return (uint32_t)crc32(crc, buf, (uInt)len);
}

/* From this many bytes ISA-L's AVX-512 folding, even through a Python call (~100 ns), beats crc32_clmul's SSE
 * folding (measured: 142 vs 177 ns at 4 KiB, 272 vs 224 ns at 8 KiB, 533 vs 287 ns at 16 KiB). */
#define CLMUL_UNTIL 8192

static inline int body_crc(PyObject *body_obj, const char *body, Py_ssize_t len, int32_t *out) {
    if (len < (have_clmul ? CLMUL_UNTIL : S.isal_from)) {
        *out = (int32_t)(crc32_of((const unsigned char *)body, (size_t)len) & 0x7FFFFFFF);
        return 0;
    }
    PyObject *r = PyObject_CallOneArg(S.isal_crc32, body_obj);
    if (r == NULL) return -1;
    unsigned long v = PyLong_AsUnsignedLongMask(r);
    Py_DECREF(r);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    *out = (int32_t)(v & 0x7FFFFFFF);
    return 0;
}

static inline const char *find_tags(const char *p, Py_ssize_t len, Py_ssize_t from) {
    /* "TAGS\x01" at or after from */
    for (Py_ssize_t i = from; i + 5 <= len; i++) {
        const char *hit = memchr(p + i, 'T', (size_t)(len - 4 - i));
        if (hit == NULL) return NULL;
        if (memcmp(hit, "TAGS\x01", 5) == 0) return hit;
        i = hit - p;
    }
    return NULL;
}

/* properties.tags_code_of_raw: Java String.hashCode of TAGS, 0 without tags. The usual shape (TAGS once, at a
 * property boundary, ASCII value) is hashed here; every other shape goes to the Python function, so both agree. */
static inline int tags_code(const char *props, Py_ssize_t len, int64_t *out) {
    const char *start = find_tags(props, len, 0);
    if (start == NULL) {
        *out = 0;
        return 0;
    }
    Py_ssize_t at = start - props;
    int plain = (at == 0 || props[at - 1] == '\x02') && find_tags(props, len, at + 5) == NULL;
    const char *value = start + 5;
    const char *end = plain ? memchr(value, '\x02', (size_t)(props + len - value)) : NULL;
    if (end == NULL) end = props + len;
    uint32_t h = 0;
    for (const char *c = value; plain && c < end; c++) {
        if ((unsigned char)*c >= 0x80) plain = 0;
        h = 31 * h + (unsigned char)*c;
    }
    if (plain) {
        *out = (int64_t)(int32_t)h;
        return 0;
    }
    PyObject *raw = PyBytes_FromStringAndSize(props, len);
    if (raw == NULL) return -1;
    PyObject *r = PyObject_CallOneArg(S.tags_code_of_raw, raw);
    Py_DECREF(raw);
    if (r == NULL) return -1;
    long long v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

/* ---- per-record preparation (prepare_batch's checks, in its order) ------------------------------------------- */

static inline int prepare_body(Item *it, PyObject *body, Py_ssize_t max_body) {
    if (PyBytes_CheckExact(body)) {
        it->body = PyBytes_AS_STRING(body);
        it->body_len = PyBytes_GET_SIZE(body);
    } else {
        if (PyObject_GetBuffer(body, &it->view, PyBUF_SIMPLE) < 0) return -1;
        it->body = it->view.buf;
        it->body_len = it->view.len;
    }
    if (it->body_len > max_body) {
        PyErr_Format(S.body_error, "message body %zd bytes exceeds %zd", it->body_len, max_body);
        return -1;
    }
    return 0;
}

static inline int prepare_props(Item *it, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "properties must be a str");
        return -1;
    }
    it->props = PyUnicode_AsUTF8AndSize(text, &it->props_len);
    if (it->props == NULL) return -1;
    if (it->props_len > MAX_PROPERTIES_BYTES) {
        PyErr_Format(S.props_error, "properties must be at most %d bytes, got %zd", MAX_PROPERTIES_BYTES,
                     it->props_len);
        return -1;
    }
    return 0;
}

/* CRC, tags code and size, once the record has passed its checks. */
static inline int measure(Item *it, PyObject *body) {
    if (body_crc(body, it->body, it->body_len, &it->crc) < 0) return -1;
    if (tags_code(it->props, it->props_len, &it->tags) < 0) return -1;
    const Template *t = it->tpl;
    it->size = RECORD_FIXED + t->born_len + t->store_len + t->topic_len + it->body_len + it->props_len;
    return 0;
}

/* ---- writing ------------------------------------------------------------------------------------------------- */

static inline char *write_one(char *p, const Item *it, int64_t queue_offset, int64_t phy, int64_t store_ts) {
    const Template *t = it->tpl;
    p = put32(p, (uint32_t)it->size);
    p = put32(p, MAGIC_V1);
    p = put32(p, (uint32_t)it->crc);
    p = put32(p, (uint32_t)t->queue_id);
    p = put32(p, (uint32_t)it->flag);
    p = put64(p, (uint64_t)queue_offset);
    p = put64(p, (uint64_t)phy);
    p = put32(p, (uint32_t)t->sys_flag);
    p = put64(p, (uint64_t)t->born_ts);
    memcpy(p, t->born_host, (size_t)t->born_len);
    p += t->born_len;
    p = put64(p, (uint64_t)store_ts);
    memcpy(p, t->store_host, (size_t)t->store_len);
    p += t->store_len;
    p = put32(p, (uint32_t)t->reconsume);
    p = put64(p, (uint64_t)t->prepared_tx);
    p = put32(p, (uint32_t)it->body_len);
    memcpy(p, it->body, (size_t)it->body_len);
    p += it->body_len;
    *p++ = (char)t->topic_len;
    memcpy(p, t->topic, (size_t)t->topic_len);
    p += t->topic_len;
    *p++ = (char)(it->props_len >> 8);
    *p++ = (char)it->props_len;
    memcpy(p, it->props, (size_t)it->props_len);
    return p + it->props_len;
}

/* ---- encode_records_into ------------------------------------------------------------------------------------- */

static inline PyObject *record_field(PyObject *rec, int field) {
    if (Py_IS_TYPE(rec, (PyTypeObject *)S.record_type) && S.slot[field] >= 0) {
        PyObject *v = *(PyObject **)((char *)rec + S.slot[field]);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(rec, field_names[field]);
}

/* A record's own template, from its fields; reuses prev's when the record shares its field objects (a batch
 * built from one template shares them). fields[] holds new references the caller releases. */
static inline int record_template(PyObject **f, Template *t, const Template *prev, PyObject **prev_f) {
    if (prev != NULL && f[F_TOPIC] == prev_f[F_TOPIC] && f[F_BORN_HOST] == prev_f[F_BORN_HOST] &&
        f[F_STORE_HOST] == prev_f[F_STORE_HOST] && f[F_SYS_FLAG] == prev_f[F_SYS_FLAG]) {
        *t = *prev;
    } else {
        if (check_topic(f[F_TOPIC], t) < 0) return -1;
        int64_t raw;
        if (as_host(f[F_BORN_HOST], &t->born_host, &t->born_len) < 0 ||
            as_host(f[F_STORE_HOST], &t->store_host, &t->store_len) < 0)
            return -1;
        if (!PyLong_Check(f[F_SYS_FLAG])) {
            PyErr_SetString(PyExc_TypeError, "sys_flag must be an int");
            return -1;
        }
        int overflow = 0;  /* an out-of-range sysFlag is refused later, where struct would refuse it */
        raw = PyLong_AsLongLongAndOverflow(f[F_SYS_FLAG], &overflow);
        if (raw == -1 && PyErr_Occurred()) return -1;
        if (check_hosts(t, raw) < 0) return -1;
    }
    return 0;
}

/* A MessageRecord's slot, borrowed, or NULL (another type, or the slot unset). */
static inline PyObject *slot_of(PyObject *rec, int field) {
    if (Py_IS_TYPE(rec, (PyTypeObject *)S.record_type) && S.slot[field] >= 0)
        return *(PyObject **)((char *)rec + S.slot[field]);
    return NULL;
}

/* All of a record's fields. A MessageRecord's are borrowed from its slots and *held = the record, with a new
 * reference: the record is frozen, so its fields live as long as it does, and one reference to it replaces eleven
 * to its fields (shared by every record of a batch built from one template, whose reference counts the records
 * then updated one after the other: ~7 % of a 128 B batch). Another object's are new references (getattr), and
 * *held = NULL. */
static inline int record_fields(PyObject *rec, PyObject **f, PyObject **held) {
    *held = NULL;
    if (Py_IS_TYPE(rec, (PyTypeObject *)S.record_type) && S.all_slots) {
        int k = 0;
        for (; k < F_COUNT; k++) {
            PyObject *v = *(PyObject **)((char *)rec + S.slot[k]);
            if (v == NULL) break;
            f[k] = v;
        }
        if (k == F_COUNT) {
            Py_INCREF(rec);
            *held = rec;
            return 0;
        }
        memset(f, 0, F_COUNT * sizeof(PyObject *));
    }
    for (int k = 0; k < F_COUNT; k++)
        if ((f[k] = PyObject_GetAttr(rec, field_names[k])) == NULL) return -1;
    return 0;
}

/* MessageStore.append_batch's rule, checked before any record is: one topic and queue for the whole batch. */
static inline int same_queue(PyObject **records, Py_ssize_t n) {
    if (n == 0) return 0;
    /* the usual batch: MessageRecords sharing their topic and queue id objects (no reference counting) */
    PyObject *topic0 = slot_of(records[0], F_TOPIC), *queue0 = slot_of(records[0], F_QUEUE_ID);
    Py_ssize_t same = topic0 != NULL && queue0 != NULL ? 1 : n;
    while (same < n && slot_of(records[same], F_TOPIC) == topic0 && slot_of(records[same], F_QUEUE_ID) == queue0)
        same++;
    if (same == n) return 0;
    int ok = 1;
    PyObject *topic = record_field(records[0], F_TOPIC), *queue = NULL;
    if (topic == NULL || (queue = record_field(records[0], F_QUEUE_ID)) == NULL) goto out;
    for (Py_ssize_t i = 1; i < n && ok == 1; i++) {
        PyObject *t = record_field(records[i], F_TOPIC), *q = NULL;
        if (t == NULL || (q = record_field(records[i], F_QUEUE_ID)) == NULL) {
            ok = -1;
        } else {
            ok = t == topic ? 1 : PyObject_RichCompareBool(t, topic, Py_EQ);
            if (ok == 1 && q != queue) ok = PyObject_RichCompareBool(q, queue, Py_EQ);
        }
        Py_XDECREF(t);
        Py_XDECREF(q);
    }
    if (ok == 0) PyErr_SetString(S.mixed_error, "a batch must target one topic and queue");
out:
    Py_XDECREF(topic);
    Py_XDECREF(queue);
    return ok == 1 && !PyErr_Occurred() ? 0 : -1;
}

/* The objects whose memory a held MessageRecord's item points into (body, properties, topic, hosts), referenced:
 * frozen is not immutable (object.__setattr__ rebinds a slot), and the clock, or a finalizer the garbage collector
 * runs at any allocation, is Python code that could rebind one and free what the write then copies. The shared
 * topic and hosts only when they differ from the previous record's (then an earlier record pins or owns them), so
 * a batch built from one template costs two references a record, not eleven. */
#define PINS 5
static inline void pin_borrowed(PyObject **pin, PyObject **f, PyObject **prev_f) {
    pin[0] = Py_NewRef(f[F_BODY]);
    pin[1] = Py_NewRef(f[F_PROPERTIES]);
    if (prev_f == NULL || f[F_TOPIC] != prev_f[F_TOPIC] || f[F_BORN_HOST] != prev_f[F_BORN_HOST] ||
        f[F_STORE_HOST] != prev_f[F_STORE_HOST]) {
        pin[2] = Py_NewRef(f[F_TOPIC]);
        pin[3] = Py_NewRef(f[F_BORN_HOST]);
        pin[4] = Py_NewRef(f[F_STORE_HOST]);
    }
}


/* ---- a whole batch of MessageRecords ------------------------------------------------------------------------- */

/* Work arrays for n records (the caller's: on its stack for a few, else allocated), zeroed before
 * prepare_records and released by release_records whatever it returned. */
typedef struct {
    Item *items;
    Template *tpls;
    PyObject **fields; /* n * F_COUNT: every field of every record (see record_fields) */
    PyObject **held;   /* n: the record itself when its fields are borrowed from its slots */
    PyObject **pins;   /* n * PINS: see pin_borrowed */
} Scratch;

/* The records' fields, checks, CRCs, tags codes and sizes, in prepare_batch's order: every record passes its
 * checks before any has its integers converted. -1 with an exception set on the first failure. The items point into
 * the records' objects, which `s` holds until release_records. */
static inline int prepare_records(Scratch *s, PyObject **records, Py_ssize_t n, Py_ssize_t max_body) {
    Item *items = s->items;
    Template *tpls = s->tpls;
    if (n > 1 && same_queue(records, n) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **f = &s->fields[i * F_COUNT];
        if (record_fields(records[i], f, &s->held[i]) < 0) return -1;
        Item *it = &items[i];
        it->tpl = &tpls[i];
        if (prepare_body(it, f[F_BODY], max_body) < 0) return -1;
        if (record_template(f, &tpls[i], i ? &tpls[i - 1] : NULL, i ? f - F_COUNT : NULL) < 0) return -1;
        if (prepare_props(it, f[F_PROPERTIES]) < 0) return -1;
        if (s->held[i] != NULL) pin_borrowed(&s->pins[i * PINS], f, i ? f - F_COUNT : NULL);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **f = &s->fields[i * F_COUNT], **p = i ? f - F_COUNT : NULL;
        Template *t = &tpls[i];
        if (as_int32(f[F_FLAG], &items[i].flag, "flag") < 0) return -1;
        /* a batch built from one template shares these objects: convert them once */
        if (p != NULL && f[F_SYS_FLAG] == p[F_SYS_FLAG] && f[F_QUEUE_ID] == p[F_QUEUE_ID] &&
            f[F_BORN_TS] == p[F_BORN_TS] && f[F_RECONSUME] == p[F_RECONSUME] && f[F_PREPARED_TX] == p[F_PREPARED_TX]) {
            t->queue_id = tpls[i - 1].queue_id;
            t->born_ts = tpls[i - 1].born_ts;
            t->reconsume = tpls[i - 1].reconsume;
            t->prepared_tx = tpls[i - 1].prepared_tx;
        } else {
            int64_t raw_sys_flag;
            if (as_int64(f[F_SYS_FLAG], &raw_sys_flag, "sys_flag") < 0 ||
                as_int32(f[F_QUEUE_ID], &t->queue_id, "queue_id") < 0 ||
                as_int64(f[F_BORN_TS], &t->born_ts, "born_timestamp") < 0 ||
                as_int32(f[F_RECONSUME], &t->reconsume, "reconsume_times") < 0 ||
                as_int64(f[F_PREPARED_TX], &t->prepared_tx, "prepared_transaction_offset") < 0)
                return -1;
            if (raw_sys_flag < INT32_MIN || raw_sys_flag > INT32_MAX) {
                PyErr_SetString(S.struct_error,
                                "'i' format requires -2147483648 <= number <= 2147483647 (sys_flag)");
                return -1;
            }
        }
        if (measure(&items[i], f[F_BODY]) < 0) return -1;
    }
    return 0;
}

static inline void release_records(Scratch *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s->held[i] != NULL) {
            Py_DECREF(s->held[i]);
        } else {
            for (int k = 0; k < F_COUNT; k++) Py_XDECREF(s->fields[i * F_COUNT + k]);
        }
    }
    for (Py_ssize_t i = 0; i < n * PINS; i++) Py_XDECREF(s->pins[i]);
    for (Py_ssize_t i = 0; i < n; i++)
        if (s->items[i].view.obj != NULL) PyBuffer_Release(&s->items[i].view);
}

/* ---- import -------------------------------------------------------------------------------------------------- */

static inline PyObject *attr_of(const char *module, const char *name) {
    PyObject *m = PyImport_ImportModule(module);
    if (m == NULL) return NULL;
    PyObject *v = PyObject_GetAttrString(m, name);
    Py_DECREF(m);
    return v;
}

/* The offset of a slotted class's object slot `name` (as its member descriptor reads it), or -1. */
static inline Py_ssize_t slot_offset(PyObject *type, PyObject *name) {
    PyObject *descr = PyDict_GetItemWithError(((PyTypeObject *)type)->tp_dict, name);
    if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX) return member->offset;
    }
    return -1;
}

/* Fill S at the extension's import: the error types, ISA-L's CRC and MessageRecord's slots. -1 on error. */
static inline int record_encoder_init(void) {
    if ((S.body_error = attr_of("remoting.codec.errors", "BodyTooLongError")) == NULL ||
        (S.props_error = attr_of("remoting.codec.errors", "PropertiesTooLongError")) == NULL ||
        (S.encode_error = attr_of("remoting.codec.errors", "MessageEncodeError")) == NULL ||
        (S.mixed_error = attr_of("remoting.codec.errors", "MixedBatchError")) == NULL ||
        (S.struct_error = attr_of("struct", "error")) == NULL ||
        (S.isal_crc32 = attr_of("remoting.codec.crc", "isal_crc32")) == NULL ||
        (S.tags_code_of_raw = attr_of("remoting.codec.message_properties", "tags_code_of_raw")) == NULL ||
        (S.record_type = attr_of("remoting.codec.message", "MessageRecord")) == NULL)
        return -1;
    PyObject *isal_from = attr_of("remoting.codec.crc", "ISAL_FROM");
    if (isal_from == NULL) return -1;
    S.isal_from = PyLong_AsSsize_t(isal_from);
    Py_DECREF(isal_from);
    if (S.isal_from == -1 && PyErr_Occurred()) return -1;
    S.all_slots = 1;
    for (int k = 0; k < F_COUNT; k++) {
        if ((field_names[k] = PyUnicode_InternFromString(FIELD_NAMES[k])) == NULL) return -1;
        /* MessageRecord is an attrs slotted class: read its slots directly, as the member descriptor would. */
        S.slot[k] = slot_offset(S.record_type, field_names[k]);
        if (S.slot[k] < 0 && PyErr_Occurred()) return -1;
        if (S.slot[k] < 0) S.all_slots = 0;
    }
#ifdef HAVE_CLMUL_CRC
    __builtin_cpu_init();
    have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
    return 0;
}

#endif /* ROCKETRIO_RECORD_ENCODER_H */
