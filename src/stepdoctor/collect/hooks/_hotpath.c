/* The hot path's hooks in C (docs/design/hot-path.md).
 *
 * Each hook does what its pure-Python twin in autoinstrument.py does and appends the same
 * events ``(clock(), code, arg, thread_id)``; only the Python frames (~0.6 us each in a
 * training loop, docs/overhead.md) are gone. The Python versions stay the reference:
 * tests/collect/test_hotpath.py runs one training loop under both and compares the events.
 * Without a C compiler the package installs without this module and uses them.
 *
 * ``Events`` is the buffer the events go to (events.py's EventQueue being its twin): where a
 * hook's ``append`` is an ``Events``' own, the hook writes a C struct into it (_events.h) and
 * makes no Python object at all (no tuple, no int for the time, the thread or an id), and
 * where its clock is ``time.perf_counter_ns`` it reads CLOCK_MONOTONIC itself, as that
 * function does on Linux. No object made means no work for the garbage collector: a deque
 * of tuples made the job's collector run ~77 times a second on a tiny training loop that
 * never ran it otherwise (docs/overhead.md). _reduce.c reads the structs directly.
 *
 * One type, ``Hook``, in six modes, each made by a module function:
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
 *   gc(append, clock)                            a ``gc.callbacks`` entry: GC_START or
 *                                                GC_STOP with the generation (gcwatch.py)
 *
 * Hooks are method descriptors, like the Python functions they replace: set on a class they
 * get the instance as their first argument.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <structmember.h>
#include <time.h>

#include "_events.h"

/* Event codes: the same values as stepdoctor/collect/hooks/events.py (checked at import there). */
enum { ENTER = 0, EXIT = 1, OPT_END = 3, FWD_ENTER = 4, FWD_EXIT = 5, GC_START = 6, GC_STOP = 7 };

enum Mode { MODE_PHASE, MODE_NEXT, MODE_FORWARD, MODE_MARK, MODE_MARK_ID, MODE_GC };

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
    PyObject *buffer;       /* append's Events, when append is an Events' append; or NULL */
    int fast_clock;         /* clock is time.perf_counter_ns */
    PyObject *last_module;  /* FORWARD: the last module found in models (compared only) */
} Hook;

static PyObject *str_shape;
static PyObject *perf_counter_ns; /* time.perf_counter_ns, read directly where it is the clock */
static PyObject *str_training;
static PyObject *str_values;
static PyObject *str_generation;

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

/* -- the event buffer -------------------------------------------------------------------- */

/* A take()n array of at most this many events is kept for the next take (a flush's events at
 * ~10 a step of ~1 ms: ~5,000); a bigger one, after a burst of short steps, is freed. */
#define EVENTS_KEPT 65536

typedef struct {
    PyObject_HEAD
    TdEvent *items; /* appended since the last take, oldest first */
    Py_ssize_t n, cap;
    TdEvent *spare; /* an array given back, reused by the next append after a take */
    Py_ssize_t spare_cap;
} Events;

static void
release_args(TdEvent *items, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i].kind == TD_ARG_OBJ) {
            Py_CLEAR(items[i].arg.obj);
        }
    }
}

