/* SPDX-License-Identifier: Apache-2.0 */
/* configure(settings): the C side's settings (platform/settings.h) from the
 * dict comfy_kitchen_c/settings.py builds of what it parsed.  A key left out
 * keeps its default; an unknown key, a wrong type or a path too long for the
 * struct is an ArgumentError naming it, and nothing changes.  The CPU kernels'
 * instruction set is selected here, the emulated device's controls set here.
 * The module calls comfy_kitchen_c.settings.apply for itself as it loads. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "configure.h"
#include "ops/devices.h"
#include "platform/settings.h"
#include "state.h"

static int
fail(PyObject *self, const char *key, const char *what)
{
    PyErr_Format(ckc_state(self)->argument_error, "configure: argument 'settings': key '%s': %s", key, what);
    return -1;
}

/* Copies a str (or None: "") into a field of cap bytes. */
static int
text(PyObject *self, const char *key, PyObject *value, char *field, size_t cap)
{
    Py_ssize_t n;
    const char *s;
    if (value == Py_None) {
        field[0] = '\0';
        return 0;
    }
    s = PyUnicode_Check(value) ? PyUnicode_AsUTF8AndSize(value, &n) : NULL;
    if (s == NULL) {
        PyErr_Clear();
        return fail(self, key, "expected a str or None");
    }
    if ((size_t)n >= cap || strlen(s) != (size_t)n) {
        return fail(self, key, "too long, or holds a NUL");
    }
    memcpy(field, s, (size_t)n + 1);
    return 0;
}

static int
milliseconds(PyObject *self, const char *key, PyObject *value, unsigned *field)
{
    const unsigned long ms = PyLong_Check(value) ? PyLong_AsUnsignedLong(value) : (unsigned long)-1;
    if (PyErr_Occurred() || ms == (unsigned long)-1 || ms == 0 || ms > 86400000ul) {
        PyErr_Clear();
        return fail(self, key, "expected a whole number of milliseconds, 1 to 86400000");
    }
    *field = (unsigned)ms;
    return 0;
}

static int
flag(PyObject *self, const char *key, PyObject *value, int *field)
{
    const int on = PyBool_Check(value) ? PyObject_IsTrue(value) : -1;
    if (on < 0) {
        PyErr_Clear();
        return fail(self, key, "expected True or False");
    }
    *field = on;
    return 0;
}

/* One entry of the dict into s, or, for the emulated device's two keys, into
 * schedule (64 bytes) and refuse. */
static int
take(PyObject *self, const char *key, PyObject *value, ckc_settings *s, char *schedule, int *refuse)
{
    if (strcmp(key, "cpu_isa") == 0) {
        return text(self, key, value, s->cpu_isa, sizeof s->cpu_isa);
    }
    if (strcmp(key, "cpu_threads_pool") == 0) {
        return flag(self, key, value, &s->cpu_threads_pool);
    }
    if (strcmp(key, "huge_pages") == 0) {
        return flag(self, key, value, &s->huge_pages);
    }
    if (strcmp(key, "hang_ms") == 0) {
        return milliseconds(self, key, value, &s->hang_ms);
    }
    if (strcmp(key, "hang_raise_ms") == 0) {
        return milliseconds(self, key, value, &s->hang_raise_ms);
    }
    if (strcmp(key, "gemm_tuning") == 0) {
        return flag(self, key, value, &s->gemm_tuning);
    }
    if (strcmp(key, "gemm_cache") == 0) {
        return text(self, key, value, s->gemm_cache, sizeof s->gemm_cache);
    }
    if (strcmp(key, "cuda_driver") == 0) {
        return text(self, key, value, s->cuda_driver, sizeof s->cuda_driver);
    }
    if (strcmp(key, "cublaslt") == 0) {
        return text(self, key, value, s->cublaslt, sizeof s->cublaslt);
    }
    if (strcmp(key, "cuda_home") == 0) {
        return text(self, key, value, s->cuda_home, sizeof s->cuda_home);
    }
    if (strcmp(key, "emu_schedule") == 0) {
        return text(self, key, value, schedule, 64);
    }
    if (strcmp(key, "emu_refuse_host_mapping") == 0) {
        return flag(self, key, value, refuse);
    }
    return fail(self, key, "not a setting of the C side");
}

