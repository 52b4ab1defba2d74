"""The C and assembly sources linked into every shared library of generated code.

:mod:`kiln_numba._shared_library` compiles them with the function's object code: the
trampolines and exception cells (:func:`assembly`), Numba's ``numba_unpickle`` memoized
in C (:data:`UNPICKLE_C`) and the entry point that checks argument types in C
(:data:`ENTRY_C`), with the NumPy flags (:data:`ARRAY_FLAGS`) it requires per layout.
"""

from __future__ import annotations

from collections.abc import Sequence

#: The C-API functions Numba's code passes exception types to (``PyExc_*``, see
#: :func:`assembly`): as first argument, or second (``PyNumber_AsSsize_t``).
TAKE_EXCEPTIONS = frozenset(
    {"PyErr_SetString", "PyErr_Format", "PyErr_SetObject", "PyErr_SetNone", "PyNumber_AsSsize_t"}
)


def assembly(helpers: Sequence[str], wrapped: Sequence[str], cells: Sequence[str]) -> str:
    """Return the assembly (x86-64, GNU as) of the library's trampolines and cells.

    - Each of ``helpers`` (a Numba runtime function) jumps through its slot of
      ``kiln_slots``, filled at load with the function's address.
    - Numba's code takes the address of the symbol ``PyExc_<name>`` as the exception
      type itself (its JIT linker maps that symbol to the object), where CPython's
      ``PyExc_<name>`` is a variable holding a pointer to it. So each of ``cells`` is a
      hidden cell of ``kiln_cells``, filled at load with the type's address, and each of
      ``wrapped`` (the C-API functions of :data:`TAKE_EXCEPTIONS`) replaces a first or
      second argument that points at a cell by the cell's content before it jumps to
      CPython's function (its slot follows the helpers'). Only ``%r11`` and the flags
      change, so variadic calls (``PyErr_Format``) pass through.
    """
    lines = [".text"]

    def function(symbol: str, hidden: bool) -> list[str]:
        head = [f".globl {symbol}", f".type {symbol},@function"]
        return [*head, *([f".hidden {symbol}"] if hidden else []), f"{symbol}:"]

    for i, symbol in enumerate(helpers):
        lines += function(symbol, hidden=False)
        lines += ["    movq kiln_slots@GOTPCREL(%rip), %r11", f"    jmpq *{8 * i}(%r11)"]
    for k, symbol in enumerate(wrapped):
        lines += function(symbol, hidden=True)
        for register in ("%rdi", "%rsi"):
            lines += [
                "    movq kiln_cells@GOTPCREL(%rip), %r11",
                f"    cmpq %r11, {register}",
                "    jb 1f",
                f"    addq ${8 * max(len(cells), 1)}, %r11",
                f"    cmpq %r11, {register}",
                "    jae 1f",
                f"    movq ({register}), {register}",
                "1:",
            ]
        lines += [
            "    movq kiln_slots@GOTPCREL(%rip), %r11",
            f"    jmpq *{8 * (len(helpers) + k)}(%r11)",
        ]
    lines.append(".bss")
    for table, size in (("kiln_slots", len(helpers) + len(wrapped)), ("kiln_cells", len(cells))):
        lines += [f".globl {table}", f".type {table},@object", ".p2align 3", f"{table}:"]
        lines.append(f"    .zero {8 * max(size, 1)}")
    for i, symbol in enumerate(cells):
        lines += [f".globl {symbol}", f".hidden {symbol}", f".set {symbol}, kiln_cells + {8 * i}"]
    lines.append('.section .note.GNU-stack,"",@progbits')
    return "\n".join(lines) + "\n"


