/* The replica's record scan in C (remoting/codec/record_scan.py has the contract and the pure-Python twin;
 * docs/protocol.md#51-record-layout for the layout). Included by _speedups.c.
 *
 * scan_records(buf, pos, limit, base, with_index[, entries]) -> (end, count, last_store_ts, cq_runs, index_runs)
 *
 * Walks the plain records of buf[pos:limit] and stops before the first other one (the caller's general path takes
 * it). With `entries` true the buffer holds DLedger entries instead (a 48-byte header, then one record or nothing:
 * dledger/entry.py), walked the same way; `count` and `end` are then in entries. Reads only: the buffer is held for
 * the call, nothing in it is written. Raises only for bad arguments or memory.
 *
 * index_put_hashed(buf, packed, number, limit, slots, entries_at, time_diff) -> (number, new_slots)
 *
 * Writes the scan's hashed index entries into an IndexFile's mapping (store/index_file.py owns the header).
 */
#ifndef ROCKETRIO_RECORD_SCAN_H
#define ROCKETRIO_RECORD_SCAN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SCAN_MAGIC_V1 0xDAA320A7u
#define SCAN_OVERHEAD_V4 91
#define SCAN_MAX_TOPIC 127
#define SCAN_TX_MASK 0x0C
#define SCAN_TX_PREPARED 0x04
#define SCAN_TX_ROLLBACK 0x0C
#define SCAN_CQ_UNIT 20
#define SCAN_INDEX_UNIT 12
#define SCAN_SCHEDULE "SCHEDULE_TOPIC_XXXX"
#define SCAN_ENTRY_HEAD 48 /* a DLedger entry's header: magic:i32 size:i32 ... bodyLength:i32 at 44 */
#define SCAN_ENTRY_MAGIC 1

static inline uint32_t scan_get32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint64_t scan_get64(const unsigned char *p) {
    return (uint64_t)scan_get32(p) << 32 | scan_get32(p + 4);
}

static inline unsigned char *scan_put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return p + 4;
}

static inline unsigned char *scan_put64(unsigned char *p, uint64_t v) {
    return scan_put32(scan_put32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}

typedef struct {
    const unsigned char *p;
    Py_ssize_t n; /* 0: absent or empty */
} Span;

static inline int span_ascii(Span s) {
    for (Py_ssize_t i = 0; i < s.n; i++)
        if (s.p[i] >= 0x80) return 0;
    return 1;
}

/* find_property's values of TAGS, KEYS and UNIQ_KEY: per property (segments split on 0x02, the name before the
 * segment's first 0x01), the last non-empty value of each name. */
static inline void scan_props(const unsigned char *props, Py_ssize_t len, Span *tags, Span *keys, Span *uniq) {
    *tags = *keys = *uniq = (Span){NULL, 0};
    Py_ssize_t i = 0;
    for (;;) {
        const unsigned char *seg = props + i;
        const unsigned char *sep = memchr(seg, 0x02, (size_t)(len - i));
        Py_ssize_t seg_len = sep != NULL ? sep - seg : len - i;
        const unsigned char *eq = memchr(seg, 0x01, (size_t)seg_len);
        if (eq != NULL) {
            Py_ssize_t name_len = eq - seg, value_len = seg_len - name_len - 1;
            Span value = {eq + 1, value_len};
            if (value_len > 0) {
                if (name_len == 4 && memcmp(seg, "TAGS", 4) == 0)
                    *tags = value;
                else if (name_len == 4 && memcmp(seg, "KEYS", 4) == 0)
                    *keys = value;
                else if (name_len == 8 && memcmp(seg, "UNIQ_KEY", 8) == 0)
                    *uniq = value;
            }
        }
        if (sep == NULL) return;
        i += seg_len + 1;
    }
}

static inline uint32_t scan_hash(uint32_t h, const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) h = 31 * h + p[i];
    return h;
}

/* abs(Java hashCode) of topic#key, 0 for MIN_INT (Java's IndexFile.indexKeyHashMethod) */
static inline int32_t scan_key_hash(uint32_t prefix, const unsigned char *key, Py_ssize_t n) {
    int32_t h = (int32_t)scan_hash(prefix, key, n);
    return h == INT32_MIN ? 0 : (h < 0 ? -h : h);
}

