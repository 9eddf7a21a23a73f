/* SPDX-License-Identifier: Apache-2.0 */
/* The Python face of the diagnostics wing (csrc/diag): the CudaFault
 * exceptions (in the module state), raised with what the flight record says;
 * the flight record's configuration; stage/fence; and, in the emulated-device
 * module, fault injection.  module.c calls ckc_diag_add at import, and the op
 * functions ckc_diag_raise for every device fault. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "diag/checked.h"
#include "diag/flight.h"
#include "diag/flight_mirror.h"
#include "diag/marks.h"
#include "faults.h"
#include "ops/devices.h"
#include "ops/op.h"
#include "state.h"

#define FLIGHT_CAPSULE "comfy_kitchen_c._flight_ring"

#if defined(CKC_EMULATED)
#define DEVICE_NAME "emulated"

/* The classes and the ring of _C: one set of exceptions, one record per process. */
static int
add_shared(PyObject *m, ckc_module_state *st)
{
    PyObject *ring = NULL;
    const ckc_taken taken[] = {{"CudaFault", &st->cuda_fault},         {"LaunchError", &st->launch_error},
                               {"KernelFault", &st->kernel_fault},     {"StagingFault", &st->staging_fault},
                               {"HangSuspected", &st->hang_suspected}, {"CaptureError", &st->capture_error},
                               {"_flight_ring", &ring}};
    (void)m;
    if (ckc_take_from_c(taken, (int)(sizeof taken / sizeof taken[0])) < 0) {
        Py_XDECREF(ring);
        return -1;
    }
    ckc_flight_ring = PyCapsule_GetPointer(ring, FLIGHT_CAPSULE);
    Py_DECREF(ring);
    return ckc_flight_ring != NULL ? 0 : -1;
}
#else
#define DEVICE_NAME "cuda"

static ckc_flight process_ring;

/* The ring is the process's: a second instance of _C (a subinterpreter's) shares it. */
static ckc_flight *
process_flight_ring(void)
{
    static int ready; /* under the GIL: module execs are serialized */
    if (!ready) {
        ckc_flight_init(&process_ring);
        ready = 1;
    }
    return &process_ring;
}

static int
add_shared(PyObject *m, ckc_module_state *st)
{
    PyObject *ring;
    st->cuda_fault = ckc_new_exception(m, "CudaFault",
                                       "A fault of the GPU (or the emulated device), named after the op it is "
                                       "attributed to. Attributes: op, seq, detected_by, record_path, cuda_error.",
                                       st->kitchen_error, PyExc_RuntimeError);
    if (st->cuda_fault == NULL) {
        return -1;
    }
    st->launch_error = ckc_new_exception(m, "LaunchError", "A kernel launch (or library call) was refused.",
                                         st->cuda_fault, NULL);
    st->kernel_fault = ckc_new_exception(m, "KernelFault", "A kernel faulted while it ran.", st->cuda_fault, NULL);
    st->staging_fault = ckc_new_exception(m, "StagingFault",
                                          "Work queued before the op (a staged copy among it) failed.",
                                          st->cuda_fault, NULL);
    st->hang_suspected = ckc_new_exception(m, "HangSuspected",
                                           "The stream made no progress past the watchdog's limit.", st->cuda_fault,
                                           NULL);
    st->capture_error = ckc_new_exception(m, "CaptureError",
                                          "Not allowed while the stream is captured into a CUDA graph (a checking "
                                          "mode that waits for the stream, a staged copy); nothing was queued.",
                                          st->kitchen_error, PyExc_RuntimeError);
    if (st->capture_error == NULL || st->launch_error == NULL || st->kernel_fault == NULL || st->staging_fault == NULL ||
        st->hang_suspected == NULL) {
        return -1;
    }
    ckc_flight_ring = process_flight_ring();
    ring = PyCapsule_New(ckc_flight_ring, FLIGHT_CAPSULE, NULL);
    if (ring == NULL || PyModule_AddObjectRef(m, "_flight_ring", ring) < 0) {
        Py_XDECREF(ring);
        return -1;
    }
    Py_DECREF(ring);
    return 0;
}
#endif

static PyObject *
class_of(const ckc_module_state *st, ckc_status status)
{
    switch (status) {
    case CKC_ERR_LAUNCH:
        return st->launch_error;
    case CKC_ERR_KERNEL:
        return st->kernel_fault;
    case CKC_ERR_STAGING:
        return st->staging_fault;
    case CKC_ERR_HANG:
        return st->hang_suspected;
    default:
        return st->cuda_fault;
    }
}