#: Numba's ``numba_unpickle``, which the wrapper calls at every call for objects it needs
#: (``numpy.ndarray``, to box outputs), memoized per constant in C: Numba's goes through
#: ``numba.core.serialize`` (importing Numba) and a Python call each time. It returns a
#: new reference, as Numba's does; the GIL is held (the wrapper runs in a Python call).
UNPICKLE_C = r"""
typedef struct _object PyObject;
PyObject *PyImport_ImportModule(const char *name);
PyObject *PyObject_GetAttrString(PyObject *o, const char *name);
PyObject *PyBytes_FromStringAndSize(const char *data, long n);
PyObject *PyObject_CallFunctionObjArgs(PyObject *f, ...);
void Py_IncRef(PyObject *o);
void Py_DecRef(PyObject *o);

#define KILN_MEMO 256
static const char *memo_key[KILN_MEMO];
static PyObject *memo_value[KILN_MEMO];
static int memo_size;
static PyObject *loads;

PyObject *numba_unpickle(const char *data, int n, const char *hashed) {
    (void)hashed;
    for (int i = 0; i < memo_size; i++) {
        if (memo_key[i] == data) {
            Py_IncRef(memo_value[i]);
            return memo_value[i];
        }
    }
    if (loads == 0) {
        PyObject *pickle = PyImport_ImportModule("pickle");
        if (pickle == 0) return 0;
        loads = PyObject_GetAttrString(pickle, "loads");
        Py_DecRef(pickle);
        if (loads == 0) return 0;
    }
    PyObject *buffer = PyBytes_FromStringAndSize(data, n);
    if (buffer == 0) return 0;
    PyObject *obj = PyObject_CallFunctionObjArgs(loads, buffer, (PyObject *)0);
    Py_DecRef(buffer);
    if (obj != 0 && memo_size < KILN_MEMO) {
        Py_IncRef(obj);
        memo_key[memo_size] = data;
        memo_value[memo_size++] = obj;
    }
    return obj;
}
"""
#: The library's entry point: checks the arguments' types in C (what Numba's dispatcher
#: does before it picks a compiled version), then calls Numba's CPython wrapper, or returns
#: ``NotImplemented`` for arguments of other types (the caller gives them to Numba). The
#: layouts are CPython's (object header, tuple) and NumPy's array object (stable since
#: NumPy 1.7, NumPy 2 included); :mod:`kiln_numba._shared_library` checks them on a
#: probe array before it uses the entry. The tables are filled at load, for up to 256 arguments.
ENTRY_C = r"""
typedef long Py_ssize_t;
typedef struct { Py_ssize_t refcount; void *type; } Object;
typedef struct { Object head; Py_ssize_t size; Object *items[1]; } Tuple;
typedef struct {
    Object head; char *data; int nd; Py_ssize_t *dimensions; Py_ssize_t *strides;
    Object *base; Object *descr; int flags;
} Array;
typedef Object *(*Wrapper)(Object *closure, Object *args, Object *kws);

#define KILN_MAX_ARGS 256
Wrapper kiln_wrapper;
void *kiln_array_type;
Object *kiln_not_implemented;
long kiln_nargs;
Object *kiln_descr[KILN_MAX_ARGS];
int kiln_nd[KILN_MAX_ARGS];
int kiln_flags[KILN_MAX_ARGS];

static int kiln_accepts(Object *const *items, long n) {
    long i;
    for (i = 0; i < n; i++) {
        Array *a = (Array *)items[i];
        if (a->head.type != kiln_array_type || a->nd != kiln_nd[i]
            || a->descr != kiln_descr[i] || (a->flags & kiln_flags[i]) != kiln_flags[i])
            return 0;
    }
    return 1;
}

static Object *kiln_other(void) {
    Py_IncRef((PyObject *)kiln_not_implemented);
    return kiln_not_implemented;
}

Object *kiln_checked_call(Object *closure, Object *args, Object *kws) {
    Tuple *t = (Tuple *)args;
    if (kws == 0 && t->size == kiln_nargs && kiln_accepts(t->items, kiln_nargs))
        return kiln_wrapper(closure, args, kws);
    return kiln_other();
}

/* A Function's direct calls: the inputs only (METH_FASTCALL); ``self`` is the tuple
 * (Numba's closure, the constants), which are appended. Returns the outputs as a list,
 * or NotImplemented for inputs of other types. */
Object *PyTuple_New(Py_ssize_t size);
Object *PySequence_List(Object *o);
typedef struct { const char *name; void *meth; int flags; const char *doc; } MethodDef;
Object *PyCFunction_NewEx(MethodDef *def, Object *self, Object *module);

static Object *kiln_direct(Object *self, Object *const *args, Py_ssize_t nargs) {
    Tuple *bound = (Tuple *)self;
    Tuple *consts = (Tuple *)bound->items[1];
    long i;
    if (nargs + consts->size != kiln_nargs || !kiln_accepts(args, nargs)) return kiln_other();
    Tuple *full = (Tuple *)PyTuple_New(kiln_nargs);
    if (full == 0) return 0;
    for (i = 0; i < nargs; i++) {
        Py_IncRef((PyObject *)args[i]);
        full->items[i] = args[i];
    }
    for (i = 0; i < consts->size; i++) {
        Py_IncRef((PyObject *)consts->items[i]);
        full->items[nargs + i] = consts->items[i];
    }
    Object *result = kiln_wrapper(bound->items[0], (Object *)full, 0);
    Py_DecRef((PyObject *)full);
    if (result == 0) return 0;
    Object *list = PySequence_List(result);
    Py_DecRef((PyObject *)result);
    return list;
}

static MethodDef kiln_direct_def = {
    "kiln_fn", (void *)kiln_direct, 0x0080 /* METH_FASTCALL */,
    "kiln_fn(*inputs): the outputs as a list (the constants appended), or NotImplemented",
};

/* Return a new reference to the direct entry bound to Numba's closure and constants. */
Object *kiln_bind(Object *closure, Object *constants) {
    Tuple *bound = (Tuple *)PyTuple_New(2);
    if (bound == 0) return 0;
    Py_IncRef((PyObject *)closure);
    Py_IncRef((PyObject *)constants);
    bound->items[0] = closure;
    bound->items[1] = constants;
    Object *fn = PyCFunction_NewEx(&kiln_direct_def, (Object *)bound, 0);
    Py_DecRef((PyObject *)bound);
    return fn;
}

/* For the loader's check of the layouts: an array's nd, flags and descr address. */
long kiln_probe(Object *obj, long what) {
    Array *a = (Array *)obj;
    if (what == 0) return a->nd;
    if (what == 1) return a->flags;
    if (what == 2) return (long)a->descr;
    return (long)a->head.type;
}
"""
#: NumPy's array flags the entry requires per layout (``NPY_ARRAY_ALIGNED`` always).
ARRAY_FLAGS = {"C": 0x0001 | 0x0100, "F": 0x0002 | 0x0100, "A": 0x0100}

#: The runtime functions the library defines itself (the others are trampolines).
DEFINED = frozenset({"numba_unpickle"})

#: The most arguments the entry checks (``KILN_MAX_ARGS`` of :data:`ENTRY_C`).
MAX_ARGS = 256
