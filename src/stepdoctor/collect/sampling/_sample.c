/* A native thread that reads small files (/proc/stat, /proc/<pid>/stat) at a fixed interval.
 *
 * What a sample costs the job is mostly the monitor waking up: after 100 ms asleep, the first
 * microseconds of Python code run 10-20x slower than warm (caches and TLBs refilled; measured
 * here: /proc/stat parsed in 314 us the first time after a 100 ms sleep, 14 us the second),
 * and a Python thread must also take the GIL from the job's thread. This thread holds no
 * Python object and never takes the GIL: at each tick it preads every file into a snapshot
 * (kept descriptors, no path lookups), and the monitor turns the snapshots into samples at
 * its flush, twice a second, with its code warm. Python twin and reference:
 * sampler.PySampler (docs/design/hot-path.md).
 *
 * Interface (sampler.Sampler):
 *   Sampler(interval_ns, capacity=600, nice=None)
 *   set_files(paths) -> generation     files read from the next tick on (unreadable: None)
 *   start(); stop()                    stop joins and closes the files; both safe to repeat
 *   take() -> [(t_ns, generation, (bytes | None, ...)), ...]   oldest first, since last take
 *   cpu_ns                             the thread's CPU time, once stopped
 * t_ns is CLOCK_MONOTONIC (time.monotonic_ns()). When take() is not called, the oldest
 * snapshots beyond capacity are dropped (counted in .dropped).
 *
 * In a child made by fork() (DataLoader workers) the thread does not exist: the object then
 * neither joins nor reads, and take() returns [].
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "_gilwait.h"

/* Larger than what is read of any file: /proc/stat's cpu lines come first, and its long
 * interrupt lines past this are not needed. */
#define READ_MAX (1 << 20)
#define READ_FIRST (1 << 16)

typedef struct {
    long long t_ns;
    unsigned long generation;
    Py_ssize_t n;
    Py_ssize_t *lengths; /* -1: the file could not be read */
    char *data;          /* the files' bytes, one after the other */
} Snapshot;

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    pthread_t thread;
    int started, stopping, joined;
    pid_t owner_pid;
    long long interval_ns;
    int nice, set_nice;
    /* the files: written with the mutex held, read by the thread with it held */
    int *fds;
    Py_ssize_t n_fds;
    unsigned long generation;
    /* the ring of snapshots */
    Snapshot **ring;
    Py_ssize_t capacity, head, count;
    unsigned long long dropped;
    long long cpu_ns; /* the thread's CPU time, set when it ends */
    /* the thread's read buffer */
    char *scratch;
    size_t scratch_size;
    int ready; /* __init__ ran */
} Sampler;

static void
close_fds(int *fds, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    free(fds);
}

/* pread the whole file (up to READ_MAX) into scratch; its length, or -1. Mutex held. */
static ssize_t
read_file(Sampler *self, int fd)
{
    if (fd < 0) {
        return -1;
    }
    for (;;) {
        ssize_t got = pread(fd, self->scratch, self->scratch_size, 0);
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        if ((size_t)got < self->scratch_size || self->scratch_size >= READ_MAX) {
            return got;
        }
        char *grown = realloc(self->scratch, self->scratch_size * 2);
        if (grown == NULL) {
            return got; /* keep what fitted */
        }
        self->scratch = grown;
        self->scratch_size *= 2;
    }
}

/* One snapshot of every file into the ring. Mutex held. */
static void
take_snapshot(Sampler *self)
{
    long long t = td_monotonic_ns();
    Py_ssize_t n = self->n_fds;
    Py_ssize_t *lengths = malloc((n > 0 ? n : 1) * sizeof(Py_ssize_t));
    char *data = NULL;
    size_t used = 0;
    if (lengths == NULL) {
        return;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        ssize_t got = read_file(self, self->fds[i]);
        lengths[i] = got;
        if (got <= 0) {
            continue;
        }
        char *grown = realloc(data, used + (size_t)got);
        if (grown == NULL) {
            lengths[i] = -1;
            continue;
        }
        data = grown;
        memcpy(data + used, self->scratch, (size_t)got);
        used += (size_t)got;
    }
    Snapshot *snap = malloc(sizeof(Snapshot));
    if (snap == NULL) {
        free(lengths);
        free(data);
        return;
    }
    snap->t_ns = t;
    snap->generation = self->generation;
    snap->n = n;
    snap->lengths = lengths;
    snap->data = data;
    if (self->count == self->capacity) { /* drop the oldest */
        Snapshot *old = self->ring[self->head];
        free(old->lengths);
        free(old->data);
        free(old);
        self->head = (self->head + 1) % self->capacity;
        self->count--;
        self->dropped++;
    }
    self->ring[(self->head + self->count) % self->capacity] = snap;
    self->count++;
}

