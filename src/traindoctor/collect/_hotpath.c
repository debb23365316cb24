/* The hot path's hooks in C (docs/design/hot-path.md).
 *
 * Each hook does what its pure-Python twin in autoinstrument.py does and appends the same
 * event tuples ``(clock(), code, arg, thread_id)`` to the same deque; only the Python frames
 * (~0.6 us each in a training loop, docs/overhead.md) are gone. The Python versions stay the
 * reference: tests/collect/test_hotpath.py runs one training loop under both and compares the
 * events. Without a C compiler the package installs without this module and uses them.
 *
 * One type, ``Hook``, in five modes, each made by a module function:
 *
 *   phase(original, phase, append, clock)        a call timed as ``phase`` (backward, save)
 *   next(original, phase, append, clock, after)  a DataLoader iterator's ``__next__``: the
 *       wait is timed as ``phase``, the EXIT carries the batch size, then ``after(it, batch)``
 *       runs while ``after`` is not None (the hook's ``after`` attribute can be set to None)
 *   forward(original, append, clock, busy, models, first_call, grad_enabled)
 *       ``Module.__call__``: an outermost call per thread (a thread id not in the set ``busy``)
 *       is timed with FWD_ENTER/FWD_EXIT; ``first_call(module, *args, **kwargs)`` runs before
 *       the first call of a module whose id is not in ``models``
 *   mark(code, arg, append, clock)               a hook appending one event with ``arg``
 *   mark_id(code, append, clock)                 the same, the arg being id() of the first
 *                                                argument (optimizer step hooks)
 *
 * Hooks are method descriptors, like the Python functions they replace: set on a class they
 * get the instance as their first argument.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <structmember.h>

/* Event codes: the same values as traindoctor/collect/events.py (checked at import there). */
enum { ENTER = 0, EXIT = 1, OPT_END = 3, FWD_ENTER = 4, FWD_EXIT = 5 };

enum Mode { MODE_PHASE, MODE_NEXT, MODE_FORWARD, MODE_MARK, MODE_MARK_ID };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int mode;
    long code;              /* MARK, MARK_ID: the event code */
    PyObject *original;     /* PHASE, NEXT, FORWARD: what is wrapped */
    PyObject *append;       /* the event deque's append */
    PyObject *clock;        /* a callable returning nanoseconds */
    PyObject *arg;          /* PHASE, NEXT: the phase name; MARK: the event arg */
    PyObject *after;        /* NEXT: after(it, batch), or None */
    PyObject *busy;         /* FORWARD: ids of threads inside an outermost call */
    PyObject *models;       /* FORWARD: ids of the modules seen */
    PyObject *first_call;   /* FORWARD */
    PyObject *grad_enabled; /* FORWARD: torch.is_grad_enabled */
    PyObject *dict;         /* __wrapped__, __name__, __doc__ */
} Hook;

static PyObject *str_shape;
static PyObject *str_training;
static PyObject *str_values;

static int
lookup_attr(PyObject *obj, PyObject *name, PyObject **result)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyObject_GetOptionalAttr(obj, name, result);
#else
    return _PyObject_LookupAttr(obj, name, result);
#endif
}

/* The last thread's id as an int, kept (under the GIL) so that a step's ten events make one
 * int object for it, not ten: the training loop's thread calls almost every hook. */
static unsigned long cached_ident;
static PyObject *cached_tid;

static PyObject *
thread_id(void)
{
    unsigned long ident = PyThread_get_thread_ident();
    if (cached_tid == NULL || ident != cached_ident) {
        PyObject *tid = PyLong_FromUnsignedLong(ident);
        if (tid == NULL) {
            return NULL;
        }
        Py_XSETREF(cached_tid, tid);
        cached_ident = ident;
    }
    return Py_NewRef(cached_tid);
}

/* Append (clock(), code, arg, tid). Steals nothing; returns -1 with an exception set. */
static int
emit(Hook *self, long code, PyObject *arg, PyObject *tid)
{
    PyObject *now = PyObject_CallNoArgs(self->clock);
    if (now == NULL) {
        return -1;
    }
    PyObject *event = PyTuple_New(4);
    PyObject *code_obj = PyLong_FromLong(code);
    if (event == NULL || code_obj == NULL) {
        Py_DECREF(now);
        Py_XDECREF(event);
        Py_XDECREF(code_obj);
        return -1;
    }
    Py_INCREF(arg);
    Py_INCREF(tid);
    PyTuple_SET_ITEM(event, 0, now);
    PyTuple_SET_ITEM(event, 1, code_obj);
    PyTuple_SET_ITEM(event, 2, arg);
    PyTuple_SET_ITEM(event, 3, tid);
    PyObject *done = PyObject_CallOneArg(self->append, event);
    Py_DECREF(event);
    if (done == NULL) {
        return -1;
    }
    Py_DECREF(done);
    return 0;
}

