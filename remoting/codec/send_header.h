/* send_v2_fields(fields, allowed): a SEND_MESSAGE_V2 request's parsed JSON header checked and read in one call, for
 * the broker's send fast path. The contract and the pure-Python twin are remoting/codec/send_header.py; both return
 * equal values for every JSON value (tests/codec/test_send_header.py). Never raises for JSON input: None means "not
 * the common case", and the general path takes the request.
 */
#ifndef ROCKETRIO_SEND_HEADER_H
#define ROCKETRIO_SEND_HEADER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define SH_SEND_V2 310

/* The header's keys, interned once (their hashes cached): a lookup is then one probe, no string built per call. */
enum { SH_CODE, SH_OPAQUE, SH_VERSION, SH_FLAG, SH_EXT, SH_A, SH_B, SH_C, SH_D, SH_E, SH_F, SH_G, SH_H, SH_I, SH_J,
       SH_K, SH_L, SH_M, SH_N, SH_KEY_COUNT };
static const char *const SH_KEY_NAMES[SH_KEY_COUNT] = {"code", "opaque", "version", "flag", "extFields", "a", "b",
                                                        "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n"};
static PyObject *SH_KEYS[SH_KEY_COUNT];
static PyObject *SH_V2_CODE;

static int send_header_init(void) {
    for (int i = 0; i < SH_KEY_COUNT; i++) {
        SH_KEYS[i] = PyUnicode_InternFromString(SH_KEY_NAMES[i]);
        if (SH_KEYS[i] == NULL) return -1;
    }
    SH_V2_CODE = PyLong_FromLong(SH_SEND_V2);
    return SH_V2_CODE == NULL ? -1 : 0;
}

/* A borrowed value or NULL (absent); a str key never makes the lookup fail. */
#define SH_GET(d, k) PyDict_GetItemWithError((d), SH_KEYS[k])

/* The digits of `s` (exact str, 1..max_len ASCII digits) into *out; 0 when it is not such a string. */
static int sh_ascii_digits(PyObject *s, Py_ssize_t max_len, long long *out) {
    if (s == NULL || !PyUnicode_CheckExact(s) || !PyUnicode_IS_ASCII(s)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n < 1 || n > max_len) return 0;
    const Py_UCS1 *p = PyUnicode_1BYTE_DATA(s);
    long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

static int sh_is_str_value(PyObject *s, const char *text) {
    return s != NULL && PyUnicode_CheckExact(s) && PyUnicode_CompareWithASCIIString(s, text) == 0;
}

static int sh_absent(PyObject *s) { return s == NULL || s == Py_None; }

static int sh_empty_str(PyObject *s) { return PyUnicode_CheckExact(s) && PyUnicode_GET_LENGTH(s) == 0; }

/* An optional number (absent, empty, or 1-9 digits); its value, 0 when absent or empty, into *out. */
static int sh_optional(PyObject *s, long long *out) {
    *out = 0;
    return sh_absent(s) || sh_empty_str(s) || sh_ascii_digits(s, 9, out);
}

/* An optional boolean: 0 false (absent, empty, "false"), 1 true ("true"), -1 anything else. */
static int sh_flag(PyObject *s) {
    if (sh_absent(s) || sh_empty_str(s) || sh_is_str_value(s, "false")) return 0;
    return sh_is_str_value(s, "true") ? 1 : -1;
}

/* An int in int32 (exact int, not bool) into *out. */
static int sh_int32(PyObject *o, long long *out) {
    if (o == NULL || !PyLong_CheckExact(o)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return v >= -2147483648LL && v <= 2147483647LL;
}

/* Whether every key of `ext` is in `allowed`; -1 on error. */
static int sh_keys_allowed(PyObject *ext, PyObject *allowed) {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(ext, &pos, &key, &value)) {
        int in = PySequence_Contains(allowed, key);
        if (in <= 0) return in;
    }
    return 1;
}

static PyObject *send_v2_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "send_v2_fields(fields: dict, allowed: set)");
        return NULL;
    }
    PyObject *fields = args[0], *allowed = args[1];
    PyObject *code = SH_GET(fields, SH_CODE);
    if (code == NULL) Py_RETURN_NONE;
    int other = PyObject_RichCompareBool(code, SH_V2_CODE, Py_NE);
    if (other < 0) return NULL;
    long long opaque, version;
    if (other || !sh_int32(SH_GET(fields, SH_OPAQUE), &opaque)) Py_RETURN_NONE;
    if (!sh_int32(SH_GET(fields, SH_VERSION), &version)) Py_RETURN_NONE;
    PyObject *flag_obj = SH_GET(fields, SH_FLAG);
    int overflow = 0;
    if (flag_obj == NULL || !PyLong_CheckExact(flag_obj) || PyLong_AsLongLongAndOverflow(flag_obj, &overflow) != 0 ||
        overflow)
        Py_RETURN_NONE;
    PyObject *ext = SH_GET(fields, SH_EXT);
    if (ext == NULL || !PyDict_CheckExact(ext)) Py_RETURN_NONE;
    int keys = sh_keys_allowed(ext, allowed);
    if (keys < 0) return NULL;
    if (!keys) Py_RETURN_NONE;
    PyObject *topic = SH_GET(ext, SH_B), *properties = SH_GET(ext, SH_I);
    PyObject *group = SH_GET(ext, SH_A), *default_topic = SH_GET(ext, SH_C);
    if (group == NULL || !PyUnicode_CheckExact(group) || topic == NULL || !PyUnicode_CheckExact(topic) ||
        default_topic == NULL || !PyUnicode_CheckExact(default_topic))
        Py_RETURN_NONE;
    long long born, queue_id, sys_flag, message_flag, queue_nums, reconsume, max_reconsume;
    if (!sh_ascii_digits(SH_GET(ext, SH_G), 18, &born)) Py_RETURN_NONE;
    if (!sh_ascii_digits(SH_GET(ext, SH_E), 9, &queue_id) ||
        !sh_ascii_digits(SH_GET(ext, SH_F), 9, &sys_flag) ||
        !sh_ascii_digits(SH_GET(ext, SH_H), 9, &message_flag) ||
        !sh_ascii_digits(SH_GET(ext, SH_D), 9, &queue_nums))
        Py_RETURN_NONE;
    if (!sh_optional(SH_GET(ext, SH_J), &reconsume) ||
        !sh_optional(SH_GET(ext, SH_L), &max_reconsume) ||
        sh_flag(SH_GET(ext, SH_K)) < 0 || sh_flag(SH_GET(ext, SH_M)) != 0)
        Py_RETURN_NONE;
    PyObject *bname = SH_GET(ext, SH_N);
    if ((!sh_absent(properties) && !PyUnicode_CheckExact(properties)) ||
        (!sh_absent(bname) && !PyUnicode_CheckExact(bname)))
        Py_RETURN_NONE;
    return Py_BuildValue("(LOOLLLLL)", opaque, topic, properties == NULL ? Py_None : properties, queue_id, sys_flag,
                         message_flag, born, reconsume);
}

#endif