static void *
run(void *arg)
{
    Sampler *self = arg;
    if (self->set_nice) {
        /* Linux: the nice value is per thread (monitor.MONITOR_NICE) */
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), self->nice);
    }
    pthread_mutex_lock(&self->mutex);
    long long next = td_monotonic_ns();
    while (!self->stopping) {
        next += self->interval_ns;
        long long now = td_monotonic_ns();
        if (next <= now) { /* fell behind (suspended, starved): start again from now */
            next = now + self->interval_ns;
        }
        struct timespec until = {
            .tv_sec = (time_t)(next / 1000000000LL),
            .tv_nsec = (long)(next % 1000000000LL),
        };
        while (!self->stopping) {
            int rc = pthread_cond_timedwait(&self->wake, &self->mutex, &until);
            if (rc == ETIMEDOUT || td_monotonic_ns() >= next) {
                break;
            }
        }
        if (self->stopping) {
            break;
        }
        take_snapshot(self);
    }
    struct timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0) {
        self->cpu_ns = (long long)cpu.tv_sec * 1000000000LL + cpu.tv_nsec;
    }
    pthread_mutex_unlock(&self->mutex);
    return NULL;
}

/* The mutex, taken without holding the GIL (the thread may hold it for a tick's reads). */
static void
lock(Sampler *self)
{
    if (pthread_mutex_trylock(&self->mutex) != 0) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&self->mutex);
        Py_END_ALLOW_THREADS
    }
}

static int
usable(Sampler *self)
{
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "Sampler.__init__ was not called");
        return 0;
    }
    return 1;
}

static int
sampler_init(Sampler *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"interval_ns", "capacity", "nice", NULL};
    long long interval_ns;
    Py_ssize_t capacity = 600;
    PyObject *nice = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "L|nO", keywords, &interval_ns, &capacity,
                                     &nice)) {
        return -1;
    }
    if (self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "Sampler.__init__ called twice");
        return -1;
    }
    if (interval_ns <= 0 || capacity <= 0) {
        PyErr_SetString(PyExc_ValueError, "interval_ns and capacity must be positive");
        return -1;
    }
    if (nice != Py_None) {
        long value = PyLong_AsLong(nice);
        if (value == -1 && PyErr_Occurred()) {
            return -1;
        }
        self->nice = (int)value;
        self->set_nice = 1;
    }
    self->ring = calloc((size_t)capacity, sizeof(Snapshot *));
    self->scratch = malloc(READ_FIRST);
    self->fds = malloc(sizeof(int));
    if (self->ring == NULL || self->scratch == NULL || self->fds == NULL) {
        free(self->ring);
        free(self->scratch);
        free(self->fds);
        self->ring = NULL;
        self->scratch = NULL;
        self->fds = NULL;
        PyErr_NoMemory();
        return -1;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&self->wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&self->mutex, NULL);
    self->scratch_size = READ_FIRST;
    self->capacity = capacity;
    self->interval_ns = interval_ns;
    self->owner_pid = getpid();
    self->ready = 1;
    return 0;
}

static PyObject *
sampler_set_files(Sampler *self, PyObject *paths)
{
    if (!usable(self)) {
        return NULL;
    }
    if (getpid() != self->owner_pid) {
        PyErr_SetString(PyExc_RuntimeError, "a Sampler cannot be changed in a forked child");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(paths, "paths must be a sequence of str or bytes");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **encoded = PyMem_Calloc(n > 0 ? n : 1, sizeof(PyObject *));
    int *fds = malloc((n > 0 ? n : 1) * sizeof(int));
    PyObject *result = NULL;
    if (encoded == NULL || fds == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, i), &encoded[i])) {
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        fds[i] = open(PyBytes_AS_STRING(encoded[i]), O_RDONLY | O_CLOEXEC);
    }
    Py_END_ALLOW_THREADS
    lock(self);
    int *old = self->fds;
    Py_ssize_t n_old = self->n_fds;
    self->fds = fds;
    self->n_fds = n;
    unsigned long generation = ++self->generation;
    pthread_mutex_unlock(&self->mutex);
    fds = NULL;
    close_fds(old, n_old);
    result = PyLong_FromUnsignedLong(generation);