/* The closing event of a wrapped call: like a ``finally``, it is appended whether the call
 * returned ``result`` or raised (``result`` NULL); the call's exception is kept. Returns
 * ``result``, or NULL. */
static PyObject *
emit_exit(Hook *self, long code, PyObject *arg, PyObject *tid, PyObject *result)
{
    if (result == NULL) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (emit(self, code, arg, tid) < 0) {
            PyErr_Clear(); /* the job's own exception matters more */
        }
        PyErr_Restore(type, value, traceback);
        return NULL;
    }
    if (emit(self, code, arg, tid) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

/* batch_size_of() of autoinstrument.py: the leading dimension of the first tensor-like in
 * ``batch`` (None if unknown). Never fails: what cannot be read is None. */
static PyObject *
batch_size_of(PyObject *batch)
{
    PyObject *item = Py_NewRef(batch);
    PyObject *result = NULL;
    for (int depth = 0; depth < 4 && result == NULL; depth++) {
        PyObject *shape = NULL;
        if (lookup_attr(item, str_shape, &shape) < 0) {
            break;
        }
        if (shape != NULL) {
            Py_ssize_t n = PyObject_Size(shape);
            if (n > 0) {
                PyObject *first = PySequence_GetItem(shape, 0);
                if (first != NULL) {
                    result = PyNumber_Long(first);
                    Py_DECREF(first);
                }
            }
            Py_DECREF(shape);
            if (result == NULL) {
                result = Py_NewRef(Py_None);
            }
            break;
        }
        PyObject *next = NULL;
        if ((PyList_Check(item) || PyTuple_Check(item)) && PySequence_Size(item) > 0) {
            next = PySequence_GetItem(item, 0);
        }
        else if (PyDict_Check(item) && PyDict_Size(item) > 0) {
            if (PyDict_CheckExact(item)) {
                Py_ssize_t pos = 0;
                PyObject *key, *value;
                if (PyDict_Next(item, &pos, &key, &value)) {
                    next = Py_NewRef(value);
                }
            }
            else { /* a subclass may order its values its own way: ask it */
                PyObject *values = PyObject_CallMethodNoArgs(item, str_values);
                PyObject *it = values == NULL ? NULL : PyObject_GetIter(values);
                next = it == NULL ? NULL : PyIter_Next(it);
                Py_XDECREF(it);
                Py_XDECREF(values);
            }
        }
        if (next == NULL) {
            break;
        }
        Py_SETREF(item, next);
    }
    Py_DECREF(item);
    PyErr_Clear();
    return result == NULL ? Py_NewRef(Py_None) : result;
}

/* ENTER self->arg on this thread; returns the thread's id (NULL with an exception set). */
static PyObject *
enter_phase(Hook *self)
{
    PyObject *tid = thread_id();
    if (tid != NULL && emit(self, ENTER, self->arg, tid) < 0) {
        Py_CLEAR(tid);
    }
    return tid;
}

static PyObject *
call_phase(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *tid = enter_phase(self);
    if (tid == NULL) {
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    result = emit_exit(self, EXIT, Py_None, tid, result);
    Py_DECREF(tid);
    return result;
}

static PyObject *
call_next(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *tid = enter_phase(self);
    if (tid == NULL) {
        return NULL;
    }
    PyObject *batch = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    if (batch == NULL) {
        emit_exit(self, EXIT, Py_None, tid, NULL);
        Py_DECREF(tid);
        return NULL;
    }
    PyObject *size = batch_size_of(batch);
    int failed = emit(self, EXIT, size, tid);
    Py_DECREF(size);
    Py_DECREF(tid);
    if (failed) {
        Py_DECREF(batch);
        return NULL;
    }
    if (self->after != Py_None && PyVectorcall_NARGS(nargsf) >= 1) {
        PyObject *after = Py_NewRef(self->after); /* it may set self.after to None */
        PyObject *done = PyObject_CallFunctionObjArgs(after, args[0], batch, NULL);
        Py_DECREF(after);
        if (done == NULL) {
            Py_DECREF(batch);
            return NULL;
        }
        Py_DECREF(done);
    }
    return batch;
}

static PyObject *
call_forward(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) < 1) { /* let the original say what is wrong */
        return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    }
    PyObject *module = args[0];
    PyObject *tid = thread_id();
    if (tid == NULL) {
        return NULL;
    }
    int inside = PySet_Contains(self->busy, tid);
    if (inside != 0) { /* an inner call: pass through */
        Py_DECREF(tid);
        return inside < 0 ? NULL : PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    }
    if (PySet_Add(self->busy, tid) < 0) {
        Py_DECREF(tid);
        return NULL;
    }
    PyObject *key = PyLong_FromVoidPtr(module);
    PyObject *fwd_arg = NULL;
    PyObject *result = NULL;
    if (key == NULL) {
        goto done;
    }
    int seen = PyDict_Contains(self->models, key);
    if (seen < 0) {
        goto done;
    }
    if (seen == 0) {
        PyObject *r = PyObject_Vectorcall(self->first_call, args, nargsf, kwnames);
        if (r == NULL) {
            goto done;
        }
        Py_DECREF(r);
    }
    PyObject *grad_obj = PyObject_CallNoArgs(self->grad_enabled);
    int grad = grad_obj == NULL ? -1 : PyObject_IsTrue(grad_obj);
    Py_XDECREF(grad_obj);
    if (grad < 0) {
        goto done;
    }
    PyObject *training_obj = PyObject_GetAttr(module, str_training);
    int training = training_obj == NULL ? -1 : PyObject_IsTrue(training_obj);
    Py_XDECREF(training_obj);
    if (training < 0) {
        goto done;
    }
    /* events.fwd_arg: id(model) << 2 | grad << 1 | training */
    uintptr_t address = (uintptr_t)module;
    if ((unsigned long long)address >> 61 == 0) {
        fwd_arg = PyLong_FromUnsignedLongLong(
            (unsigned long long)address << 2 | (unsigned long long)grad << 1 | training);
    }
    else {
        PyObject *two = PyLong_FromLong(2);
        PyObject *shifted = two == NULL ? NULL : PyNumber_Lshift(key, two);
        PyObject *low = PyLong_FromLong(grad << 1 | training);
        fwd_arg = shifted == NULL || low == NULL ? NULL : PyNumber_Or(shifted, low);
        Py_XDECREF(two);
        Py_XDECREF(shifted);
        Py_XDECREF(low);
    }
    if (fwd_arg == NULL || emit(self, FWD_ENTER, fwd_arg, tid) < 0) {
        goto done;
    }
    result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    result = emit_exit(self, FWD_EXIT, key, tid, result);
done:
    if (result == NULL) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (PySet_Discard(self->busy, tid) < 0) {
            PyErr_Clear();
        }
        PyErr_Restore(type, value, traceback);
    }
    else if (PySet_Discard(self->busy, tid) < 0) {
        Py_CLEAR(result);
    }
    Py_XDECREF(fwd_arg);
    Py_XDECREF(key);
    Py_DECREF(tid);
    return result;
}

