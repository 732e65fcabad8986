/* remoting.codec._speedups: the store's batch append encoder in C (docs/protocol.md#51-record-layout,
 * docs/protocol.md#63-consumequeue).
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
 *
 * scan_records(buf, pos, limit, base, with_index): a slave's received records into ConsumeQueue and index runs
 * (remoting/codec/record_scan.h; the contract and the twin are remoting/codec/record_scan.py), and
 * index_put_hashed, which writes hashed index entries into an IndexFile's mapping.
 *
 * decode_pull_records(data, pos, out, extra, tags): the consumer's pull body into MessageExt values
 * (remoting/codec/pull_decode.h; the contract and the twin are remoting/codec/pull_body.py).
 *
 * send_v2_fields(fields, allowed): the broker's send fast path's header check (remoting/codec/send_header.h; the
 * contract and the twin are remoting/codec/send_header.py).
 *
 * split_stored_entries(body, suffix) and encode_batch_parts(entries): the broker's batch send body split and the
 * client's batch body (remoting/codec/batch_split.h; the contract and the twins are remoting/codec/batch_body.py).
 *
 * send_frame(...) and send_result_json(...): the producer's send request frame and its response's result
 * (remoting/codec/send_frame.h; the contract and the twins are remoting/codec/send_frame.py).
 */
#include "record_encoder.h"
#include "record_scan.h"
#include "pull_decode.h"
#include "send_header.h"
#include "batch_split.h"
#include "send_frame.h"

static PyObject *py_crc32(PyObject *module, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t crc = crc32_of(view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
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
    /* the last record's queue offset and position must fit an int64, as the Python twin's struct.pack insists */
    if (n > 0 && (tg->first_queue_offset > INT64_MAX - (n - 1) || tg->phy > INT64_MAX - (total - items[n - 1].size))) {
        PyErr_SetString(S.struct_error, "int too large to convert");
        return NULL;
    }
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
    /* unsigned: past a last record that ends at INT64_MAX the step after it would overflow a signed int64 (UB) */
    uint64_t phy = (uint64_t)tg->phy;
    for (Py_ssize_t i = 0; i < n; i++) {
        p = write_one(p, &items[i], tg->first_queue_offset + i, (int64_t)phy, store_ts);
        q = put64(q, phy);
        q = put32(q, (uint32_t)items[i].size);
        q = put64(q, (uint64_t)items[i].tags);
        phy += (uint64_t)items[i].size;
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

/* The records' fields, checks, CRCs and tags (prepare_records), then write_all. Up to STACK_RECORDS records use
 * stack storage. */
static PyObject *records_into(const Target *tg, PyObject **records, Py_ssize_t n, int single) {
    Item stack_items[STACK_RECORDS];
    Template stack_tpls[STACK_RECORDS];
    PyObject *stack_fields[STACK_RECORDS * F_COUNT];
    PyObject *stack_held[STACK_RECORDS];
    PyObject *stack_pins[STACK_RECORDS * PINS];
    Scratch s;
    int on_stack = n <= STACK_RECORDS;
    if (on_stack) {
        memset(stack_items, 0, (size_t)n * sizeof(Item));
        memset(stack_fields, 0, (size_t)n * F_COUNT * sizeof(PyObject *));
        memset(stack_held, 0, (size_t)n * sizeof(PyObject *));
        memset(stack_pins, 0, (size_t)n * PINS * sizeof(PyObject *));
        s = (Scratch){stack_items, stack_tpls, stack_fields, stack_held, stack_pins};
    } else {
        size_t m = (size_t)(n ? n : 1);
        s = (Scratch){PyMem_Calloc(m, sizeof(Item)), PyMem_Calloc(m, sizeof(Template)),
                      PyMem_Calloc(m * F_COUNT, sizeof(PyObject *)), PyMem_Calloc(m, sizeof(PyObject *)),
                      PyMem_Calloc(m * PINS, sizeof(PyObject *))};
    }
    PyObject *result = NULL;
    if (s.items == NULL || s.tpls == NULL || s.fields == NULL || s.held == NULL || s.pins == NULL) {
        PyErr_NoMemory();
    } else {
        if (prepare_records(&s, records, n, tg->max_body) == 0) result = write_all(tg, s.items, n, single);
        release_records(&s, n);
    }
    if (!on_stack) {
        PyMem_Free(s.pins);
        PyMem_Free(s.held);
        PyMem_Free(s.fields);
        PyMem_Free(s.items);
        PyMem_Free(s.tpls);
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
    {"scan_records", (PyCFunction)(void (*)(void))scan_records, METH_FASTCALL,
     "Walk a replica's plain records into ConsumeQueue and index runs; see remoting.codec.record_scan."},
    {"index_put_hashed", (PyCFunction)(void (*)(void))index_put_hashed, METH_FASTCALL,
     "Write hashed index entries into an IndexFile mapping; see remoting.codec.record_scan."},
    {"decode_pull_records", (PyCFunction)(void (*)(void))decode_pull_records, METH_FASTCALL,
     "Decode a pull body's plain IPv4 records into MessageExt values; see remoting.codec.pull_body."},
    {"send_v2_fields", (PyCFunction)(void (*)(void))send_v2_fields, METH_FASTCALL,
     "Check and read a SEND_MESSAGE_V2 request's parsed header; see remoting.codec.send_header."},
    {"encode_batch_parts", (PyCFunction)(void (*)(void))encode_batch_parts, METH_FASTCALL,
     "The client's batch body from (body, encoded properties, flag) tuples; see remoting.codec.batch_body."},
    {"split_stored_entries", (PyCFunction)(void (*)(void))split_stored_entries, METH_FASTCALL,
     "Split a batch send body into (body, stored properties, flag); see remoting.codec.batch_body."},
    {"send_frame", (PyCFunction)(void (*)(void))send_frame, METH_FASTCALL,
     "Write a producer's SEND_MESSAGE_V2 request frame; see remoting.codec.send_frame."},
    {"send_result_json", (PyCFunction)(void (*)(void))send_result_json, METH_FASTCALL,
     "Read a send response's parsed JSON header into a SendResult; see remoting.codec.send_frame."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "remoting.codec._speedups",
                                        "The store's batch append encoder in C (remoting.codec.record_batch).", -1,
                                        methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__speedups(void) {
    if (record_encoder_init() < 0 || pull_decode_init() < 0 || send_header_init() < 0 ||
        send_frame_init() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m != NULL && (PyModule_AddIntConstant(m, "CLMUL_CRC", have_clmul) < 0 ||
                      PyModule_AddIntConstant(m, "PULL_DECODE", PD.ok) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