/* Append one event; ``obj`` (TD_ARG_OBJ) gets a new reference. -1 with MemoryError set. */
static int
events_push(Events *self, long long t, int code, int kind, long long ival, PyObject *obj,
            unsigned long long tid)
{
    if (self->n == self->cap) {
        if (self->items == NULL && self->spare != NULL) {
            self->items = self->spare;
            self->cap = self->spare_cap;
            self->spare = NULL;
            self->spare_cap = 0;
        }
        if (self->n == self->cap) {
            Py_ssize_t cap = self->cap ? 2 * self->cap : 1024;
            TdEvent *grown = PyMem_Realloc(self->items, cap * sizeof(TdEvent));
            if (grown == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            self->items = grown;
            self->cap = cap;
        }
    }
    TdEvent *event = &self->items[self->n++];
    event->t = t;
    event->tid = tid;
    event->code = code;
    event->kind = kind;
    if (kind == TD_ARG_OBJ) {
        event->arg.obj = Py_NewRef(obj);
    }
    else {
        event->arg.i = kind == TD_ARG_INT ? ival : 0;
    }
    return 0;
}

/* How an object arg is kept (TD_ARG_*): None, an int of 64 bits (its value in *value), or
 * the object itself (anything else: a str, a bool, a bigger int...). */
static int
arg_kind(PyObject *arg, long long *value)
{
    if (arg == Py_None) {
        return TD_ARG_NONE;
    }
    if (PyLong_CheckExact(arg)) {
        int overflow;
        *value = PyLong_AsLongLongAndOverflow(arg, &overflow);
        if (!overflow && !(*value == -1 && PyErr_Occurred())) {
            return TD_ARG_INT;
        }
        PyErr_Clear();
    }
    return TD_ARG_OBJ;
}

/* Append an event whose arg is an object (arg_kind). */
static int
events_push_object(Events *self, long long t, int code, PyObject *arg, unsigned long long tid)
{
    long long value = 0;
    int kind = arg_kind(arg, &value);
    return events_push(self, t, code, kind, value, kind == TD_ARG_OBJ ? arg : NULL, tid);
}

static TdEvent *
events_take(PyObject *op, Py_ssize_t *n)
{
    Events *self = (Events *)op;
    TdEvent *taken = self->n ? self->items : NULL;
    *n = self->n;
    if (taken != NULL) {
        self->items = NULL;
        self->n = self->cap = 0;
    }
    return taken;
}

static void
events_give_back(PyObject *op, TdEvent *taken, Py_ssize_t n)
{
    Events *self = (Events *)op;
    if (taken == NULL) {
        return;
    }
    release_args(taken, n);
    /* the array's capacity is not known here: a kept one is at least n long, and pushing
     * into it starts over at the capacity it is told */
    if (self->spare == NULL && n <= EVENTS_KEPT) {
        self->spare = taken;
        self->spare_cap = n;
    }
    else {
        PyMem_Free(taken);
    }
}

static PyObject *
event_tuple(const TdEvent *event)
{
    PyObject *arg;
    if (event->kind == TD_ARG_OBJ) {
        arg = Py_NewRef(event->arg.obj);
    }
    else if (event->kind == TD_ARG_INT) {
        arg = PyLong_FromLongLong(event->arg.i);
    }
    else {
        arg = Py_NewRef(Py_None);
    }
    PyObject *tuple = PyTuple_New(4);
    PyObject *t = PyLong_FromLongLong(event->t);
    PyObject *code = PyLong_FromLong(event->code);
    PyObject *tid = PyLong_FromUnsignedLongLong(event->tid);
    if (tuple == NULL || arg == NULL || t == NULL || code == NULL || tid == NULL) {
        Py_XDECREF(tuple);
        Py_XDECREF(arg);
        Py_XDECREF(t);
        Py_XDECREF(code);
        Py_XDECREF(tid);
        return NULL;
    }
    PyTuple_SET_ITEM(tuple, 0, t);
    PyTuple_SET_ITEM(tuple, 1, code);
    PyTuple_SET_ITEM(tuple, 2, arg);
    PyTuple_SET_ITEM(tuple, 3, tid);
    return tuple;
}

static PyObject *
events_append(Events *self, PyObject *event)
{
    if (!PyTuple_Check(event) || PyTuple_GET_SIZE(event) != 4) {
        PyErr_SetString(PyExc_ValueError, "an event is a tuple (t_ns, code, arg, thread_id)");
        return NULL;
    }
    long long t = PyLong_AsLongLong(PyTuple_GET_ITEM(event, 0));
    if (t == -1 && PyErr_Occurred()) {
        return NULL;
    }
    int overflow;
    long code = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(event, 1), &overflow);
    if (code == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (overflow || code < INT_MIN || code > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "an event's code must fit a C int");
        return NULL;
    }
    unsigned long long tid = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(event, 3));
    if (tid == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    if (events_push_object(self, t, (int)code, PyTuple_GET_ITEM(event, 2), tid) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
events_take_list(Events *self, PyObject *Py_UNUSED(ignored))
{
    Py_ssize_t n;
    TdEvent *taken = events_take((PyObject *)self, &n);
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list != NULL && i < n; i++) {
        PyObject *tuple = event_tuple(&taken[i]);
        if (tuple == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, tuple);
    }
    events_give_back((PyObject *)self, taken, n);
    return list;
}

static PyObject *
events_clear_method(Events *self, PyObject *Py_UNUSED(ignored))
{
    Py_ssize_t n;
    TdEvent *taken = events_take((PyObject *)self, &n);
    events_give_back((PyObject *)self, taken, n);
    Py_RETURN_NONE;
}

static Py_ssize_t
events_length(Events *self)
{
    return self->n;
}

static PyObject *
events_sizeof(Events *self, PyObject *Py_UNUSED(ignored))
{
    /* the arrays held (a kept spare's size known at least) */
    return PyLong_FromSsize_t(Py_TYPE(self)->tp_basicsize
                              + (self->cap + self->spare_cap) * (Py_ssize_t)sizeof(TdEvent));
}

static PyObject *
events_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) || (kwargs != NULL && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "Events() takes no arguments");
        return NULL;
    }
    return type->tp_alloc(type, 0); /* zeroed: no events, no arrays */
}