done:
    if (encoded != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_XDECREF(encoded[i]);
        }
        PyMem_Free(encoded);
    }
    free(fds);
    Py_DECREF(seq);
    return result;
}

static PyObject *
sampler_start(Sampler *self, PyObject *Py_UNUSED(ignored))
{
    if (!usable(self)) {
        return NULL;
    }
    if (self->started) {
        Py_RETURN_NONE;
    }
    if (getpid() != self->owner_pid) {
        PyErr_SetString(PyExc_RuntimeError, "a Sampler cannot start in a forked child");
        return NULL;
    }
    int rc = pthread_create(&self->thread, NULL, run, self);
    if (rc != 0) {
        errno = rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    self->started = 1;
    Py_RETURN_NONE;
}

static void
stop_thread(Sampler *self)
{
    if (!self->started || self->joined || getpid() != self->owner_pid) {
        return;
    }
    lock(self);
    self->stopping = 1;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->mutex);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(self->thread, NULL);
    Py_END_ALLOW_THREADS
    self->joined = 1;
    for (Py_ssize_t i = 0; i < self->n_fds; i++) { /* nothing reads them any more */
        if (self->fds[i] >= 0) {
            close(self->fds[i]);
            self->fds[i] = -1;
        }
    }
}

static PyObject *
sampler_stop(Sampler *self, PyObject *Py_UNUSED(ignored))
{
    if (!usable(self)) {
        return NULL;
    }
    stop_thread(self);
    Py_RETURN_NONE;
}

static void
free_snapshot(Snapshot *snap)
{
    free(snap->lengths);
    free(snap->data);
    free(snap);
}

static PyObject *
snapshot_tuple(Snapshot *snap)
{
    PyObject *contents = PyTuple_New(snap->n);
    if (contents == NULL) {
        return NULL;
    }
    size_t at = 0;
    for (Py_ssize_t i = 0; i < snap->n; i++) {
        PyObject *item;
        if (snap->lengths[i] < 0) {
            item = Py_NewRef(Py_None);
        }
        else {
            item = PyBytes_FromStringAndSize(snap->data + at, snap->lengths[i]);
            at += (size_t)snap->lengths[i];
            if (item == NULL) {
                Py_DECREF(contents);
                return NULL;
            }
        }
        PyTuple_SET_ITEM(contents, i, item);
    }
    return Py_BuildValue("(LkN)", snap->t_ns, snap->generation, contents);
}

static PyObject *
sampler_take(Sampler *self, PyObject *Py_UNUSED(ignored))
{
    if (!usable(self)) {
        return NULL;
    }
    if (getpid() != self->owner_pid) {
        return PyList_New(0);
    }
    lock(self);
    Py_ssize_t count = self->count;
    Snapshot **taken = malloc((count > 0 ? count : 1) * sizeof(Snapshot *));
    if (taken == NULL) {
        pthread_mutex_unlock(&self->mutex);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        taken[i] = self->ring[(self->head + i) % self->capacity];
    }
    self->head = 0;
    self->count = 0;
    pthread_mutex_unlock(&self->mutex);
    PyObject *result = PyList_New(count);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (result != NULL) {
            PyObject *item = snapshot_tuple(taken[i]);
            if (item == NULL) {
                Py_CLEAR(result);
            }
            else {
                PyList_SET_ITEM(result, i, item);
            }
        }
        free_snapshot(taken[i]);
    }
    free(taken);
    return result;
}

static void
sampler_dealloc(Sampler *self)
{
    PyTypeObject *type = Py_TYPE(self);
    if (self->ready) {
        stop_thread(self);
        if (!self->started || self->joined) {
            /* (a forked child leaves the parent's thread's memory alone) */
            for (Py_ssize_t i = 0; i < self->count; i++) {
                free_snapshot(self->ring[(self->head + i) % self->capacity]);
            }
            free(self->ring);
            free(self->scratch);
            close_fds(self->fds, self->n_fds);
            pthread_mutex_destroy(&self->mutex);
            pthread_cond_destroy(&self->wake);
        }
    }
    type->tp_free((PyObject *)self);
}

static PyObject *
sampler_get_generation(Sampler *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLong(self->generation);
}

static PyObject *
sampler_get_dropped(Sampler *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(self->dropped);
}

static PyObject *
sampler_get_cpu_ns(Sampler *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->joined ? self->cpu_ns : 0);
}