static int
set_attr(PyObject *obj, const char *name, PyObject *value)
{
    int rc;
    if (value == NULL) {
        return -1;
    }
    rc = PyObject_SetAttrString(obj, name, value);
    Py_DECREF(value);
    return rc;
}

int
ckc_diag_is_fault(ckc_status status)
{
    return status >= CKC_ERR_LAUNCH;
}

void
ckc_diag_raise(ckc_module_state *st, const ckc_error *err, const ckc_fault *fault)
{
    PyObject *type = class_of(st, err->status);
    const char *path = ckc_flight_path();
    PyObject *exc;
    char message[2048];
    PyOS_snprintf(message, sizeof message,
                  "%s: %s\n  attributed to: %s (flight record seq %llu) on " DEVICE_NAME
                  ":%d, stream 0x%llx\n  tensors: %s\n  params: %s\n  device error: %s\n"
                  "  flight record: %s\n  record file: %s",
                  fault->detected_by, err->message, fault->op, (unsigned long long)fault->seq, fault->device,
                  (unsigned long long)fault->stream, fault->tensors[0] ? fault->tensors : "-",
                  fault->params[0] ? fault->params : "-", err->device_error[0] ? err->device_error : "none reported",
                  fault->context[0] ? fault->context : "-", path[0] ? path : "(in memory only)");
    exc = PyObject_CallFunction(type, "s", message);
    if (exc == NULL) {
        return;
    }
    if (set_attr(exc, "op", PyUnicode_FromString(fault->op)) < 0 ||
        set_attr(exc, "seq", PyLong_FromUnsignedLongLong((unsigned long long)fault->seq)) < 0 ||
        set_attr(exc, "detected_by", PyUnicode_FromString(fault->detected_by)) < 0 ||
        set_attr(exc, "record_path", path[0] ? PyUnicode_FromString(path) : Py_NewRef(Py_None)) < 0 ||
        set_attr(exc, "cuda_error", PyUnicode_FromString(err->device_error)) < 0) {
        Py_DECREF(exc);
        return;
    }
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
}

/* Raises err: a CudaFault, or the op layer's exception. */
static PyObject *
fail(PyObject *module, const ckc_error *err, const ckc_fault *fault)
{
    if (ckc_diag_is_fault(err->status)) {
        ckc_diag_raise(ckc_state(module), err, fault);
    } else {
        PyErr_Format(err->status == CKC_ERR_CAPTURE ? ckc_state(module)->capture_error : PyExc_RuntimeError, "%s: %s", fault->detected_by,
                     err->message);
    }
    return NULL;
}

/* ---- functions ---- */

static PyObject *
flight_configure(PyObject *self, PyObject *args)
{
    ckc_flight_config c = {NULL, 0, "", "", "", "", 0}; /* no prefix and keep: nothing is pruned */
    (void)self;
    if (!PyArg_ParseTuple(args, "zpss|ssI", &c.path, &c.ops, &c.python, &c.package_version, &c.prune_prefix,
                          &c.prune_suffix, &c.keep)) {
        return NULL;
    }
    ckc_flight_configure(&c);
    Py_RETURN_NONE;
}

static PyObject *
flight_path(PyObject *self, PyObject *args)
{
    const char *path = ckc_flight_path();
    (void)self;
    (void)args;
    if (path[0] == '\0') {
        Py_RETURN_NONE;
    }
    return PyUnicode_FromString(path);
}

static PyObject *
flight_sync(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    ckc_flight_mirror_now();
    Py_RETURN_NONE;
}

static PyObject *
flight_marks(PyObject *self, PyObject *args)
{
    const ckc_flight *f = ckc_flight_ring;
    const int pinned = ckc_atomic_load_ptr(&f->words) != NULL;
    (void)self;
    (void)args;
    return Py_BuildValue("{s:s,s:s,s:K}", "words", pinned ? "pinned" : "file",
                         "mirror", f->mirror == 1 ? "running" : (f->mirror < 0 ? "failed" : "off"),
                         "mirror_wakeups", (unsigned long long)ckc_atomic_load64(&f->mirror_wakeups));
}