/* A growing byte buffer. */
typedef struct {
    unsigned char *p;
    Py_ssize_t len, cap;
} Grow;

static inline unsigned char *grow_take(Grow *g, Py_ssize_t n) {
    if (g->len + n > g->cap) {
        Py_ssize_t cap = g->cap ? g->cap * 2 : 4096;
        while (cap < g->len + n) cap *= 2;
        unsigned char *p = PyMem_Realloc(g->p, (size_t)cap);
        if (p == NULL) return NULL;
        g->p = p;
        g->cap = cap;
    }
    unsigned char *at = g->p + g->len;
    g->len += n;
    return at;
}

/* A run's place in its buffer and what names it. */
typedef struct {
    Py_ssize_t from, to; /* byte range in the buffer */
    const unsigned char *topic;
    Py_ssize_t topic_len;
    int32_t queue_id;
    int64_t first; /* first queue offset, or the store time of an index run */
} Run;

typedef struct {
    Run *runs;
    Py_ssize_t n, cap;
} Runs;

static inline Run *runs_add(Runs *r) {
    if (r->n == r->cap) {
        Py_ssize_t cap = r->cap ? r->cap * 2 : 16;
        Run *p = PyMem_Realloc(r->runs, (size_t)cap * sizeof(Run));
        if (p == NULL) return NULL;
        r->runs = p;
        r->cap = cap;
    }
    return &r->runs[r->n++];
}

/* The Python list of a scan's ConsumeQueue runs; a run's topic str is shared with the previous run of the same
 * topic. */
static PyObject *cq_run_list(const Runs *r, const Grow *g) {
    PyObject *list = PyList_New(r->n);
    PyObject *topic = NULL;
    const Run *prev = NULL;
    for (Py_ssize_t i = 0; list != NULL && i < r->n; i++) {
        const Run *run = &r->runs[i];
        if (prev == NULL || prev->topic_len != run->topic_len || memcmp(prev->topic, run->topic, (size_t)run->topic_len)) {
            Py_XDECREF(topic);
            topic = PyUnicode_DecodeASCII((const char *)run->topic, run->topic_len, NULL);
        }
        prev = run;
        PyObject *item = topic == NULL ? NULL
            : Py_BuildValue("(OiLy#)", topic, run->queue_id, (long long)run->first, (const char *)g->p + run->from,
                            run->to - run->from);
        if (item == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, item);
    }
    Py_XDECREF(topic);
    return list;
}

