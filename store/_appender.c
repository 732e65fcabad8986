/* store._appender: MessageStore.append's and append_batch's usual case in C (bench/store.py measures appends against
 * the memcpy floor; docs/PERFORMANCE.md has the figures). The AppendResult they return is store/_append_result.c.
 *
 * Appender(commitlog, queue_offsets, consume_queues, fallback, batch_fallback, clock, max_body) is built by the
 * MessageStore and bound as its `append` and `append_batch`. Appender.append(msg) does in one call what
 * store/message_store.py's Python `append` does for the usual message: the record written into the CommitLog's
 * current segment (remoting/codec/record_encoder.h), the segment's wrote_position and the log's
 * last_store_timestamp advanced, the queue's next offset counted up, its ConsumeQueue entry written into the queue's
 * current file, then the indexer and arrival listener called, and an AppendResult returned. Appender.append_batch
 * does the same for up to 64 records of one queue, contiguous, as the Python `append_batch` (every record gets a
 * ConsumeQueue entry), then calls the store's batch_notifier (index and listener) when it has one. The state stays
 * where the Python path keeps it (the store's dicts, the slotted CommitLog, MappedFileQueue, MappedFile and
 * ConsumeQueue objects, read and written by slot), so the two paths can alternate call by call and produce the same
 * files (tests/store/test_appender.py).
 *
 * Everything else goes to the Python method (`fallback(msg)`, `batch_fallback(msgs)`) before anything is written: a
 * store that refuses writes (`writable` false), SCHEDULE_TOPIC_XXXX, a single prepared or rolled-back transaction
 * message, another record or sequence type, a queue without its ConsumeQueue or offset yet, entries past the queue's
 * current file, records that do not fit the segment (the Python path rolls it), a batch over 64 records, and any
 * record the encoder refuses (the Python path raises the store's error for it). `fast_appends`, `fallbacks`,
 * `fast_batches` and `batch_fallbacks` count them. The clock's errors propagate with nothing written; the indexer's,
 * listener's and notifier's after the message is stored, as in the Python path.
 *
 * The put lock's hold (osPageCacheBusyTimeOutMills): with `on_slow` set, each append (either path) is timed on
 * CLOCK_MONOTONIC and `on_slow(held_ns)` called after one held the Trio thread, the store's put lock, longer than
 * `busy_limit_ns` (MessageStore.is_os_page_cache_busy); two clock reads per append, none when unset.
 *
 * All on the Trio thread, under the GIL. Python code can run mid-call (the clock, a finalizer at an allocation): the
 * objects written through are referenced for the call and the two mmaps exported before the clock runs, so a
 * segment cannot be closed under the write.
 */
#include "record_encoder.h"
#include "_append_result.h"
#include <time.h>

#define CQ_ENTRY 20
/* The queue dicts looked up and updated with the key's hash computed once (CPython's exported _PyDict_*_KnownHash,
 * 3.11-3.12); later versions get the public calls, which hash the key again. */
#if PY_VERSION_HEX < 0x030D0000
#define DICT_GET(d, k, h) _PyDict_GetItem_KnownHash((d), (k), (h))
#define DICT_SET(d, k, v, h) _PyDict_SetItem_KnownHash((d), (k), (v), (h))
#else
#define DICT_GET(d, k, h) PyDict_GetItemWithError((d), (k))
#define DICT_SET(d, k, v, h) PyDict_SetItem((d), (k), (v))
#endif
#define END_FILE_MIN_BLANK 8
#define TX_MASK 0x0C
#define TX_PREPARED 0x04
#define TX_ROLLBACK 0x0C

/* The slots of the store's classes this file reads and writes, resolved at import. */
static struct {
    PyTypeObject *commitlog_t, *queue_t, *mapped_t, *cq_t;
    Py_ssize_t cl_queue, cl_last_ts;                           /* CommitLog */
    Py_ssize_t q_files;                                        /* MappedFileQueue */
    Py_ssize_t mf_buf, mf_from, mf_size, mf_wrote;             /* MappedFile */
    Py_ssize_t cq_queue, cq_max, cq_key;                       /* ConsumeQueue */
    PyObject *schedule_topic;
} L;

/* ---- Appender ------------------------------------------------------------------------------------------------ */

/* A queue's key, kept so that an append does not build and hash its (topic, queue_id) tuple each time: a broker
 * decodes a new topic string per request, so entries match by the topic's text and the queue id's value. Slot
 * (queue id, topic length and first and last characters) % KEY_CACHE; a collision just replaces the entry. */
#define KEY_CACHE 64
typedef struct {
    PyObject *topic; /* held: the topic the entry was made for (or last matched by identity) */
    PyObject *key;   /* held: the (topic, queue_id) tuple, the ConsumeQueue's own once seen */
    long queue_id;
    Py_hash_t hash;
} KeyEntry;