static PyObject *
stage(PyObject *self, PyObject *args)
{
    unsigned long long dst;
    unsigned long long src;
    unsigned long long bytes;
    unsigned long long stream;
    const char *tensors;
    const char *memory = "unknown";
    ckc_stage_args s;
    ckc_error err;
    ckc_fault fault;
    ckc_status status;
    s.op = NULL;
    s.issued = 0;
    if (!PyArg_ParseTuple(args, "KKKiKips|zp", &dst, &src, &bytes, &s.device, &stream, &s.mode, &s.non_blocking,
                          &tensors, &s.op, &s.issued)) {
        return NULL;
    }
    s.dst = (void *)(uintptr_t)dst;
    s.src = (const void *)(uintptr_t)src;
    s.bytes = (size_t)bytes;
    s.stream = (uintptr_t)stream;
    s.tensors = tensors;
    err.status = CKC_OK;
    err.device_error[0] = '\0';
    Py_BEGIN_ALLOW_THREADS
    status = ckc_checked_stage(&s, &memory, &err, &fault);
    Py_END_ALLOW_THREADS
    if (status != CKC_OK) {
        return fail(self, &err, &fault);
    }
    return PyUnicode_FromString(memory);
}

static PyObject *
fence(PyObject *self, PyObject *args)
{
    unsigned long long ptr;
    unsigned long long bytes;
    ckc_error err;
    ckc_fault fault;
    ckc_status status;
    if (!PyArg_ParseTuple(args, "KK", &ptr, &bytes)) {
        return NULL;
    }
    err.status = CKC_OK;
    err.device_error[0] = '\0';
    Py_BEGIN_ALLOW_THREADS
    status = ckc_fence_host((const void *)(uintptr_t)ptr, (size_t)bytes, &err, &fault);
    Py_END_ALLOW_THREADS
    if (status != CKC_OK) {
        return fail(self, &err, &fault);
    }
    Py_RETURN_NONE;
}

static PyObject *
fence_stream(PyObject *self, PyObject *args)
{
    const char *op;
    int device;
    unsigned long long stream;
    ckc_error err;
    ckc_fault fault;
    ckc_status status;
    if (!PyArg_ParseTuple(args, "siK", &op, &device, &stream)) {
        return NULL;
    }
    err.status = CKC_OK;
    err.device_error[0] = '\0';
    Py_BEGIN_ALLOW_THREADS
    status = ckc_fence_stream(op, device, (uintptr_t)stream, &err, &fault);
    Py_END_ALLOW_THREADS
    if (status != CKC_OK) {
        return fail(self, &err, &fault);
    }
    Py_RETURN_NONE;
}

/* ---- the checks' own cost (benchmarks/bench_faults.py) ---- */

static PyObject *
check_overhead_ns(PyObject *self, PyObject *args)
{
    int iterations;
    int mode;
    int device;
    unsigned long long stream;
    int one_kernel = 0;
    const ckc_op_spec *spec;
    ckc_op_args a;
    ckc_error err;
    ckc_fault fault;
    ckc_status status = CKC_OK;
    uint64_t start;
    uint64_t elapsed;
    if (!PyArg_ParseTuple(args, "iiiK|p", &iterations, &mode, &device, &stream, &one_kernel)) {
        return NULL;
    }
    spec = one_kernel ? &ckc_op_probe_mark_kernel : &ckc_op_probe_nothing;
    memset(&a, 0, sizeof a);
    a.sig = &spec->sig;
    a.device = CKC_DEVICE_CUDA;
    a.exec.device_index = device;
    a.exec.stream = (uintptr_t)stream;
    a.exec.nthreads = 1;
    a.i[0] = 256;
    for (int k = 0; k < 3; k++) {
        static const ckc_dtype dtypes[3] = {CKC_DTYPE_BFLOAT16, CKC_DTYPE_INT8, CKC_DTYPE_FLOAT32};
        a.present[k] = 1;
        a.t[k].dtype = dtypes[k];
        a.t[k].device = CKC_DEVICE_CUDA;
        a.t[k].ndim = 2;
        a.t[k].shape[0] = 4096;
        a.t[k].shape[1] = k == 2 ? 1 : 3072;
    }
    err.device_error[0] = '\0';
    Py_BEGIN_ALLOW_THREADS
    start = ckc_monotonic_ns();
    for (int k = 0; k < iterations && status == CKC_OK; k++) {
        status = ckc_op_run(spec, spec->sig.name, &a, mode, &err, &fault);
    }
    elapsed = ckc_monotonic_ns() - start;
    Py_END_ALLOW_THREADS
    if (status != CKC_OK) {
        return fail(self, &err, &fault);
    }
    return PyFloat_FromDouble((double)elapsed / (iterations > 0 ? iterations : 1));
}

