/* The producer's send path in C (the contract and the pure-Python twins are remoting/codec/send_frame.py; both give
 * equal values for every input, tests/codec/test_send_frame.py). Included by _speedups.c.
 *
 * send_frame(code, opaque, head, queue_id, tail, broker_json, body, version) -> bytes
 *     A JSON request frame whose extFields are the send's encoded fields around the queue id plus the broker name:
 *     length | header word | {"code":C,"extFields":{HEAD Q TAIL,"n":BROKER},"flag":0,"language":"PYTHON",
 *     "opaque":O,"serializeTypeCurrentRPC":"JSON","version":V} | body, written in one allocation.
 *
 * send_result_json(fields, statuses, cls, uniq_id, topic, broker_name) -> cls instance | None
 *     A send response's parsed JSON header read into the producer's SendResult (cls), or None when the general
 *     path must read it. cls's instance is allocated with its type's tp_alloc and its ten slots filled directly (as
 *     the attrs frozen __init__ would through object.__setattr__) when cls has them as object slots; otherwise cls
 *     is called with the ten values.
 */
#ifndef ROCKETRIO_SEND_FRAME_H
#define ROCKETRIO_SEND_FRAME_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* ---- send_frame ---------------------------------------------------------------------------------------------- */

/* Decimal of v into out (at least 20 bytes), returning its length. */
static Py_ssize_t sf_decimal(long long v, char *out) {
    char tmp[24];
    Py_ssize_t n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    Py_ssize_t len = 0;
    if (v < 0) out[len++] = '-';
    while (n) out[len++] = tmp[--n];
    return len;
}

#define SF_PUT(p, s, n) (memcpy((p), (s), (size_t)(n)), (p) += (n))
#define SF_LIT(p, lit) SF_PUT(p, lit, sizeof(lit) - 1)

static PyObject *send_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "send_frame takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    long long code = PyLong_AsLongLong(args[0]);
    if (code == -1 && PyErr_Occurred()) return NULL;
    long long opaque = PyLong_AsLongLong(args[1]);
    if (opaque == -1 && PyErr_Occurred()) return NULL;
    long long queue_id = PyLong_AsLongLong(args[3]);
    if (queue_id == -1 && PyErr_Occurred()) return NULL;
    long long version = PyLong_AsLongLong(args[7]);
    if (version == -1 && PyErr_Occurred()) return NULL;
    PyObject *head = args[2], *tail = args[4], *broker = args[5];
    if (!PyBytes_Check(head) || !PyBytes_Check(tail) || !PyBytes_Check(broker)) {
        PyErr_SetString(PyExc_TypeError, "send_frame: head, tail and broker_json must be bytes");
        return NULL;
    }
    Py_buffer body;
    if (PyObject_GetBuffer(args[6], &body, PyBUF_SIMPLE) < 0) return NULL;
    char code_s[24], opaque_s[24], queue_s[24], version_s[24];
    Py_ssize_t code_n = sf_decimal(code, code_s), opaque_n = sf_decimal(opaque, opaque_s);
    Py_ssize_t queue_n = sf_decimal(queue_id, queue_s), version_n = sf_decimal(version, version_s);
    static const char p1[] = "{\"code\":", p2[] = ",\"extFields\":{", p3[] = ",\"n\":",
                      p4[] = "},\"flag\":0,\"language\":\"PYTHON\",\"opaque\":",
                      p5[] = ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":";
    Py_ssize_t header = (Py_ssize_t)(sizeof(p1) + sizeof(p2) + sizeof(p3) + sizeof(p4) + sizeof(p5) - 5) + code_n +
                        PyBytes_GET_SIZE(head) + queue_n + PyBytes_GET_SIZE(tail) + PyBytes_GET_SIZE(broker) +
                        opaque_n + version_n + 1;
    if ((long long)header + body.len + 4 > INT32_MAX) {
        PyBuffer_Release(&body);
        PyErr_SetString(PyExc_OverflowError, "send_frame: the frame exceeds 2 GiB");
        return NULL;
    }
    PyObject *frame = PyBytes_FromStringAndSize(NULL, 8 + header + body.len);
    if (frame == NULL) {
        PyBuffer_Release(&body);
        return NULL;
    }
    unsigned char *start = (unsigned char *)PyBytes_AS_STRING(frame);
    uint32_t length = (uint32_t)(4 + header + body.len), word = (uint32_t)header;
    start[0] = (unsigned char)(length >> 24), start[1] = (unsigned char)(length >> 16);
    start[2] = (unsigned char)(length >> 8), start[3] = (unsigned char)length;
    start[4] = (unsigned char)(word >> 24), start[5] = (unsigned char)(word >> 16);
    start[6] = (unsigned char)(word >> 8), start[7] = (unsigned char)word;
    char *p = (char *)start + 8;
    SF_LIT(p, p1);
    SF_PUT(p, code_s, code_n);
    SF_LIT(p, p2);
    SF_PUT(p, PyBytes_AS_STRING(head), PyBytes_GET_SIZE(head));
    SF_PUT(p, queue_s, queue_n);
    SF_PUT(p, PyBytes_AS_STRING(tail), PyBytes_GET_SIZE(tail));
    SF_LIT(p, p3);
    SF_PUT(p, PyBytes_AS_STRING(broker), PyBytes_GET_SIZE(broker));
    SF_LIT(p, p4);
    SF_PUT(p, opaque_s, opaque_n);
    SF_LIT(p, p5);
    SF_PUT(p, version_s, version_n);
    *p++ = '}';
    if (body.len) SF_PUT(p, body.buf, body.len);
    PyBuffer_Release(&body);
    return frame;
}

