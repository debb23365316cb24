/* The step reducer's event loop in C (docs/design/hot-path.md, docs/overhead.md).
 *
 * ``Reducer`` does what ``StepReducer`` in reducer.py does, event for event: the same step
 * boundaries (explicit, the first optimizer, the backward rhythm of a job updating by hand,
 * the first model's calls in inference; held back as tentative until the kind of job is
 * known), the same evaluation stretches, the same charge of the time between the owner thread's events to its innermost open
 * phase, the same GC and per-model bookkeeping, and it builds the same ``StepTiming`` objects.
 * The Python class stays the reference and the fallback: tests/collect/test_reducer.py runs
 * its tests on both and compares them on random event streams. It runs on the monitor thread
 * for ~10 events of every step of the job, on the job's CPUs: in Python that was 6.5 us a
 * step, here a fraction of that.
 *
 *   Reducer(owner_thread, model_names, step_type, model_mode_after, encode, *, keep_steps=True)
 *       .feed(events)      events: a list or tuple of (t_ns, code, arg, thread_id)
 *       .drain(buffer)     feed what an event buffer holds, taking it out: read as structs
 *                          from _hotpath's Events (_events.h), no tuple made; from any
 *                          other buffer through its take()
 *       .take_steps()      the steps finished since the last call
 *       .take_rows()       the same steps' rows as JSON (record/rows.py), since the last call
 *       .take_marks()      their progress marks (progress.MARK_FIELDS, int64s), since the last
 *                          call; with keep_steps=False no StepTiming is made (a run's monitor
 *                          needs only the rows and the marks) and take_steps() stays empty
 *       .finish()          settle tentative steps; the steps left
 *       .model_calls()     [(model_id, class_name, calls, threads, max_concurrent,
 *                            concurrent_calls, solo_ns, solo_calls, concurrent_ns,
 *                            grad_calls, train_mode_calls)], in the order first seen
 *       .mode, .owner_thread, .model_names
 *
 * Times are int64 nanoseconds (the session's clock is perf_counter_ns).
 *
 * Each step is also written as its record row (``[index,start_ns,...,{phase:ns},...]``) into
 * a byte buffer as it is made: ints and None here, strings (phase names, the boundary) and
 * anything else through ``encode`` (record/rows.py's encode_json), once per distinct string.
 * The rows come out byte for byte as ``rows.step_rows_json`` writes them from the steps.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <structmember.h>

#include "../hooks/_events.h"

/* The same values as stepdoctor/collect/hooks/events.py (checked at import in reducer.py). */
enum { ENTER = 0, EXIT = 1, STEP = 2, OPT_END = 3, FWD_ENTER = 4, FWD_EXIT = 5, GC_START = 6,
       GC_STOP = 7, SAMPLE = 9 };

#define N_STEP_FIELDS 13
/* A step's progress mark: progress.MARK_FIELDS, int64 each; NO_BATCH for no batch size. */
#define N_MARKS 7
#define NO_BATCH LLONG_MIN
/* The row buffer kept between take_rows() calls: a flush's rows (0.5 s of ~1 ms steps at
 * ~110 bytes a row) fit; a larger one, after a burst of short steps, is freed. */
#define ROWS_KEPT (256 * 1024)

/* A growing byte buffer (the rows, the progress marks), handed out by buf_take. */
typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

/* A step being accumulated (reducer.py's _Open), with where it ended once tentative. */
typedef struct {
    long long start;
    long long end;
    PyObject *phase_ns;    /* dict: phase -> ns */
    PyObject *batch_size;  /* None or the batch size */
    PyObject *gc_phase_ns; /* dict */
    long long gc_count;
    long long gc_pause;
    long long gc_max_pause;
    long long micro_batches;
    long long closure_passes;
    long long eval_calls;
} Step;

/* A thread inside a model's forward. */
typedef struct {
    PyObject *tid;
    long long start;
    int overlapped;
} Active;

/* reducer.py's _ModelCalls. */
typedef struct {
    PyObject *model_id;
    PyObject *class_name;
    PyObject *threads; /* set of thread ids */
    Active *active;
    Py_ssize_t n_active, cap_active;
    long long calls, max_concurrent, concurrent_calls, concurrent_ns, solo_calls, solo_ns,
        grad_calls, train_mode_calls;
} Model;

typedef struct {
    PyObject_HEAD
    PyObject *owner;       /* the owner thread's id */
    unsigned long long owner_raw; /* the same as a C int, where owner_is_raw */
    int owner_is_raw;
    PyObject *other_tid;   /* the last other thread's id seen in an Events buffer, or NULL */
    unsigned long long other_tid_raw;
    PyObject *model_names; /* dict: id(model) -> class name, filled by the monitor */
    PyObject *step_type;   /* StepTiming */
    PyObject *encode;      /* value -> its JSON bytes */
    PyObject *encoded;     /* dict: str -> its JSON bytes (what encode gave) */
    Buf rows;              /* the rows of the steps made since take_rows(), comma-separated */
    Buf marks;             /* their progress marks since take_marks() (N_MARKS int64 each) */
    int keep_steps;        /* make StepTiming objects for take_steps() (else rows and marks) */
    PyObject *slots[N_STEP_FIELDS]; /* its fields' slot descriptors */
    PyObject *mode;        /* NULL (None) or one of the mode strings below */
    PyObject *boundary_optimizer; /* NULL (None) or the first optimizer's id */
    PyObject *stack;       /* list of phase names */
    PyObject *sample_phases; /* list of (sample id, phase) since take_sample_phases() */
    PyObject *done;        /* list of StepTiming */
    PyObject *model_index; /* dict: model id -> index into models */
    int has_open;
    Step open;
    long long last_t;
    Step *tentative;
    Py_ssize_t n_tentative, cap_tentative, model_mode_after;
    long long next_index;
    int has_gc_start;
    long long gc_start;
    long long foreign_forwards;
    int trained;              /* a backward was seen on the owner thread */
    PyObject *trained_models; /* set: models called with autograd on in train mode */
    PyObject *first_model;    /* NULL (None) or the first model the owner called */
    int after_backward;       /* a backward ended since the last backward-rhythm boundary */
    int eval;                 /* inside an evaluation stretch */
    long long eval_tail;      /* data wait charged to evaluation since its last model call */
    Model *models;
    Py_ssize_t n_models, cap_models;
} Reducer;

static PyObject *str_other, *str_forward, *str_explicit, *str_optimizer, *str_model, *str_setup;
static PyObject *str_empty;
static PyObject *str_unknown_class, *str_data_wait, *str_backward, *str_evaluation;
/* _hotpath's event buffer, read directly by drain(); NULL where _hotpath is not built. */
static TdEventsApi *events_api;
/* StepTiming's field names, in the order emit() passes the values. */
static const char *step_fields[N_STEP_FIELDS] = {
    "index", "start_ns", "end_ns", "boundary", "batch_size", "phase_ns", "gc_count",
    "gc_pause_ns", "gc_max_pause_ns", "gc_phase_ns", "micro_batches", "closure_passes",
    "eval_calls"};