/* "order", "shuffle" (seed 1) or "shuffle:SEED", as settings.py validated it. */
static void
set_schedule(const char *schedule)
{
    const int shuffle = strncmp(schedule, "shuffle", 7) == 0;
    const unsigned long long seed = schedule[7] == ':' ? strtoull(schedule + 8, NULL, 10) : 1;
    ckc_devices_emulated_schedule(shuffle, shuffle ? (uint64_t)seed : 0);
}

static PyObject *
configure(PyObject *self, PyObject *arg)
{
    ckc_settings s;
    char schedule[64] = "order";
    int refuse = 0;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    if (!PyDict_Check(arg)) {
        PyErr_Format(ckc_state(self)->argument_type_error, "configure: argument 'settings': expected a dict");
        return NULL;
    }
    ckc_settings_default(&s);
    while (PyDict_Next(arg, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
        if (name == NULL) {
            PyErr_Clear();
            PyErr_Format(ckc_state(self)->argument_error, "configure: argument 'settings': a key is not a str");
            return NULL;
        }
        if (take(self, name, value, &s, schedule, &refuse) < 0) {
            return NULL;
        }
    }
    if (s.cpu_isa[0] != '\0' && !ckc_devices_select_cpu_isa(s.cpu_isa)) {
        PyErr_Format(ckc_state(self)->argument_error, "configure: argument 'settings': key 'cpu_isa': '%s' is not "
                     "available here", s.cpu_isa);
        return NULL;
    }
    ckc_settings_set(&s);
    ckc_devices_emulated_refuse_host_mapping(refuse);
    set_schedule(schedule);
    Py_RETURN_NONE;
}

/* The settings in force, as a dict of the struct's fields (what the tests and
 * doctor compare with what Python parsed). */
static PyObject *
settings_in_force(PyObject *self, PyObject *args)
{
    ckc_settings s;
    (void)self;
    (void)args;
    ckc_settings_read(&s);
    return Py_BuildValue("{s:s,s:O,s:O,s:I,s:I,s:O,s:s,s:s,s:s,s:s}", "cpu_isa", s.cpu_isa, "cpu_threads_pool",
                         s.cpu_threads_pool ? Py_True : Py_False, "huge_pages", s.huge_pages ? Py_True : Py_False,
                         "hang_ms", s.hang_ms, "hang_raise_ms", s.hang_raise_ms, "gemm_tuning",
                         s.gemm_tuning ? Py_True : Py_False, "gemm_cache", s.gemm_cache, "cuda_driver", s.cuda_driver,
                         "cublaslt", s.cublaslt, "cuda_home", s.cuda_home);
}

static PyMethodDef settings_functions[] = {
    {"configure", configure, METH_O,
     "configure(settings)\n--\n\nPuts the C side's settings in force: a dict of cpu_isa, cpu_threads_pool, "
     "huge_pages, hang_ms, hang_raise_ms, gemm_tuning, gemm_cache, cuda_driver, cublaslt, cuda_home, "
     "emu_schedule, emu_refuse_host_mapping (each left out: its default).  comfy_kitchen_c.settings.apply() "
     "calls it."},
    {"settings", settings_in_force, METH_NOARGS,
     "settings()\n--\n\nThe C side's settings in force (paths unset: ''; cpu_isa: the one asked for, '' for the "
     "best)."},
    {NULL, NULL, 0, NULL},
};

int
ckc_configure_add(PyObject *m)
{
    PyObject *settings;
    PyObject *done;
    if (PyModule_AddFunctions(m, settings_functions) < 0) {
        return -1;
    }
    /* The settings as the package parsed them, before any op can run: each
     * module (_C, _C_emu) holds its own copy of the C side. */
    settings = PyImport_ImportModule("comfy_kitchen_c.settings");
    done = settings != NULL ? PyObject_CallMethod(settings, "apply", "(O[O])", Py_None, m) : NULL;
    Py_XDECREF(settings);
    if (done == NULL) {
        return -1;
    }
    Py_DECREF(done);
    return 0;
}
