/* The Python face of the diagnostics wing (csrc/diag): the CudaFault
 * exceptions, raised with what the flight record says; the flight record's
 * configuration; stage/fence; and, in the emulated-device module, fault
 * injection.  module.c calls ckc_diag_add at import and ckc_diag_raise for
 * every device fault. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "diag/checked.h"
#include "diag/flight.h"
#include "diag/marks.h"
#include "diag_module.h"
#if defined(CKC_WITH_GPU)
#include "gpu/launch.h"
#endif
#if defined(CKC_EMULATED)
#include "emu/emu_api.h"
#endif

static PyObject *CudaFault;
static PyObject *LaunchError;
static PyObject *KernelFault;
static PyObject *StagingFault;
static PyObject *HangSuspected;
static PyObject *CaptureError;

#define FLIGHT_CAPSULE "comfy_kitchen_c._flight_ring"

#if defined(CKC_EMULATED)
#define DEVICE_NAME "emulated"

/* The classes and the ring of _C: one set of exceptions, one record per process. */
static int
add_shared(PyObject *m)
{
    PyObject *c = PyImport_ImportModule("comfy_kitchen_c._C");
    PyObject *ring;
    (void)m;
    if (c == NULL) {
        return -1;
    }
    CudaFault = PyObject_GetAttrString(c, "CudaFault");
    LaunchError = PyObject_GetAttrString(c, "LaunchError");
    KernelFault = PyObject_GetAttrString(c, "KernelFault");
    StagingFault = PyObject_GetAttrString(c, "StagingFault");
    HangSuspected = PyObject_GetAttrString(c, "HangSuspected");
    CaptureError = PyObject_GetAttrString(c, "CaptureError");
    ring = PyObject_GetAttrString(c, "_flight_ring");
    Py_DECREF(c);
    if (CudaFault == NULL || LaunchError == NULL || KernelFault == NULL || StagingFault == NULL ||
        HangSuspected == NULL || CaptureError == NULL || ring == NULL) {
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

static PyObject *
new_class(PyObject *m, const char *name, const char *doc, PyObject *base1, PyObject *base2)
{
    char qualified[64];
    PyObject *bases = base2 ? PyTuple_Pack(2, base1, base2) : PyTuple_Pack(1, base1);
    PyObject *cls;
    if (bases == NULL) {
        return NULL;
    }
    PyOS_snprintf(qualified, sizeof qualified, "comfy_kitchen_c.%s", name);
    cls = PyErr_NewExceptionWithDoc(qualified, doc, bases, NULL);
    Py_DECREF(bases);
    if (cls != NULL && PyModule_AddObjectRef(m, name, cls) < 0) {
        Py_CLEAR(cls);
    }
    return cls;
}

static int
add_shared(PyObject *m)
{
    PyObject *kitchen = PyObject_GetAttrString(m, "KitchenError");
    PyObject *ring;
    if (kitchen == NULL) {
        return -1;
    }
    CudaFault = new_class(m, "CudaFault",
                          "A fault of the GPU (or the emulated device), named after the op it is attributed to. "
                          "Attributes: op, seq, detected_by, record_path, cuda_error.",
                          kitchen, PyExc_RuntimeError);
    CaptureError = new_class(m, "CaptureError",
                             "Not allowed while the stream is captured into a CUDA graph (a checking mode that waits "
                             "for the stream, a staged copy); nothing was queued.",
                             kitchen, PyExc_RuntimeError);
    Py_DECREF(kitchen);
    if (CudaFault == NULL || CaptureError == NULL) {
        return -1;
    }
    LaunchError = new_class(m, "LaunchError", "A kernel launch (or library call) was refused.", CudaFault, NULL);
    KernelFault = new_class(m, "KernelFault", "A kernel faulted while it ran.", CudaFault, NULL);
    StagingFault = new_class(m, "StagingFault", "Work queued before the op (a staged copy among it) failed.",
                             CudaFault, NULL);
    HangSuspected = new_class(m, "HangSuspected", "The stream made no progress past the watchdog's limit.",
                              CudaFault, NULL);
    if (LaunchError == NULL || KernelFault == NULL || StagingFault == NULL || HangSuspected == NULL) {
        return -1;
    }
    ckc_flight_init(&process_ring);
    ckc_flight_ring = &process_ring;
    ring = PyCapsule_New(&process_ring, FLIGHT_CAPSULE, NULL);
    if (ring == NULL || PyModule_AddObjectRef(m, "_flight_ring", ring) < 0) {
        Py_XDECREF(ring);
        return -1;
    }
    Py_DECREF(ring);
    return 0;
}
#endif

static PyObject *
class_of(ckc_status status)
{
    switch (status) {
    case CKC_ERR_LAUNCH:
        return LaunchError;
    case CKC_ERR_KERNEL:
        return KernelFault;
    case CKC_ERR_STAGING:
        return StagingFault;
    case CKC_ERR_HANG:
        return HangSuspected;
    default:
        return CudaFault;
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

PyObject *
ckc_diag_capture_error(void)
{
    return CaptureError;
}

void
ckc_diag_raise(const ckc_error *err, const ckc_fault *fault)
{
    PyObject *type = class_of(err->status);
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
fail(const ckc_error *err, const ckc_fault *fault)
{
    if (ckc_diag_is_fault(err->status)) {
        ckc_diag_raise(err, fault);
    } else {
        PyErr_Format(err->status == CKC_ERR_CAPTURE ? CaptureError : PyExc_RuntimeError, "%s: %s", fault->detected_by,
                     err->message);
    }
    return NULL;
}

/* ---- functions ---- */

static PyObject *
flight_configure(PyObject *self, PyObject *args)
{
    const char *path;
    const char *python;
    const char *version;
    int ops;
    (void)self;
    if (!PyArg_ParseTuple(args, "zpss", &path, &ops, &python, &version)) {
        return NULL;
    }
    ckc_flight_configure(path, ops, python, version);
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
    (void)self;
    if (!PyArg_ParseTuple(args, "KKKiKips", &dst, &src, &bytes, &s.device, &stream, &s.mode, &s.non_blocking,
                          &tensors)) {
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
        return fail(&err, &fault);
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
    (void)self;
    if (!PyArg_ParseTuple(args, "KK", &ptr, &bytes)) {
        return NULL;
    }
    err.status = CKC_OK;
    err.device_error[0] = '\0';
    Py_BEGIN_ALLOW_THREADS
    status = ckc_fence_host((const void *)(uintptr_t)ptr, (size_t)bytes, &err, &fault);
    Py_END_ALLOW_THREADS
    if (status != CKC_OK) {
        return fail(&err, &fault);
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
    (void)self;
    if (!PyArg_ParseTuple(args, "siK", &op, &device, &stream)) {
        return NULL;
    }
    err.status = CKC_OK;
    err.device_error[0] = '\0';
    Py_BEGIN_ALLOW_THREADS
    status = ckc_fence_stream(op, device, (uintptr_t)stream, &err, &fault);
    Py_END_ALLOW_THREADS
    if (status != CKC_OK) {
        return fail(&err, &fault);
    }
    Py_RETURN_NONE;
}

/* ---- the checks' own cost (benchmarks/bench_faults.py) ---- */

static ckc_status
run_nothing(const ckc_op_args *a, ckc_error *err)
{
    (void)a;
    (void)err;
    return CKC_OK;
}

#if defined(CKC_WITH_GPU)
/* The least an op whose completion mark rides on its kernel can do: launch
 * one one-thread kernel carrying the mark (a null mark with the record off). */
static ckc_status
run_one_kernel(const ckc_op_args *a, ckc_error *err)
{
    const ckc_done_mark m = ckc_gpu_take_done_mark();
    return ckc_gpu_flight_mark(&m, a->exec.stream, err);
}
#else
#define run_one_kernel run_nothing
#endif

/* An op that queues no work (or one kernel), with the arguments of a typical one. */
#define NULL_OP(name, run)                                                                                  \
    {                                                                                                       \
        name, "", 3,                                                                                        \
            {{"x", CKC_FLOATS, 0}, {"q", CKC_DTYPE_BIT(CKC_DTYPE_INT8), CKC_ARG_OUTPUT},                    \
             {"scale", CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32), CKC_ARG_OUTPUT}},                                  \
            1, {"group"}, run,                                                                              \
    }
static const ckc_op_spec null_op = NULL_OP("null", run_nothing);
static const ckc_op_spec one_kernel_op = NULL_OP("one_kernel", run_one_kernel);

static PyObject *
check_overhead_ns(PyObject *self, PyObject *args)
{
    int iterations;
    int mode;
    int device;
    unsigned long long stream;
    int one_kernel = 0;
    ckc_op_args a;
    ckc_error err;
    ckc_fault fault;
    ckc_status status = CKC_OK;
    uint64_t start;
    uint64_t elapsed;
    (void)self;
    if (!PyArg_ParseTuple(args, "iiiK|p", &iterations, &mode, &device, &stream, &one_kernel)) {
        return NULL;
    }
    memset(&a, 0, sizeof a);
    a.spec = one_kernel ? &one_kernel_op : &null_op;
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
        status = ckc_checked_op(a.spec->name, &a, mode, &err, &fault);
    }
    elapsed = ckc_monotonic_ns() - start;
    Py_END_ALLOW_THREADS
    if (status != CKC_OK) {
        return fail(&err, &fault);
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
    ckc_emu_inject(kind, op, nth);
    Py_RETURN_NONE;
}

static PyObject *
refuse_host_mapping(PyObject *self, PyObject *args)
{
    int refuse;
    (void)self;
    if (!PyArg_ParseTuple(args, "p", &refuse)) {
        return NULL;
    }
    ckc_emu_refuse_host_mapping(refuse);
    Py_RETURN_NONE;
}

/* The emulated device's answer code as the Python exception (CaptureError for
 * what a capture forbids). */
static PyObject *
emu_failed(const char *call, int code, const char *why)
{
    PyErr_Format(code == CKC_EMU_CAPTURE ? CaptureError : PyExc_RuntimeError, "%s: %s", call, why);
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
    code = ckc_emu_capture_begin((uintptr_t)stream, mode, why, sizeof why);
    return code == CKC_EMU_OK ? Py_NewRef(Py_None) : emu_failed("capture_begin", code, why);
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
    code = ckc_emu_capture_end((uintptr_t)stream, &graph, why, sizeof why);
    return code == CKC_EMU_OK ? PyLong_FromUnsignedLongLong(graph) : emu_failed("capture_end", code, why);
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
    code = ckc_emu_graph_launch(graph, (uintptr_t)stream, why, sizeof why);
    Py_END_ALLOW_THREADS
    return code == CKC_EMU_OK ? Py_NewRef(Py_None) : emu_failed("graph_launch", code, why);
}

static PyObject *
graph_destroy(PyObject *self, PyObject *args)
{
    unsigned long long graph;
    (void)self;
    if (!PyArg_ParseTuple(args, "K", &graph)) {
        return NULL;
    }
    ckc_emu_graph_destroy(graph);
    Py_RETURN_NONE;
}

static PyObject *
capturing(PyObject *self, PyObject *args)
{
    unsigned long long stream;
    uint64_t id;
    (void)self;
    if (!PyArg_ParseTuple(args, "K", &stream)) {
        return NULL;
    }
    return PyBool_FromLong(ckc_emu_capture_status((uintptr_t)stream, &id));
}

static PyObject *
reset_device(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    ckc_emu_reset();
    ckc_flight_abandon("never completed: the emulated device was reset");
    Py_RETURN_NONE;
}
#endif

static PyMethodDef diag_functions[] = {
    {"flight_configure", flight_configure, METH_VARARGS,
     "flight_configure(path, ops, python, package_version)\n--\n\n"
     "Where the flight record goes (None: memory only) and whether ops are recorded; "
     "takes effect at the first record."},
    {"flight_path", flight_path, METH_NOARGS, "flight_path()\n--\n\nThe flight record's file, or None."},
    {"flight_sync", flight_sync, METH_NOARGS,
     "flight_sync()\n--\n\nCopies the completions that landed in pinned words into the flight record's file now."},
    {"flight_marks", flight_marks, METH_NOARGS,
     "flight_marks()\n--\n\nWhere the device writes completions: {'words': 'file' | 'pinned', "
     "'mirror': 'off' | 'running' | 'failed', 'mirror_wakeups': int}."},
    {"stage", stage, METH_VARARGS,
     "stage(dst_ptr, src_ptr, nbytes, device, stream, mode, non_blocking, tensors)\n--\n\n"
     "Checked, recorded host-to-device copy; returns what the source memory is."},
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
#if defined(CKC_EMULATED)
    {"inject", inject, METH_VARARGS, "inject(kind, op, nth)\n--\n\nArms a fault on the emulated device."},
    {"refuse_host_mapping", refuse_host_mapping, METH_VARARGS,
     "refuse_host_mapping(refuse)\n--\n\nWhether the emulated device refuses to map the flight record's file "
     "(as Linux >= 6.5 refuses CUDA), so completions go to pinned words."},
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
ckc_diag_add(PyObject *m)
{
    if (add_shared(m) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(m, diag_functions);
}