/* ---- send_result_json ------------------------------------------------------------------------------------------ */

/* The response header's keys, interned once. */
enum { SR_CODE, SR_EXT, SR_VERSION, SR_LANGUAGE, SR_MSG_ID, SR_QUEUE_ID, SR_QUEUE_OFFSET, SR_REGION, SR_TRACE_ON,
       SR_RECALL, SR_KEY_COUNT };
static const char *const SR_KEY_NAMES[SR_KEY_COUNT] = {"code", "extFields", "version", "language", "msgId", "queueId",
                                                        "queueOffset", "MSG_REGION", "TRACE_ON", "recallHandle"};
/* The result's fields, in the order cls takes them. */
enum { SR_F_STATUS, SR_F_MSG_ID, SR_F_OFFSET_MSG_ID, SR_F_TOPIC, SR_F_BROKER, SR_F_QUEUE_ID, SR_F_QUEUE_OFFSET,
       SR_F_REGION, SR_F_TRACE_ON, SR_F_RECALL, SR_F_COUNT };
static const char *const SR_FIELD_NAMES[SR_F_COUNT] = {
    "send_status", "msg_id", "offset_msg_id", "topic", "broker_name", "queue_id", "queue_offset", "region_id",
    "trace_on", "recall_handle"};

static struct {
    PyObject *keys[SR_KEY_COUNT];
    PyObject *false_text;      /* "false" */
    PyTypeObject *cls;         /* the class the slot offsets below are for (a strong reference), or NULL */
    Py_ssize_t slot[SR_F_COUNT];
    int direct;                /* cls's fields are all object slots: fill them directly */
} SR;

static int send_frame_init(void) {
    for (int i = 0; i < SR_KEY_COUNT; i++)
        if ((SR.keys[i] = PyUnicode_InternFromString(SR_KEY_NAMES[i])) == NULL) return -1;
    SR.false_text = PyUnicode_InternFromString("false");
    return SR.false_text == NULL ? -1 : 0;
}

/* Remember cls and whether its ten fields are object slots (their offsets into SR.slot). -1 on error. */
static int sr_learn(PyTypeObject *cls) {
    Py_XDECREF(SR.cls);
    Py_INCREF(cls);
    SR.cls = cls;
    SR.direct = cls->tp_alloc != NULL && cls->tp_new == PyBaseObject_Type.tp_new;
    for (int k = 0; k < SR_F_COUNT && SR.direct; k++) {
        PyObject *name = PyUnicode_FromString(SR_FIELD_NAMES[k]);
        PyObject *descr = name == NULL ? NULL : PyDict_GetItemWithError(cls->tp_dict, name);
        Py_XDECREF(name);
        if (descr == NULL && PyErr_Occurred()) { /* forget cls: a half-learnt layout must never be used */
            Py_CLEAR(SR.cls);
            SR.direct = 0;
            return -1;
        }
        SR.direct = descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
                    ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX;
        if (SR.direct) SR.slot[k] = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    return 0;
}

/* int(s) of an exact str, as Python's int() reads it; NULL with no error set when int() raises ValueError. */
static PyObject *sr_int(PyObject *s) {
    if (PyUnicode_IS_ASCII(s)) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        const Py_UCS1 *p = PyUnicode_1BYTE_DATA(s);
        if (n >= 1 && n <= 18) {
            long long v = 0;
            Py_ssize_t i = 0;
            for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) v = v * 10 + (p[i] - '0');
            if (i == n) return PyLong_FromLongLong(v);
        }
    }
    PyObject *v = PyLong_FromUnicodeObject(s, 10);
    if (v == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) PyErr_Clear();
    return v;
}