static int
events_traverse(Events *self, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < self->n; i++) {
        if (self->items[i].kind == TD_ARG_OBJ) {
            Py_VISIT(self->items[i].arg.obj);
        }
    }
    return 0;
}

static int
events_clear(Events *self)
{
    /* arguments are released before the count drops: a decref may run code that appends */
    while (self->n > 0) {
        Py_ssize_t n;
        TdEvent *taken = events_take((PyObject *)self, &n);
        events_give_back((PyObject *)self, taken, n);
    }
    return 0;
}

static void
events_dealloc(Events *self)
{
    PyObject_GC_UnTrack(self);
    events_clear(self);
    PyMem_Free(self->items);
    PyMem_Free(self->spare);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef events_methods[] = {
    {"append", (PyCFunction)events_append, METH_O,
     "append(event): add an event (t_ns, code, arg, thread_id)."},
    {"take", (PyCFunction)events_take_list, METH_NOARGS,
     "take(): the events appended so far, oldest first, as tuples; the buffer is left empty."},
    {"clear", (PyCFunction)events_clear_method, METH_NOARGS, "clear(): drop every event."},
    {"__sizeof__", (PyCFunction)events_sizeof, METH_NOARGS, "Bytes held, arrays included."},
    {NULL},
};

static PySequenceMethods events_as_sequence = {
    .sq_length = (lenfunc)events_length,
};

static PyTypeObject EventsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepdoctor.collect.hooks._hotpath.Events",
    .tp_doc = "Events(): the hot path's events, kept as C structs until taken (events.py).",
    .tp_basicsize = sizeof(Events),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = events_new,
    .tp_traverse = (traverseproc)events_traverse,
    .tp_clear = (inquiry)events_clear,
    .tp_dealloc = (destructor)events_dealloc,
    .tp_methods = events_methods,
    .tp_as_sequence = &events_as_sequence,
};

static TdEventsApi events_api = {
    .type = &EventsType,
    .take = events_take,
    .give_back = events_give_back,
};

/* -- emitting events ---------------------------------------------------------------------- */

/* Now on the hook's clock. */
static int
hook_now(Hook *self, long long *t)
{
#ifdef __linux__
    if (self->fast_clock) { /* time.perf_counter_ns is CLOCK_MONOTONIC on Linux */
        struct timespec ts;
        if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0) {
            *t = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
            return 0;
        }
    }
#endif
    PyObject *now = PyObject_CallNoArgs(self->clock);
    if (now == NULL) {
        return -1;
    }
    *t = PyLong_AsLongLong(now);
    Py_DECREF(now);
    return *t == -1 && PyErr_Occurred() ? -1 : 0;
}

/* Append (clock(), code, arg, this thread's id), arg being None, the int ``ival`` or ``obj``
 * (TD_ARG_*): as a struct into an ``Events`` buffer, else as a tuple through ``append``.
 * Steals nothing; returns -1 with an exception set. */