/* -- steps --------------------------------------------------------------------------------- */

static int
step_init(Step *step, long long start)
{
    step->start = start;
    step->end = 0;
    step->gc_count = step->gc_pause = step->gc_max_pause = 0;
    step->micro_batches = step->closure_passes = step->eval_calls = 0;
    step->phase_ns = PyDict_New();
    step->gc_phase_ns = PyDict_New();
    step->batch_size = Py_NewRef(Py_None);
    if (step->phase_ns == NULL || step->gc_phase_ns == NULL) {
        Py_CLEAR(step->phase_ns);
        Py_CLEAR(step->gc_phase_ns);
        Py_CLEAR(step->batch_size);
        return -1;
    }
    return 0;
}

static void
step_clear(Step *step)
{
    Py_CLEAR(step->phase_ns);
    Py_CLEAR(step->gc_phase_ns);
    Py_CLEAR(step->batch_size);
}

/* dict[key] = dict.get(key, 0) + ns */
static int
add_ns(PyObject *dict, PyObject *key, long long ns)
{
    PyObject *old = PyDict_GetItemWithError(dict, key);
    long long value = ns;
    if (old == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
    }
    else {
        long long before = PyLong_AsLongLong(old);
        if (before == -1 && PyErr_Occurred()) {
            return -1;
        }
        value += before;
    }
    PyObject *sum = PyLong_FromLongLong(value);
    if (sum == NULL) {
        return -1;
    }
    int rc = PyDict_SetItem(dict, key, sum);
    Py_DECREF(sum);
    return rc;
}