typedef struct {
    PyObject_HEAD
    PyObject *commitlog;
    PyObject *queue_offsets;  /* dict (topic, queue_id) -> next queue offset */
    PyObject *consume_queues; /* dict (topic, queue_id) -> ConsumeQueue */
    PyObject *fallback;       /* the Python append */
    PyObject *batch_fallback; /* the Python append_batch */
    PyObject *clock;          /* a callable returning ms, or NULL: CLOCK_REALTIME (store.store_config.wall_clock_ms) */
    PyObject *listener;       /* None or callable(topic, queue_id, queue_offset, tags_code, properties) */
    PyObject *indexer;        /* None or callable(topic, properties, phy_offset, store_timestamp) */
    PyObject *batch_notifier; /* None or callable(topic, queue_id, first_offset, packed, texts, store_timestamp) */
    PyObject *on_slow;        /* None or callable(held_ns): an append held the put lock past busy_limit_ns */
    PyObject *on_append;      /* None or callable(): called once after the next append, then cleared */
    long long busy_limit_ns;  /* osPageCacheBusyTimeOutMills in ns */
    KeyEntry keys[KEY_CACHE];
    Py_ssize_t max_body;
    char writable;
    unsigned long long fast_appends, fallbacks, fast_batches, batch_fallbacks;
} Appender;

static inline PyObject *slot(PyObject *o, Py_ssize_t off) { return *(PyObject **)((char *)o + off); }

/* Rebind a slot to `v` (a new reference, stolen); 0, or -1 when `v` is NULL (its allocation failed). */
static inline int set_slot(PyObject *o, Py_ssize_t off, PyObject *v) {
    if (v == NULL) return -1;
    PyObject **p = (PyObject **)((char *)o + off);
    PyObject *old = *p;
    *p = v;
    Py_XDECREF(old);
    return 0;
}

/* An int slot's value, or -1 (no exception) when unset, not an exact int or out of range. */
static inline long long int_slot(PyObject *o, Py_ssize_t off) {
    PyObject *v = slot(o, off);
    if (v == NULL || !PyLong_CheckExact(v)) return -1;
    int overflow;
    long long r = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || r < 0) {
        PyErr_Clear();
        return -1;
    }
    return r;
}

/* A MappedFileQueue's newest MappedFile (borrowed), or NULL without an exception. */
static inline PyObject *newest_file(PyObject *queue) {
    if (queue == NULL || !Py_IS_TYPE(queue, L.queue_t)) return NULL;
    PyObject *files = slot(queue, L.q_files);
    if (files == NULL || !PyList_CheckExact(files) || PyList_GET_SIZE(files) == 0) return NULL;
    PyObject *mf = PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1);
    return Py_IS_TYPE(mf, L.mapped_t) ? mf : NULL;
}

/* Where a fast append writes: the CommitLog segment and the ConsumeQueue file, with their positions. */
typedef struct {
    PyObject *key, *cq, *mf, *cmf; /* new references */
    Py_hash_t hash;                /* the key's */
    long long queue_offset, mf_from, mf_wrote, mf_size, cq_pos, cq_wrote;
    Py_ssize_t n; /* the records (ConsumeQueue entries) to place */
    Py_buffer out, cq_out;
} Place;

static inline void place_init(Place *p, Py_ssize_t n) {
    p->key = p->cq = p->mf = p->cmf = NULL;
    p->out.obj = p->cq_out.obj = NULL;
    p->n = n;
}

static void place_release(Place *p) {
    if (p->out.obj != NULL) PyBuffer_Release(&p->out);
    if (p->cq_out.obj != NULL) PyBuffer_Release(&p->cq_out);
    Py_XDECREF(p->key);
    Py_XDECREF(p->cq);
    Py_XDECREF(p->mf);
    Py_XDECREF(p->cmf);
}

/* Find the place for `topic`/`queue_id`'s next p->n entries: 1 when the fast path can take the message(s), 0 when
 * the fallback must (no exception), -1 on an error to raise. */
static inline int same_text(PyObject *a, PyObject *b) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return n == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * (size_t)kind) == 0;
}

/* The cache entry holding `topic`/`queue_id`'s key (both exact: str and int), made on a miss; NULL with an
 * exception on an error, NULL without one for a queue id out of range (the fallback takes it). */
