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

/* thread_stack(thread_id, limit) -> [(code, line), ...] innermost first, or None when no
 * thread of this interpreter has that id. */
static PyObject *
thread_stack(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "thread_stack(thread_id, limit)");
        return NULL;
    }
    unsigned long thread_id = PyLong_AsUnsignedLong(args[0]);
    if (thread_id == (unsigned long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t limit = PyLong_AsSsize_t(args[1]);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (limit < 0 || limit > MAX_FRAMES) {
        limit = MAX_FRAMES;
    }
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
        if (t->thread_id != thread_id) {
            continue;
        }
        found = 1;
        for (_PyInterpreterFrame *f = TD_CURRENT_FRAME(t); f != NULL && n < limit;
             f = f->previous) {
            if (!visible(f)) {
                continue;
            }
            PyCodeObject *code = TD_CODE(f);
            Py_INCREF(code);
            codes[n] = code;
            lines[n] = PyCode_Addr2Line(code, _PyInterpreterFrame_LASTI(f) * sizeof(_Py_CODEUNIT));
            n++;
        }
        break;
    }
    TD_UNLOCK();
    PyObject *result = found ? PyList_New(n) : Py_NewRef(Py_None);
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

#endif /* TD_FRAMES */

static PyMethodDef frames_methods[] = {
#ifdef TD_FRAMES
    {"thread_stack", (PyCFunction)(void (*)(void))thread_stack, METH_FASTCALL,
     "thread_stack(thread_id, limit) -> [(code, line), ...], innermost first, of the thread's "
     "Python frames (at most limit; incomplete frames left out), or None when no thread has "
     "that id. Makes no frame object."},
#endif
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot frames_slots[] = {
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
