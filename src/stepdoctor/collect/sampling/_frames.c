/* Another thread's Python stack, read in one C call: the stack sampler's walk (stacks.py).
 *
 * ``sys._current_frames()`` makes a frame object for another thread's running frame, and
 * walking its ``f_back`` makes one for each caller. On CPython 3.11 that thread may pop those
 * frames while the walk is still in Python code (the GIL changes hands between bytecodes),
 * and a frame object whose callers were all incomplete keeps a pointer to a popped frame:
 * the next ``f_back`` reads freed memory (python/cpython gh-99110, getsentry/sentry-python
 * #2386). Measured here: 2 in 10 zoo runs died of SIGSEGV in that walk at 1 kHz, while the
 * job was importing torch._dynamo. Python-level samplers of 3.11 (sentry, ddtrace) crash the
 * same way.
 *
 * ``thread_stack`` reads the interpreter's own frame records instead (the internal
 * ``_PyInterpreterFrame``, as faulthandler and sys._current_frames do), makes no frame
 * object, and runs from the thread's list to its result without running Python code or
 * allocating before its references are taken: the other thread cannot run (it needs the GIL
 * this call holds), so every frame it reads is alive. Built for the CPython versions whose
 * frame layout it was written against (3.11 to 3.13); elsewhere the module has no
 * ``thread_stack`` and stacks.py walks frame objects. */
#define PY_SSIZE_T_CLEAN
#include <patchlevel.h>

/* The internal headers want the core's own build flag, set before Python.h. */
#if !defined(PYPY_VERSION) && PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
#define TD_FRAMES 1
#define Py_BUILD_CORE 1
#endif

#include <Python.h>

#ifdef TD_FRAMES
#include "internal/pycore_frame.h"
#include "internal/pycore_runtime.h"
#ifdef __linux__
#include <pthread.h>
#include <stdatomic.h>

#include "_gilwait.h"
#endif
#endif

#ifdef TD_FRAMES

/* The most frames one call reads (stacks.py keeps MAX_DEPTH of the job's). */
#define MAX_FRAMES 512

#if PY_VERSION_HEX >= 0x030D0000
#define TD_CURRENT_FRAME(t) ((t)->current_frame)
#define TD_CODE(f) (PyCode_Check((f)->f_executable) ? (PyCodeObject *)(f)->f_executable : NULL)
#else
#define TD_CURRENT_FRAME(t) ((t)->cframe == NULL ? NULL : (t)->cframe->current_frame)
#define TD_CODE(f) ((f)->f_code)
#endif

/* The list of thread states changes under the runtime's HEAD lock (a thread of C code
 * making its first thread state does not hold the GIL): sys._current_frames takes it too. */
#if PY_VERSION_HEX >= 0x030D0000
/* (PyMutex_Lock lets the GIL go while it waits: nothing has been read yet) */
#define TD_LOCK() PyMutex_Lock(&_PyRuntime.interpreters.mutex)
#define TD_UNLOCK() PyMutex_Unlock(&_PyRuntime.interpreters.mutex)
#else
#define TD_LOCK() PyThread_acquire_lock(_PyRuntime.interpreters.mutex, WAIT_LOCK)
#define TD_UNLOCK() PyThread_release_lock(_PyRuntime.interpreters.mutex)
#endif

/* Whether a frame is the caller's to see: not a C-stack shim (3.12+), not one whose first
 * instruction has not run (its record is still being filled), and with a code object. */
static int
visible(_PyInterpreterFrame *frame)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (frame->owner == FRAME_OWNED_BY_CSTACK) {
        return 0;
    }
#endif
    if (TD_CODE(frame) == NULL) {
        return 0;
    }
    return !_PyFrame_IsIncomplete(frame);
}

/* Up to `limit` visible frames of thread state `t`, innermost first, into `codes` (each with
 * a reference of its own) and `lines`: their count. Nothing here allocates or runs Python
 * code. */
static Py_ssize_t
read_frames(PyThreadState *t, Py_ssize_t limit, PyCodeObject **codes, int *lines)
{
    Py_ssize_t n = 0;
    for (_PyInterpreterFrame *f = TD_CURRENT_FRAME(t); f != NULL && n < limit; f = f->previous) {
        if (!visible(f)) {
            continue;
        }
        PyCodeObject *code = TD_CODE(f);
        Py_INCREF(code);
        codes[n] = code;
        lines[n] = PyCode_Addr2Line(code, _PyInterpreterFrame_LASTI(f) * sizeof(_Py_CODEUNIT));
        n++;
    }
    return n;
}