static KeyEntry *key_entry(Appender *self, PyObject *topic, PyObject *queue_id) {
    int overflow;
    long qid = PyLong_AsLongAndOverflow(queue_id, &overflow);
    Py_ssize_t n = PyUnicode_GET_LENGTH(topic);
    if (overflow || n == 0) return NULL;
    int kind = PyUnicode_KIND(topic);
    const void *data = PyUnicode_DATA(topic);
    size_t at = ((size_t)qid * 31 + (size_t)n * 7 + PyUnicode_READ(kind, data, 0) + PyUnicode_READ(kind, data, n - 1))
                % KEY_CACHE;
    KeyEntry *e = &self->keys[at];
    if (e->key != NULL && e->queue_id == qid && (e->topic == topic || same_text(e->topic, topic))) return e;
    PyObject *key = PyTuple_Pack(2, topic, queue_id);
    Py_hash_t hash = key == NULL ? -1 : PyObject_Hash(key);
    if (hash == -1) {
        Py_XDECREF(key);
        return NULL;
    }
    Py_XSETREF(e->key, key);
    Py_XSETREF(e->topic, Py_NewRef(topic));
    e->queue_id = qid;
    e->hash = hash;
    return e;
}

static int find_place(Appender *self, PyObject *topic, PyObject *queue_id, Place *p) {
    KeyEntry *e = key_entry(self, topic, queue_id);
    if (e == NULL) return PyErr_Occurred() ? -1 : 0;
    PyObject *cq = DICT_GET(self->consume_queues, e->key, e->hash);
    if (cq == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!Py_IS_TYPE(cq, L.cq_t)) return 0;
    PyObject *own = slot(cq, L.cq_key);
    if (own != NULL && own != e->key && PyTuple_CheckExact(own)) {
        /* the store files the queue under the ConsumeQueue's own key object: keep that one, so the dict lookups
         * that follow (and this queue's next appends) match by identity instead of comparing tuples */
        int same = PyObject_RichCompareBool(own, e->key, Py_EQ);
        if (same < 0) return -1;
        if (same) Py_SETREF(e->key, Py_NewRef(own));
    }
    p->key = Py_NewRef(e->key);
    p->hash = e->hash;
    PyObject *next = DICT_GET(self->queue_offsets, p->key, p->hash);
    if (next == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!PyLong_CheckExact(next)) return 0;
    int overflow;
    p->queue_offset = PyLong_AsLongLongAndOverflow(next, &overflow);
    if (overflow || p->queue_offset < 0 || p->queue_offset > LLONG_MAX / CQ_ENTRY) {
        PyErr_Clear();
        return 0;
    }
    PyObject *cmf = newest_file(slot(cq, L.cq_queue));
    PyObject *mf = newest_file(slot(self->commitlog, L.cl_queue));
    if (cmf == NULL || mf == NULL) return 0;
    long long cq_from = int_slot(cmf, L.mf_from), cq_size = int_slot(cmf, L.mf_size);
    p->cq_wrote = int_slot(cmf, L.mf_wrote);
    p->cq_pos = p->queue_offset * CQ_ENTRY - cq_from;
    if (cq_from < 0 || cq_size < 0 || p->cq_wrote < 0 || p->cq_pos < 0 || p->cq_pos + CQ_ENTRY * p->n > cq_size)
        return 0;
    p->mf_from = int_slot(mf, L.mf_from);
    p->mf_wrote = int_slot(mf, L.mf_wrote);
    p->mf_size = int_slot(mf, L.mf_size);
    if (p->mf_from < 0 || p->mf_wrote < 0 || p->mf_size < 0) return 0;
    p->cq = Py_NewRef(cq);
    p->cmf = Py_NewRef(cmf);
    p->mf = Py_NewRef(mf);
    return 1;
}

/* Export both mmaps for writing (an exported mmap cannot be closed): 1, or 0 (no exception) when either is gone
 * or smaller than the positions say. */