static PyObject *index_run_list(const Runs *r, const Grow *g) {
    PyObject *list = PyList_New(r->n);
    for (Py_ssize_t i = 0; list != NULL && i < r->n; i++) {
        const Run *run = &r->runs[i];
        PyObject *item = Py_BuildValue("(Ly#)", (long long)run->first, (const char *)g->p + run->from,
                                       run->to - run->from);
        if (item == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *scan_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5 && nargs != 6) {
        PyErr_Format(PyExc_TypeError, "scan_records takes 5 or 6 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t limit = PyLong_AsSsize_t(args[2]);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    long long base = PyLong_AsLongLong(args[3]);
    if (base == -1 && PyErr_Occurred()) return NULL;
    int with_index = PyObject_IsTrue(args[4]);
    if (with_index < 0) return NULL;
    int entries = nargs == 6 ? PyObject_IsTrue(args[5]) : 0;
    if (entries < 0) return NULL;
    Py_ssize_t head = entries ? SCAN_ENTRY_HEAD : 0;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = view.buf;
    if (limit > view.len) limit = view.len;

    Grow cq = {0}, idx = {0};
    Runs cq_runs = {0}, idx_runs = {0};
    Run *cq_run = NULL, *idx_run = NULL;
    int64_t next_qoff = 0, last_ts = 0;
    int run_open = 0; /* the run can take the next queue offset (not past INT64_MAX) */
    Py_ssize_t count = 0;
    int failed = 0;
    while (pos >= 0 && limit - pos >= (head ? head : 8)) {
        Py_ssize_t at = pos; /* where the record starts: past the entry's header */
        if (head) {
            int32_t entry_size = (int32_t)scan_get32(b + pos + 4);
            if (scan_get32(b + pos) != SCAN_ENTRY_MAGIC || entry_size < head || entry_size > limit - pos) break;
            if ((int32_t)scan_get32(b + pos + 44) != entry_size - head) break;
            if (entry_size == head) { /* an empty entry (a new leader's first): nothing to dispatch */
                count++;
                pos += head;
                continue;
            }
            at = pos + head;
            if (entry_size - head < 8 || (int32_t)scan_get32(b + at) != entry_size - head) break;
        }
        const unsigned char *r = b + at;
        int32_t size = (int32_t)scan_get32(r);
        if (scan_get32(r + 4) != SCAN_MAGIC_V1 || size < SCAN_OVERHEAD_V4 || size > limit - at) break;
        Py_ssize_t end = at + size;
        int32_t sys_flag = (int32_t)scan_get32(r + 36);
        Py_ssize_t bl = sys_flag & 0x10 ? 20 : 8, sl = sys_flag & 0x20 ? 20 : 8;
        Py_ssize_t fixed = 72 + bl + sl;
        if (fixed + 3 > size) break;
        int32_t body_len = (int32_t)scan_get32(r + fixed - 4);
        if (body_len < 0 || body_len > size) break;
        Py_ssize_t topic_at = at + fixed + body_len;
        if (topic_at + 3 > end) break;
        Py_ssize_t topic_len = b[topic_at];
        Py_ssize_t props_at = topic_at + 1 + topic_len;
        if (topic_len > SCAN_MAX_TOPIC || props_at + 2 > end) break;
        Py_ssize_t props_len = (int16_t)(b[props_at] << 8 | b[props_at + 1]);
        if (props_at + 2 + props_len != end) break;
        int64_t phy = (int64_t)scan_get64(r + 28);
        int tx = sys_flag & SCAN_TX_MASK;
        /* base + at must not wrap (base comes from the caller, near INT64_MAX at worst) */
        if (base > INT64_MAX - at || phy != base + at || tx == SCAN_TX_PREPARED ||
            tx == SCAN_TX_ROLLBACK)
            break;
        Span topic = {b + topic_at + 1, topic_len};
        if (!span_ascii(topic)) break;
        if (topic_len == (Py_ssize_t)strlen(SCAN_SCHEDULE) && memcmp(topic.p, SCAN_SCHEDULE, (size_t)topic_len) == 0)
            break;
        Span tags, keys, uniq;
        scan_props(b + props_at + 2, props_len, &tags, &keys, &uniq);
        if (!span_ascii(tags) || (with_index && !(span_ascii(keys) && span_ascii(uniq)))) break;
        int32_t queue_id = (int32_t)scan_get32(r + 12);
        int64_t qoff = (int64_t)scan_get64(r + 20);
        int64_t store_ts = (int64_t)scan_get64(r + 48 + bl);

        if (cq_run == NULL || !run_open || cq_run->queue_id != queue_id || next_qoff != qoff ||
            cq_run->topic_len != topic_len ||
            memcmp(cq_run->topic, topic.p, (size_t)topic_len) != 0) {
            if ((cq_run = runs_add(&cq_runs)) == NULL) goto nomem;
            *cq_run = (Run){cq.len, cq.len, topic.p, topic_len, queue_id, qoff};
        }
        unsigned char *e = grow_take(&cq, SCAN_CQ_UNIT);
        if (e == NULL) goto nomem;
        e = scan_put64(e, (uint64_t)phy);
        e = scan_put32(e, (uint32_t)size);
        scan_put64(e, (uint64_t)(int64_t)(int32_t)scan_hash(0, tags.p, tags.n));
        cq_run->to = cq.len;
        run_open = qoff != INT64_MAX; /* as the Python twin: no run across the wrap */
        next_qoff = run_open ? qoff + 1 : 0;

        if (with_index && (uniq.n > 0 || keys.n > 0)) {
            uint32_t prefix = scan_hash(scan_hash(0, topic.p, topic_len), (const unsigned char *)"#", 1);
            /* the UNIQ_KEY (i == -1), then each non-empty KEYS token; the run opens at the first entry */
            for (Py_ssize_t i = uniq.n > 0 ? -1 : 0; i < keys.n;) {
                const unsigned char *key = i < 0 ? uniq.p : keys.p + i;
                Py_ssize_t len = uniq.n;
                if (i >= 0) {
                    const unsigned char *space = memchr(key, ' ', (size_t)(keys.n - i));
                    len = space != NULL ? space - key : keys.n - i;
                }
                i = i < 0 ? 0 : i + len + 1;
                if (len == 0) continue;
                if (idx_run == NULL || idx_run->first != store_ts) {
                    if ((idx_run = runs_add(&idx_runs)) == NULL) goto nomem;
                    *idx_run = (Run){idx.len, idx.len, NULL, 0, 0, store_ts};
                }
                if ((e = grow_take(&idx, SCAN_INDEX_UNIT)) == NULL) goto nomem;
                scan_put64(scan_put32(e, (uint32_t)scan_key_hash(prefix, key, len)), (uint64_t)phy);
                idx_run->to = idx.len;
            }
        }
        last_ts = store_ts;
        count++;
        pos = end;
    }
    PyObject *result = NULL;
    if (0) {
    nomem:
        PyErr_NoMemory();
        failed = 1;
    }
    if (!failed) {
        PyObject *cq_list = cq_run_list(&cq_runs, &cq);
        PyObject *idx_list = cq_list != NULL ? index_run_list(&idx_runs, &idx) : NULL;
        if (idx_list != NULL)
            result = Py_BuildValue("(nnLNN)", pos, count, (long long)last_ts, cq_list, idx_list);
        else
            Py_XDECREF(cq_list);
    }
    PyMem_Free(cq.p);
    PyMem_Free(idx.p);
    PyMem_Free(cq_runs.runs);
    PyMem_Free(idx_runs.runs);
    PyBuffer_Release(&view);
    return result;
}

/* index_put_hashed(buf, packed, number, limit, slots, entries_at, time_diff) -> (number, new_slots): the IndexFile
 * writes of remoting/codec/record_scan.py's put_hashed_entries (its docstring has the contract). */
static PyObject *index_put_hashed(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "index_put_hashed takes 7 arguments (%zd given)", nargs);
        return NULL;
    }
    long long v[5];
    for (int i = 0; i < 5; i++)
        if ((v[i] = PyLong_AsLongLong(args[2 + i])) == -1 && PyErr_Occurred()) return NULL;
    long long number = v[0], limit = v[1], slots = v[2], entries_at = v[3], time_diff = v[4];
    Py_buffer out, in;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &in, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    unsigned char *b = out.buf;
    const unsigned char *e = in.buf;
    long long added = 0;
    if (slots <= 0 || number < 1 || entries_at < 40 + slots * 4 || entries_at > out.len || limit > (out.len - entries_at) / SCAN_CQ_UNIT ||
        in.len % SCAN_INDEX_UNIT || time_diff < INT32_MIN || time_diff > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "index_put_hashed: arguments outside the file's geometry");
        number = -1;
    }
    for (Py_ssize_t at = 0; number >= 1 && at < in.len && number < limit; at += SCAN_INDEX_UNIT) {
        int32_t hash = (int32_t)scan_get32(e + at);
        unsigned char *slot = b + 40 + ((hash % slots + slots) % slots) * 4;
        int32_t prev = (int32_t)scan_get32(slot);
        if (prev <= 0 || prev >= number) {
            prev = 0;
            added++;
        }
        unsigned char *entry = b + entries_at + number * SCAN_CQ_UNIT;
        memcpy(entry, e + at, SCAN_INDEX_UNIT); /* keyHash int32 | phyOffset int64, as packed */
        scan_put32(scan_put32(entry + SCAN_INDEX_UNIT, (uint32_t)time_diff), (uint32_t)prev);
        scan_put32(slot, (uint32_t)number);
        number++;
    }
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    return number < 0 ? NULL : Py_BuildValue("(LL)", number, added);
}

#endif