/* [(code, line), ...] of what read_frames read; its references are given up either way.
 * NULL with an exception set when memory ran out. */
static PyObject *
stack_list(PyCodeObject **codes, int *lines, Py_ssize_t n)
{
    PyObject *result = PyList_New(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (result != NULL) {
            PyObject *pair = Py_BuildValue("(Oi)", (PyObject *)codes[i], lines[i]);
            if (pair == NULL) {
                Py_CLEAR(result);
            }
            else {
                PyList_SET_ITEM(result, i, pair);
            }
        }
        Py_DECREF(codes[i]);
    }
    return result;
}

static Py_ssize_t
clamp_limit(Py_ssize_t limit)
{
    return limit < 0 || limit > MAX_FRAMES ? MAX_FRAMES : limit;
}

/* The stack of the thread with that id as a list, Py_None when no thread of this interpreter
 * has it, NULL with an exception set when memory ran out. The GIL is held. */
static PyObject *
stack_of(unsigned long thread_id, Py_ssize_t limit)
{
    /* From here to the result nothing allocates or runs Python code: the codes are held
     * with a reference of their own before anything else can happen. */
    PyCodeObject *codes[MAX_FRAMES];
    int lines[MAX_FRAMES];
    Py_ssize_t n = 0;
    int found = 0;
    PyInterpreterState *interp = PyInterpreterState_Get();
    TD_LOCK();
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t != NULL;
         t = PyThreadState_Next(t)) {
        if (t->thread_id == thread_id) {
            found = 1;
            n = read_frames(t, clamp_limit(limit), codes, lines);
            break;
        }
    }
    TD_UNLOCK();
    return found ? stack_list(codes, lines, n) : Py_NewRef(Py_None);
}

/* A thread id and a frame limit from args[0] and args[1]: -1 with an exception set when
 * either is not an int of its range. */
static int
thread_and_limit(PyObject *const *args, unsigned long *thread_id, Py_ssize_t *limit)
{
    *thread_id = PyLong_AsUnsignedLong(args[0]);
    if (*thread_id == (unsigned long)-1 && PyErr_Occurred()) {
        return -1;
    }
    *limit = PyLong_AsSsize_t(args[1]);
    return *limit == -1 && PyErr_Occurred() ? -1 : 0;
}

/* thread_stack(thread_id, limit) -> [(code, line), ...] innermost first, or None when no
 * thread of this interpreter has that id. */
static PyObject *
thread_stack(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "thread_stack(thread_id, limit)");
        return NULL;
    }
    unsigned long thread_id;
    Py_ssize_t limit;
    if (thread_and_limit(args, &thread_id, &limit) < 0) {
        return NULL;
    }
    return stack_of(thread_id, limit);
}

#ifdef __linux__
/* The main thread reading its own stack at the sampler's request (sleep_read).
 *
 * The sampler reads another thread's stack once it holds the GIL. A thread that holds the GIL
 * in C code (json.loads) and lets it go now and then for a moment (a torch op) can keep the
 * sampler waiting for milliseconds: each release wakes the waiting sampler before its
 * switch interval runs out, the job's thread takes the GIL back before the sampler runs, and
 * CPython asks a holder to give the GIL up only after a wait that timed out with no switch
 * (take_gil). The sample then lands at the next longer release, in other code: measured on
 * tests/scenarios/input_json.py, samples due in the JSON parse waited up to 5 ms and landed in
 * the collate's torch.stack, 9-47% of the data wait's samples for 2.6% of its time.
 *
 * So the sampler also asks the main thread, through CPython's pending calls (run by the main
 * thread at its next bytecode boundary, before it looks at a request to drop the GIL), to read
 * its own stack there. Whichever comes first wins: the main thread's own reading, or the
 * sampler's, when it got the GIL first (the main thread was in code that had let the GIL go:
 * it has not moved since). Each request has a number: a reading answers the request it was
 * made for, and only while that request is still the last one and open (samplers of one
 * process ask in turn; a reading that lost the GIL midway, to a collection's callbacks, is
 * dropped if the sampler moved on). At most one call of ours is queued at a time (the queue
 * holds 32 calls of every extension's). pend_stack, pend_answered and pend_closed are read and
 * written with the GIL held. */
