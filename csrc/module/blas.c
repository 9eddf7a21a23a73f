/* SPDX-License-Identifier: Apache-2.0 */
/* The Python face of the GEMM seam's shared logic (gpu/blas_plan.c, reached
 * through ops/devices.h), for tests and gpu_check: blas_stats() and
 * blas_reset(capacity=0); in the emulated-device module also
 * blas_fake_heuristic(candidates), blas_fake_capturing(flag) and blas_plant(bug).  module.c
 * calls ckc_blas_add at import; a build without a GPU adds nothing. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "blas.h"
#include "ops/devices.h"

static int
set_item(PyObject *d, const char *name, long value)
{
    PyObject *v = PyLong_FromLong(value);
    const int rc = v != NULL ? PyDict_SetItemString(d, name, v) : -1;
    Py_XDECREF(v);
    return rc;
}

static PyObject *
blas_stats(PyObject *self, PyObject *args)
{
    ckc_blas_stats s;
    PyObject *d = PyDict_New();
    (void)self;
    (void)args;
    ckc_devices_blas_stats(&s);
    if (d == NULL || set_item(d, "hits", s.hits) < 0 || set_item(d, "misses", s.misses) < 0 ||
        set_item(d, "evictions", s.evictions) < 0 || set_item(d, "uncached", s.uncached) < 0 ||
        set_item(d, "rejected", s.rejected) < 0 || set_item(d, "last_choice", s.last_choice) < 0 ||
        set_item(d, "entries", s.entries) < 0 || set_item(d, "capacity", s.capacity) < 0 ||
        set_item(d, "last_workspace", (long)s.last_workspace) < 0 ||
        set_item(d, "timed", s.timed) < 0 || set_item(d, "tunings", s.tunings) < 0 ||
        set_item(d, "from_file", s.from_file) < 0) {
        Py_XDECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *
blas_reset(PyObject *self, PyObject *args)
{
    int capacity = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "|i:blas_reset", &capacity)) {
        return NULL;
    }
    if (capacity < 0 || capacity > CKC_BLAS_CACHE_MAX) {
        PyErr_Format(PyExc_ValueError, "blas_reset: argument 'capacity': expected 0 .. %d, got %d",
                     CKC_BLAS_CACHE_MAX, capacity);
        return NULL;
    }
    ckc_devices_blas_reset(capacity);
    Py_RETURN_NONE;
}

static const char *const source_names[] = {"heuristic", "timing", "cache file"};

/* [(device, m_bucket, n, k, index, candidates, us, source)] of the int8 GEMM's shape classes. */
static PyObject *
blas_choices(PyObject *self, PyObject *args)
{
    ckc_blas_choice c[CKC_BLAS_CACHE_MAX];
    const int got = ckc_devices_blas_choices(c, CKC_BLAS_CACHE_MAX);
    const int n = got < CKC_BLAS_CACHE_MAX ? got : CKC_BLAS_CACHE_MAX;
    PyObject *list = PyList_New(n);
    (void)self;
    (void)args;
    for (int i = 0; list != NULL && i < n; i++) {
        const int s = c[i].source >= 0 && c[i].source <= 2 ? c[i].source : 0;
        PyObject *t = Py_BuildValue("{s:i,s:L,s:L,s:L,s:i,s:i,s:d,s:s}", "device", c[i].device, "m_bucket",
                                    (long long)c[i].m_bucket, "n", (long long)c[i].n, "k", (long long)c[i].k, "index",
                                    c[i].index, "candidates", c[i].candidates, "us", (double)c[i].us, "source",
                                    source_names[s]);
        if (t == NULL) {
            Py_CLEAR(list);
        } else {
            PyList_SetItem(list, i, t); /* steals t */
        }
    }
    return list;
}

static PyObject *
blas_tuning(PyObject *self, PyObject *args)
{
    int tuning = -1;
    const char *path = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "|iz:blas_tuning", &tuning, &path)) {
        return NULL;
    }
    if (tuning < -1 || tuning > 1) {
        PyErr_Format(PyExc_ValueError, "blas_tuning: argument 'tuning': expected -1, 0 or 1, got %d", tuning);
        return NULL;
    }
    ckc_devices_blas_tune_configure(tuning, path);
    Py_RETURN_NONE;
}