static int export_buffers(Place *p, Py_ssize_t size) {
    PyObject *buf = slot(p->mf, L.mf_buf), *cq_buf = slot(p->cmf, L.mf_buf);
    if (buf == NULL || cq_buf == NULL || PyObject_GetBuffer(buf, &p->out, PyBUF_WRITABLE) < 0 ||
        PyObject_GetBuffer(cq_buf, &p->cq_out, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        return 0;
    }
    return p->mf_wrote <= p->out.len && size <= p->out.len - p->mf_wrote &&
           p->cq_pos + CQ_ENTRY * p->n <= p->cq_out.len;
}

static int store_time(Appender *self, int64_t *out) {
    if (self->clock == NULL) {
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        *out = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        return 0;
    }
    PyObject *now = PyObject_CallNoArgs(self->clock);
    if (now == NULL) return -1;
    int r = as_int64(now, out, "store_timestamp");
    Py_DECREF(now);
    return r;
}

/* The bookkeeping after writing `total` bytes and p->n entries, in the Python path's order: segment end and log
 * time, next queue offset, ConsumeQueue file end and max offset. */
static int advance(Appender *self, Place *p, Py_ssize_t total, PyObject *store_ts) {
    if (set_slot(p->mf, L.mf_wrote, PyLong_FromLongLong(p->mf_wrote + total)) < 0 ||
        set_slot(self->commitlog, L.cl_last_ts, Py_NewRef(store_ts)) < 0)
        return -1;
    PyObject *next = PyLong_FromLongLong(p->queue_offset + p->n);
    if (next == NULL || DICT_SET(self->queue_offsets, p->key, next, p->hash) < 0) {
        Py_XDECREF(next);
        return -1;
    }
    long long cq_end = p->cq_pos + CQ_ENTRY * p->n;
    if (cq_end > p->cq_wrote && set_slot(p->cmf, L.mf_wrote, PyLong_FromLongLong(cq_end)) < 0) {
        Py_DECREF(next);
        return -1;
    }
    long long max = int_slot(p->cq, L.cq_max);
    if (p->queue_offset + p->n > max) return set_slot(p->cq, L.cq_max, next);
    Py_DECREF(next);
    return 0;
}

/* indexer(topic, properties, phy, store_ts), then listener(topic, queue_id, queue_offset, tags, properties). */
static int notify(Appender *self, PyObject **f, PyObject *key, long long phy, long long queue_offset, int64_t tags,
                  int64_t store_ts) {
    int has_indexer = self->indexer != NULL && self->indexer != Py_None;
    int has_listener = self->listener != NULL && self->listener != Py_None;
    if (!has_indexer && !has_listener) return 0;
    PyObject *a = NULL, *b = NULL, *r = NULL;
    if (has_indexer) {
        if ((a = PyLong_FromLongLong(phy)) == NULL || (b = PyLong_FromLongLong(store_ts)) == NULL) goto out;
        PyObject *args[4] = {f[F_TOPIC], f[F_PROPERTIES], a, b};
        if ((r = PyObject_Vectorcall(self->indexer, args, 4, NULL)) == NULL) goto out;
        Py_CLEAR(r);
        Py_CLEAR(a);
        Py_CLEAR(b);
    }
    if (has_listener) {
        if ((a = PyLong_FromLongLong(queue_offset)) == NULL || (b = PyLong_FromLongLong(tags)) == NULL) goto out;
        /* the queue id from the held key: the record's own slot is not pinned (see pin_borrowed) */
        PyObject *args[5] = {f[F_TOPIC], PyTuple_GET_ITEM(key, 1), a, b, f[F_PROPERTIES]};
        r = PyObject_Vectorcall(self->listener, args, 5, NULL);
    }
out:
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (r == NULL && PyErr_Occurred()) return -1;
    Py_XDECREF(r);
    return 0;
}

/* SCHEDULE_TOPIC_XXXX (a str), whose tags code is a delivery time: the Python path's. */
static inline int is_schedule_topic(PyObject *topic) {
    return topic == L.schedule_topic || (PyUnicode_GET_LENGTH(topic) == PyUnicode_GET_LENGTH(L.schedule_topic) &&
                                         PyUnicode_Compare(topic, L.schedule_topic) == 0);
}

/* Whether `msg` is a MessageRecord the fast path takes, by its topic and sysFlag alone. */
static int plain_message(PyObject *msg) {
    if (!Py_IS_TYPE(msg, (PyTypeObject *)S.record_type) || !S.all_slots) return 0;
    PyObject *topic = slot(msg, S.slot[F_TOPIC]), *queue_id = slot(msg, S.slot[F_QUEUE_ID]);
    PyObject *sys_flag = slot(msg, S.slot[F_SYS_FLAG]);
    if (topic == NULL || queue_id == NULL || sys_flag == NULL || !PyUnicode_CheckExact(topic) ||
        !PyLong_CheckExact(queue_id) || !PyLong_CheckExact(sys_flag))
        return 0;
    long flag = PyLong_AsLong(sys_flag);
    if (flag == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if ((flag & TX_MASK) == TX_PREPARED || (flag & TX_MASK) == TX_ROLLBACK) return 0;
    return !is_schedule_topic(topic);
}

/* The fast path for a plain_message: 1 with *result set (NULL on an error to raise), or 0 when the fallback must
 * take the message (nothing written, the clock not read, no exception). */
static int fast_append(Appender *self, PyObject *msg, PyObject **result) {
    *result = NULL;
    Place p; /* set field by field: zeroing it and the item whole (buffers included) was ~5 % of a 128 B append */
    place_init(&p, 1);
    int found = find_place(self, slot(msg, S.slot[F_TOPIC]), slot(msg, S.slot[F_QUEUE_ID]), &p);
    if (found <= 0) {
        place_release(&p);
        return found < 0;
    }
    Item item;
    item.view.obj = NULL;
    Template tpl;
    PyObject *fields[F_COUNT] = {0}, *held = NULL, *pins[PINS] = {0};
    Scratch s = {&item, &tpl, fields, &held, pins};
    int taken = prepare_records(&s, &msg, 1, self->max_body) == 0 &&
                item.size <= p.mf_size - p.mf_wrote - END_FILE_MIN_BLANK && export_buffers(&p, item.size);
    int64_t store_ts;
    if (!taken) {
        PyErr_Clear(); /* the fallback raises the store's error for a refused record, or rolls the segment */
    } else if (store_time(self, &store_ts) == 0) {
        long long phy = p.mf_from + p.mf_wrote;
        write_one((char *)p.out.buf + p.mf_wrote, &item, p.queue_offset, phy, store_ts);
        char *q = put64((char *)p.cq_out.buf + p.cq_pos, (uint64_t)phy);
        put64(put32(q, (uint32_t)item.size), (uint64_t)item.tags);
        PyBuffer_Release(&p.out);
        PyBuffer_Release(&p.cq_out);
        self->fast_appends++;
        PyObject *ts = PyLong_FromLongLong(store_ts);
        if (ts != NULL && advance(self, &p, item.size, ts) == 0 &&
            notify(self, fields, p.key, phy, p.queue_offset, item.tags, store_ts) == 0)
            *result = append_result(fields[F_STORE_HOST], phy, item.size, p.queue_offset, store_ts, Py_None);
        Py_XDECREF(ts);
    }
    release_records(&s, 1);
    place_release(&p);
    return taken;
}

/* CLOCK_MONOTONIC in ns: how long an append holds the put lock (the Trio thread), whatever the store clock says. */
static inline long long monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int watched(Appender *self) { return self->on_slow != NULL && self->on_slow != Py_None; }

/* Tell on_slow when the append begun at `begin` held the put lock past busy_limit_ns (the append stands: what
 * on_slow raises is reported as unraisable). Returns `result`. */
static PyObject *timed(Appender *self, PyObject *result, long long begin) {
    long long held = monotonic_ns() - begin;
    if (held > self->busy_limit_ns) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *r = PyObject_CallFunction(self->on_slow, "L", held);
        if (r == NULL) PyErr_WriteUnraisable(self->on_slow);
        Py_XDECREF(r);
        PyErr_Restore(type, value, tb);
    }
    return result;
}

/* Call and clear on_append after an append that stored something (`result` not NULL); returns `result`. One-shot, so
 * a send pays one pointer test while its owner (the SYNC_FLUSH group commit's idle round) is not listening. */
static PyObject *announced(Appender *self, PyObject *result) {
    PyObject *hook = self->on_append;
    if (result != NULL && hook != NULL && hook != Py_None) {
        self->on_append = NULL; /* its reference is ours now */
        PyObject *r = PyObject_CallNoArgs(hook);
        if (r == NULL) PyErr_WriteUnraisable(hook);
        Py_XDECREF(r);
        Py_DECREF(hook);
    }
    return result;
}

static PyObject *appender_append(Appender *self, PyObject *msg) {
    if (self->fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Appender not initialised");
        return NULL;
    }
    long long begin = watched(self) ? monotonic_ns() : 0;
    PyObject *result;
    if (!(self->writable && plain_message(msg) && fast_append(self, msg, &result))) {
        self->fallbacks++;
        result = PyObject_CallOneArg(self->fallback, msg);
    }
    return announced(self, begin && watched(self) ? timed(self, result, begin) : result);
}

/* Whether every record of the tuple is a MessageRecord whose topic and queue id the fast path takes (the encoder
 * checks that they all name one queue). */
static int plain_batch(PyObject *seq) {
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    if (n == 0 || n > STACK_RECORDS || !S.all_slots) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!Py_IS_TYPE(PyTuple_GET_ITEM(seq, i), (PyTypeObject *)S.record_type)) return 0;
    PyObject *topic = slot(PyTuple_GET_ITEM(seq, 0), S.slot[F_TOPIC]);
    PyObject *queue_id = slot(PyTuple_GET_ITEM(seq, 0), S.slot[F_QUEUE_ID]);
    return topic != NULL && queue_id != NULL && PyUnicode_CheckExact(topic) && PyLong_CheckExact(queue_id) &&
           !is_schedule_topic(topic);
}