/* Every (key, value) of src added to dst's (values as Python ints: ``get(k, 0) + v``). */
static int
merge_dict(PyObject *dst, PyObject *src)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(src, &pos, &key, &value)) {
        PyObject *old = PyDict_GetItemWithError(dst, key);
        if (old == NULL && PyErr_Occurred()) {
            return -1;
        }
        PyObject *sum = old == NULL ? Py_NewRef(value) : PyNumber_Add(old, value);
        if (sum == NULL) {
            return -1;
        }
        int rc = PyDict_SetItem(dst, key, sum);
        Py_DECREF(sum);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

/* _Open.merge: other's time, batch size (where dst has none) and pauses into dst. */
static int
step_merge(Step *dst, Step *src)
{
    if (merge_dict(dst->phase_ns, src->phase_ns) < 0) {
        return -1;
    }
    int has_batch = PyObject_IsTrue(dst->batch_size); /* ``self.batch_size or other's`` */
    if (has_batch < 0) {
        return -1;
    }
    if (!has_batch) {
        Py_SETREF(dst->batch_size, Py_NewRef(src->batch_size));
    }
    dst->micro_batches += src->micro_batches;
    dst->closure_passes += src->closure_passes;
    dst->eval_calls += src->eval_calls;
    dst->gc_count += src->gc_count;
    dst->gc_pause += src->gc_pause;
    if (src->gc_max_pause > dst->gc_max_pause) {
        dst->gc_max_pause = src->gc_max_pause;
    }
    return merge_dict(dst->gc_phase_ns, src->gc_phase_ns);
}

/* -- rows ---------------------------------------------------------------------------------- */

static int
buf_put(Buf *buf, const char *data, Py_ssize_t n)
{
    if (buf->len + n > buf->cap) {
        Py_ssize_t cap = buf->cap ? buf->cap : 4096;
        while (cap < buf->len + n) {
            cap *= 2;
        }
        char *grown = PyMem_Realloc(buf->data, cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        buf->data = grown;
        buf->cap = cap;
    }
    memcpy(buf->data + buf->len, data, n);
    buf->len += n;
    return 0;
}

/* The buffer's bytes; it is left empty, and its memory given back after a burst (more than
 * ROWS_KEPT). */
static PyObject *
buf_take(Buf *buf)
{
    PyObject *bytes = PyBytes_FromStringAndSize(buf->data, buf->len);
    if (bytes != NULL) {
        buf->len = 0;
        if (buf->cap > ROWS_KEPT) {
            PyMem_Free(buf->data);
            buf->data = NULL;
            buf->cap = 0;
        }
    }
    return bytes;
}

static int
rows_put(Reducer *self, const char *data, Py_ssize_t n)
{
    return buf_put(&self->rows, data, n);
}

/* value in decimal (snprintf's locale handling took most of a row's time) */
static int
rows_int(Reducer *self, long long value)
{
    char text[24];
    char *end = text + sizeof(text), *at = end;
    unsigned long long n = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    do {
        *--at = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    if (value < 0) {
        *--at = '-';
    }
    return rows_put(self, at, end - at);
}

/* value's JSON: None and ints that fit here; strings through encode, once each; the rest
 * (bools, ints over 64 bits, ...) through encode each time. */
static int
rows_value(Reducer *self, PyObject *value)
{
    if (value == Py_None) {
        return rows_put(self, "null", 4);
    }
    if (PyLong_CheckExact(value)) {
        int overflow;
        long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (n == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (!overflow) {
            return rows_int(self, n);
        }
    }
    int is_str = PyUnicode_CheckExact(value);
    PyObject *data = is_str ? PyDict_GetItemWithError(self->encoded, value) : NULL;
    if (data != NULL) {
        return rows_put(self, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    data = PyObject_CallOneArg(self->encode, value);
    if (data == NULL) {
        return -1;
    }
    if (!PyBytes_Check(data)) {
        Py_DECREF(data);
        PyErr_SetString(PyExc_TypeError, "encode must return bytes");
        return -1;
    }
    int rc = is_str ? PyDict_SetItem(self->encoded, value, data) : 0;
    if (rc == 0) {
        rc = rows_put(self, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
    }
    Py_DECREF(data);
    return rc;
}

static int
rows_dict(Reducer *self, PyObject *dict)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    char sep = '{';
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (rows_put(self, &sep, 1) < 0 || rows_value(self, key) < 0
            || rows_put(self, ":", 1) < 0 || rows_value(self, value) < 0) {
            return -1;
        }
        sep = ',';
    }
    return sep == '{' ? rows_put(self, "{}", 2) : rows_put(self, "}", 1);
}

/* values (emit's, in StepTiming's field order) as one row at the end of the buffer; on
 * failure the buffer is left as it was. */
static int
rows_add(Reducer *self, PyObject **values)
{
    Py_ssize_t before = self->rows.len;
    int rc = rows_put(self, before ? ",[" : "[", before ? 2 : 1);
    for (int i = 0; rc == 0 && i < N_STEP_FIELDS; i++) {
        if (i > 0) {
            rc = rows_put(self, ",", 1);
        }
        if (rc == 0) {
            rc = PyDict_CheckExact(values[i]) ? rows_dict(self, values[i])
                                              : rows_value(self, values[i]);
        }
    }
    if (rc == 0) {
        rc = rows_put(self, "]", 1);
    }
    if (rc < 0) {
        self->rows.len = before;
    }
    return rc;
}

/* The batch size as a mark: an int of 64 bits (a bool as 0 or 1), else NO_BATCH. */
static long long
batch_mark(PyObject *batch)
{
    if (!PyLong_Check(batch)) {
        return NO_BATCH;
    }
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(batch, &overflow);
    if (overflow || value == NO_BATCH || (value == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return NO_BATCH;
    }
    return value;
}

/* The step's progress mark (progress.MARK_FIELDS) after the buffer's others. */
static int
marks_add(Reducer *self, Step *step, long long end)
{
    long long data_wait = 0;
    PyObject *ns = PyDict_GetItemWithError(step->phase_ns, str_data_wait);
    if (ns == NULL && PyErr_Occurred()) {
        return -1;
    }
    if (ns != NULL && (data_wait = PyLong_AsLongLong(ns)) == -1 && PyErr_Occurred()) {
        return -1;
    }
    long long mark[N_MARKS] = {self->next_index, step->start, end,
                               batch_mark(step->batch_size), data_wait, step->gc_count,
                               step->gc_pause};
    return buf_put(&self->marks, (const char *)mark, sizeof(mark));
}

/* The step written as its row and its mark and, with keep_steps, made a StepTiming appended
 * to done; the step's references are handed over.
 *
 * StepTiming is a frozen, slotted dataclass: its generated __init__ sets each field with
 * object.__setattr__, 1.6 us a step from Python. The instance is made here as that __init__
 * leaves it, every slot set through its descriptor (what object.__setattr__ does); the type
 * is checked to be such a dataclass when the Reducer is made. */
static int
emit(Reducer *self, Step *step, long long end, PyObject *boundary)
{
    PyObject *values[N_STEP_FIELDS] = {
        PyLong_FromLongLong(self->next_index),
        PyLong_FromLongLong(step->start),
        PyLong_FromLongLong(end),
        Py_NewRef(boundary),
        Py_NewRef(step->batch_size),
        Py_NewRef(step->phase_ns),
        PyLong_FromLongLong(step->gc_count),
        PyLong_FromLongLong(step->gc_pause),
        PyLong_FromLongLong(step->gc_max_pause),
        Py_NewRef(step->gc_phase_ns),
        PyLong_FromLongLong(step->micro_batches),
        PyLong_FromLongLong(step->closure_passes),
        PyLong_FromLongLong(step->eval_calls),
    };
    PyTypeObject *type = (PyTypeObject *)self->step_type;
    PyObject *timing = NULL;
    Py_ssize_t rows_before = self->rows.len, marks_before = self->marks.len;
    int rc = -1;
    for (int i = 0; i < N_STEP_FIELDS; i++) {
        if (values[i] == NULL) {
            goto done;
        }
    }
    if (self->keep_steps) {
        timing = type->tp_alloc(type, 0);
        if (timing == NULL) {
            goto done;
        }
        /* A run keeps every step (1M steps made a full collection 200 ms longer here): a
         * step holds ints, strs, None and dicts of str -> int, so it cannot be part of a
         * cycle, and the collector need not visit it. */
        PyObject_GC_UnTrack(timing);
        for (int i = 0; i < N_STEP_FIELDS; i++) {
            PyObject *slot = self->slots[i];
            if (Py_TYPE(slot)->tp_descr_set(slot, timing, values[i]) < 0) {
                goto done;
            }
        }
    }
    if (rows_add(self, values) < 0 || marks_add(self, step, end) < 0
        || (timing != NULL && PyList_Append(self->done, timing) < 0)) {
        self->rows.len = rows_before; /* the step is lost: so are its row and mark */
        self->marks.len = marks_before;
        goto done;
    }
    self->next_index++;
    rc = 0;
done:
    for (int i = 0; i < N_STEP_FIELDS; i++) {
        Py_XDECREF(values[i]);
    }
    Py_XDECREF(timing);
    step_clear(step);
    return rc;
}

/* A new open step at t (the old one, if any, is dropped). */
static int
open_at(Reducer *self, long long t)
{
    if (self->has_open) {
        step_clear(&self->open);
        self->has_open = 0;
    }
    if (step_init(&self->open, t) < 0) {
        return -1;
    }
    self->has_open = 1;
    return 0;
}

/* Whether ``obj`` is a str equal to ``interned`` (1), not (0), or an error (-1). */
static int
same_str(PyObject *obj, PyObject *interned)
{
    if (obj == interned) {
        return 1;
    }
    if (!PyUnicode_Check(obj)) {
        return 0;
    }
    int cmp = PyUnicode_Compare(obj, interned);
    return cmp == -1 && PyErr_Occurred() ? -1 : cmp == 0;
}

static PyObject *
top_phase(Reducer *self)
{
    Py_ssize_t n = PyList_GET_SIZE(self->stack);
    return n ? PyList_GET_ITEM(self->stack, n - 1) : str_other;
}

static int
pop_phase(Reducer *self)
{
    Py_ssize_t n = PyList_GET_SIZE(self->stack);
    return n ? PyList_SetSlice(self->stack, n - 1, n, NULL) : 0;
}

/* Time since the last event to the innermost open phase (or to forward, see reducer.py). */
/* The phase the owner's time goes to now (borrowed; NULL on error): its innermost open
 * phase, except that in an evaluation stretch time outside phases and data waits are
 * evaluation (*data_wait says it was a data wait: the stretch's tail), that after a backward in
 * a job updating by hand time outside phases is optimizer, and that while other threads run the
 * model it is forward. StepReducer._charged_phase is its twin. */
static PyObject *
charged_phase(Reducer *self, int *data_wait)
{
    PyObject *phase = top_phase(self);
    *data_wait = 0;
    int other = same_str(phase, str_other);
    if (other < 0) {
        return NULL;
    }
    if (self->eval) {
        int waiting = same_str(phase, str_data_wait);
        if (waiting < 0) {
            return NULL;
        }
        *data_wait = waiting;
        return other || waiting ? str_evaluation : phase;
    }
    if (other && self->after_backward && (self->mode == NULL || self->mode == str_backward)) {
        return str_optimizer; /* the parameters updated by hand */
    }
    if (other && self->foreign_forwards > 0) {
        return str_forward;
    }
    return phase;
}

static int
charge(Reducer *self, long long t)
{
    if (t <= self->last_t) {
        return 0;
    }
    int data_wait;
    PyObject *phase = charged_phase(self, &data_wait);
    if (phase == NULL) {
        return -1;
    }
    if (data_wait) {
        self->eval_tail += t - self->last_t;
    }
    if (add_ns(self->open.phase_ns, phase, t - self->last_t) < 0) {
        return -1;
    }
    self->last_t = t;
    return 0;
}

static int
close_step(Reducer *self, long long t, PyObject *boundary)
{
    if (!self->has_open) {
        return 0;
    }
    self->has_open = 0;
    if (emit(self, &self->open, t, boundary) < 0) {
        return -1;
    }
    return open_at(self, t);
}

/* The tentative steps become steps of ``mode`` (str_model or str_backward). */
static int
settle_mode(Reducer *self, PyObject *mode)
{
    Py_XSETREF(self->mode, Py_NewRef(mode));
    int rc = 0;
    for (Py_ssize_t i = 0; i < self->n_tentative; i++) {
        Step *step = &self->tentative[i];
        if (rc == 0) {
            rc = emit(self, step, step->end, mode);
        }
        step_clear(step);
    }
    self->n_tentative = 0;
    return rc;
}

/* The open step becomes a tentative one ending at t; a new one opens. */
static int
hold_back(Reducer *self, long long t)
{
    if (self->n_tentative == self->cap_tentative) {
        Py_ssize_t cap = self->cap_tentative ? 2 * self->cap_tentative : 16;
        Step *grown = PyMem_Realloc(self->tentative, cap * sizeof(Step));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->tentative = grown;
        self->cap_tentative = cap;
    }
    self->open.end = t;
    self->tentative[self->n_tentative++] = self->open; /* moved: the references go along */
    self->has_open = 0;
    return open_at(self, t);
}

static int
model_boundary(Reducer *self, long long t)
{
    if (self->mode == str_model) {
        return close_step(self, t, str_model);
    }
    if (self->mode != NULL || self->trained || !self->has_open) {
        return 0;
    }
    if (hold_back(self, t) < 0) {
        return -1;
    }
    return self->n_tentative >= self->model_mode_after ? settle_mode(self, str_model) : 0;
}

/* A training pass starts after a backward: a step boundary when updating by hand. */
static int
rhythm_boundary(Reducer *self, long long t)
{
    self->after_backward = 0;
    if (self->mode == str_backward) {
        self->eval_tail = 0;
        return close_step(self, t, str_backward);
    }
    if (self->mode != NULL || !self->trained || !self->has_open) {
        return 0;
    }
    self->eval_tail = 0;
    if (hold_back(self, t) < 0) {
        return -1;
    }
    return self->n_tentative >= self->model_mode_after ? settle_mode(self, str_backward) : 0;
}

/* The tentative steps and the open one become one open step. */
static int
merge_tentative(Reducer *self)
{
    int rc = 0;
    if (self->n_tentative && self->has_open) {
        Step *first = &self->tentative[0];
        for (Py_ssize_t i = 1; i < self->n_tentative && rc == 0; i++) {
            rc = step_merge(first, &self->tentative[i]);
        }
        if (rc == 0) {
            rc = step_merge(first, &self->open);
        }
        if (rc == 0) {
            step_clear(&self->open);
            self->open = *first;
            first->phase_ns = first->gc_phase_ns = first->batch_size = NULL;
        }
    }
    for (Py_ssize_t i = 0; i < self->n_tentative; i++) {
        step_clear(&self->tentative[i]);
    }
    self->n_tentative = 0;
    return rc;
}

/* Training resumes: the stretch's last data wait fetched the training batch. */
static int
end_eval(Reducer *self)
{
    if (!self->eval) {
        return 0;
    }
    self->eval = 0;
    long long tail = self->eval_tail;
    self->eval_tail = 0;
    if (tail == 0 || !self->has_open) {
        return 0;
    }
    PyObject *phases = self->open.phase_ns;
    if (add_ns(phases, str_evaluation, -tail) < 0 || add_ns(phases, str_data_wait, tail) < 0) {
        return -1;
    }
    PyObject *left = PyDict_GetItemWithError(phases, str_evaluation);
    if (left == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    int zero = PyObject_Not(left);
    if (zero < 0) {
        return -1;
    }
    return zero ? PyDict_DelItem(phases, str_evaluation) : 0;
}

/* The owner enters ``phase`` (reducer.py's _training_event for backward, optimizer and
 * data_wait; nothing for the others). */
static int
training_event(Reducer *self, long long t, PyObject *phase)
{
    int is;
    if ((is = same_str(phase, str_data_wait)) != 0) {
        return is < 0 ? -1 : self->after_backward ? rhythm_boundary(self, t) : 0;
    }
    int backward = same_str(phase, str_backward);
    if (backward < 0 || (is = same_str(phase, str_optimizer)) < 0) {
        return -1;
    }
    if (!backward && !is) {
        return 0;
    }
    if (end_eval(self) < 0) {
        return -1;
    }
    if (is) {
        return 0;
    }
    int in_optimizer = PySequence_Contains(self->stack, str_optimizer);
    if (in_optimizer < 0) {
        return -1;
    }
    if (self->has_open) {
        if (in_optimizer) {
            self->open.closure_passes += 1;
        }
        else {
            self->open.micro_batches += 1;
        }
    }
    if (!self->trained) {
        self->trained = 1;
        if (self->mode == str_model) {
            Py_CLEAR(self->mode);
        }
        else if (self->mode == NULL && self->n_tentative && self->has_open) {
            return merge_tentative(self);
        }
    }
    else if (self->mode == str_model) {
        Py_CLEAR(self->mode);
    }
    return 0;
}

/* The owner calls a model (arg: events.fwd_arg): the phase it enters, a borrowed reference
 * (NULL on error). */
static PyObject *
model_call_phase(Reducer *self, long long t, PyObject *arg)
{
    if (!PyLong_CheckExact(arg)) {
        return str_forward;
    }
    PyObject *two = PyLong_FromLong(2);
    PyObject *model_id = two == NULL ? NULL : PyNumber_Rshift(arg, two);
    Py_XDECREF(two);
    if (model_id == NULL) {
        return NULL;
    }
    unsigned long long bits = PyLong_AsUnsignedLongLongMask(arg);
    if (bits == (unsigned long long)-1 && PyErr_Occurred()) {
        Py_DECREF(model_id);
        return NULL;
    }
    int grad = (bits >> 1) & 1, training = bits & 1;
    PyObject *phase = str_forward;
    if (self->first_model == NULL) {
        self->first_model = Py_NewRef(model_id);
    }
    if (grad && training) {
        if (PySet_Add(self->trained_models, model_id) < 0) {
            phase = NULL;
        }
    }
    else if (!grad && self->trained) {
        int known = PySet_Contains(self->trained_models, model_id);
        if (known < 0) {
            phase = NULL;
        }
        else if (known) {
            if (!self->eval) {
                self->eval = 1;
                self->eval_tail = 0;
            }
            int first = PyObject_RichCompareBool(model_id, self->first_model, Py_EQ);
            if (first < 0) {
                phase = NULL;
            }
            else {
                if (first && self->has_open) {
                    self->open.eval_calls += 1;
                }
                phase = str_evaluation;
            }
        }
    }
    Py_DECREF(model_id);
    if (phase == str_forward && grad) {
        if (end_eval(self) < 0
            || (self->after_backward && rhythm_boundary(self, t) < 0)) {
            return NULL;
        }
    }
    return phase;
}

static int
optimizer_boundary(Reducer *self, long long t, PyObject *optimizer_id)
{
    if (self->mode == str_explicit) {
        return 0;
    }
    if (self->boundary_optimizer == NULL || self->boundary_optimizer == Py_None) {
        Py_XSETREF(self->boundary_optimizer, Py_NewRef(optimizer_id));
    }
    else {
        int other = PyObject_RichCompareBool(optimizer_id, self->boundary_optimizer, Py_NE);
        if (other != 0) {
            return other < 0 ? -1 : 0; /* an error, or another optimizer: not a boundary */
        }
    }
    if (self->mode != str_optimizer) {
        Py_XSETREF(self->mode, Py_NewRef(str_optimizer));
        /* The micro-batches' passes and the open step become one step. */
        if (merge_tentative(self) < 0) {
            return -1;
        }
    }
    return close_step(self, t, str_optimizer);
}

static int
gc_stop(Reducer *self, long long t, int on_owner)
{
    if (!self->has_gc_start) {
        return 0;
    }
    long long pause = t - self->gc_start;
    self->has_gc_start = 0;
    if (!self->has_open) {
        return 0;
    }
    self->open.gc_count += 1;
    self->open.gc_pause += pause;
    if (pause > self->open.gc_max_pause) {
        self->open.gc_max_pause = pause;
    }
    return on_owner ? add_ns(self->open.gc_phase_ns, top_phase(self), pause) : 0;
}

/* -- per-model bookkeeping ----------------------------------------------------------------- */

static Model *
model_of(Reducer *self, PyObject *model_id)
{
    PyObject *index = PyDict_GetItemWithError(self->model_index, model_id);
    if (index != NULL) {
        return &self->models[PyLong_AsSsize_t(index)];
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (self->n_models == self->cap_models) {
        Py_ssize_t cap = self->cap_models ? 2 * self->cap_models : 4;
        Model *grown = PyMem_Realloc(self->models, cap * sizeof(Model));
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        self->models = grown;
        self->cap_models = cap;
    }
    PyObject *name = PyDict_GetItemWithError(self->model_names, model_id);
    if (name == NULL && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *threads = PySet_New(NULL);
    PyObject *at = PyLong_FromSsize_t(self->n_models);
    if (threads == NULL || at == NULL || PyDict_SetItem(self->model_index, model_id, at) < 0) {
        Py_XDECREF(threads);
        Py_XDECREF(at);
        return NULL;
    }
    Py_DECREF(at);
    Model *model = &self->models[self->n_models++];
    memset(model, 0, sizeof(*model));
    model->model_id = Py_NewRef(model_id);
    model->class_name = Py_NewRef(name != NULL ? name : str_unknown_class);
    model->threads = threads;
    return model;
}

static Active *
active_of(Model *model, PyObject *tid, int *error)
{
    for (Py_ssize_t i = 0; i < model->n_active; i++) {
        int same = PyObject_RichCompareBool(model->active[i].tid, tid, Py_EQ);
        if (same) {
            *error = same < 0;
            return same < 0 ? NULL : &model->active[i];
        }
    }
    *error = 0;
    return NULL;
}

static int
model_call(Reducer *self, long long t, int code, PyObject *arg, PyObject *tid)
{
    PyObject *model_id;
    unsigned long long bits = 0;
    if (code == FWD_ENTER) {
        /* events.fwd_arg: id(model) << 2 | grad << 1 | training */
        PyObject *two = PyLong_FromLong(2);
        model_id = two == NULL ? NULL : PyNumber_Rshift(arg, two);
        Py_XDECREF(two);
        if (model_id == NULL) {
            return -1;
        }
        bits = PyLong_AsUnsignedLongLongMask(arg);
        if (bits == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_DECREF(model_id);
            return -1;
        }
    }
    else {
        model_id = Py_NewRef(arg);
    }
    Model *model = model_of(self, model_id);
    Py_DECREF(model_id);
    if (model == NULL) {
        return -1;
    }
    int error;
    Active *active = active_of(model, tid, &error);
    if (error) {
        return -1;
    }
    if (code == FWD_ENTER) {
        int overlapped = model->n_active > 0;
        for (Py_ssize_t i = 0; i < model->n_active; i++) {
            model->active[i].overlapped = 1;
        }
        if (active == NULL) {
            if (model->n_active == model->cap_active) {
                Py_ssize_t cap = model->cap_active ? 2 * model->cap_active : 4;
                Active *grown = PyMem_Realloc(model->active, cap * sizeof(Active));
                if (grown == NULL) {
                    PyErr_NoMemory();
                    return -1;
                }
                model->active = grown;
                model->cap_active = cap;
            }
            active = &model->active[model->n_active++];
            active->tid = Py_NewRef(tid);
        }
        active->start = t;
        active->overlapped = overlapped;
        model->calls += 1;
        model->grad_calls += (bits >> 1) & 1;
        model->train_mode_calls += bits & 1;
        if (PySet_Add(model->threads, tid) < 0) {
            return -1;
        }
        if (model->n_active > model->max_concurrent) {
            model->max_concurrent = model->n_active;
        }
        return 0;
    }
    if (active == NULL) {
        return 0;
    }
    if (active->overlapped) {
        model->concurrent_calls += 1;
        model->concurrent_ns += t - active->start;
    }
    else {
        model->solo_calls += 1;
        model->solo_ns += t - active->start;
    }
    Py_DECREF(active->tid);
    *active = model->active[--model->n_active];
    return 0;
}

/* -- the loop ------------------------------------------------------------------------------ */

/* A SAMPLE event due at t: note the phase the owner's time would be charged to now (charge()'s
 * choice, without charging); "setup" before its first event; "" when an event of the owner
 * came after t (the sample straddles it: stacks.py). */
static int
sample_phase(Reducer *self, long long t, PyObject *arg)
{
    PyObject *phase = str_setup;
    if (self->has_open && t < self->last_t) {
        phase = str_empty;
    }
    else if (self->has_open) {
        int data_wait;
        phase = charged_phase(self, &data_wait);
        if (phase == NULL) {
            return -1;
        }
    }
    PyObject *pair = PyTuple_Pack(2, arg, phase);
    if (pair == NULL) {
        return -1;
    }
    int rc = PyList_Append(self->sample_phases, pair);
    Py_DECREF(pair);
    return rc;
}

/* One event; ``owner``: whether ``tid`` is the owner thread's. */
static int
feed_event(Reducer *self, long long t, long code, PyObject *arg, PyObject *tid, int owner)
{
    if (code >= FWD_ENTER) {
        if (code >= GC_START) {
            if (code == GC_START) {
                self->has_gc_start = 1;
                self->gc_start = t;
                return 0;
            }
            if (code == GC_STOP) {
                return gc_stop(self, t, owner);
            }
            if (code == SAMPLE) {
                return sample_phase(self, t, arg);
            }
            if (self->has_open) { /* RESET: drop what the open step holds */
                self->last_t = t;
                self->eval_tail = 0;
                return open_at(self, t);
            }
            return 0;
        }
        if (!owner) {
            if (self->has_open && charge(self, t) < 0) {
                return -1;
            }
            self->foreign_forwards += code == FWD_ENTER ? 1 : -1;
        }
        if (PyLong_CheckExact(arg) && model_call(self, t, (int)code, arg, tid) < 0) {
            return -1;
        }
    }
    if (!owner) {
        return 0;
    }
    if (!self->has_open) {
        if (open_at(self, t) < 0) {
            return -1;
        }
        self->last_t = t;
    }
    else if (charge(self, t) < 0) {
        return -1;
    }
    switch (code) {
    case ENTER: {
        PyObject *phase = PyObject_Str(arg);
        if (phase == NULL) {
            return -1;
        }
        int rc = training_event(self, t, phase);
        if (rc == 0) {
            rc = PyList_Append(self->stack, phase);
        }
        Py_DECREF(phase);
        return rc;
    }
    case EXIT: {
        Py_ssize_t n = PyList_GET_SIZE(self->stack);
        if (n) {
            int backward = same_str(PyList_GET_ITEM(self->stack, n - 1), str_backward);
            if (backward < 0 || pop_phase(self) < 0) {
                return -1;
            }
            if (backward) {
                self->after_backward = 1;
            }
        }
        if (PyLong_CheckExact(arg)) {
            Py_SETREF(self->open.batch_size, Py_NewRef(arg));
        }
        return 0;
    }
    case FWD_ENTER: {
        PyObject *phase = model_call_phase(self, t, arg);
        return phase == NULL ? -1 : PyList_Append(self->stack, phase);
    }
    case FWD_EXIT: {
        Py_ssize_t n = PyList_GET_SIZE(self->stack);
        int evaluation = 0;
        if (n) {
            evaluation = same_str(PyList_GET_ITEM(self->stack, n - 1), str_evaluation);
            if (evaluation < 0 || pop_phase(self) < 0) {
                return -1;
            }
        }
        if (evaluation) {
            self->eval_tail = 0;
            return 0;
        }
        int first = PyObject_RichCompareBool(
            arg, self->first_model == NULL ? Py_None : self->first_model, Py_EQ);
        return first < 0 ? -1 : first ? model_boundary(self, t) : 0;
    }
    case OPT_END:
        return pop_phase(self) < 0 ? -1 : optimizer_boundary(self, t, arg);
    case STEP:
        if (end_eval(self) < 0) {
            return -1;
        }
        Py_XSETREF(self->mode, Py_NewRef(str_explicit));
        if (PyLong_Check(arg)) {
            Py_SETREF(self->open.batch_size, Py_NewRef(arg));
        }
        return close_step(self, t, str_explicit);
    default:
        return 0;
    }
}

/* One event tuple (t_ns, code, arg, thread_id). */
static int
feed_one(Reducer *self, PyObject *event)
{
    if (!PyTuple_Check(event) || PyTuple_GET_SIZE(event) != 4) {
        PyErr_SetString(PyExc_ValueError, "an event is a tuple (t_ns, code, arg, thread_id)");
        return -1;
    }
    long long t = PyLong_AsLongLong(PyTuple_GET_ITEM(event, 0));
    if (t == -1 && PyErr_Occurred()) {
        return -1;
    }
    long code = PyLong_AsLong(PyTuple_GET_ITEM(event, 1));
    if (code == -1 && PyErr_Occurred()) {
        return -1;
    }
    PyObject *tid = PyTuple_GET_ITEM(event, 3);
    int owner = tid == self->owner ? 1 : PyObject_RichCompareBool(tid, self->owner, Py_EQ);
    if (owner < 0) {
        return -1;
    }
    return feed_event(self, t, code, PyTuple_GET_ITEM(event, 2), tid, owner);
}

/* A thread id as an int: the owner's own object, else the last other thread's, kept (other
 * threads' events are rare: forwards from threads, GC on a worker thread). New reference. */
static PyObject *
tid_object(Reducer *self, unsigned long long tid, int owner)
{
    if (owner) {
        return Py_NewRef(self->owner);
    }
    if (self->other_tid == NULL || self->other_tid_raw != tid) {
        PyObject *made = PyLong_FromUnsignedLongLong(tid);
        if (made == NULL) {
            return NULL;
        }
        Py_XSETREF(self->other_tid, made);
        self->other_tid_raw = tid;
    }
    return Py_NewRef(self->other_tid);
}

/* One event struct of an Events buffer: no tuple, and an int only where one is kept or
 * compared as an object (an id, a batch size). */
static int
feed_struct(Reducer *self, const TdEvent *event)
{
    int owner;
    PyObject *tid = NULL;
    if (self->owner_is_raw) {
        owner = event->tid == self->owner_raw;
    }
    else { /* an owner id that is not a 64-bit int: compared as objects */
        tid = PyLong_FromUnsignedLongLong(event->tid);
        owner = tid == NULL ? -1 : PyObject_RichCompareBool(tid, self->owner, Py_EQ);
        if (owner < 0) {
            Py_XDECREF(tid);
            return -1;
        }
    }
    if (tid == NULL && (tid = tid_object(self, event->tid, owner)) == NULL) {
        return -1;
    }
    PyObject *arg;
    if (event->kind == TD_ARG_OBJ) {
        arg = Py_NewRef(event->arg.obj);
    }
    else if (event->kind == TD_ARG_INT && (event->code < GC_START || event->code == SAMPLE)) {
        arg = PyLong_FromLongLong(event->arg.i);
    }
    else { /* None, or a GC event's generation, which nothing reads */
        arg = Py_NewRef(Py_None);
    }
    int rc = arg == NULL ? -1 : feed_event(self, event->t, event->code, arg, tid, owner);
    Py_XDECREF(arg);
    Py_DECREF(tid);
    return rc;
}

/* Whether __init__ ran (Reducer.__new__ alone leaves nothing to work with). */
static int
initialised(Reducer *self)
{
    if (self->done == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Reducer.__init__ was not called");
        return 0;
    }
    return 1;
}

static PyObject *
reducer_feed(Reducer *self, PyObject *events)
{
    if (!initialised(self)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(events, "events must be iterable");
    if (seq == NULL) {
        return NULL;
    }
    /* The size and item are read afresh each time, and the event held while it is fed: a
     * phase name's __str__ may run Python code that changes the list. */
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *event = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        int rc = feed_one(self, event);
        Py_DECREF(event);
        if (rc < 0) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

static PyObject *
reducer_drain(Reducer *self, PyObject *events)
{
    if (!initialised(self)) {
        return NULL;
    }
    if (events_api == NULL || !Py_IS_TYPE(events, events_api->type)) {
        PyObject *taken = PyObject_CallMethod(events, "take", NULL);
        if (taken == NULL) {
            return NULL;
        }
        PyObject *done = reducer_feed(self, taken);
        Py_DECREF(taken);
        return done;
    }
    Py_ssize_t n;
    TdEvent *taken = events_api->take(events, &n);
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && rc >= 0; i++) {
        rc = feed_struct(self, &taken[i]);
    }
    events_api->give_back(events, taken, n);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
reducer_take_steps(Reducer *self, PyObject *Py_UNUSED(ignored))
{
    if (!initialised(self)) {
        return NULL;
    }
    PyObject *fresh = PyList_New(0);
    if (fresh == NULL) {
        return NULL;
    }
    PyObject *done = self->done;
    self->done = fresh;
    return done;
}

static PyObject *
reducer_take_rows(Reducer *self, PyObject *Py_UNUSED(ignored))
{
    if (!initialised(self)) {
        return NULL;
    }
    return buf_take(&self->rows);
}

static PyObject *
reducer_take_marks(Reducer *self, PyObject *Py_UNUSED(ignored))
{
    if (!initialised(self)) {
        return NULL;
    }
    return buf_take(&self->marks);
}

static PyObject *
reducer_take_sample_phases(Reducer *self, PyObject *Py_UNUSED(ignored))
{
    if (!initialised(self)) {
        return NULL;
    }
    PyObject *fresh = PyList_New(0);
    if (fresh == NULL) {
        return NULL;
    }
    PyObject *taken = self->sample_phases;
    self->sample_phases = fresh;
    return taken;
}

static PyObject *
reducer_finish(Reducer *self, PyObject *Py_UNUSED(ignored))
{
    if (!initialised(self)) {
        return NULL;
    }
    if (self->mode == NULL && self->trained) {
        if (settle_mode(self, str_backward) < 0) {
            return NULL;
        }
    }
    else if (self->mode == NULL && self->n_tentative && settle_mode(self, str_model) < 0) {
        return NULL;
    }
    if (self->mode == str_backward && self->has_open && self->open.micro_batches
        && close_step(self, self->last_t, str_backward) < 0) {
        return NULL;
    }
    return reducer_take_steps(self, NULL);
}

static PyObject *
reducer_model_calls(Reducer *self, PyObject *Py_UNUSED(ignored))
{
    if (!initialised(self)) {
        return NULL;
    }
    PyObject *rows = PyList_New(self->n_models);
    if (rows == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->n_models; i++) {
        Model *m = &self->models[i];
        PyObject *row = Py_BuildValue(
            "OOLnLLLLLLL", m->model_id, m->class_name, m->calls, PySet_GET_SIZE(m->threads),
            m->max_concurrent, m->concurrent_calls, m->solo_ns, m->solo_calls,
            m->concurrent_ns, m->grad_calls, m->train_mode_calls);
        if (row == NULL) {
            Py_DECREF(rows);
            return NULL;
        }
        PyList_SET_ITEM(rows, i, row);
    }
    return rows;
}

/* step_type must be a frozen slotted dataclass with exactly StepTiming's fields and nothing
 * run at construction (no __post_init__): then emit() may build it slot by slot. Its slot
 * descriptors are kept in self->slots. */
static int
check_step_type(Reducer *self, PyObject *step_type)
{
    if (!PyType_Check(step_type)) {
        PyErr_SetString(PyExc_TypeError, "step_type must be a class");
        return -1;
    }
    PyObject *fields = PyObject_GetAttrString(step_type, "__dataclass_fields__");
    PyObject *post_init = PyObject_GetAttrString(step_type, "__post_init__");
    int ok = fields != NULL && PyDict_Check(fields) && PyDict_GET_SIZE(fields) == N_STEP_FIELDS
             && post_init == NULL;
    Py_XDECREF(fields);
    Py_XDECREF(post_init);
    PyErr_Clear();
    for (int i = 0; ok && i < N_STEP_FIELDS; i++) {
        PyObject *slot = PyObject_GetAttrString(step_type, step_fields[i]);
        if (slot == NULL || Py_TYPE(slot) != &PyMemberDescr_Type) {
            PyErr_Clear();
            Py_XDECREF(slot);
            ok = 0;
            break;
        }
        Py_XSETREF(self->slots[i], slot);
    }
    if (!ok) {
        PyErr_SetString(PyExc_TypeError,
                        "step_type must be a slotted dataclass with StepTiming's 13 fields "
                        "and no __post_init__");
        return -1;
    }
    return 0;
}

/* -- the type ------------------------------------------------------------------------------ */

static int
reducer_init(Reducer *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"owner_thread", "model_names", "step_type", "model_mode_after",
                            "encode", "keep_steps", NULL};
    PyObject *owner, *model_names, *step_type, *encode;
    Py_ssize_t after;
    int keep_steps = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!OnO|$p:Reducer", names, &owner,
                                     &PyDict_Type, &model_names, &step_type, &after, &encode,
                                     &keep_steps)) {
        return -1;
    }
    if (!PyCallable_Check(encode)) {
        PyErr_SetString(PyExc_TypeError, "encode must be callable");
        return -1;
    }
    if (self->stack != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Reducer is initialised once");
        return -1;
    }
    self->stack = PyList_New(0);
    self->sample_phases = PyList_New(0);
    self->done = PyList_New(0);
    self->model_index = PyDict_New();
    self->encoded = PyDict_New();
    self->trained_models = PySet_New(NULL);
    if (self->stack == NULL || self->sample_phases == NULL || self->done == NULL
        || self->model_index == NULL
        || self->encoded == NULL || self->trained_models == NULL) {
        return -1;
    }
    if (check_step_type(self, step_type) < 0) {
        return -1;
    }
    self->owner = Py_NewRef(owner);
    self->owner_raw = PyLong_Check(owner) ? PyLong_AsUnsignedLongLong(owner) : 0;
    self->owner_is_raw = PyLong_Check(owner) && !PyErr_Occurred();
    PyErr_Clear();
    self->model_names = Py_NewRef(model_names);
    self->step_type = Py_NewRef(step_type);
    self->encode = Py_NewRef(encode);
    self->model_mode_after = after;
    self->keep_steps = keep_steps;
    return 0;
}

static int
reducer_traverse(Reducer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->owner);
    Py_VISIT(self->other_tid);
    Py_VISIT(self->model_names);
    Py_VISIT(self->step_type);
    Py_VISIT(self->encode);
    Py_VISIT(self->encoded);
    for (int i = 0; i < N_STEP_FIELDS; i++) {
        Py_VISIT(self->slots[i]);
    }
    Py_VISIT(self->boundary_optimizer);
    Py_VISIT(self->stack);
    Py_VISIT(self->sample_phases);
    Py_VISIT(self->done);
    Py_VISIT(self->model_index);
    Py_VISIT(self->trained_models);
    Py_VISIT(self->first_model);
    if (self->has_open) {
        Py_VISIT(self->open.phase_ns);
        Py_VISIT(self->open.gc_phase_ns);
        Py_VISIT(self->open.batch_size);
    }
    for (Py_ssize_t i = 0; i < self->n_tentative; i++) {
        Py_VISIT(self->tentative[i].phase_ns);
        Py_VISIT(self->tentative[i].gc_phase_ns);
        Py_VISIT(self->tentative[i].batch_size);
    }
    for (Py_ssize_t i = 0; i < self->n_models; i++) {
        Py_VISIT(self->models[i].model_id);
        Py_VISIT(self->models[i].class_name);
        Py_VISIT(self->models[i].threads);
        for (Py_ssize_t k = 0; k < self->models[i].n_active; k++) {
            Py_VISIT(self->models[i].active[k].tid);
        }
    }
    return 0;
}

static int
reducer_clear(Reducer *self)
{
    Py_CLEAR(self->owner);
    Py_CLEAR(self->other_tid);
    Py_CLEAR(self->model_names);
    Py_CLEAR(self->step_type);
    Py_CLEAR(self->encode);
    Py_CLEAR(self->encoded);
    for (int i = 0; i < N_STEP_FIELDS; i++) {
        Py_CLEAR(self->slots[i]);
    }
    Py_CLEAR(self->mode);
    Py_CLEAR(self->boundary_optimizer);
    Py_CLEAR(self->stack);
    Py_CLEAR(self->sample_phases);
    Py_CLEAR(self->done);
    Py_CLEAR(self->model_index);
    Py_CLEAR(self->trained_models);
    Py_CLEAR(self->first_model);
    if (self->has_open) {
        step_clear(&self->open);
        self->has_open = 0;
    }
    for (Py_ssize_t i = 0; i < self->n_tentative; i++) {
        step_clear(&self->tentative[i]);
    }
    self->n_tentative = 0;
    for (Py_ssize_t i = 0; i < self->n_models; i++) {
        Model *m = &self->models[i];
        Py_CLEAR(m->model_id);
        Py_CLEAR(m->class_name);
        Py_CLEAR(m->threads);
        for (Py_ssize_t k = 0; k < m->n_active; k++) {
            Py_CLEAR(m->active[k].tid);
        }
        PyMem_Free(m->active);
        m->active = NULL;
        m->n_active = m->cap_active = 0;
    }
    self->n_models = 0;
    return 0;
}

static void
reducer_dealloc(Reducer *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    reducer_clear(self);
    PyMem_Free(self->tentative);
    PyMem_Free(self->models);
    PyMem_Free(self->rows.data);
    PyMem_Free(self->marks.data);
    type->tp_free((PyObject *)self);
}

static PyObject *
reducer_get_mode(Reducer *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->mode != NULL ? self->mode : Py_None);
}

static PyGetSetDef reducer_getset[] = {
    {"mode", (getter)reducer_get_mode, NULL,
     "What ends steps: None (not known yet), 'explicit', 'optimizer' or 'model'.", NULL},
    {NULL},
};

static PyMemberDef reducer_members[] = {
    {"owner_thread", T_OBJECT, offsetof(Reducer, owner), READONLY,
     "The thread whose phases make up steps."},
    {"model_names", T_OBJECT, offsetof(Reducer, model_names), READONLY,
     "id(model) -> class name (a dict the monitor fills)."},
    {NULL},
};

static PyMethodDef reducer_methods[] = {
    {"feed", (PyCFunction)reducer_feed, METH_O,
     "Process events (a list or tuple of (t_ns, code, arg, thread_id)) in order."},
    {"drain", (PyCFunction)reducer_drain, METH_O,
     "Process everything appended to an event buffer so far, taking it out."},
    {"take_steps", (PyCFunction)reducer_take_steps, METH_NOARGS,
     "Return the steps finished since the last call."},
    {"take_rows", (PyCFunction)reducer_take_rows, METH_NOARGS,
     "Return the record rows (JSON, comma-separated) of the steps made since the last call."},
    {"take_marks", (PyCFunction)reducer_take_marks, METH_NOARGS,
     "Return the progress marks (int64s, progress.MARK_FIELDS) of the steps made since the "
     "last call."},
    {"take_sample_phases", (PyCFunction)reducer_take_sample_phases, METH_NOARGS,
     "Return (sample id, phase) of the SAMPLE events fed since the last call."},
    {"finish", (PyCFunction)reducer_finish, METH_NOARGS,
     "Settle tentative model steps and return the steps left."},
    {"model_calls", (PyCFunction)reducer_model_calls, METH_NOARGS,
     "Per-model rows: (model_id, class_name, calls, threads, max_concurrent, "
     "concurrent_calls, solo_ns, solo_calls, concurrent_ns, grad_calls, train_mode_calls)."},
    {NULL},
};

static PyTypeObject ReducerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepdoctor.collect.reduce._reduce.Reducer",
    .tp_doc = "StepReducer's event loop in C (see the comment at the top of _reduce.c).",
    .tp_basicsize = sizeof(Reducer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)reducer_init,
    .tp_dealloc = (destructor)reducer_dealloc,
    .tp_traverse = (traverseproc)reducer_traverse,
    .tp_clear = (inquiry)reducer_clear,
    .tp_methods = reducer_methods,
    .tp_members = reducer_members,
    .tp_getset = reducer_getset,
};

static int
reduce_exec(PyObject *module)
{
    if (PyType_Ready(&ReducerType) < 0 || PyModule_AddType(module, &ReducerType) < 0) {
        return -1;
    }
    str_other = PyUnicode_InternFromString("other");
    str_forward = PyUnicode_InternFromString("forward");
    str_explicit = PyUnicode_InternFromString("explicit");
    str_optimizer = PyUnicode_InternFromString("optimizer");
    str_model = PyUnicode_InternFromString("model");
    str_unknown_class = PyUnicode_InternFromString("?");
    str_data_wait = PyUnicode_InternFromString("data_wait");
    str_backward = PyUnicode_InternFromString("backward");
    str_evaluation = PyUnicode_InternFromString("evaluation");
    str_setup = PyUnicode_InternFromString("setup");
    str_empty = PyUnicode_InternFromString("");
    if (str_other == NULL || str_forward == NULL || str_explicit == NULL
        || str_optimizer == NULL || str_model == NULL || str_unknown_class == NULL
        || str_data_wait == NULL || str_backward == NULL || str_evaluation == NULL
        || str_setup == NULL || str_empty == NULL) {
        return -1;
    }
    if (events_api == NULL) { /* the C event buffer, where _hotpath was built */
        /* imported here: PyCapsule_Import only finds a submodule already imported */
        PyObject *hotpath = PyImport_ImportModule("stepdoctor.collect.hooks._hotpath");
        if (hotpath != NULL) {
            events_api = (TdEventsApi *)PyCapsule_Import(TD_EVENTS_CAPSULE, 0);
            Py_DECREF(hotpath);
        }
        if (events_api == NULL) {
            PyErr_Clear(); /* drain() then asks the buffer for take() */
        }
    }
    /* whether drain() reads _hotpath's Events as structs (tests check it does where built) */
    if (PyModule_AddIntConstant(module, "READS_EVENT_STRUCTS", events_api != NULL) < 0) {
        return -1;
    }
    static const struct { const char *name; int value; } codes[] = {
        {"ENTER", ENTER},         {"EXIT", EXIT},         {"STEP", STEP},
        {"OPT_END", OPT_END},     {"FWD_ENTER", FWD_ENTER}, {"FWD_EXIT", FWD_EXIT},
        {"GC_START", GC_START},   {"GC_STOP", GC_STOP},     {"SAMPLE", SAMPLE},
    };
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        if (PyModule_AddIntConstant(module, codes[i].name, codes[i].value) < 0) {
            return -1;
        }
    }
    return 0;
}

static PyModuleDef_Slot reduce_slots[] = {
    {Py_mod_exec, reduce_exec},
    {0, NULL},
};

static struct PyModuleDef reduce_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "stepdoctor.collect.reduce._reduce",
    .m_doc = "The step reducer's event loop in C (see the comment at the top of _reduce.c).",
    .m_size = 0,
    .m_slots = reduce_slots,
};

PyMODINIT_FUNC
PyInit__reduce(void)
{
    return PyModuleDef_Init(&reduce_module);
}