static PyGetSetDef sampler_getset[] = {
    {"cpu_ns", (getter)sampler_get_cpu_ns, NULL,
     "CPU time the thread spent, once stopped (0 before).", NULL},
    {"generation", (getter)sampler_get_generation, NULL,
     "The number set_files() returned last (0: none yet).", NULL},
    {"dropped", (getter)sampler_get_dropped, NULL,
     "Snapshots dropped because take() came too late.", NULL},
    {NULL},
};

static PyMethodDef sampler_methods[] = {
    {"set_files", (PyCFunction)sampler_set_files, METH_O,
     "Read these files from the next tick on; returns their generation number."},
    {"start", (PyCFunction)sampler_start, METH_NOARGS, "Start the thread."},
    {"stop", (PyCFunction)sampler_stop, METH_NOARGS, "Stop the thread and wait for it."},
    {"take", (PyCFunction)sampler_take, METH_NOARGS,
     "Return [(t_ns, generation, contents)] taken since the last call, oldest first."},
    {NULL},
};

static PyTypeObject SamplerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepdoctor.collect.sampling._sample.Sampler",
    .tp_doc = "A thread reading small files at an interval (see the top of _sample.c).",
    .tp_basicsize = sizeof(Sampler),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)sampler_init,
    .tp_dealloc = (destructor)sampler_dealloc,
    .tp_methods = sampler_methods,
    .tp_getset = sampler_getset,
};

static int
sample_exec(PyObject *module)
{
    if (PyType_Ready(&SamplerType) < 0 || PyModule_AddType(module, &SamplerType) < 0) {
        return -1;
    }
    static int forks_handled = 0; /* once a process, however often the module is set up */
    if (!forks_handled && pthread_atfork(NULL, NULL, td_gilwait_after_fork) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
        return -1;
    }
    forks_handled = 1;
    return PyModule_AddIntConstant(module, "READ_MAX", READ_MAX);
}

static PyModuleDef_Slot sample_slots[] = {
    {Py_mod_exec, sample_exec},
    {0, NULL},
};

/* sleep_until(deadline_ns, switch_us=0) -> (woke_ns, gil_ns): sleep without the GIL until
 * CLOCK_MONOTONIC reaches deadline_ns, then take the GIL back (_gilwait.h). woke_ns is when
 * the sleep ended, gil_ns when the GIL was held again. */
static PyObject *
sleep_until(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "sleep_until(deadline_ns, switch_us=0)");
        return NULL;
    }
    long long deadline = PyLong_AsLongLong(args[0]);
    if (deadline == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long switch_us = nargs > 1 ? PyLong_AsLong(args[1]) : 0;
    if (switch_us == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long long got;
    long long woke = td_sleep_then_take(deadline, switch_us, NULL, NULL, &got);
    return Py_BuildValue("LL", woke, got);
}

/* The allocation window's censuses (allocations.py). Another thread's code may hold an object
 * it is still building with one reference (tuple(genexpr) resizes its tuple in place, and
 * fails when another reference exists: "bad argument to internal function"). A census from
 * Python holds the collector's whole list across bytecodes, where the GIL may go to that
 * thread: these run from the list to their result in one C call, with the collector off (its
 * callbacks are Python code), and drop the list before they return. */

/* gc.get_objects(generation), or its last `tail` objects (tail < 0: all). */
static PyObject *
gc_objects(long generation, Py_ssize_t tail)
{
    PyObject *gc = PyImport_ImportModule("gc");
    if (gc == NULL) {
        return NULL;
    }
    PyObject *objects = generation < 0 ? PyObject_CallMethod(gc, "get_objects", NULL)
                                       : PyObject_CallMethod(gc, "get_objects", "l", generation);
    Py_DECREF(gc);
    if (objects == NULL || tail < 0 || PyList_GET_SIZE(objects) <= tail) {
        return objects;
    }
    PyObject *last = PyList_GetSlice(objects, PyList_GET_SIZE(objects) - tail,
                                     PyList_GET_SIZE(objects));
    Py_DECREF(objects);
    return last;
}

/* instances(cls) -> [objects the collector tracks whose type is cls or a subclass] */
static PyObject *
census_instances(PyObject *Py_UNUSED(module), PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "instances(cls): cls must be a type");
        return NULL;
    }
    int was_enabled = PyGC_Disable();
    PyObject *objects = gc_objects(-1, -1);
    PyObject *found = objects == NULL ? NULL : PyList_New(0);
    for (Py_ssize_t i = 0; found != NULL && i < PyList_GET_SIZE(objects); i++) {
        PyObject *obj = PyList_GET_ITEM(objects, i);
        if (PyType_IsSubtype(Py_TYPE(obj), (PyTypeObject *)cls) && PyList_Append(found, obj) < 0) {
            Py_CLEAR(found);
        }
    }
    Py_XDECREF(objects);
    if (was_enabled) {
        PyGC_Enable();
    }
    return found;
}