/* batch_notifier(topic, queue_id, first_queue_offset, packed_entries, properties_texts, store_ts): the index and
 * the arrival listener, for the batch as the Python path notifies them. */
static int notify_batch(Appender *self, PyObject **fields, PyObject *key, Py_ssize_t n, long long first,
                        PyObject *packed, int64_t store_ts) {
    if (self->batch_notifier == NULL || self->batch_notifier == Py_None) return 0;
    PyObject *texts = PyList_New(n), *first_obj = NULL, *ts = NULL, *r = NULL;
    if (texts == NULL) return -1;
    for (Py_ssize_t i = 0; i < n; i++) PyList_SET_ITEM(texts, i, Py_NewRef(fields[i * F_COUNT + F_PROPERTIES]));
    if ((first_obj = PyLong_FromLongLong(first)) != NULL && (ts = PyLong_FromLongLong(store_ts)) != NULL) {
        PyObject *args[6] = {fields[F_TOPIC], PyTuple_GET_ITEM(key, 1), first_obj, packed, texts, ts};
        r = PyObject_Vectorcall(self->batch_notifier, args, 6, NULL);
    }
    Py_DECREF(texts);
    Py_XDECREF(first_obj);
    Py_XDECREF(ts);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Write the prepared records at the place and their ConsumeQueue entries both into the queue's file and into
 * `packed` (the result's copy); returns the bytes written. */
static Py_ssize_t write_batch(Place *p, const Item *items, Py_ssize_t n, int64_t store_ts, PyObject *packed) {
    char *out = (char *)p->out.buf + p->mf_wrote, *q = PyBytes_AS_STRING(packed);
    long long phy = p->mf_from + p->mf_wrote;
    for (Py_ssize_t i = 0; i < n; i++) {
        out = write_one(out, &items[i], p->queue_offset + i, phy, store_ts);
        q = put64(put32(put64(q, (uint64_t)phy), (uint32_t)items[i].size), (uint64_t)items[i].tags);
        phy += items[i].size;
    }
    memcpy((char *)p->cq_out.buf + p->cq_pos, PyBytes_AS_STRING(packed), (size_t)(n * CQ_ENTRY));
    return (Py_ssize_t)(phy - p->mf_from - p->mf_wrote);
}

/* append_batch's fast path, as fast_append for up to STACK_RECORDS records of one queue written contiguously in the
 * current segment, their entries in the queue's current file. The Python batch path gives every record a
 * ConsumeQueue entry whatever its transaction flag, so this one does too. */
static int fast_batch(Appender *self, PyObject *seq, PyObject **result) {
    *result = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject **records = &PyTuple_GET_ITEM(seq, 0);
    Place p;
    place_init(&p, n);
    int found = find_place(self, slot(records[0], S.slot[F_TOPIC]), slot(records[0], S.slot[F_QUEUE_ID]), &p);
    if (found <= 0) {
        place_release(&p);
        return found < 0;
    }
    Item items[STACK_RECORDS];
    Template tpls[STACK_RECORDS];
    PyObject *fields[STACK_RECORDS * F_COUNT], *held[STACK_RECORDS], *pins[STACK_RECORDS * PINS];
    memset(items, 0, (size_t)n * sizeof(Item));
    memset(fields, 0, (size_t)n * F_COUNT * sizeof(PyObject *));
    memset(held, 0, (size_t)n * sizeof(PyObject *));
    memset(pins, 0, (size_t)n * PINS * sizeof(PyObject *));
    Scratch s = {items, tpls, fields, held, pins};
    Py_ssize_t total = 0;
    int taken = prepare_records(&s, records, n, self->max_body) == 0;
    for (Py_ssize_t i = 0; taken && i < n; i++) total += items[i].size;
    taken = taken && total <= p.mf_size - p.mf_wrote - END_FILE_MIN_BLANK && export_buffers(&p, total);
    PyObject *packed = NULL;
    int64_t store_ts;
    if (!taken) {
        PyErr_Clear(); /* the fallback raises the store's error for a refused batch, or rolls the segment */
    } else if ((packed = PyBytes_FromStringAndSize(NULL, n * CQ_ENTRY)) != NULL && store_time(self, &store_ts) == 0) {
        long long phy = p.mf_from + p.mf_wrote;
        write_batch(&p, items, n, store_ts, packed);
        PyBuffer_Release(&p.out);
        PyBuffer_Release(&p.cq_out);
        self->fast_batches++;
        PyObject *ts = PyLong_FromLongLong(store_ts);
        if (ts != NULL && advance(self, &p, total, ts) == 0 &&
            notify_batch(self, fields, p.key, n, p.queue_offset, packed, store_ts) == 0)
            *result = append_result(fields[F_STORE_HOST], phy, total, p.queue_offset, store_ts, packed);
        Py_XDECREF(ts);
    }
    Py_XDECREF(packed);
    release_records(&s, n);
    place_release(&p);
    return taken;
}

static PyObject *append_batch_untimed(Appender *self, PyObject *msgs) {
    if (self->writable && (PyList_CheckExact(msgs) || PyTuple_CheckExact(msgs))) {
        /* a tuple: Python code run mid-call (the clock) cannot empty it under the records it holds */
        PyObject *seq = PySequence_Tuple(msgs), *result;
        if (seq == NULL) return NULL;
        int taken = plain_batch(seq) && fast_batch(self, seq, &result);
        Py_DECREF(seq);
        if (taken) return result;
    }
    self->batch_fallbacks++;
    return PyObject_CallOneArg(self->batch_fallback, msgs);
}

static PyObject *appender_append_batch(Appender *self, PyObject *msgs) {
    if (self->batch_fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Appender not initialised");
        return NULL;
    }
    long long begin = watched(self) ? monotonic_ns() : 0;
    PyObject *result = append_batch_untimed(self, msgs);
    return announced(self, begin && watched(self) ? timed(self, result, begin) : result);
}

/* ---- the type ------------------------------------------------------------------------------------------------ */

static int appender_init(Appender *self, PyObject *args, PyObject *kwds) {
    PyObject *commitlog, *queue_offsets, *consume_queues, *fallback, *batch_fallback, *clock;
    Py_ssize_t max_body;
    static char *names[] = {"commitlog", "queue_offsets", "consume_queues", "fallback", "batch_fallback", "clock",
                            "max_body", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O!OOOn:Appender", names, L.commitlog_t, &commitlog,
                                     &PyDict_Type, &queue_offsets, &PyDict_Type, &consume_queues, &fallback,
                                     &batch_fallback, &clock, &max_body))
        return -1;
    if (!PyCallable_Check(fallback) || !PyCallable_Check(batch_fallback) ||
        (clock != Py_None && !PyCallable_Check(clock))) {
        PyErr_SetString(PyExc_TypeError, "the fallbacks must be callable, the clock callable or None");
        return -1;
    }
    Py_XSETREF(self->commitlog, Py_NewRef(commitlog));
    Py_XSETREF(self->queue_offsets, Py_NewRef(queue_offsets));
    Py_XSETREF(self->consume_queues, Py_NewRef(consume_queues));
    Py_XSETREF(self->fallback, Py_NewRef(fallback));
    Py_XSETREF(self->batch_fallback, Py_NewRef(batch_fallback));
    Py_XSETREF(self->clock, clock == Py_None ? NULL : Py_NewRef(clock));
    self->max_body = max_body;
    self->writable = 1;
    self->busy_limit_ns = 1000000000LL;
    return 0;
}

static int appender_traverse(Appender *self, visitproc visit, void *arg) {
    Py_VISIT(self->commitlog);
    Py_VISIT(self->queue_offsets);
    Py_VISIT(self->consume_queues);
    Py_VISIT(self->fallback);
    Py_VISIT(self->batch_fallback);
    Py_VISIT(self->clock);
    Py_VISIT(self->listener);
    Py_VISIT(self->indexer);
    Py_VISIT(self->batch_notifier);
    Py_VISIT(self->on_slow);
    Py_VISIT(self->on_append);
    for (int i = 0; i < KEY_CACHE; i++) {
        Py_VISIT(self->keys[i].topic);
        Py_VISIT(self->keys[i].key);
    }
    return 0;
}

static int appender_clear(Appender *self) {
    Py_CLEAR(self->commitlog);
    Py_CLEAR(self->queue_offsets);
    Py_CLEAR(self->consume_queues);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->batch_fallback);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->listener);
    Py_CLEAR(self->indexer);
    Py_CLEAR(self->batch_notifier);
    Py_CLEAR(self->on_slow);
    Py_CLEAR(self->on_append);
    for (int i = 0; i < KEY_CACHE; i++) {
        Py_CLEAR(self->keys[i].topic);
        Py_CLEAR(self->keys[i].key);
    }
    return 0;
}

