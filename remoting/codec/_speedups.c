/* remoting.codec._speedups: the store's batch append encoder in C (store.md 2.1, 4).
 *
 * One call per batch writes every record of the batch straight into a writable buffer (the CommitLog segment's
 * mmap) and returns the packed ConsumeQueue entries, so the per-message Python work of prepare_batch,
 * encode_records and tags_code_of_raw (about 2 us a 128-byte message) becomes one C loop. The records are byte for
 * byte those of remoting.codec.message.encode_records(prepare_batch(...)); the errors are prepare_batch's, raised
 * before anything is written. Sans-IO: no system calls, the caller owns the buffer and the segment roll.
 *
 * encode_entries_into(buf, pos, room, phy_offset, first_queue_offset, clock, max_body,
 *                     topic, sys_flag, queue_id, born_timestamp, born_host, store_host, reconsume_times,
 *                     prepared_transaction_offset, entries) -> (total, cq_entries, store_timestamp)
 * encode_records_into(buf, pos, room, phy_offset, first_queue_offset, clock, max_body, records)
 *                     -> (total, cq_entries, store_timestamp)
 * encode_record_into(buf, pos, room, phy_offset, queue_offset, clock, max_body, record)
 *                     -> (size, tags_code, store_timestamp)   (a single append; -size when it does not fit)
 *
 * When the batch does not fit in `room` bytes, nothing is written, the clock is not read and (-total, b"", 0) is
 * returned.
 * See remoting/codec/record_batch.py for the contract and the pure-Python twin.
 */
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
    PyObject *tags_code_of_raw; /* remoting.codec.properties.tags_code_of_raw */
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