/* count_by(fn, generation, tail) -> {fn(obj): count} over gc.get_objects(generation)[-tail:]
 * (tail < 0: all); results that are None are not counted. fn must be a C function: Python
 * code would run bytecode while the list is held. */
static PyObject *
census_count_by(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "count_by(fn, generation, tail)");
        return NULL;
    }
    long generation = PyLong_AsLong(args[1]);
    Py_ssize_t tail = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    int was_enabled = PyGC_Disable();
    PyObject *objects = gc_objects(generation, tail);
    /* key -> its index in n; the counts stay C integers until the end (a Python int per
     * increment would be an allocation each, and tracemalloc may be tracing them) */
    PyObject *index = objects == NULL ? NULL : PyDict_New();
    Py_ssize_t size = objects == NULL ? 0 : PyList_GET_SIZE(objects);
    Py_ssize_t *n = objects == NULL ? NULL : calloc(size > 0 ? size : 1, sizeof(Py_ssize_t));
    Py_ssize_t keys = 0;
    int failed = index == NULL || n == NULL;
    for (Py_ssize_t i = 0; !failed && i < size; i++) {
        PyObject *key = PyObject_CallOneArg(args[0], PyList_GET_ITEM(objects, i));
        if (key == NULL) {
            failed = 1;
            break;
        }
        if (key != Py_None) {
            PyObject *at = PyDict_GetItemWithError(index, key);
            if (at != NULL) {
                n[PyLong_AsSsize_t(at)]++;
            }
            else if (PyErr_Occurred()) {
                failed = 1;
            }
            else {
                PyObject *slot = PyLong_FromSsize_t(keys);
                if (slot == NULL || PyDict_SetItem(index, key, slot) < 0) {
                    failed = 1;
                }
                else {
                    n[keys++] = 1;
                }
                Py_XDECREF(slot);
            }
        }
        Py_DECREF(key);
    }
    PyObject *counts = failed ? NULL : PyDict_New();
    PyObject *key, *at;
    Py_ssize_t pos = 0;
    while (counts != NULL && PyDict_Next(index, &pos, &key, &at)) {
        PyObject *count = PyLong_FromSsize_t(n[PyLong_AsSsize_t(at)]);
        if (count == NULL || PyDict_SetItem(counts, key, count) < 0) {
            Py_CLEAR(counts);
        }
        Py_XDECREF(count);
    }
    Py_XDECREF(index);
    free(n);
    Py_XDECREF(objects);
    if (was_enabled) {
        PyGC_Enable();
    }
    return counts;
}

static PyMethodDef sample_functions[] = {
    {"instances", census_instances, METH_O,
     "instances(cls) -> the objects the collector tracks that are instances of cls, found "
     "in one C call (see _sample.c)."},
    {"count_by", (PyCFunction)(void (*)(void))census_count_by, METH_FASTCALL,
     "count_by(fn, generation, tail) -> {fn(obj): count} over the last tail objects of "
     "gc.get_objects(generation) (tail < 0: all; None results left out), in one C call; fn "
     "must be a C function."},
    {"sleep_until", (PyCFunction)(void (*)(void))sleep_until, METH_FASTCALL,
     "sleep_until(deadline_ns, switch_us=0) -> (woke_ns, gil_ns): sleep without the GIL "
     "until time.monotonic_ns() reaches deadline_ns, then wait for the GIL with the switch "
     "interval at switch_us (0, or CPython 3.12 and later: as it is); when the sleep ended "
     "and when the GIL was held again."},
    {NULL},
};

static struct PyModuleDef sample_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "stepdoctor.collect.sampling._sample",
    .m_doc = "A native thread reading small files at an interval (see the top of _sample.c).",
    .m_size = 0,
    .m_methods = sample_functions,
    .m_slots = sample_slots,
};

PyMODINIT_FUNC
PyInit__sample(void)
{
    return PyModuleDef_Init(&sample_module);
}