static PyObject *
mark_counts(PyObject *self, PyObject *args)
{
    uint64_t riding;
    uint64_t separate;
    (void)self;
    (void)args;
    ckc_mark_counts(&riding, &separate);
    return Py_BuildValue("{s:K,s:K}", "riding", (unsigned long long)riding, "separate",
                         (unsigned long long)separate);
}

/* riding_mark_limit([bytes]): the limit in force; with bytes, sets it (marks.h). */
static PyObject *
riding_mark_limit(PyObject *self, PyObject *args)
{
    unsigned long long bytes = 0;
    int set;
    (void)self;
    if (!PyArg_ParseTuple(args, "|K", &bytes)) {
        return NULL;
    }
    set = PyTuple_Size(args) > 0;
    return PyLong_FromUnsignedLongLong(set ? ckc_mark_set_riding_limit(bytes) : ckc_mark_riding_limit());
}

#if defined(CKC_EMULATED)
static PyObject *
inject(PyObject *self, PyObject *args)
{
    int kind;
    const char *op;
    int nth;
    (void)self;
    if (!PyArg_ParseTuple(args, "izi", &kind, &op, &nth)) {
        return NULL;
    }
    ckc_devices_emulated_inject(kind, op, nth);
    Py_RETURN_NONE;
}

/* A switch of the emulated device, set from one truth value. */
static PyObject *
set_switch(PyObject *args, void (*set)(int))
{
    int on;
    if (!PyArg_ParseTuple(args, "p", &on)) {
        return NULL;
    }
    set(on);
    Py_RETURN_NONE;
}

static PyObject *
refuse_host_mapping(PyObject *self, PyObject *args)
{
    (void)self;
    return set_switch(args, ckc_devices_emulated_refuse_host_mapping);
}

static PyObject *
skip_kernels(PyObject *self, PyObject *args)
{
    (void)self;
    return set_switch(args, ckc_devices_emulated_skip_kernels);
}

/* The emulated device's answer code as the Python exception (CaptureError for
 * what a capture forbids). */
static PyObject *
emu_failed(PyObject *module, const char *call, int code, const char *why)
{
    PyErr_Format(code == CKC_DEVICES_CAPTURE_REFUSED ? ckc_state(module)->capture_error : PyExc_RuntimeError,
                 "%s: %s", call, why);
    return NULL;
}

static PyObject *
capture_begin(PyObject *self, PyObject *args)
{
    unsigned long long stream;
    int mode;
    char why[400];
    int code;
    (void)self;
    if (!PyArg_ParseTuple(args, "Ki", &stream, &mode)) {
        return NULL;
    }
    code = ckc_devices_emulated_capture_begin((uintptr_t)stream, mode, why, sizeof why);
    return code == 0 ? Py_NewRef(Py_None) : emu_failed(self, "capture_begin", code, why);
}

static PyObject *
capture_end(PyObject *self, PyObject *args)
{
    unsigned long long stream;
    uint64_t graph = 0;
    char why[400];
    int code;
    (void)self;
    if (!PyArg_ParseTuple(args, "K", &stream)) {
        return NULL;
    }
    code = ckc_devices_emulated_capture_end((uintptr_t)stream, &graph, why, sizeof why);
    return code == 0 ? PyLong_FromUnsignedLongLong(graph) : emu_failed(self, "capture_end", code, why);
}

static PyObject *
graph_launch(PyObject *self, PyObject *args)
{
    unsigned long long graph;
    unsigned long long stream;
    char why[400];
    int code;
    (void)self;
    if (!PyArg_ParseTuple(args, "KK", &graph, &stream)) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    code = ckc_devices_emulated_graph_launch(graph, (uintptr_t)stream, why, sizeof why);
    Py_END_ALLOW_THREADS
    return code == 0 ? Py_NewRef(Py_None) : emu_failed(self, "graph_launch", code, why);
}

static PyObject *
graph_destroy(PyObject *self, PyObject *args)
{
    unsigned long long graph;
    (void)self;
    if (!PyArg_ParseTuple(args, "K", &graph)) {
        return NULL;
    }
    ckc_devices_emulated_graph_destroy(graph);
    Py_RETURN_NONE;
}

static PyObject *
capturing(PyObject *self, PyObject *args)
{
    unsigned long long stream;
    (void)self;
    if (!PyArg_ParseTuple(args, "K", &stream)) {
        return NULL;
    }
    return PyBool_FromLong(ckc_devices_emulated_capturing_stream((uintptr_t)stream));
}

