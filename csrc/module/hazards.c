/* SPDX-License-Identifier: Apache-2.0 */
/* The Python face of the emulated device's cross-stream hazard detector
 * (csrc/emu/emu_hazards.cpp, through ops/hazards.h): comfy_kitchen_c.testing's
 * stream_hazards() turns it on, records and waits on events, and reads the reports. */
#include "hazards.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/hazards.h"

#if defined(CKC_EMULATED)
/* METH_O: any object, taken by its truth; returns whether the detector was on before. */
static PyObject *
hazards_track(PyObject *self, PyObject *on)
{
    static int tracking; /* under the GIL */
    const int truth = PyObject_IsTrue(on);
    const int was = tracking;
    (void)self;
    if (truth < 0) {
        return NULL;
    }
    ckc_hazards_track(truth);
    tracking = truth;
    return PyBool_FromLong(was);
}

static PyObject *
hazard_record(PyObject *self, PyObject *args)
{
    unsigned long long stream;
    (void)self;
    if (!PyArg_ParseTuple(args, "K", &stream)) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)ckc_hazards_record((uintptr_t)stream));
}

static PyObject *
hazard_wait(PyObject *self, PyObject *args)
{
    unsigned long long stream;
    unsigned long long event;
    (void)self;
    if (!PyArg_ParseTuple(args, "KK", &stream, &event)) {
        return NULL;
    }
    if (ckc_hazards_wait((uintptr_t)stream, (uint64_t)event) != 0) {
        PyErr_Format(PyExc_ValueError, "hazard_wait: argument 'event': %llu is no event recorded since tracking "
                     "began", event);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
hazards_take(PyObject *self, PyObject *args)
{
    size_t n;
    char *buf;
    PyObject *text;
    (void)self;
    (void)args;
    n = ckc_hazards_take(NULL, 0);
    buf = (char *)malloc(n + 1);
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    n = ckc_hazards_take(buf, n + 1); /* reports added meanwhile stay for the next call */
    text = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)(n < 1 ? 0 : strlen(buf)), "replace");
    free(buf);
    return text;
}

static PyMethodDef hazard_functions[] = {
    {"hazards_track", hazards_track, METH_O,
     "hazards_track(on)\n--\n\nTurns the cross-stream hazard detector on or off (either clears it); returns whether it was on."},
    {"hazard_record", hazard_record, METH_VARARGS,
     "hazard_record(stream)\n--\n\nRecords an event on stream for the detector; returns its id."},
    {"hazard_wait", hazard_wait, METH_VARARGS,
     "hazard_wait(stream, event)\n--\n\nMakes stream wait on the event (as cudaStreamWaitEvent)."},
    {"hazards_take", hazards_take, METH_NOARGS,
     "hazards_take()\n--\n\nThe detector's reports since the last call, one per line, and clears them."},
    {NULL, NULL, 0, NULL},
};

int
ckc_add_hazard_functions(PyObject *m)
{
    return PyModule_AddFunctions(m, hazard_functions);
}
#else
int
ckc_add_hazard_functions(PyObject *m)
{
    (void)m;
    return 0;
}
#endif