static void appender_dealloc(Appender *self) {
    PyObject_GC_UnTrack(self);
    appender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef appender_methods[] = {
    {"append", (PyCFunction)appender_append, METH_O,
     "Append one MessageRecord as MessageStore.append does, in C when it can; returns its AppendResult."},
    {"append_batch", (PyCFunction)appender_append_batch, METH_O,
     "Append MessageRecords of one queue as MessageStore.append_batch does, in C when it can."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef appender_members[] = {
    {"listener", T_OBJECT, offsetof(Appender, listener), 0, "The store's arrival listener, or None."},
    {"indexer", T_OBJECT, offsetof(Appender, indexer), 0,
     "callable(topic, properties, phy_offset, store_timestamp) indexing a stored message's keys, or None."},
    {"writable", T_BOOL, offsetof(Appender, writable), 0, "False sends every append to the fallback."},
    {"fast_appends", T_ULONGLONG, offsetof(Appender, fast_appends), READONLY, "Appends done here."},
    {"fallbacks", T_ULONGLONG, offsetof(Appender, fallbacks), READONLY, "Appends handed to the fallback."},
    {"batch_notifier", T_OBJECT, offsetof(Appender, batch_notifier), 0,
     "callable(topic, queue_id, first_queue_offset, packed_entries, properties_texts, store_timestamp) indexing and "
     "announcing a stored batch, or None."},
    {"on_slow", T_OBJECT, offsetof(Appender, on_slow), 0,
     "callable(held_ns) told of an append that held the put lock longer than busy_limit_ns, or None (untimed)."},
    {"on_append", T_OBJECT, offsetof(Appender, on_append), 0,
     "callable() called once after the next append that stored something (then None), or None."},
    {"busy_limit_ns", T_LONGLONG, offsetof(Appender, busy_limit_ns), 0,
     "osPageCacheBusyTimeOutMills in nanoseconds (monotonic clock)."},
    {"fast_batches", T_ULONGLONG, offsetof(Appender, fast_batches), READONLY, "Batches appended here."},
    {"batch_fallbacks", T_ULONGLONG, offsetof(Appender, batch_fallbacks), READONLY,
     "Batches handed to the batch fallback."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "store._appender.Appender",
    .tp_basicsize = sizeof(Appender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "MessageStore.append's single-record path (see store/_appender.c).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)appender_init,
    .tp_dealloc = (destructor)appender_dealloc,
    .tp_traverse = (traverseproc)appender_traverse,
    .tp_clear = (inquiry)appender_clear,
    .tp_methods = appender_methods,
    .tp_members = appender_members,
};

/* ---- module -------------------------------------------------------------------------------------------------- */

/* The slot `name` of `type`, required: an ImportError names a class that lost its __slots__. */
static int required_slot(PyTypeObject *type, const char *name, Py_ssize_t *out) {
    PyObject *key = PyUnicode_InternFromString(name);
    if (key == NULL) return -1;
    *out = slot_offset((PyObject *)type, key);
    Py_DECREF(key);
    if (*out >= 0) return 0;
    if (!PyErr_Occurred()) PyErr_Format(PyExc_ImportError, "%s.%s is not an object slot", type->tp_name, name);
    return -1;
}

static int load_layout(void) {
    if ((L.commitlog_t = (PyTypeObject *)attr_of("store.commitlog", "CommitLog")) == NULL ||
        (L.queue_t = (PyTypeObject *)attr_of("store.mapped_file", "MappedFileQueue")) == NULL ||
        (L.mapped_t = (PyTypeObject *)attr_of("store.mapped_file", "MappedFile")) == NULL ||
        (L.cq_t = (PyTypeObject *)attr_of("store.consume_queue", "ConsumeQueue")) == NULL)
        return -1;
    PyTypeObject *types[] = {L.commitlog_t, L.queue_t, L.mapped_t, L.cq_t};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!PyType_Check(types[i])) {
            PyErr_SetString(PyExc_ImportError, "store._appender: a store class is not a class");
            return -1;
        }
    if (required_slot(L.commitlog_t, "queue", &L.cl_queue) < 0 ||
        required_slot(L.commitlog_t, "last_store_timestamp", &L.cl_last_ts) < 0 ||
        required_slot(L.queue_t, "files", &L.q_files) < 0 || required_slot(L.mapped_t, "buf", &L.mf_buf) < 0 ||
        required_slot(L.mapped_t, "file_from_offset", &L.mf_from) < 0 ||
        required_slot(L.mapped_t, "file_size", &L.mf_size) < 0 ||
        required_slot(L.mapped_t, "wrote_position", &L.mf_wrote) < 0 ||
        required_slot(L.cq_t, "queue", &L.cq_queue) < 0 || required_slot(L.cq_t, "max_offset", &L.cq_max) < 0 ||
        required_slot(L.cq_t, "key", &L.cq_key) < 0)
        return -1;
    /* store.message_store.SCHEDULE_TOPIC (that module imports this one) */
    return (L.schedule_topic = PyUnicode_InternFromString("SCHEDULE_TOPIC_XXXX")) == NULL ? -1 : 0;
}

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "store._appender",
                                        "MessageStore.append's single-record path in C (store/_appender.c).", -1,
                                        NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__appender(void) {
    if (record_encoder_init() < 0 || load_layout() < 0 || PyType_Ready(&AppenderType) < 0 ||
        PyType_Ready(&AppendResultType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Appender", (PyObject *)&AppenderType) < 0 ||
        PyModule_AddObjectRef(m, "AppendResult", (PyObject *)&AppendResultType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