static PyObject *
reset_device(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    ckc_devices_emulated_reset();
    ckc_flight_abandon("never completed: the emulated device was reset");
    Py_RETURN_NONE;
}
#endif

static PyMethodDef diag_functions[] = {
    {"flight_configure", flight_configure, METH_VARARGS,
     "flight_configure(path, ops, python, package_version, prefix='', suffix='', keep=0)\n--\n\n"
     "Where the flight record goes (None: memory only) and whether ops are recorded; "
     "takes effect at the first record, which creates the file and leaves the keep newest "
     "files named prefix...suffix in its folder."},
    {"flight_path", flight_path, METH_NOARGS, "flight_path()\n--\n\nThe flight record's file, or None."},
    {"flight_sync", flight_sync, METH_NOARGS,
     "flight_sync()\n--\n\nCopies the completions that landed in pinned words into the flight record's file now."},
    {"flight_marks", flight_marks, METH_NOARGS,
     "flight_marks()\n--\n\nWhere the device writes completions: {'words': 'file' | 'pinned', "
     "'mirror': 'off' | 'running' | 'failed', 'mirror_wakeups': int}."},
    {"stage", stage, METH_VARARGS,
     "stage(dst_ptr, src_ptr, nbytes, device, stream, mode, non_blocking, tensors, op=None, issued=False)\n--\n\n"
     "Checked, recorded host-to-device copy (issued: one its caller already queued, recorded only); "
     "returns what the source memory is."},
    {"fence", fence, METH_VARARGS,
     "fence(ptr, nbytes)\n--\n\nWaits until every recorded copy from the host range has completed."},
    {"fence_stream", fence_stream, METH_VARARGS,
     "fence_stream(op, device, stream)\n--\n\nWaits for the work queued on stream, under the watchdog."},
    {"check_overhead_ns", check_overhead_ns, METH_VARARGS,
     "check_overhead_ns(iterations, mode, device, stream, one_kernel=False)\n--\n\n"
     "Nanoseconds per call of the checks around an op that queues no work, or (one_kernel) one one-thread "
     "kernel that carries the op's completion mark (benchmarks)."},
    {"mark_counts", mark_counts, METH_NOARGS,
     "mark_counts()\n--\n\nThis module's completion marks so far: {'riding': written by an op's own last "
     "kernel, 'separate': queued as work of their own}."},
    {"riding_mark_limit", riding_mark_limit, METH_VARARGS,
     "riding_mark_limit([bytes])\n--\n\nThe most bytes an op's tensors may hold for its completion mark to ride "
     "on its last kernel (larger ops get a separate mark); with bytes, sets it and returns the previous limit "
     "(tests and benchmarks)."},
#if defined(CKC_EMULATED)
    {"inject", inject, METH_VARARGS, "inject(kind, op, nth)\n--\n\nArms a fault on the emulated device."},
    {"refuse_host_mapping", refuse_host_mapping, METH_VARARGS,
     "refuse_host_mapping(refuse)\n--\n\nWhether the emulated device refuses to map the flight record's file "
     "(as Linux >= 6.5 refuses CUDA), so completions go to pinned words."},
    {"skip_kernels", skip_kernels, METH_VARARGS,
     "skip_kernels(skip)\n--\n\nHost-timing mode: launches are checked and admitted, their kernels not run "
     "(results are garbage meanwhile)."},
    {"reset_device", reset_device, METH_NOARGS,
     "reset_device()\n--\n\nDisarms faults, clears the sticky error and hung streams."},
    {"capture_begin", capture_begin, METH_VARARGS,
     "capture_begin(stream, mode)\n--\n\nBegins capturing the work issued to stream into a graph (mode: 0 global, "
     "1 thread-local, 2 relaxed, as cudaStreamCaptureMode)."},
    {"capture_end", capture_end, METH_VARARGS,
     "capture_end(stream)\n--\n\nEnds the capture and returns its graph (CaptureError if it was invalidated)."},
    {"graph_launch", graph_launch, METH_VARARGS,
     "graph_launch(graph, stream)\n--\n\nReplays the graph's work on stream."},
    {"graph_destroy", graph_destroy, METH_VARARGS, "graph_destroy(graph)\n--\n\nFrees the graph."},
    {"capturing", capturing, METH_VARARGS, "capturing(stream)\n--\n\nWhether stream is being captured."},
#endif
    {NULL, NULL, 0, NULL},
};

int
ckc_diag_add(PyObject *m, ckc_module_state *st)
{
    if (add_shared(m, st) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(m, diag_functions);
}