static atomic_long pend_asked = 0;        /* the last request's number */
static atomic_ulong pend_thread = 0;      /* the thread it asks: the main thread's id */
static atomic_long pend_limit = 0;
static atomic_int pend_queued = 0;
static long pend_closed = 0;              /* requests up to this one need no reading */
static long pend_answered = 0;            /* the request pend_stack answers */
static PyObject *pend_stack = NULL;

/* A child made by fork() (a DataLoader worker) starts with no call of ours queued. */
static void
pend_after_fork(void)
{
    atomic_store(&pend_queued, 0);
    pend_closed = atomic_load(&pend_asked);
    td_gilwait_after_fork();
}

static int read_own(void *arg);

/* Not while the interpreter shuts down: it frees the queue's lock late in finalizing, while
 * a daemon thread may still be asleep here. */
#if PY_VERSION_HEX >= 0x030D0000
#define TD_FINALIZING() Py_IsFinalizing()
#else
#define TD_FINALIZING() _Py_IsFinalizing()
#endif

/* Up to 3.12 a call queued from a thread other than the main thread does not set the
 * interpreter's eval breaker (python/cpython#95820): the main thread would run it only when it
 * next stops for another reason (a request to drop the GIL, 5 ms on 3.12). Set it as CPython's
 * own asynchronous exceptions do; a thread that finds nothing to do clears it again. */
#if PY_VERSION_HEX < 0x030D0000
#define TD_BREAK_MAIN() \
    _Py_atomic_store_relaxed(&PyInterpreterState_Main()->ceval.eval_breaker, 1)
#else
#define TD_BREAK_MAIN() ((void)0)
#endif

/* Ask the main thread for its stack (the GIL is not held): the request's number, 0 when none
 * was made. */
static long
ask_for_stack(unsigned long thread_id, Py_ssize_t limit)
{
    if (TD_FINALIZING()) {
        return 0;
    }
    atomic_store(&pend_thread, thread_id);
    atomic_store(&pend_limit, (long)limit);
    long asked = atomic_fetch_add(&pend_asked, 1) + 1;
    if (!atomic_exchange(&pend_queued, 1)) {
        if (Py_AddPendingCall(read_own, NULL) != 0) {
            atomic_store(&pend_queued, 0); /* the queue is full: the sampler reads it */
            return asked;
        }
    }
    TD_BREAK_MAIN();
    return asked;
}

static int
read_own(void *Py_UNUSED(arg))
{
    atomic_store(&pend_queued, 0);
    long asked = atomic_load(&pend_asked);
    PyThreadState *tstate = PyThreadState_Get();
    if (asked <= pend_closed || tstate->thread_id != atomic_load(&pend_thread)) {
        return 0; /* answered, or not this thread's (the sampler reads it itself) */
    }
    PyCodeObject *codes[MAX_FRAMES];
    int lines[MAX_FRAMES];
    Py_ssize_t n = read_frames(tstate, clamp_limit(atomic_load(&pend_limit)), codes, lines);
    /* making the list may run a collection, and its callbacks let the GIL go */
    PyObject *stack = stack_list(codes, lines, n);
    if (stack == NULL) {
        PyErr_Clear(); /* out of memory: the sampler reads it itself */
        return 0;
    }
    if (asked != atomic_load(&pend_asked) || asked <= pend_closed) {
        Py_DECREF(stack); /* the sampler moved on meanwhile */
        return 0;
    }
    Py_XSETREF(pend_stack, stack);
    pend_answered = asked;
    pend_closed = asked;
    return 0;
}

/* The stack read for request `asked` (> 0: the main thread's reading, or the sampler's own),
 * and whether the main thread read it; the request is closed. The GIL is held. */
static PyObject *
answer(long asked, unsigned long thread_id, Py_ssize_t limit, int *by_main)
{
    *by_main = pend_answered == asked && pend_stack != NULL;
    if (asked > pend_closed) {
        pend_closed = asked;
    }
    if (*by_main) {
        PyObject *stack = pend_stack;
        pend_stack = NULL;
        return stack;
    }
    return stack_of(thread_id, limit);
}