#if defined(CKC_EMULATED)
/* us: one float argument per candidate of the emulated heuristic. */
static PyObject *
blas_fake_timings(PyObject *self, PyObject *args)
{
    float us[CKC_BLAS_EMU_CANDIDATES];
    const Py_ssize_t n = PyTuple_Size(args);
    (void)self;
    if (n > CKC_BLAS_EMU_CANDIDATES) {
        PyErr_Format(PyExc_ValueError, "blas_fake_timings: at most %d candidates", CKC_BLAS_EMU_CANDIDATES);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n && !PyErr_Occurred(); i++) {
        us[i] = (float)PyFloat_AsDouble(PyTuple_GetItem(args, i)); /* borrowed */
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    ckc_devices_emulated_timings(us, (int)n);
    Py_RETURN_NONE;
}

/* candidates: a sequence of (ok, workspace bytes, split_k, reduction scheme). */
static PyObject *
blas_fake_heuristic(PyObject *self, PyObject *seq)
{
    ckc_blas_candidate c[CKC_BLAS_EMU_CANDIDATES];
    Py_ssize_t n;
    (void)self;
    n = PySequence_Size(seq);
    if (n < 0) {
        return NULL;
    }
    if (n > CKC_BLAS_EMU_CANDIDATES) {
        PyErr_Format(PyExc_ValueError, "blas_fake_heuristic: at most %d candidates", CKC_BLAS_EMU_CANDIDATES);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(seq, i);
        int ok = 0;
        unsigned long long ws = 0;
        int split_k = 0;
        unsigned int reduction = 0;
        const int parsed = item != NULL && PyArg_ParseTuple(item, "iKiI:blas_fake_heuristic", &ok, &ws, &split_k,
                                                            &reduction);
        Py_XDECREF(item);
        if (!parsed) {
            return NULL;
        }
        c[i].ok = ok;
        c[i].workspace = (size_t)ws;
        c[i].split_k = split_k;
        c[i].reduction = reduction;
    }
    ckc_devices_emulated_heuristic(c, (int)n);
    Py_RETURN_NONE;
}

static PyObject *
blas_fake_capturing(PyObject *self, PyObject *flag)
{
    const int on = PyObject_IsTrue(flag);
    (void)self;
    if (on < 0) {
        return NULL;
    }
    ckc_devices_emulated_capturing(on);
    Py_RETURN_NONE;
}

static PyObject *
blas_plant(PyObject *self, PyObject *arg)
{
    const long bug = PyLong_AsLong(arg);
    (void)self;
    if (bug == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (bug < CKC_BLAS_EMU_BUG_NONE || bug >= CKC_BLAS_EMU_BUG_COUNT) {
        PyErr_Format(PyExc_ValueError, "blas_plant: argument 'bug': expected 0 .. %d, got %ld",
                     CKC_BLAS_EMU_BUG_COUNT - 1, bug);
        return NULL;
    }
    ckc_devices_emulated_blas_plant((int)bug);
    Py_RETURN_NONE;
}
#endif

static PyMethodDef blas_functions[] = {
    {"blas_stats", blas_stats, METH_NOARGS,
     "blas_stats()\n--\n\nCounters of the GEMM plans and workspaces (gpu/blas_plan.h): hits, misses, evictions, "
     "uncached, rejected, last_choice, entries, capacity, last_workspace (bytes the last GEMM was given), timed, "
     "tunings, from_file."},
    {"blas_reset", blas_reset, METH_VARARGS,
     "blas_reset(capacity=0)\n--\n\nFrees the cached GEMM plans not in use and zeroes the counters; "
     "capacity 1..256 resizes the cache (0: keep)."},
    {"blas_choices", blas_choices, METH_NOARGS,
     "blas_choices()\n--\n\nThe int8 GEMM's algorithm per shape class (gpu/blas_tune.h): device, m_bucket, n, k, "
     "index (in the heuristic's answer), candidates, us (when timed), source (heuristic, timing, cache file)."},
    {"blas_tuning", blas_tuning, METH_VARARGS,
     "blas_tuning(tuning=-1, cache_path=None)\n--\n\nOverrides COMFY_KITCHEN_C_GEMM_TUNING (1 on, 0 off, -1 the "
     "settings') and COMFY_KITCHEN_C_GEMM_CACHE (a path, '' none, None the settings'); forgets every "
     "choice."},
#if defined(CKC_EMULATED)
    {"blas_fake_timings", blas_fake_timings, METH_VARARGS,
     "blas_fake_timings(*us)\n--\n\nThe emulated time of each candidate of the heuristic when timed (us; "
     "negative: it fails to run; beyond the list: 1 us)."},
    {"blas_fake_heuristic", blas_fake_heuristic, METH_O,
     "blas_fake_heuristic(candidates)\n--\n\nThe emulated heuristic's answer: (ok, workspace bytes, split_k, "
     "reduction scheme) per candidate, best first."},
    {"blas_fake_capturing", blas_fake_capturing, METH_O,
     "blas_fake_capturing(flag)\n--\n\nWhether the emulated streams pretend to be captured into a CUDA graph."},
    {"blas_plant", blas_plant, METH_O,
     "blas_plant(bug)\n--\n\nPlants a bug in the emulated int8 GEMM (1: each sum misses its last term; 0: "
     "none), for the test that shows the comparison with the CPU path fails on it."},
#endif
    {NULL, NULL, 0, NULL},
};

int
ckc_blas_add(PyObject *m)
{
    return ckc_devices_have_gpu_runtime() ? PyModule_AddFunctions(m, blas_functions) : 0;
}
