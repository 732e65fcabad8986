/* store/_append_result.h: the AppendResult type of store._appender (store/_append_result.c), for store/_appender.c. */
#ifndef ROCKETRIO_APPEND_RESULT_H
#define ROCKETRIO_APPEND_RESULT_H
#include <Python.h>
#include <stdint.h>

/* AppendResult(phy_offset, size, queue_offset, store_timestamp, phy_offsets, store_host); PyType_Ready it once. */
extern PyTypeObject AppendResultType;

/* A new AppendResult without the constructor's argument parsing; phy_offsets is None, a tuple or packed bytes. */
PyObject *append_result(PyObject *store_host, long long phy, Py_ssize_t size, long long queue_offset,
                        int64_t store_ts, PyObject *phy_offsets);

#endif /* ROCKETRIO_APPEND_RESULT_H */