static PyObject *
call_mark(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *tid = thread_id();
    if (tid == NULL) {
        return NULL;
    }
    PyObject *arg;
    if (self->mode == MODE_MARK_ID) {
        if (PyVectorcall_NARGS(nargsf) < 1) {
            Py_DECREF(tid);
            PyErr_SetString(PyExc_TypeError, "the hook needs the object as its first argument");
            return NULL;
        }
        arg = PyLong_FromVoidPtr(args[0]);
        if (arg == NULL) {
            Py_DECREF(tid);
            return NULL;
        }
    }
    else {
        arg = Py_NewRef(self->arg);
    }
    int failed = emit(self, self->code, arg, tid);
    Py_DECREF(arg);
    Py_DECREF(tid);
    return failed ? NULL : Py_NewRef(Py_None);
}

static PyObject *
hook_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Hook *self = (Hook *)op;
    switch (self->mode) {
    case MODE_PHASE:
        return call_phase(self, args, nargsf, kwnames);
    case MODE_NEXT:
        return call_next(self, args, nargsf, kwnames);
    case MODE_FORWARD:
        return call_forward(self, args, nargsf, kwnames);
    default:
        return call_mark(self, args, nargsf, kwnames);
    }
}

static PyObject *
hook_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

static int
hook_traverse(Hook *self, visitproc visit, void *arg)
{
    Py_VISIT(self->original);
    Py_VISIT(self->append);
    Py_VISIT(self->clock);
    Py_VISIT(self->arg);
    Py_VISIT(self->after);
    Py_VISIT(self->busy);
    Py_VISIT(self->models);
    Py_VISIT(self->first_call);
    Py_VISIT(self->grad_enabled);
    Py_VISIT(self->dict);
    return 0;
}