#define SR_GET(d, k) PyDict_GetItemWithError((d), SR.keys[k])

static PyObject *send_result_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "send_result_json takes 6 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *fields = args[0], *statuses = args[1], *cls = args[2];
    if (!PyDict_Check(fields) || !PyDict_Check(statuses) || !PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "send_result_json(dict, dict, type, str, str, str)");
        return NULL;
    }
    PyObject *code = SR_GET(fields, SR_CODE);
    if (code == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    if (!PyLong_CheckExact(code)) Py_RETURN_NONE;
    PyObject *status = PyDict_GetItemWithError(statuses, code);
    if (status == NULL || status == Py_None) { /* the twin's statuses.get(code) is None */
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *ext = SR_GET(fields, SR_EXT);
    if (ext == NULL || !PyDict_CheckExact(ext)) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *version = SR_GET(fields, SR_VERSION);
    if (version == NULL && PyErr_Occurred()) return NULL;
    if (version != NULL) { /* absent is 0 */
        if (!PyLong_CheckExact(version)) Py_RETURN_NONE;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(version, &overflow);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (overflow || v < -2147483648LL || v > 2147483647LL) Py_RETURN_NONE;
    }
    PyObject *language = SR_GET(fields, SR_LANGUAGE);
    if (language == NULL && PyErr_Occurred()) return NULL;
    if (language == NULL || !PyUnicode_CheckExact(language)) Py_RETURN_NONE;
    PyObject *got[6];
    for (int k = 0; k < 6; k++) {
        got[k] = SR_GET(ext, SR_MSG_ID + k);
        if (got[k] == NULL && PyErr_Occurred()) return NULL;
    }
    PyObject *msg_id = got[0], *queue_id = got[1], *queue_offset = got[2];
    if (msg_id == NULL || !PyUnicode_CheckExact(msg_id) || queue_id == NULL || !PyUnicode_CheckExact(queue_id) ||
        queue_offset == NULL || !PyUnicode_CheckExact(queue_offset))
        Py_RETURN_NONE;
    for (int k = 3; k < 6; k++) { /* region, TRACE_ON, recall handle: absent, None or a str */
        if (got[k] == Py_None) got[k] = NULL;
        if (got[k] != NULL && !PyUnicode_CheckExact(got[k])) Py_RETURN_NONE;
    }
    if (got[3] == NULL || PyUnicode_GET_LENGTH(got[3]) == 0) Py_RETURN_NONE; /* no region: the general path's default */
    PyObject *v[SR_F_COUNT] = {NULL};
    if ((v[SR_F_QUEUE_ID] = sr_int(queue_id)) == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    if ((v[SR_F_QUEUE_OFFSET] = sr_int(queue_offset)) == NULL) {
        Py_DECREF(v[SR_F_QUEUE_ID]);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    int trace_off = 0;
    if (got[4] != NULL) {
        trace_off = PyUnicode_Compare(got[4], SR.false_text) == 0;
        if (PyErr_Occurred()) trace_off = -1;
    }
    if (trace_off < 0) {
        Py_DECREF(v[SR_F_QUEUE_ID]);
        Py_DECREF(v[SR_F_QUEUE_OFFSET]);
        return NULL;
    }
    v[SR_F_STATUS] = status, v[SR_F_MSG_ID] = args[3], v[SR_F_OFFSET_MSG_ID] = msg_id, v[SR_F_TOPIC] = args[4];
    v[SR_F_BROKER] = args[5], v[SR_F_REGION] = got[3];
    v[SR_F_TRACE_ON] = trace_off ? Py_False : Py_True, v[SR_F_RECALL] = got[5] != NULL ? got[5] : Py_None;
    for (int k = 0; k < SR_F_COUNT; k++)
        if (k != SR_F_QUEUE_ID && k != SR_F_QUEUE_OFFSET) Py_INCREF(v[k]);
    if ((PyTypeObject *)cls != SR.cls && sr_learn((PyTypeObject *)cls) < 0) goto fail;
    PyObject *result;
    if (SR.direct) {
        if ((result = SR.cls->tp_alloc(SR.cls, 0)) == NULL) goto fail;
        for (int k = 0; k < SR_F_COUNT; k++) *(PyObject **)((char *)result + SR.slot[k]) = v[k]; /* steals */
        return result;
    }
    result = PyObject_Vectorcall(cls, v, SR_F_COUNT, NULL);
    for (int k = 0; k < SR_F_COUNT; k++) Py_DECREF(v[k]);
    return result;
fail:
    for (int k = 0; k < SR_F_COUNT; k++) Py_XDECREF(v[k]);
    return NULL;
}

#endif /* ROCKETRIO_SEND_FRAME_H */
