/* kiln's C backend: the one CPython extension it builds (once per Python and compiler).
 *
 * A generated graph library holds no Python.h; calling its kiln_call through ctypes
 * costs about a microsecond and a half of argument conversion. This file gives a
 * callable type whose vectorcall passes the Python objects straight to a graph's
 * kiln_callv (one pointer array: the inputs, then the outputs it makes with numpy.empty)
 * and returns the outputs as a list: what the thunk's Python ``direct`` does, minus
 * ctypes. kiln_callv's status: 0 done, -1 inputs it does not take as they are
 * (NotImplemented: the caller takes the general path), another value an error, which
 * the ``on_error`` callable raises as kiln names it. Like a ctypes call, the graph runs
 * with the GIL released.
 *
 * kiln_c._trampoline loads the built library with ctypes.PyDLL and calls
 * kiln_trampoline_new once per thunk.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#define KILN_TRAMPOLINE_MAX_ARGS 256

typedef int (*kiln_callv_fn)(const void *head, PyObject *const *objects);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    kiln_callv_fn call;
    const void *head;
    Py_ssize_t n_in;
    Py_ssize_t n_out;
    PyObject *empty;    /* numpy.empty */
    PyObject *shapes;   /* a tuple: each output's shape tuple */
    PyObject *dtypes;   /* a tuple: each output's numpy dtype */
    PyObject *on_error; /* on_error(status) raises */
    PyObject *keep;     /* what keeps ``call`` and ``head`` alive */
} kiln_direct;

static PyObject *kiln_direct_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf,
                                        PyObject *kwnames) {
    kiln_direct *self = (kiln_direct *)obj;
    Py_ssize_t n_in = PyVectorcall_NARGS(nargsf);
    if (n_in != self->n_in || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *objects[KILN_TRAMPOLINE_MAX_ARGS];
    for (Py_ssize_t i = 0; i < n_in; i++) objects[i] = args[i];
    PyObject *outputs = PyList_New(self->n_out);
    if (outputs == NULL) return NULL;
    for (Py_ssize_t j = 0; j < self->n_out; j++) {
        PyObject *spec[2] = {PyTuple_GET_ITEM(self->shapes, j), PyTuple_GET_ITEM(self->dtypes, j)};
        PyObject *made = PyObject_Vectorcall(self->empty, spec, 2, NULL);
        if (made == NULL) {
            Py_DECREF(outputs);
            return NULL;
        }
        PyList_SET_ITEM(outputs, j, made);
        objects[n_in + j] = made;
    }
    kiln_callv_fn call = self->call;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = call(self->head, objects);
    Py_END_ALLOW_THREADS
    if (status == 0) return outputs;
    Py_DECREF(outputs);
    if (status == -1) Py_RETURN_NOTIMPLEMENTED;
    PyObject *code = PyLong_FromLong(status);
    if (code == NULL) return NULL;
    PyObject *result = PyObject_CallOneArg(self->on_error, code);
    Py_DECREF(code);
    return result;
}

static int kiln_direct_traverse(PyObject *obj, visitproc visit, void *arg) {
    kiln_direct *self = (kiln_direct *)obj;
    Py_VISIT(self->empty);
    Py_VISIT(self->shapes);
    Py_VISIT(self->dtypes);
    Py_VISIT(self->on_error);
    Py_VISIT(self->keep);
    return 0;
}

static int kiln_direct_clear(PyObject *obj) {
    kiln_direct *self = (kiln_direct *)obj;
    Py_CLEAR(self->empty);
    Py_CLEAR(self->shapes);
    Py_CLEAR(self->dtypes);
    Py_CLEAR(self->on_error);
    Py_CLEAR(self->keep);
    return 0;
}

static void kiln_direct_dealloc(PyObject *obj) {
    PyObject_GC_UnTrack(obj);
    kiln_direct_clear(obj);
    Py_TYPE(obj)->tp_free(obj);
}

/* retarget(address): call the kiln_callv at ``address`` from the next call on. */
static PyObject *kiln_direct_retarget(PyObject *obj, PyObject *address) {
    void *call = PyLong_AsVoidPtr(address);
    if (call == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "retarget: a null address");
        return NULL;
    }
    ((kiln_direct *)obj)->call = (kiln_callv_fn)call;
    Py_RETURN_NONE;
}

static PyMethodDef kiln_direct_methods[] = {
    {"retarget", kiln_direct_retarget, METH_O, "Call the kiln_callv at this address next."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject kiln_direct_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln_c.Direct",
    .tp_basicsize = sizeof(kiln_direct),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A C-compiled graph's outputs from its inputs, called without ctypes.",
    .tp_vectorcall_offset = offsetof(kiln_direct, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_traverse = kiln_direct_traverse,
    .tp_clear = kiln_direct_clear,
    .tp_dealloc = kiln_direct_dealloc,
    .tp_methods = kiln_direct_methods,
};

/* Return a new callable (a new reference), or NULL with an exception set. */
PyObject *kiln_trampoline_new(void *call, void *head, Py_ssize_t n_in, PyObject *empty,
                              PyObject *shapes, PyObject *dtypes, PyObject *on_error,
                              PyObject *keep) {
    if (PyType_Ready(&kiln_direct_type) < 0) return NULL; /* once; then a no-op */
    if (!PyTuple_Check(shapes) || !PyTuple_Check(dtypes) ||
        PyTuple_GET_SIZE(shapes) != PyTuple_GET_SIZE(dtypes)) {
        PyErr_SetString(PyExc_TypeError, "kiln_trampoline_new: shapes and dtypes: tuples of one length");
        return NULL;
    }
    Py_ssize_t n_out = PyTuple_GET_SIZE(shapes);
    if (call == NULL || head == NULL || n_in < 0 || n_in + n_out > KILN_TRAMPOLINE_MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "kiln_trampoline_new: no entry, or too many arguments");
        return NULL;
    }
    kiln_direct *self = PyObject_GC_New(kiln_direct, &kiln_direct_type);
    if (self == NULL) return NULL;
    self->vectorcall = kiln_direct_vectorcall;
    self->call = (kiln_callv_fn)call;
    self->head = head;
    self->n_in = n_in;
    self->n_out = n_out;
    self->empty = Py_NewRef(empty);
    self->shapes = Py_NewRef(shapes);
    self->dtypes = Py_NewRef(dtypes);
    self->on_error = Py_NewRef(on_error);
    self->keep = Py_NewRef(keep);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}