static int
emit(Hook *self, long code, int kind, long long ival, PyObject *obj)
{
    long long t;
    if (self->buffer != NULL) {
        if (hook_now(self, &t) < 0) {
            return -1;
        }
        return events_push((Events *)self->buffer, t, (int)code, kind, ival, obj,
                           PyThread_get_thread_ident());
    }
    PyObject *tid = thread_id();
    if (tid == NULL || hook_now(self, &t) < 0) {
        Py_XDECREF(tid);
        return -1;
    }
    PyObject *arg = kind == TD_ARG_INT   ? PyLong_FromLongLong(ival)
                    : kind == TD_ARG_OBJ ? Py_NewRef(obj)
                                         : Py_NewRef(Py_None);
    PyObject *now = PyLong_FromLongLong(t);
    PyObject *code_obj = PyLong_FromLong(code);
    PyObject *event = PyTuple_New(4);
    if (arg == NULL || now == NULL || code_obj == NULL || event == NULL) {
        Py_XDECREF(arg);
        Py_XDECREF(now);
        Py_XDECREF(code_obj);
        Py_XDECREF(event);
        Py_DECREF(tid);
        return -1;
    }
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

/* emit() with an object arg (arg_kind). */
static int
emit_object(Hook *self, long code, PyObject *arg)
{
    long long value = 0;
    int kind = arg_kind(arg, &value);
    return emit(self, code, kind, value, kind == TD_ARG_OBJ ? arg : NULL);
}

/* The closing event of a wrapped call: like a ``finally``, it is appended whether the call
 * returned ``result`` or raised (``result`` NULL); the call's exception is kept. Returns
 * ``result``, or NULL. */
static PyObject *
emit_exit(Hook *self, long code, int kind, long long ival, PyObject *result)
{
    if (result == NULL) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (emit(self, code, kind, ival, NULL) < 0) {
            PyErr_Clear(); /* the job's own exception matters more */
        }
        PyErr_Restore(type, value, traceback);
        return NULL;
    }
    if (emit(self, code, kind, ival, NULL) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

static PyObject *
batch_size_of(PyObject *batch)
{
    PyObject *item = Py_NewRef(batch);
    PyObject *result = NULL;
    for (int depth = 0; depth < 4 && result == NULL; depth++) {
        PyObject *shape = NULL;
        /* an exact list, tuple or dict has no ``shape``: no failed lookup (and its exception)
         * on the way to the tensor, at each batch */
        int plain = PyList_CheckExact(item) || PyTuple_CheckExact(item) || PyDict_CheckExact(item);
        if (!plain && lookup_attr(item, str_shape, &shape) < 0) {
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

/* Append ``code`` with ``id(obj) << shift | low`` (events.fwd_arg for FWD_ENTER, the id for
 * FWD_EXIT and OPT_END): an int of 64 bits where it fits, as on every platform CPython runs
 * on, else a Python int. */
static int
emit_id(Hook *self, long code, PyObject *obj, int shift, long low)
{
    unsigned long long address = (unsigned long long)(uintptr_t)obj;
    if (address >> (62 - shift) == 0) {
        return emit(self, code, TD_ARG_INT, (long long)(address << shift | low), NULL);
    }
    PyObject *id = PyLong_FromVoidPtr(obj);
    PyObject *by = PyLong_FromLong(shift);
    PyObject *shifted = id == NULL || by == NULL ? NULL : PyNumber_Lshift(id, by);
    PyObject *bits = PyLong_FromLong(low);
    PyObject *arg = shifted == NULL || bits == NULL ? NULL : PyNumber_Or(shifted, bits);
    int rc = arg == NULL ? -1 : emit(self, code, TD_ARG_OBJ, 0, arg);
    Py_XDECREF(id);
    Py_XDECREF(by);
    Py_XDECREF(shifted);
    Py_XDECREF(bits);
    Py_XDECREF(arg);
    return rc;
}

static PyObject *
call_phase(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (emit_object(self, ENTER, self->arg) < 0) {
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    return emit_exit(self, EXIT, TD_ARG_NONE, 0, result);
}

static PyObject *
call_next(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (emit_object(self, ENTER, self->arg) < 0) {
        return NULL;
    }
    PyObject *batch = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    if (batch == NULL) {
        return emit_exit(self, EXIT, TD_ARG_NONE, 0, NULL);
    }
    PyObject *size = batch_size_of(batch);
    int failed = emit_object(self, EXIT, size);
    Py_DECREF(size);
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

/* Whether ``module`` was seen before (its id in ``models``, which only ever grows; the last
 * module seen is remembered so that a loop's model costs no lookup). 1, 0 or -1. */
static int
seen_before(Hook *self, PyObject *module)
{
    if (module == self->last_module) {
        return 1;
    }
    PyObject *key = PyLong_FromVoidPtr(module);
    if (key == NULL) {
        return -1;
    }
    int seen = PyDict_Contains(self->models, key);
    Py_DECREF(key);
    if (seen == 1) {
        self->last_module = module; /* compared, never dereferenced */
    }
    return seen;
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
    PyObject *result = NULL;
    int seen = seen_before(self, module);
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
    /* events.fwd_arg: id(model) << 2 | grad << 1 | training */
    if (training < 0 || emit_id(self, FWD_ENTER, module, 2, grad << 1 | training) < 0) {
        goto done;
    }
    result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    if (result == NULL) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (emit_id(self, FWD_EXIT, module, 0, 0) < 0) {
            PyErr_Clear(); /* the job's own exception matters more */
        }
        PyErr_Restore(type, value, traceback);
    }
    else if (emit_id(self, FWD_EXIT, module, 0, 0) < 0) {
        Py_CLEAR(result);
    }
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
    Py_DECREF(tid);
    return result;
}

static PyObject *
call_mark(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    int failed;
    if (self->mode == MODE_MARK_ID) {
        if (PyVectorcall_NARGS(nargsf) < 1) {
            PyErr_SetString(PyExc_TypeError, "the hook needs the object as its first argument");
            return NULL;
        }
        failed = emit_id(self, self->code, args[0], 0, 0);
    }
    else {
        failed = emit_object(self, self->code, self->arg);
    }
    return failed ? NULL : Py_NewRef(Py_None);
}

/* A ``gc.callbacks`` entry, called as (phase, info) by the collector before and after each
 * collection: GC_START (phase "start") or GC_STOP with ``info["generation"]``, as gcwatch.py's
 * Python callback appends them. The collector makes ``info`` for any callback; what this
 * saves is the callback's Python frame and its event tuple (docs/overhead.md). */
static PyObject *
call_gc(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "a gc callback takes (phase, info)");
        return NULL;
    }
    int code = PyUnicode_CompareWithASCIIString(args[0], "start") == 0 ? GC_START : GC_STOP;
    PyObject *generation = PyObject_GetItem(args[1], str_generation);
    if (generation == NULL) {
        return NULL;
    }
    long long value = 0;
    int kind = arg_kind(generation, &value);
    int failed = emit(self, code, kind, value, kind == TD_ARG_OBJ ? generation : NULL);
    Py_DECREF(generation);
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
    case MODE_GC:
        return call_gc(self, args, nargsf, kwnames);
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
    Py_VISIT(self->buffer);
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
    Py_CLEAR(self->buffer);
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
    .tp_name = "stepdoctor.collect.hooks._hotpath.Hook",
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
    self->buffer = NULL;
    if (PyCFunction_Check(append) && PyCFunction_GET_FUNCTION(append) == (PyCFunction)events_append
        && PyCFunction_GET_SELF(append) != NULL
        && Py_IS_TYPE(PyCFunction_GET_SELF(append), &EventsType)) {
        self->buffer = Py_NewRef(PyCFunction_GET_SELF(append)); /* pushed to directly */
    }
    self->fast_clock = clock == perf_counter_ns;
    self->last_module = NULL;
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
make_gc(PyObject *module, PyObject *args)
{
    PyObject *append, *clock;
    if (!PyArg_ParseTuple(args, "OO:gc", &append, &clock)) {
        return NULL;
    }
    return new_hook(MODE_GC, append, clock);
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
    {"gc", make_gc, METH_VARARGS,
     "gc(append, clock): a gc.callbacks entry appending GC_START/GC_STOP with the generation."},
    {"batch_size_of", py_batch_size_of, METH_O,
     "The leading dimension of the first tensor-like in batch (None if unknown)."},
    {NULL},
};

static int
hotpath_exec(PyObject *module)
{
    if (PyType_Ready(&HookType) < 0 || PyModule_AddType(module, &HookType) < 0
        || PyType_Ready(&EventsType) < 0 || PyModule_AddType(module, &EventsType) < 0) {
        return -1;
    }
    PyObject *api = PyCapsule_New(&events_api, TD_EVENTS_CAPSULE, NULL);
    if (api == NULL || PyModule_AddObject(module, "_events_api", api) < 0) {
        Py_XDECREF(api);
        return -1;
    }
    if (perf_counter_ns == NULL) {
        PyObject *time = PyImport_ImportModule("time");
        perf_counter_ns = time == NULL ? NULL : PyObject_GetAttrString(time, "perf_counter_ns");
        Py_XDECREF(time);
        if (perf_counter_ns == NULL) {
            return -1;
        }
    }
    str_shape = PyUnicode_InternFromString("shape");
    str_training = PyUnicode_InternFromString("training");
    str_values = PyUnicode_InternFromString("values");
    str_generation = PyUnicode_InternFromString("generation");
    if (str_shape == NULL || str_training == NULL || str_values == NULL
        || str_generation == NULL) {
        return -1;
    }
    if (PyModule_AddIntConstant(module, "ENTER", ENTER) < 0
        || PyModule_AddIntConstant(module, "EXIT", EXIT) < 0
        || PyModule_AddIntConstant(module, "OPT_END", OPT_END) < 0
        || PyModule_AddIntConstant(module, "FWD_ENTER", FWD_ENTER) < 0
        || PyModule_AddIntConstant(module, "FWD_EXIT", FWD_EXIT) < 0
        || PyModule_AddIntConstant(module, "GC_START", GC_START) < 0
        || PyModule_AddIntConstant(module, "GC_STOP", GC_STOP) < 0) {
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
    .m_name = "stepdoctor.collect.hooks._hotpath",
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
