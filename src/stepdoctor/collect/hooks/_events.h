/* The hot path's event buffer as C structs, shared by _hotpath.c (which owns the ``Events``
 * type and fills it) and _reduce.c (which drains it without making a Python object per
 * event). docs/design/hot-path.md says why.
 *
 * An event is what events.py describes, ``(t_ns, code, arg, thread_id)``, with ``arg`` kept
 * as None, an int that fits 64 bits (``TD_ARG_INT``), or any other object, owned by the
 * buffer (``TD_ARG_OBJ``: a phase name, a bool, a bigger int...).
 *
 * _hotpath exports the functions below in a capsule named ``TD_EVENTS_CAPSULE``; a module that
 * cannot import it (_hotpath not built) treats an event buffer as any object with ``take()``.
 */
#ifndef STEPDOCTOR_EVENTS_H
#define STEPDOCTOR_EVENTS_H

#include <Python.h>

#define TD_EVENTS_CAPSULE "stepdoctor.collect.hooks._hotpath._events_api"

enum { TD_ARG_NONE = 0, TD_ARG_INT = 1, TD_ARG_OBJ = 2 };

typedef struct {
    long long t;
    unsigned long long tid;
    int code;
    int kind; /* TD_ARG_* */
    union {
        long long i;   /* TD_ARG_INT */
        PyObject *obj; /* TD_ARG_OBJ: a strong reference */
    } arg;
} TdEvent;

typedef struct {
    /* The ``Events`` type. */
    PyTypeObject *type;
    /* Take out the ``*n`` events appended so far, oldest first (NULL and 0 when there are
     * none). The caller owns them until it hands them back with ``give_back``, which it must
     * do (with the GIL held, like every call here). Never fails. */
    TdEvent *(*take)(PyObject *events, Py_ssize_t *n);
    /* Release what ``take`` returned (the objects' references, the array or its reuse). */
    void (*give_back)(PyObject *events, TdEvent *taken, Py_ssize_t n);
} TdEventsApi;

#endif