static int as_int32(PyObject *o, int32_t *out, const char *what) {
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

static int as_int64(PyObject *o, int64_t *out, const char *what) {
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

static int as_host(PyObject *o, const char **ptr, Py_ssize_t *len) {
    if (!PyBytes_Check(o)) {
        PyErr_SetString(S.struct_error, "argument for 's' must be a bytes object");
        return -1;
    }
    *ptr = PyBytes_AS_STRING(o);
    *len = PyBytes_GET_SIZE(o);
    return 0;
}

/* message._check_template's host rule: each host 8 or 20 bytes, 20 sets its sysFlag bit. */
static int check_hosts(Template *t, int64_t raw_sys_flag) {
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

static int check_topic(PyObject *topic, Template *t) {
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
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc32_clmul(const unsigned char *buf, size_t len,
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
static uint32_t crc32_of(const unsigned char *buf, size_t len) {
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

static PyObject *py_crc32(PyObject *module, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t crc = crc32_of(view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* From this many bytes ISA-L's AVX-512 folding, even through a Python call (~100 ns), beats crc32_clmul's SSE
 * folding (measured: 142 vs 177 ns at 4 KiB, 272 vs 224 ns at 8 KiB, 533 vs 287 ns at 16 KiB). */
#define CLMUL_UNTIL 8192

static int body_crc(PyObject *body_obj, const char *body, Py_ssize_t len, int32_t *out) {
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

static const char *find_tags(const char *p, Py_ssize_t len, Py_ssize_t from) {
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
static int tags_code(const char *props, Py_ssize_t len, int64_t *out) {
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

static int prepare_body(Item *it, PyObject *body, Py_ssize_t max_body) {
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

static int prepare_props(Item *it, PyObject *text) {
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
static int measure(Item *it, PyObject *body) {
    if (body_crc(body, it->body, it->body_len, &it->crc) < 0) return -1;
    if (tags_code(it->props, it->props_len, &it->tags) < 0) return -1;
    const Template *t = it->tpl;
    it->size = RECORD_FIXED + t->born_len + t->store_len + t->topic_len + it->body_len + it->props_len;
    return 0;
}

/* ---- writing ------------------------------------------------------------------------------------------------- */

static char *write_one(char *p, const Item *it, int64_t queue_offset, int64_t phy, int64_t store_ts) {
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

typedef struct {
    PyObject *buf;
    Py_ssize_t pos, room;
    int64_t phy, first_queue_offset;
    PyObject *clock;  /* read once the batch is known to fit, so a refused or rolled batch takes no store time */
    Py_ssize_t max_body;
} Target;

/* The arguments every encoder starts with (after checking their count, which is the encoder's whole arity). */
static int parse_target(const char *name, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t expected, Target *t) {
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, expected, nargs);
        return -1;
    }
    t->buf = args[0];
    if ((t->pos = PyLong_AsSsize_t(args[1])) == -1 && PyErr_Occurred()) return -1;
    if ((t->room = PyLong_AsSsize_t(args[2])) == -1 && PyErr_Occurred()) return -1;
    if (as_int64(args[3], &t->phy, "phy_offset") < 0) return -1;
    if (as_int64(args[4], &t->first_queue_offset, "first_queue_offset") < 0) return -1;
    t->clock = args[5];
    if ((t->max_body = PyLong_AsSsize_t(args[6])) == -1 && PyErr_Occurred()) return -1;
    return 0;
}

/* (total, a, b) from new references a and b (stolen, also on failure): the tuple built directly, as
 * Py_BuildValue's format parsing cost more than the tuple (~1.4 % of a 128 B batch). */
static PyObject *result3(Py_ssize_t total, PyObject *a, PyObject *b) {
    PyObject *t = a != NULL && b != NULL ? PyTuple_New(3) : NULL;
    PyObject *n = t != NULL ? PyLong_FromSsize_t(total) : NULL;
    if (n == NULL) {
        Py_XDECREF(t);
        Py_XDECREF(a);
        Py_XDECREF(b);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, n);
    PyTuple_SET_ITEM(t, 1, a);
    PyTuple_SET_ITEM(t, 2, b);
    return t;
}

/* Write the prepared items at buf[pos:] (or report -total when they do not fit room) and build the CQ entries; a
 * single record returns (size, tags code, store time) instead, its one entry being written by ConsumeQueue.put. */
static PyObject *write_all(const Target *tg, Item *items, Py_ssize_t n, int single) {
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) total += items[i].size;
    if (total > tg->room)
        return single ? Py_BuildValue("(nii)", -total, 0, 0) : Py_BuildValue("(ny#i)", -total, "", (Py_ssize_t)0, 0);
    PyObject *now = PyObject_CallNoArgs(tg->clock);
    if (now == NULL) return NULL;
    int64_t store_ts;
    if (as_int64(now, &store_ts, "store_timestamp") < 0) {
        Py_DECREF(now);
        return NULL;
    }
    Py_buffer out;
    if (PyObject_GetBuffer(tg->buf, &out, PyBUF_WRITABLE) < 0) {
        Py_DECREF(now);
        return NULL;
    }
    if (tg->pos < 0 || tg->pos > out.len || total > out.len - tg->pos) { /* pos + total could overflow */
        PyBuffer_Release(&out);
        Py_DECREF(now);
        PyErr_Format(PyExc_IndexError, "%zd bytes at %zd overrun a %zd-byte buffer", total, tg->pos, out.len);
        return NULL;
    }
    if (single) {
        write_one((char *)out.buf + tg->pos, &items[0], tg->first_queue_offset, tg->phy, store_ts);
        PyBuffer_Release(&out);
        return result3(total, PyLong_FromLongLong((long long)items[0].tags), now);
    }
    PyObject *cq = PyBytes_FromStringAndSize(NULL, n * CQ_UNIT);
    if (cq == NULL) {
        PyBuffer_Release(&out);
        Py_DECREF(now);
        return NULL;
    }
    char *q = PyBytes_AS_STRING(cq);
    char *p = (char *)out.buf + tg->pos;
    int64_t phy = tg->phy;
    for (Py_ssize_t i = 0; i < n; i++) {
        p = write_one(p, &items[i], tg->first_queue_offset + i, phy, store_ts);
        q = put64(q, (uint64_t)phy);
        q = put32(q, (uint32_t)items[i].size);
        q = put64(q, (uint64_t)items[i].tags);
        phy += items[i].size;
    }
    PyBuffer_Release(&out);
    return result3(total, cq, now);
}

static void release_items(Item *items, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (items[i].view.obj != NULL) PyBuffer_Release(&items[i].view);
    if (n > STACK_RECORDS) PyMem_Free(items);
}

/* ---- encode_entries_into ------------------------------------------------------------------------------------- */

static PyObject *encode_entries_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    Target tg;
    if (parse_target("encode_entries_into", args, nargs, 16, &tg) < 0) return NULL;
    Template t;
    if (!PyBytes_Check(args[7])) {
        PyErr_SetString(PyExc_TypeError, "topic must be the encoded topic (bytes)");
        return NULL;
    }
    t.topic = PyBytes_AS_STRING(args[7]);
    t.topic_len = PyBytes_GET_SIZE(args[7]);
    if (t.topic_len < 1 || t.topic_len > MAX_TOPIC_BYTES) {
        PyErr_Format(S.encode_error, "topic must be 1..%d bytes, got %zd", MAX_TOPIC_BYTES, t.topic_len);
        return NULL;
    }
    /* A tuple, not PySequence_Fast's list itself: the items borrow each entry's body and properties, and the clock
     * (Python code) runs between that and the write; a list it cleared would free them under the memcpy. */
    PyObject *seq = PySequence_Tuple(args[15]);
    if (seq == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    Item stack_items[STACK_RECORDS];
    Item *items = n <= STACK_RECORDS ? stack_items : PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Item));
    if (items != NULL) memset(items, 0, (size_t)n * sizeof(Item));
    PyObject *result = NULL;
    Py_ssize_t done = 0;
    if (items == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    PyObject **entries = &PyTuple_GET_ITEM(seq, 0);
    for (; done < n; done++) {
        PyObject *e = entries[done];
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 3) {
            PyErr_SetString(PyExc_TypeError, "an entry is a (body, properties, flag) tuple");
            goto out;
        }
        Item *it = &items[done];
        it->tpl = &t;
        if (prepare_body(it, PyTuple_GET_ITEM(e, 0), tg.max_body) < 0) goto out;
        if (prepare_props(it, PyTuple_GET_ITEM(e, 1)) < 0) goto out;
    }
    /* Fields prepare_batch does not check are range-checked here, before writing, where encode_records' struct
     * packing would fail. */
    int64_t raw_sys_flag;
    if (as_int64(args[8], &raw_sys_flag, "sys_flag") < 0 || as_int32(args[9], &t.queue_id, "queue_id") < 0 ||
        as_int64(args[10], &t.born_ts, "born_timestamp") < 0 ||
        as_host(args[11], &t.born_host, &t.born_len) < 0 || as_host(args[12], &t.store_host, &t.store_len) < 0 ||
        as_int32(args[13], &t.reconsume, "reconsume_times") < 0 ||
        as_int64(args[14], &t.prepared_tx, "prepared_transaction_offset") < 0)
        goto out;
    if (raw_sys_flag < INT32_MIN || raw_sys_flag > INT32_MAX) {
        PyErr_SetString(S.struct_error, "'i' format requires -2147483648 <= number <= 2147483647 (sys_flag)");
        goto out;
    }
    t.sys_flag = (int32_t)raw_sys_flag;  /* the caller passes the sysFlag with its host bits set */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (as_int32(PyTuple_GET_ITEM(entries[i], 2), &items[i].flag, "flag") < 0) goto out;
        if (measure(&items[i], PyTuple_GET_ITEM(entries[i], 0)) < 0) goto out;
    }
    result = write_all(&tg, items, n, 0);
out:
    if (items != NULL) release_items(items, n);
    Py_DECREF(seq);
    return result;
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
static int record_template(PyObject **f, Template *t, const Template *prev, PyObject **prev_f) {
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
static int record_fields(PyObject *rec, PyObject **f, PyObject **held) {
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
static int same_queue(PyObject **records, Py_ssize_t n) {
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
static void pin_borrowed(PyObject **pin, PyObject **f, PyObject **prev_f) {
    pin[0] = Py_NewRef(f[F_BODY]);
    pin[1] = Py_NewRef(f[F_PROPERTIES]);
    if (prev_f == NULL || f[F_TOPIC] != prev_f[F_TOPIC] || f[F_BORN_HOST] != prev_f[F_BORN_HOST] ||
        f[F_STORE_HOST] != prev_f[F_STORE_HOST]) {
        pin[2] = Py_NewRef(f[F_TOPIC]);
        pin[3] = Py_NewRef(f[F_BORN_HOST]);
        pin[4] = Py_NewRef(f[F_STORE_HOST]);
    }
}

/* The records' fields, checks, CRCs and tags, then write_all. Up to STACK_RECORDS records use stack storage. */
static PyObject *records_into(const Target *tg, PyObject **records, Py_ssize_t n, int single) {
    Item stack_items[STACK_RECORDS];
    Template stack_tpls[STACK_RECORDS];
    PyObject *stack_fields[STACK_RECORDS * F_COUNT];
    PyObject *stack_held[STACK_RECORDS];
    PyObject *stack_pins[STACK_RECORDS * PINS];
    Item *items;
    Template *tpls;
    PyObject **fields, **held, **pins;
    int on_stack = n <= STACK_RECORDS;
    if (on_stack) {
        memset(stack_items, 0, (size_t)n * sizeof(Item));
        memset(stack_fields, 0, (size_t)n * F_COUNT * sizeof(PyObject *));
        memset(stack_held, 0, (size_t)n * sizeof(PyObject *));
        memset(stack_pins, 0, (size_t)n * PINS * sizeof(PyObject *));
        pins = stack_pins;
        items = stack_items;
        tpls = stack_tpls;
        fields = stack_fields;
        held = stack_held;
    } else {
        items = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Item));
        tpls = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Template));
        /* every field of every record (see record_fields): the pointers the items hold stay valid until released */
        fields = PyMem_Calloc((size_t)(n ? n : 1) * F_COUNT, sizeof(PyObject *));
        held = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PyObject *));
        pins = PyMem_Calloc((size_t)(n ? n : 1) * PINS, sizeof(PyObject *));
    }
    PyObject *result = NULL;
    if (items == NULL || tpls == NULL || fields == NULL || held == NULL || pins == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    if (n > 1 && same_queue(records, n) < 0) goto out;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **f = &fields[i * F_COUNT];
        if (record_fields(records[i], f, &held[i]) < 0) goto out;
        Item *it = &items[i];
        it->tpl = &tpls[i];
        if (prepare_body(it, f[F_BODY], tg->max_body) < 0) goto out;
        if (record_template(f, &tpls[i], i ? &tpls[i - 1] : NULL, i ? f - F_COUNT : NULL) < 0) goto out;
        if (prepare_props(it, f[F_PROPERTIES]) < 0) goto out;
        if (held[i] != NULL) pin_borrowed(&pins[i * PINS], f, i ? f - F_COUNT : NULL);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **f = &fields[i * F_COUNT], **p = i ? f - F_COUNT : NULL;
        Template *t = &tpls[i];
        if (as_int32(f[F_FLAG], &items[i].flag, "flag") < 0) goto out;
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
                goto out;
            if (raw_sys_flag < INT32_MIN || raw_sys_flag > INT32_MAX) {
                PyErr_SetString(S.struct_error,
                                "'i' format requires -2147483648 <= number <= 2147483647 (sys_flag)");
                goto out;
            }
        }
        if (measure(&items[i], f[F_BODY]) < 0) goto out;
    }
    result = write_all(tg, items, n, single);
out:
    if (fields != NULL && held != NULL)
        for (Py_ssize_t i = 0; i < n; i++) {
            if (held[i] != NULL) {
                Py_DECREF(held[i]);
            } else {
                for (int k = 0; k < F_COUNT; k++) Py_XDECREF(fields[i * F_COUNT + k]);
            }
        }
    if (pins != NULL)
        for (Py_ssize_t i = 0; i < n * PINS; i++) Py_XDECREF(pins[i]);
    if (items != NULL)
        for (Py_ssize_t i = 0; i < n; i++)
            if (items[i].view.obj != NULL) PyBuffer_Release(&items[i].view);
    if (!on_stack) {
        PyMem_Free(pins);
        PyMem_Free(held);
        PyMem_Free(fields);
        PyMem_Free(items);
        PyMem_Free(tpls);
    }
    return result;
}

static PyObject *encode_records_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    Target tg;
    if (parse_target("encode_records_into", args, nargs, 8, &tg) < 0) return NULL;
    /* a tuple (see encode_entries_into): another record type's getattr runs Python code that could empty a list */
    PyObject *seq = PySequence_Tuple(args[7]);
    if (seq == NULL) return NULL;
    PyObject *result = records_into(&tg, &PyTuple_GET_ITEM(seq, 0), PyTuple_GET_SIZE(seq), 0);
    Py_DECREF(seq);
    return result;
}

static PyObject *encode_record_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    Target tg;
    if (parse_target("encode_record_into", args, nargs, 8, &tg) < 0) return NULL;
    PyObject *record = args[7];
    return records_into(&tg, &record, 1, 1);
}

/* ---- module -------------------------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"crc32", py_crc32, METH_O, "zlib.crc32 of a buffer, by the encoder's own CRC (the tests compare the two)."},
    {"encode_entries_into", (PyCFunction)(void (*)(void))encode_entries_into, METH_FASTCALL,
     "Write one record per (body, properties, flag) entry of a template; see remoting.codec.record_batch."},
    {"encode_records_into", (PyCFunction)(void (*)(void))encode_records_into, METH_FASTCALL,
     "Write one record per MessageRecord; see remoting.codec.record_batch."},
    {"encode_record_into", (PyCFunction)(void (*)(void))encode_record_into, METH_FASTCALL,
     "Write one MessageRecord, returning (size, tags code, store time); see remoting.codec.record_batch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "remoting.codec._speedups",
                                        "The store's batch append encoder in C (remoting.codec.record_batch).", -1,
                                        methods, NULL, NULL, NULL, NULL};

static PyObject *attr_of(const char *module, const char *name) {
    PyObject *m = PyImport_ImportModule(module);
    if (m == NULL) return NULL;
    PyObject *v = PyObject_GetAttrString(m, name);
    Py_DECREF(m);
    return v;
}

PyMODINIT_FUNC PyInit__speedups(void) {
    if ((S.body_error = attr_of("remoting.codec.errors", "BodyTooLongError")) == NULL ||
        (S.props_error = attr_of("remoting.codec.errors", "PropertiesTooLongError")) == NULL ||
        (S.encode_error = attr_of("remoting.codec.errors", "MessageEncodeError")) == NULL ||
        (S.mixed_error = attr_of("remoting.codec.errors", "MixedBatchError")) == NULL ||
        (S.struct_error = attr_of("struct", "error")) == NULL ||
        (S.isal_crc32 = attr_of("remoting.codec.crc", "isal_crc32")) == NULL ||
        (S.tags_code_of_raw = attr_of("remoting.codec.properties", "tags_code_of_raw")) == NULL ||
        (S.record_type = attr_of("remoting.codec.message", "MessageRecord")) == NULL)
        return NULL;
    PyObject *isal_from = attr_of("remoting.codec.crc", "ISAL_FROM");
    if (isal_from == NULL) return NULL;
    S.isal_from = PyLong_AsSsize_t(isal_from);
    Py_DECREF(isal_from);
    if (S.isal_from == -1 && PyErr_Occurred()) return NULL;
    S.all_slots = 1;
    for (int k = 0; k < F_COUNT; k++) {
        if ((field_names[k] = PyUnicode_InternFromString(FIELD_NAMES[k])) == NULL) return NULL;
        /* MessageRecord is an attrs slotted class: read its slots directly, as the member descriptor would. */
        S.slot[k] = -1;
        PyObject *descr = PyDict_GetItemWithError(((PyTypeObject *)S.record_type)->tp_dict, field_names[k]);
        if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
            if (member->type == T_OBJECT_EX) S.slot[k] = member->offset;
        } else if (PyErr_Occurred()) {
            return NULL;
        }
        if (S.slot[k] < 0) S.all_slots = 0;
    }
#ifdef HAVE_CLMUL_CRC
    __builtin_cpu_init();
    have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
    PyObject *m = PyModule_Create(&module_def);
    if (m != NULL && PyModule_AddIntConstant(m, "CLMUL_CRC", have_clmul) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