/* What this sampler asks while it waits (the hook runs without the GIL). */
typedef struct {
    unsigned long thread_id;
    Py_ssize_t limit;
    long asked;
} Request;

static void
ask_pending(void *request)
{
    Request *r = request;
    r->asked = ask_for_stack(r->thread_id, r->limit);
}

/* sleep_read(deadline_ns, switch_us, thread_id, limit, ask_main) -> (woke_ns, gil_ns, stack,
 * by_main): _sample.sleep_until (sleep without the GIL until CLOCK_MONOTONIC reaches
 * deadline_ns, then wait for the GIL: _gilwait.h), then the thread's stack as thread_stack
 * gives it. With ask_main (the thread is the main thread), the main thread is asked to read
 * its own stack at its next bytecode boundary while the sampler waits; by_main says whose
 * reading the stack is. */
static PyObject *
sleep_read(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "sleep_read(deadline_ns, switch_us, thread_id, limit, ask_main)");
        return NULL;
    }
    long long deadline = PyLong_AsLongLong(args[0]);
    if (deadline == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long switch_us = PyLong_AsLong(args[1]);
    if (switch_us == -1 && PyErr_Occurred()) {
        return NULL;
    }
    unsigned long thread_id;
    Py_ssize_t limit;
    if (thread_and_limit(args + 2, &thread_id, &limit) < 0) {
        return NULL;
    }
    int ask_main = PyObject_IsTrue(args[4]);
    if (ask_main < 0) {
        return NULL;
    }
    Request request = {.thread_id = thread_id, .limit = limit, .asked = 0};
    long long got;
    long long woke = td_sleep_then_take(deadline, switch_us, ask_main ? ask_pending : NULL,
                                        &request, &got);
    long asked = request.asked;
    int by_main = 0;
    PyObject *stack = asked ? answer(asked, thread_id, limit, &by_main)
                            : stack_of(thread_id, limit);
    if (stack == NULL) {
        return NULL;
    }
    return Py_BuildValue("LLNO", woke, got, stack, by_main ? Py_True : Py_False);
}
#endif /* __linux__ */

#endif /* TD_FRAMES */

static PyMethodDef frames_methods[] = {
#ifdef TD_FRAMES
    {"thread_stack", (PyCFunction)(void (*)(void))thread_stack, METH_FASTCALL,
     "thread_stack(thread_id, limit) -> [(code, line), ...], innermost first, of the thread's "
     "Python frames (at most limit; incomplete frames left out), or None when no thread has "
     "that id. Makes no frame object."},
#ifdef __linux__
    {"sleep_read", (PyCFunction)(void (*)(void))sleep_read, METH_FASTCALL,
     "sleep_read(deadline_ns, switch_us, thread_id, limit, ask_main) -> (woke_ns, gil_ns, "
     "stack, by_main): sleep without the GIL until time.monotonic_ns() reaches deadline_ns, "
     "wait for the GIL with the switch interval at switch_us, then thread_stack(thread_id, "
     "limit); with ask_main, the main thread is asked to read its own stack at its next "
     "bytecode boundary meanwhile (by_main: it did)."},
#endif
#endif
    {NULL, NULL, 0, NULL},
};

static int
frames_exec(PyObject *Py_UNUSED(module))
{
#if defined(TD_FRAMES) && defined(__linux__)
    static int forks_handled = 0; /* once a process, however often the module is set up */
    if (!forks_handled && pthread_atfork(NULL, NULL, pend_after_fork) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
        return -1;
    }
    forks_handled = 1;
#endif
    return 0;
}

static PyModuleDef_Slot frames_slots[] = {
    {Py_mod_exec, frames_exec},
    {0, NULL},
};

static struct PyModuleDef frames_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "stepdoctor.collect.sampling._frames",
    .m_doc = "Another thread's Python stack without frame objects (stacks.py).",
    .m_size = 0,
    .m_methods = frames_methods,
    .m_slots = frames_slots,
};

PyMODINIT_FUNC
PyInit__frames(void)
{
    return PyModuleDef_Init(&frames_module);
}