static int
hook_clear(Hook *self)
{
    Py_CLEAR(self->original);
    Py_CLEAR(self->append);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->arg);
    Py_CLEAR(self->after);
    Py_CLEAR(self->busy);
    Py_CLEAR(self->models);
    Py_CLEAR(self->first_call);
    Py_CLEAR(self->grad_enabled);
    Py_CLEAR(self->dict);
    return 0;
}

static void
hook_dealloc(Hook *self)
{
    PyObject_GC_UnTrack(self);
    hook_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
hook_get_after(Hook *self, void *closure)
{
    return Py_NewRef(self->after == NULL ? Py_None : self->after);
}

static int
hook_set_after(Hook *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        value = Py_None;
    }
    if (value != Py_None && !PyCallable_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "after must be callable or None");
        return -1;
    }
    Py_XSETREF(self->after, Py_NewRef(value));
    return 0;
}

static PyGetSetDef hook_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"after", (getter)hook_get_after, (setter)hook_set_after,
     "NEXT hooks: after(it, batch) run after each batch, or None", NULL},
    {NULL},
};

static PyTypeObject HookType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "traindoctor.collect._hotpath.Hook",
    .tp_doc = "A hot-path hook (made by phase(), next(), forward(), mark() or mark_id()).",
    .tp_basicsize = sizeof(Hook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
        | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(Hook, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = hook_descr_get,
    .tp_dictoffset = offsetof(Hook, dict),
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_getset = hook_getset,
    .tp_traverse = (traverseproc)hook_traverse,
    .tp_clear = (inquiry)hook_clear,
    .tp_dealloc = (destructor)hook_dealloc,
};

static PyObject *
new_hook(int mode, PyObject *append, PyObject *clock)
{
    if (!PyCallable_Check(append) || !PyCallable_Check(clock)) {
        PyErr_SetString(PyExc_TypeError, "append and clock must be callable");
        return NULL;
    }
    Hook *self = PyObject_GC_New(Hook, &HookType);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = hook_vectorcall;
    self->mode = mode;
    self->code = 0;
    self->append = Py_NewRef(append);
    self->clock = Py_NewRef(clock);
    self->original = NULL;
    self->arg = Py_NewRef(Py_None);
    self->after = Py_NewRef(Py_None);
    self->busy = NULL;
    self->models = NULL;
    self->first_call = NULL;
    self->grad_enabled = NULL;
    self->dict = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
check_callable(PyObject *obj, const char *what)
{
    if (!PyCallable_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be callable", what);
        return -1;
    }
    return 0;
}

static PyObject *
make_phase(PyObject *module, PyObject *args)
{
    PyObject *original, *phase, *append, *clock;
    if (!PyArg_ParseTuple(args, "OOOO:phase", &original, &phase, &append, &clock)
        || check_callable(original, "original") < 0) {
        return NULL;
    }
    Hook *self = (Hook *)new_hook(MODE_PHASE, append, clock);
    if (self != NULL) {
        self->original = Py_NewRef(original);
        Py_SETREF(self->arg, Py_NewRef(phase));
    }
    return (PyObject *)self;
}

static PyObject *
make_next(PyObject *module, PyObject *args)
{
    PyObject *original, *phase, *append, *clock, *after;
    if (!PyArg_ParseTuple(args, "OOOOO:next", &original, &phase, &append, &clock, &after)
        || check_callable(original, "original") < 0) {
        return NULL;
    }
    Hook *self = (Hook *)new_hook(MODE_NEXT, append, clock);
    if (self == NULL) {
        return NULL;
    }
    self->original = Py_NewRef(original);
    Py_SETREF(self->arg, Py_NewRef(phase));
    if (hook_set_after(self, after, NULL) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyObject *
make_forward(PyObject *module, PyObject *args)
{
    PyObject *original, *append, *clock, *busy, *models, *first_call, *grad_enabled;
    if (!PyArg_ParseTuple(args, "OOOO!O!OO:forward", &original, &append, &clock, &PySet_Type,
                          &busy, &PyDict_Type, &models, &first_call, &grad_enabled)
        || check_callable(original, "original") < 0
        || check_callable(first_call, "first_call") < 0
        || check_callable(grad_enabled, "grad_enabled") < 0) {
        return NULL;
    }
    Hook *self = (Hook *)new_hook(MODE_FORWARD, append, clock);
    if (self != NULL) {
        self->original = Py_NewRef(original);
        self->busy = Py_NewRef(busy);
        self->models = Py_NewRef(models);
        self->first_call = Py_NewRef(first_call);
        self->grad_enabled = Py_NewRef(grad_enabled);
    }
    return (PyObject *)self;
}

static PyObject *
make_mark(PyObject *module, PyObject *args)
{
    long code;
    PyObject *arg, *append, *clock;
    if (!PyArg_ParseTuple(args, "lOOO:mark", &code, &arg, &append, &clock)) {
        return NULL;
    }
    Hook *self = (Hook *)new_hook(MODE_MARK, append, clock);
    if (self != NULL) {
        self->code = code;
        Py_SETREF(self->arg, Py_NewRef(arg));
    }
    return (PyObject *)self;
}

static PyObject *
make_mark_id(PyObject *module, PyObject *args)
{
    long code;
    PyObject *append, *clock;
    if (!PyArg_ParseTuple(args, "lOO:mark_id", &code, &append, &clock)) {
        return NULL;
    }
    Hook *self = (Hook *)new_hook(MODE_MARK_ID, append, clock);
    if (self != NULL) {
        self->code = code;
    }
    return (PyObject *)self;
}

static PyObject *
py_batch_size_of(PyObject *module, PyObject *batch)
{
    return batch_size_of(batch);
}

static PyMethodDef hotpath_methods[] = {
    {"phase", make_phase, METH_VARARGS,
     "phase(original, phase, append, clock): a call of original timed as phase."},
    {"next", make_next, METH_VARARGS,
     "next(original, phase, append, clock, after): a timed iterator __next__."},
    {"forward", make_forward, METH_VARARGS,
     "forward(original, append, clock, busy, models, first_call, grad_enabled): a timed "
     "Module.__call__."},
    {"mark", make_mark, METH_VARARGS, "mark(code, arg, append, clock): a hook appending one "
                                      "event."},
    {"mark_id", make_mark_id, METH_VARARGS,
     "mark_id(code, append, clock): a hook appending one event with id(first argument)."},
    {"batch_size_of", py_batch_size_of, METH_O,
     "The leading dimension of the first tensor-like in batch (None if unknown)."},
    {NULL},
};

static int
hotpath_exec(PyObject *module)
{
    if (PyType_Ready(&HookType) < 0 || PyModule_AddType(module, &HookType) < 0) {
        return -1;
    }
    str_shape = PyUnicode_InternFromString("shape");
    str_training = PyUnicode_InternFromString("training");
    str_values = PyUnicode_InternFromString("values");
    if (str_shape == NULL || str_training == NULL || str_values == NULL) {
        return -1;
    }
    if (PyModule_AddIntConstant(module, "ENTER", ENTER) < 0
        || PyModule_AddIntConstant(module, "EXIT", EXIT) < 0
        || PyModule_AddIntConstant(module, "OPT_END", OPT_END) < 0
        || PyModule_AddIntConstant(module, "FWD_ENTER", FWD_ENTER) < 0
        || PyModule_AddIntConstant(module, "FWD_EXIT", FWD_EXIT) < 0) {
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot hotpath_slots[] = {
    {Py_mod_exec, hotpath_exec},
    {0, NULL},
};

static struct PyModuleDef hotpath_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "traindoctor.collect._hotpath",
    .m_doc = "The hot path's hooks in C (see the comment at the top of _hotpath.c).",
    .m_size = 0,
    .m_methods = hotpath_methods,
    .m_slots = hotpath_slots,
};

PyMODINIT_FUNC
PyInit__hotpath(void)
{
    return PyModuleDef_Init(&hotpath_module);
}
