/* The GC log parsers' fast path in C (gc_jdk8.py, gc_unified.py; docs/logs.md).
 *
 * ``Scanner(stats, family, ...).scan(buffer, pos)`` reads the whole lines of ``buffer`` from
 * ``pos`` for as long as each is one it can take, and returns where the first one it cannot
 * take begins (or the end of the last whole line): the Python parser reads that line, then
 * hands the rest back. What it takes, it takes with the Python parser's own effect on the
 * ``GcStats`` ``stats`` (gc_stats.py), whose running sums it reads when a call starts and
 * writes back when it ends, so that the pure-Python parser is the reference: a log read with
 * this and without it gives the same figures, to the last bit.
 *
 * The lines it takes (any other line, and any line with a byte above 127, goes to Python):
 * - both families: lines the parser ignores (JDK 8: G1's indented details, heap printouts
 *   without a bracket; unified: every line whose message holds none of the words the parser
 *   looks for), and the safepoint line ``Total time for which application threads were
 *   stopped: N seconds`` with an uptime stamp or none;
 * - JDK 8: a whole collection on one line, after the first ``min_events`` events (the parser
 *   tells the collector from those): ``[up: ][#n: ][GC (cause) 1K->2K(3K), N secs]``,
 *   ``[GC pause (...) (young) ...]``, ``[Full GC ...]``, ``[GC remark, N secs]``,
 *   ``[GC cleanup ...]``: one bracket pair, no date stamp, none of the marks of a problem,
 *   a concurrent phase, CMS, the metaspace or G1's ``Heap:`` summary;
 * - unified: ``GC(n) Metaspace: ...`` lines.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum Family { JDK8 = 0, UNIFIED = 1 };
enum Result { TAKEN = 1, PYTHON = 0, NO_MATCH = 2 /* the pattern is not there */ };
#define CAUSE_CACHE 16

typedef struct {
    const char *s;
    Py_ssize_t n;
} Text;

/* A (kind, cause) entry of ``GcStats._causes`` being updated during a call. */
typedef struct {
    PyObject *kind;  /* borrowed: one of the interned kinds */
    PyObject *cause; /* owned str */
    PyObject *obj;   /* owned _Cause */
    long long count;
    double total, max;
} CauseSlot;

/* A pause parsed from a line, before it is added. */
typedef struct {
    int timed;
    double t, p;
    PyObject *kind; /* borrowed */
    Text cause;
    int heap_known;
    long long before, after, total;
    int has_unix;
    double unix_s; /* its wall-clock time where the log has dates */
} Pause;

/* A line's time stamps: the JVM's uptime, and the date in Unix seconds (``date``: its text,
 * read when the line is taken, as the parser reads it only then). */
typedef struct {
    int has_up, has_unix, has_date;
    double up, unix_s;
    Text date;
} Stamp;

typedef struct {
    PyObject_HEAD
    PyObject *stats;
    int family;
    PyObject *pause_type, *cause_type, *heappush, *heapreplace;
    Py_ssize_t kept, longest_kept;
    long long min_events;
    /* the running sums, for the length of one call */
    long long lines, events, pauses, full_gcs, safepoint_pauses, seen, stride;
    double total, max, full_s, safepoint_s, since_stop;
    int has_first, has_last, last_was_gc, has_heap_max, utc_known, utc_new;
    double utc_offset;
    int has_first_date;
    double first_date; /* GcStats._first_date, also started_unix_s */
    int first_date_new;
    PyObject *round;   /* builtins.round */
    double first_t, last_t;
    long long heap_max;
    int has_last_pause, last_pause_new;
    Pause last_pause;
    PyObject *last_pause_cause; /* owned str, for the last pause when it is new */
    PyObject *timeline, *longest, *causes; /* owned, for the call */
    double longest_min;
    int meta_set;
    long long meta_after, meta_total;
    double concurrent_s;
    PyObject *span_phases; /* frozenset of the concurrent phases that count for the span */
    /* GcStats.last_collection: id, kind (borrowed: interned or the loaded one), full pause */
    long long zgc_phases, zgc_cycles;
    int zgc_named; /* the collector was set to ZGC in this call */
    int collector_known;
    long long last_id;
    PyObject *last_kind; /* owned, for the call */
    double last_full_s;
    int last_collection_new;
    CauseSlot slots[CAUSE_CACHE];
    int nslots;
    /* an event taken with the lines after it: where the next line starts, how many it took */
    const char *resume;
    long long extra_lines;
    char *joined; /* MAX_JOINED bytes, for an event's lines joined */
} Scanner;

static PyObject *K_YOUNG, *K_MIXED, *K_FULL, *K_REMARK, *K_CLEANUP, *K_SAFEPOINT, *K_INITIAL_MARK,
    *K_CONCURRENT_PAUSE;

/* ---- text ---- */

static int is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
           (c >= 0x1c && c <= 0x1f);
}
static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int has(Text t, const char *needle) {
    size_t n = strlen(needle);
    if ((size_t)t.n < n) return 0;
    return memmem(t.s, (size_t)t.n, needle, n) != NULL;
}
static int starts(Text t, Py_ssize_t at, const char *prefix) {
    size_t n = strlen(prefix);
    return at >= 0 && (size_t)(t.n - at) >= n && memcmp(t.s + at, prefix, n) == 0;
}
static int ends(Text t, const char *suffix) {
    size_t n = strlen(suffix);
    return (size_t)t.n >= n && memcmp(t.s + t.n - n, suffix, n) == 0;
}

/* ``\d+[.,]\d+`` at ``*at``, greedy, as log_number() reads it; 1 with ``*at`` past it, 0 when
 * not there, -1 when it is there but not a finite number (Python says what). */
static int number(Text t, Py_ssize_t *at, double *out) {
    Py_ssize_t i = *at, start = i;
    while (i < t.n && is_digit(t.s[i])) i++;
    if (i == start || i >= t.n || (t.s[i] != '.' && t.s[i] != ',')) return 0;
    Py_ssize_t sep = i++;
    Py_ssize_t frac = i;
    while (i < t.n && is_digit(t.s[i])) i++;
    if (i == frac) return 0;
    /* Clinger's fast path: an integer of at most 15 digits over a power of ten up to 1e22,
     * both exact, so one division rounds correctly, as strtod does */
    if (i - start - 1 <= 15 && i - frac <= 22) {
        static const double tens[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
        long long mantissa = 0;
        for (Py_ssize_t k = start; k < i; k++)
            if (k != sep) mantissa = mantissa * 10 + (t.s[k] - '0');
        *at = i;
        *out = (double)mantissa / tens[i - frac];
        return 1;
    }
    char buf[64];
    if (i - start >= (Py_ssize_t)sizeof buf) return -1;
    memcpy(buf, t.s + start, (size_t)(i - start));
    buf[sep - start] = '.';
    buf[i - start] = '\0';
    char *end = NULL;
    double value = PyOS_string_to_double(buf, &end, NULL);
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (!isfinite(value)) return -1;
    *at = i;
    *out = value;
    return 1;
}

/* ``\d+`` at ``*at`` as an integer no larger than ``limit``: 1, 0 (none), -1 (larger). */
static int integer(Text t, Py_ssize_t *at, long long limit, long long *out) {
    Py_ssize_t i = *at;
    long long value = 0;
    if (i >= t.n || !is_digit(t.s[i])) return 0;
    while (i < t.n && is_digit(t.s[i])) {
        int d = t.s[i] - '0';
        if (value > (limit - d) / 10) return -1;
        value = value * 10 + d;
        i++;
    }
    *at = i;
    *out = value;
    return 1;
}

static long long unit_of(char c) {
    switch (c) {
    case 'B': return 1;
    case 'K': return 1024LL;
    case 'M': return 1024LL * 1024;
    case 'G': return 1024LL * 1024 * 1024;
    default: return 0;
    }
}

/* ``\d+[KMG]`` (``B`` too where ``bytes_too``) in bytes: 1, 0 (not there), -1 (too large). */
static int size(Text t, Py_ssize_t *at, int bytes_too, long long *out) {
    long long value;
    Py_ssize_t i = *at;
    int r = integer(t, &i, INT64_MAX, &value);
    if (r <= 0) return r;
    if (i >= t.n) return 0;
    long long unit = unit_of(t.s[i]);
    if (unit == 0 || (unit == 1 && !bytes_too)) return 0;
    if (value > INT64_MAX / unit) return -1;
    *out = value * unit;
    *at = i + 1;
    return 1;
}

/* The words the parsers look for, found in one pass over a line (``marks``). */
enum {
    M_CONCURRENT = 1 << 0,   /* "concurrent" */
    M_CONC_MODE = 1 << 1,    /* "concurrent mode" */
    M_CMS = 1 << 2,          /* "CMS" */
    M_META = 1 << 3,         /* "Meta" */
    M_PERM = 1 << 4,         /* "Perm" */
    M_HEAP = 1 << 5,         /* "Heap" */
    M_DASHES = 1 << 6,       /* "--" */
    M_TO_SPACE = 1 << 7,     /* "to-space" */
    M_PROMOTION = 1 << 8,    /* "promotion" */
    M_HUMONGOUS = 1 << 9,    /* "Humongous" */
    M_PAUSE = 1 << 10,       /* "Pause " */
    M_TOTAL_TIME = 1 << 11,  /* "Total time" */
    M_STALL = 1 << 12,       /* "Stall" */
    M_CONCURRENT_ = 1 << 13, /* "Concurrent " */
    M_COLLECTION = 1 << 14,  /* "Collection (" */
    M_TO_SPACE_EX = 1 << 15, /* "To-space exhausted" */
    M_EVACUATION = 1 << 16,  /* "Evacuation Failure" */
    M_METASPACE = 1 << 17,   /* "Metaspace: " */
    M_METADATA = 1 << 18,    /* "Metadata GC" */
    M_BRACKET = 1 << 19,     /* "[" */
    M_HIGH = 1 << 20,        /* a byte above 127 */
    M_META_WORD = 1 << 21,   /* "Metaspace" */
};

#define AT(word) (n - i >= (Py_ssize_t)sizeof(word) - 1 && memcmp(s + i, word, sizeof(word) - 1) == 0)

static unsigned marks(Text t) {
    const char *s = t.s;
    Py_ssize_t n = t.n;
    unsigned found = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        switch (s[i]) {
        case 'c':
            if (AT("concurrent")) found |= AT("concurrent mode") ? M_CONCURRENT | M_CONC_MODE
                                                                 : M_CONCURRENT;
            break;
        case 'C':
            if (AT("CMS")) found |= M_CMS;
            else if (AT("Concurrent ")) found |= M_CONCURRENT_;
            else if (AT("Collection (")) found |= M_COLLECTION;
            break;
        case 'M':
            if (AT("Meta")) {
                found |= M_META;
                if (AT("Metaspace")) found |= M_META_WORD;
                if (AT("Metaspace: ")) found |= M_METASPACE;
                if (AT("Metadata GC")) found |= M_METADATA;
            }
            break;
        case 'P':
            if (AT("Perm")) found |= M_PERM;
            else if (AT("Pause ")) found |= M_PAUSE;
            break;
        case 'H':
            if (AT("Heap")) found |= M_HEAP;
            else if (AT("Humongous")) found |= M_HUMONGOUS;
            break;
        case '-':
            if (AT("--")) found |= M_DASHES;
            break;
        case 't':
            if (AT("to-space")) found |= M_TO_SPACE;
            break;
        case 'p':
            if (AT("promotion")) found |= M_PROMOTION;
            break;
        case 'T':
            if (AT("Total time")) found |= M_TOTAL_TIME;
            else if (AT("To-space exhausted")) found |= M_TO_SPACE_EX;
            break;
        case 'S':
            if (AT("Stall")) found |= M_STALL;
            break;
        case 'E':
            if (AT("Evacuation Failure")) found |= M_EVACUATION;
            break;
        case '[':
            found |= M_BRACKET;
            break;
        default:
            if ((unsigned char)s[i] >= 0x80) found |= M_HIGH;
        }
    }
    return found;
}
#undef AT

/* ---- the running sums: gc_stats.GcStats, read and written back ---- */

static int get_ll(PyObject *o, const char *name, long long *out, int *present) {
    PyObject *v = PyObject_GetAttrString(o, name);
    if (v == NULL) return -1;
    if (v == Py_None) {
        if (present) *present = 0;
        Py_DECREF(v);
        return 0;
    }
    if (present) *present = 1;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "a GcStats value past 64 bits");
        return -1;
    }
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}
static int get_d(PyObject *o, const char *name, double *out, int *present) {
    PyObject *v = PyObject_GetAttrString(o, name);
    if (v == NULL) return -1;
    if (v == Py_None) {
        if (present) *present = 0;
        Py_DECREF(v);
        return 0;
    }
    if (present) *present = 1;
    *out = PyFloat_AsDouble(v);
    Py_DECREF(v);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}
static int set_obj(PyObject *o, const char *name, PyObject *v) {
    if (v == NULL) return -1;
    int r = PyObject_SetAttrString(o, name, v);
    Py_DECREF(v);
    return r;
}
static int set_ll(PyObject *o, const char *name, long long v) {
    return set_obj(o, name, PyLong_FromLongLong(v));
}
static int set_d(PyObject *o, const char *name, double v) {
    return set_obj(o, name, PyFloat_FromDouble(v));
}
static int set_opt_d(PyObject *o, const char *name, int present, double v) {
    if (!present) return PyObject_SetAttrString(o, name, Py_None);
    return set_d(o, name, v);
}

static int refresh_longest(Scanner *self) {
    if (PyList_GET_SIZE(self->longest) < self->longest_kept) return 0;
    PyObject *top = PyList_GET_ITEM(self->longest, 0);
    if (!PyTuple_Check(top) || PyTuple_GET_SIZE(top) < 1) {
        PyErr_SetString(PyExc_TypeError, "GcStats._longest holds something else");
        return -1;
    }
    self->longest_min = PyFloat_AsDouble(PyTuple_GET_ITEM(top, 0));
    return (self->longest_min == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static int load(Scanner *self) {
    PyObject *s = self->stats;
    double offset;
    int last_pause_present;
    self->nslots = 0;
    self->utc_new = self->first_date_new = 0;
    self->has_last_pause = self->last_pause_new = 0;
    self->meta_set = 0;
    if (get_ll(s, "lines", &self->lines, NULL) || get_ll(s, "events", &self->events, NULL) ||
        get_ll(s, "pauses", &self->pauses, NULL) || get_ll(s, "full_gcs", &self->full_gcs, NULL) ||
        get_ll(s, "safepoint_pauses", &self->safepoint_pauses, NULL) ||
        get_ll(s, "_seen", &self->seen, NULL) || get_ll(s, "_stride", &self->stride, NULL) ||
        get_ll(s, "zgc_phases", &self->zgc_phases, NULL) ||
        get_ll(s, "zgc_cycles", &self->zgc_cycles, NULL) ||
        get_d(s, "total_pause_s", &self->total, NULL) ||
        get_d(s, "max_pause_s", &self->max, NULL) ||
        get_d(s, "full_pause_s", &self->full_s, NULL) ||
        get_d(s, "safepoint_s", &self->safepoint_s, NULL) ||
        get_d(s, "_since_stop", &self->since_stop, NULL) ||
        get_d(s, "concurrent_s", &self->concurrent_s, NULL) ||
        get_d(s, "first_t_s", &self->first_t, &self->has_first) ||
        get_d(s, "last_t_s", &self->last_t, &self->has_last) ||
        get_d(s, "utc_offset_s", &offset, &self->utc_known) ||
        get_d(s, "_first_date", &self->first_date, &self->has_first_date) ||
        get_ll(s, "heap_max_bytes", &self->heap_max, &self->has_heap_max))
        return -1;
    if (self->stride < 1) {
        PyErr_SetString(PyExc_ValueError, "GcStats._stride below 1");
        return -1;
    }
    self->last_collection_new = self->zgc_named = 0;
    PyObject *collector = PyObject_GetAttrString(s, "collector");
    if (collector == NULL) return -1;
    self->collector_known = PyObject_IsTrue(collector);
    Py_DECREF(collector);
    if (self->collector_known < 0) return -1;
    PyObject *collection = PyObject_GetAttrString(s, "last_collection");
    if (collection == NULL) return -1;
    if (!PyTuple_Check(collection) || PyTuple_GET_SIZE(collection) != 3) {
        Py_DECREF(collection);
        PyErr_SetString(PyExc_TypeError, "GcStats.last_collection is not a 3-tuple");
        return -1;
    }
    int overflow = 0;
    self->last_id = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(collection, 0), &overflow);
    if (overflow) PyErr_SetString(PyExc_OverflowError, "a GC id past 64 bits");
    Py_XSETREF(self->last_kind, Py_NewRef(PyTuple_GET_ITEM(collection, 1)));
    self->last_full_s = PyFloat_AsDouble(PyTuple_GET_ITEM(collection, 2));
    Py_DECREF(collection);
    if (PyErr_Occurred()) return -1;
    PyObject *flag = PyObject_GetAttrString(s, "_last_was_gc");
    if (flag == NULL) return -1;
    self->last_was_gc = PyObject_IsTrue(flag);
    Py_DECREF(flag);
    PyObject *last = PyObject_GetAttrString(s, "_last_pause");
    if (last == NULL) return -1;
    last_pause_present = last != Py_None;
    if (last_pause_present) {
        int ok = get_d(last, "t_s", &self->last_pause.t, NULL) == 0 &&
                 get_d(last, "pause_s", &self->last_pause.p, NULL) == 0;
        if (!ok) {
            Py_DECREF(last);
            return -1;
        }
    }
    Py_DECREF(last);
    self->has_last_pause = last_pause_present;
    self->timeline = PyObject_GetAttrString(s, "_timeline");
    self->longest = PyObject_GetAttrString(s, "_longest");
    self->causes = PyObject_GetAttrString(s, "_causes");
    if (self->timeline == NULL || self->longest == NULL || self->causes == NULL) return -1;
    if (!PyList_Check(self->timeline) || !PyList_Check(self->longest) ||
        !PyDict_Check(self->causes)) {
        PyErr_SetString(PyExc_TypeError, "GcStats holds other types than a list and a dict");
        return -1;
    }
    return refresh_longest(self);
}

static PyObject *make_pause(Scanner *self, const Pause *p, PyObject *cause);

static int flush_causes(Scanner *self) {
    int failed = 0;
    for (int i = 0; i < self->nslots; i++) {
        CauseSlot *slot = &self->slots[i];
        if (!failed && (set_ll(slot->obj, "count", slot->count) ||
                        set_d(slot->obj, "total_s", slot->total) ||
                        set_d(slot->obj, "max_s", slot->max)))
            failed = 1;
        Py_CLEAR(slot->cause);
        Py_CLEAR(slot->obj);
    }
    self->nslots = 0;
    return failed ? -1 : 0;
}

/* Write the sums back (also after an error: what was taken stays taken). */
static int store(Scanner *self) {
    PyObject *s = self->stats;
    int failed = flush_causes(self);
    if (!failed && self->last_pause_new) {
        PyObject *pause = make_pause(self, &self->last_pause, self->last_pause_cause);
        failed = pause == NULL || set_obj(s, "_last_pause", pause);
    }
    Py_CLEAR(self->last_pause_cause);
    if (!failed &&
        (set_ll(s, "lines", self->lines) || set_ll(s, "events", self->events) ||
         set_ll(s, "pauses", self->pauses) || set_ll(s, "full_gcs", self->full_gcs) ||
         set_ll(s, "safepoint_pauses", self->safepoint_pauses) ||
         set_ll(s, "_seen", self->seen) || set_ll(s, "_stride", self->stride) ||
         set_ll(s, "zgc_phases", self->zgc_phases) || set_ll(s, "zgc_cycles", self->zgc_cycles) ||
         set_d(s, "total_pause_s", self->total) || set_d(s, "max_pause_s", self->max) ||
         set_d(s, "full_pause_s", self->full_s) || set_d(s, "safepoint_s", self->safepoint_s) ||
         set_d(s, "_since_stop", self->since_stop) ||
         set_d(s, "concurrent_s", self->concurrent_s) ||
         PyObject_SetAttrString(s, "_last_was_gc", self->last_was_gc ? Py_True : Py_False) ||
         set_opt_d(s, "first_t_s", self->has_first, self->first_t) ||
         set_opt_d(s, "last_t_s", self->has_last, self->last_t)))
        failed = 1;
    if (!failed && self->has_heap_max && set_ll(s, "heap_max_bytes", self->heap_max)) failed = 1;
    if (!failed && self->utc_new && set_d(s, "utc_offset_s", self->utc_offset)) failed = 1;
    if (!failed && self->zgc_named && set_obj(s, "collector", PyUnicode_FromString("ZGC")))
        failed = 1;
    if (!failed && self->first_date_new &&
        (set_d(s, "_first_date", self->first_date) ||
         set_d(s, "started_unix_s", self->first_date)))
        failed = 1;
    if (!failed && self->meta_set &&
        (set_ll(s, "metaspace_after_bytes", self->meta_after) ||
         set_ll(s, "metaspace_total_bytes", self->meta_total)))
        failed = 1;
    if (!failed && self->last_collection_new) {
        PyObject *id = PyLong_FromLongLong(self->last_id);
        PyObject *full = PyFloat_FromDouble(self->last_full_s);
        PyObject *t = (id && full) ? PyTuple_Pack(3, id, self->last_kind, full) : NULL;
        Py_XDECREF(id);
        Py_XDECREF(full);
        if (set_obj(s, "last_collection", t)) failed = 1;
    }
    Py_CLEAR(self->last_kind);
    Py_CLEAR(self->timeline);
    Py_CLEAR(self->longest);
    Py_CLEAR(self->causes);
    return failed ? -1 : 0;
}

static PyObject *opt_ll(int known, long long v) {
    if (!known) Py_RETURN_NONE;
    return PyLong_FromLongLong(v);
}

/* A ``model.jvm.GcPause`` of ``p``: its slots filled as its ``__init__`` fills them (a frozen
 * dataclass's ``__init__`` sets each field with ``object.__setattr__``), without running that
 * Python code for each pause the timeline keeps. */
static PyObject *PAUSE_FIELDS[8];

static PyObject *make_pause(Scanner *self, const Pause *p, PyObject *cause) {
    PyTypeObject *type = (PyTypeObject *)self->pause_type;
    PyObject *pause = type->tp_alloc(type, 0);
    if (pause == NULL) return NULL;
    PyObject *values[] = {
        PyFloat_FromDouble(p->t), PyFloat_FromDouble(p->p), Py_NewRef(p->kind), Py_NewRef(cause),
        opt_ll(p->heap_known, p->before), opt_ll(p->heap_known, p->after),
        opt_ll(p->heap_known && p->total >= 0, p->total),
        p->has_unix ? PyFloat_FromDouble(p->unix_s) : Py_NewRef(Py_None)};
    int failed = 0;
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        if (values[i] == NULL || PyObject_GenericSetAttr(pause, PAUSE_FIELDS[i], values[i]))
            failed = 1;
        Py_XDECREF(values[i]);
    }
    if (failed) Py_CLEAR(pause);
    return pause;
}

static CauseSlot *cause_slot(Scanner *self, PyObject *kind, Text cause) {
    for (int i = 0; i < self->nslots; i++) {
        CauseSlot *slot = &self->slots[i];
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(slot->cause, &n);
        if (slot->kind == kind && n == cause.n && memcmp(s, cause.s, (size_t)n) == 0)
            return slot;
    }
    if (self->nslots == CAUSE_CACHE && flush_causes(self)) return NULL;
    CauseSlot *slot = &self->slots[self->nslots];
    PyObject *text = PyUnicode_DecodeASCII(cause.s, cause.n, NULL);
    if (text == NULL) return NULL;
    PyObject *key = PyTuple_Pack(2, kind, text);
    if (key == NULL) {
        Py_DECREF(text);
        return NULL;
    }
    PyObject *obj = PyDict_GetItemWithError(self->causes, key);
    if (obj == NULL && PyErr_Occurred()) goto fail;
    if (obj == NULL) {
        obj = PyObject_CallNoArgs(self->cause_type);
        if (obj == NULL || PyDict_SetItem(self->causes, key, obj)) {
            Py_XDECREF(obj);
            goto fail;
        }
    } else {
        Py_INCREF(obj);
    }
    slot->kind = kind;
    slot->cause = text;
    slot->obj = obj;
    if (get_ll(obj, "count", &slot->count, NULL) || get_d(obj, "total_s", &slot->total, NULL) ||
        get_d(obj, "max_s", &slot->max, NULL)) {
        Py_CLEAR(slot->cause);
        Py_CLEAR(slot->obj);
        Py_DECREF(key);
        return NULL;
    }
    self->nslots++;
    Py_DECREF(key);
    return slot;
fail:
    Py_DECREF(key);
    Py_DECREF(text);
    return NULL;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static long long days_from_civil(long long y, int m, int d) {
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int two(const char *s) {
    return is_digit(s[0]) && is_digit(s[1]) ? (s[0] - '0') * 10 + (s[1] - '0') : -1;
}

/* GcStats.date_seconds for ``YYYY-MM-DDTHH:MM:SS.f[ff...]+HHMM`` (``,`` for ``.`` too), the
 * JVM's form; 0 for any other text (Python reads it). The first date's UTC offset is kept. */
static int date_value(Text d, double *unix_s, long long *offset_s);

static int date_seconds(Scanner *self, Text d, double *unix_s) {
    long long offset;
    if (!date_value(d, unix_s, &offset)) return 0;
    if (!self->utc_known) {
        self->utc_known = self->utc_new = 1;
        self->utc_offset = (double)offset;
    }
    return 1;
}

/* The date's Unix time and UTC offset, without keeping it. */
static int date_value(Text d, double *unix_s, long long *offset_s) {
    if (d.n < 26 || d.n > 31 || d.s[4] != '-' || d.s[7] != '-' || d.s[10] != 'T' ||
        d.s[13] != ':' || d.s[16] != ':' || (d.s[19] != '.' && d.s[19] != ','))
        return 0;
    for (int i = 0; i < 4; i++)
        if (!is_digit(d.s[i])) return 0;
    long long year = (d.s[0] - '0') * 1000 + (d.s[1] - '0') * 100 + two(d.s + 2);
    int month = two(d.s + 5), day = two(d.s + 8), hour = two(d.s + 11), minute = two(d.s + 14),
        second = two(d.s + 17);
    Py_ssize_t i = 20;
    long long micro = 0;
    int digits = 0;
    while (i < d.n && is_digit(d.s[i]) && digits < 6) {
        micro = micro * 10 + (d.s[i] - '0');
        i++;
        digits++;
    }
    if (digits == 0 || d.n - i != 5 || (d.s[i] != '+' && d.s[i] != '-')) return 0;
    for (int k = digits; k < 6; k++) micro *= 10;
    int oh = two(d.s + i + 1), om = two(d.s + i + 3);
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (year < 1 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 ||
        minute > 59 || second < 0 || second > 59 || oh < 0 || oh > 23 || om < 0 || om > 59)
        return 0;
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if (day > mdays[month - 1] + (month == 2 && leap)) return 0;
    long long offset = (oh * 3600LL + om * 60LL) * (d.s[i] == '-' ? -1 : 1);
    long long seconds = days_from_civil(year, month, day) * 86400 + hour * 3600LL +
                        minute * 60LL + second - offset;
    if (seconds > 9000000000LL || seconds < -9000000000LL) return 0; /* 2^53 microseconds */
    long long total_us = seconds * 1000000LL + micro;
    *offset_s = offset;
    *unix_s = (double)total_us / 1e6;
    return 1;
}

/* GcStats.timestamp: the uptime, or the seconds since the first date where there is none;
 * ``*timed`` 0 where neither. 0 (PYTHON) for a date in another form. */
static int timestamp(Scanner *self, Stamp *at, int *timed, double *t) {
    if (at->has_date) { /* GcStats.date_seconds: the first date's UTC offset is kept */
        if (!date_seconds(self, at->date, &at->unix_s)) return 0;
        at->has_date = 0;
        at->has_unix = 1;
    }
    if (at->has_unix && !self->has_first_date) {
        self->has_first_date = self->first_date_new = 1;
        self->first_date = at->unix_s;
    }
    *timed = 1;
    if (at->has_up) {
        *t = at->up;
        return 1;
    }
    if (at->has_unix && self->has_first_date) {
        PyObject *r = PyObject_CallFunction(self->round, "di", at->unix_s - self->first_date, 3);
        if (r == NULL) return -1;
        *t = PyFloat_AsDouble(r);
        Py_DECREF(r);
        return (*t == -1.0 && PyErr_Occurred()) ? -1 : 1;
    }
    *timed = 0;
    return 1;
}

/* timestamp() in a function that returns TAKEN / PYTHON / -1 */
#define TIMESTAMP(stamp, timed, t)                                                          \
    do {                                                                                    \
        int r_ = timestamp(self, stamp, timed, t);                                          \
        if (r_ <= 0) return r_ < 0 ? -1 : PYTHON;                                           \
    } while (0)

/* GcStats._saw */
static void saw(Scanner *self, double t) {
    self->events++;
    if (self->events == 1 || t > 0.0) {
        if (!self->has_first || t < self->first_t) self->first_t = t;
        self->has_first = 1;
    }
    if (!self->has_last || t > self->last_t) self->last_t = t;
    self->has_last = 1;
}

/* GcStats._add */
static int add(Scanner *self, const Pause *p) {
    PyObject *obj = NULL, *cause = NULL;
    self->pauses++;
    self->total += p->p;
    if (p->p > self->max) self->max = p->p;
    CauseSlot *slot = cause_slot(self, p->kind, p->cause);
    if (slot == NULL) return -1;
    slot->count++;
    slot->total += p->p;
    if (p->p > slot->max) slot->max = p->p;
    cause = Py_NewRef(slot->cause);
    if (PyList_GET_SIZE(self->longest) < self->longest_kept || p->p >= self->longest_min) {
        obj = make_pause(self, p, cause);
        PyObject *seq = PyLong_FromLongLong(self->pauses);
        PyObject *value = PyFloat_FromDouble(p->p);
        PyObject *entry = (obj && seq && value) ? PyTuple_Pack(3, value, seq, obj) : NULL;
        Py_XDECREF(seq);
        Py_XDECREF(value);
        if (entry == NULL) goto fail;
        PyObject *r = PyObject_CallFunctionObjArgs(
            PyList_GET_SIZE(self->longest) < self->longest_kept ? self->heappush
                                                                : self->heapreplace,
            self->longest, entry, NULL);
        Py_DECREF(entry);
        if (r == NULL) goto fail;
        Py_DECREF(r);
        if (refresh_longest(self)) goto fail;
    }
    self->seen++;
    if ((self->seen - 1) % self->stride == 0) {
        if (obj == NULL && (obj = make_pause(self, p, cause)) == NULL) goto fail;
        if (PyList_Append(self->timeline, obj)) goto fail;
        if (PyList_GET_SIZE(self->timeline) >= self->kept) {
            /* GcStats keeps every other one: del _timeline[1::2] */
            PyObject *one = PyLong_FromLong(1), *two = PyLong_FromLong(2);
            PyObject *odd = (one && two) ? PySlice_New(one, Py_None, two) : NULL;
            Py_XDECREF(one);
            Py_XDECREF(two);
            if (odd == NULL) goto fail;
            int r = PyObject_DelItem(self->timeline, odd);
            Py_DECREF(odd);
            if (r) goto fail;
            self->stride *= 2;
        }
    }
    Py_XSETREF(self->last_pause_cause, cause);
    self->last_pause = *p;
    self->has_last_pause = self->last_pause_new = 1;
    Py_XDECREF(obj);
    return 0;
fail:
    Py_XDECREF(obj);
    Py_XDECREF(cause);
    return -1;
}

/* GcStats.pause (a finite, non-negative pause, no date) */
static int add_pause(Scanner *self, Pause *p) {
    if (p->timed) {
        saw(self, p->t);
    } else {
        p->t = self->has_last ? self->last_t : 0.0;
        if (p->t == 0.0) p->t = 0.0; /* last_t_s or 0.0 */
        self->events++;
    }
    if (add(self, p)) return -1;
    self->since_stop += p->p;
    self->last_was_gc = 1;
    if (p->kind == K_FULL) {
        self->full_gcs++;
        self->full_s += p->p;
    }
    if (p->heap_known && p->total >= 0) {
        long long was = self->has_heap_max ? self->heap_max : 0;
        self->heap_max = p->total > was ? p->total : was;
        self->has_heap_max = 1;
    }
    return 0;
}

/* GcStats.stopped */
static int stopped(Scanner *self, int timed, double t, double seconds, int has_unix,
                   double unix_s) {
    double p = seconds;
    if (!timed) t = self->has_last_pause ? self->last_pause.t + self->last_pause.p : 0.0;
    if (self->has_last_pause && self->last_was_gc) {
        double beyond = seconds - self->since_stop;
        p = beyond > 0.0 ? beyond : 0.0;
        double end = self->last_pause.t + self->last_pause.p;
        if (end > t) t = end;
    }
    saw(self, t);
    Pause stop = {.timed = 1, .t = t, .p = p, .kind = K_SAFEPOINT, .cause = {"", 0},
                  .has_unix = has_unix, .unix_s = unix_s};
    if (add(self, &stop)) return -1;
    self->since_stop = 0.0;
    self->last_was_gc = 0;
    self->safepoint_pauses++;
    self->safepoint_s += p;
    return 0;
}

static const char STOPPED[] = "Total time for which application threads were stopped: ";

/* ``N seconds`` after the safepoint words at ``at``: 1, 0 (not there), -1 (not finite). */
static int stop_seconds(Text t, Py_ssize_t at, double *seconds) {
    at += (Py_ssize_t)strlen(STOPPED);
    int r = number(t, &at, seconds);
    if (r <= 0) return r;
    return starts(t, at, " seconds") ? 1 : 0;
}

/* ---- JDK 8 ---- */

/* ``_CAUSE.match(text.lstrip())``'s group: ``(`` then runs of non-parens or ``()``, then
 * ``)``; the empty text when there is none. */
static Text cause_of(Text t, Py_ssize_t at) {
    Text none = {"", 0};
    while (at < t.n && is_ws(t.s[at])) at++;
    if (at >= t.n || t.s[at] != '(') return none;
    Py_ssize_t i = at + 1;
    while (i < t.n) {
        char c = t.s[i];
        if (c == ')') break;
        if (c == '(') {
            if (i + 1 < t.n && t.s[i + 1] == ')') {
                i += 2;
                continue;
            }
            return none;
        }
        i++;
    }
    if (i >= t.n || i == at + 1) return none;
    Text found = {t.s + at + 1, i - at - 1};
    return found;
}

static int is_cause(Text c) {
    static const char *not_causes[] = {"young", "mixed", "partial", "initial-mark"};
    if (c.n == 0) return 0;
    for (size_t i = 0; i < sizeof not_causes / sizeof *not_causes; i++)
        if ((size_t)c.n == strlen(not_causes[i]) && memcmp(c.s, not_causes[i], (size_t)c.n) == 0)
            return 0;
    return 1;
}

/* GcStats.concurrent */
static void concurrent(Scanner *self, int timed, double t, double seconds) {
    if (timed)
        saw(self, t);
    else
        self->events++;
    self->concurrent_s += seconds;
}

static int is_word(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* _NESTED_CONCURRENT's seconds after a phase's name: ``: [N/]N secs`` or ``, N secs``; 0 where
 * there are none (the phase counts with 0 s), -1 where a number is not finite. */
static int phase_seconds(Text t, Py_ssize_t at, double *seconds, Py_ssize_t *end) {
    *seconds = 0.0;
    *end = at;
    if (at >= t.n || (t.s[at] != ':' && t.s[at] != ',')) return 0;
    int colon = t.s[at] == ':';
    at++;
    while (at < t.n && is_ws(t.s[at])) at++;
    for (int with_cpu = colon; with_cpu >= 0; with_cpu--) {
        Py_ssize_t i = at;
        double value;
        if (with_cpu) { /* (?:N/)? */
            int r = number(t, &i, &value);
            if (r < 0) return -1;
            if (r == 0 || i >= t.n || t.s[i] != '/') continue;
            i++;
        }
        int r = number(t, &i, &value);
        if (r < 0) return -1;
        if (r == 0) continue;
        while (i < t.n && is_ws(t.s[i])) i++;
        if (starts(t, i, "secs")) {
            *seconds = value;
            *end = i + 4;
            return 1;
        }
    }
    return 0;
}

/* A concurrent phase alone on its line, in one bracket pair: ``[up: ][GC concurrent-x...]``,
 * ``[CMS-concurrent-x: 0.1/0.2 secs]`` (gc_jdk8._concurrent). */
static int jdk8_concurrent(Scanner *self, Text t, Stamp *stamp, Py_ssize_t head,
                           Py_ssize_t end) {
    Py_ssize_t i = head;
    if (starts(t, i, "GC concurrent-"))
        i += 14;
    else if (starts(t, i, "CMS-concurrent-"))
        i += 15;
    else
        return PYTHON;
    Py_ssize_t name = i;
    while (i < end && (is_word(t.s[i]) || t.s[i] == '-')) i++;
    if (i == name) return PYTHON;
    double seconds;
    Py_ssize_t after;
    if (phase_seconds(t, i, &seconds, &after) < 0) return PYTHON;
    int timed; /* its date is read only now that the line is taken, as the parser reads it */
    double when;
    TIMESTAMP(stamp, &timed, &when);
    concurrent(self, timed, when, seconds);
    return TAKEN;
}

/* The last ``1K->2K(3K)`` of ``t`` (_HEAP.finditer's last): 1 (into ``p``), 0 (none), -1 (a
 * size past 64 bits: Python's). */
static int last_heap(Text t, Pause *p) {
    int found = 0;
    Py_ssize_t i = 0;
    while (i < t.n) {
        if (!is_digit(t.s[i])) {
            i++;
            continue;
        }
        Py_ssize_t at = i;
        long long before, after, total;
        int r = size(t, &at, 0, &before);
        if (r == 1 && starts(t, at, "->")) {
            at += 2;
            r = size(t, &at, 0, &after);
            if (r == 1 && at < t.n && t.s[at] == '(') {
                at++;
                r = size(t, &at, 0, &total);
                if (r == 1 && at < t.n && t.s[at] == ')') {
                    found = 1;
                    p->before = before;
                    p->after = after;
                    p->total = total;
                    i = at + 1;
                    continue;
                }
            }
        }
        if (r < 0) return -1;
        /* a match failing at a run of digits fails at each of its later digits too */
        while (i < t.n && is_digit(t.s[i])) i++;
    }
    return found;
}

static Text before_times(Text t) {
    const char *times = memmem(t.s, (size_t)t.n, "[Times:", 7);
    if (times != NULL) t.n = times - t.s;
    return t;
}

static const char *PERM_SPACES[] = {"Metaspace: ", "PSPermGen: ", "CMS Perm : ", "Perm : "};

/* gc_jdk8._heap without G1's ``Heap:`` summary (Python's): the whole heap's
 * ``before->after(total)``, the last one before ``[Times:``, outside the metaspace's or
 * permanent generation's brackets. 0 for PYTHON. */
static int heap_jdk8(Text text, int meta, Pause *p) {
    p->heap_known = 0;
    int r = last_heap(before_times(text), p);
    if (r <= 0) return r == 0;
    if (!meta) {
        p->heap_known = 1;
        return 1;
    }
    /* _last_heap: re.sub(r"\[(?:Metaspace|PSPermGen|CMS Perm |Perm ): [^\]]*\]", "", text) */
    char *cut = PyMem_Malloc((size_t)text.n + 1);
    if (cut == NULL) return 0;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < text.n;) {
        if (text.s[i] == '[') {
            Py_ssize_t skip = 0;
            for (size_t k = 0; k < 4 && !skip; k++) {
                if (starts(text, i + 1, PERM_SPACES[k])) {
                    const char *close = memchr(text.s + i + 1, ']', (size_t)(text.n - i - 1));
                    if (close != NULL) skip = close - text.s + 1 - i;
                }
            }
            if (skip) {
                i += skip;
                continue;
            }
        }
        cut[n++] = text.s[i++];
    }
    Text rest = {cut, n};
    r = last_heap(before_times(rest), p);
    PyMem_Free(cut);
    if (r < 0) return 0;
    p->heap_known = r;
    return 1;
}

/* ``[Metaspace: 1K->2K(3K)]`` (gc_jdk8._METASPACE.search): 1 (``*after``, ``*total`` in
 * bytes), 0 (none), -1 (Python's). */
static int metaspace_jdk8(Text t, long long *after_bytes, long long *total_bytes) {
    for (Py_ssize_t i = 0; i < t.n; i++) {
        if (t.s[i] != '[') continue;
        for (size_t k = 0; k < 4; k++) {
            if (!starts(t, i + 1, PERM_SPACES[k])) continue;
            Py_ssize_t at = i + 1 + (Py_ssize_t)strlen(PERM_SPACES[k]);
            long long used, after, total;
            int r = integer(t, &at, INT64_MAX / 1024, &used);
            if (r < 0) return -1;
            if (r == 0 || !starts(t, at, "K->")) break;
            at += 3;
            r = integer(t, &at, INT64_MAX / 1024, &after);
            if (r < 0) return -1;
            if (r == 0 || !starts(t, at, "K(")) break;
            at += 2;
            r = integer(t, &at, INT64_MAX / 1024, &total);
            if (r < 0) return -1;
            if (r == 0 || !starts(t, at, "K)")) break;
            *after_bytes = after * 1024;
            *total_bytes = total * 1024;
            return 1;
        }
    }
    return 0;
}

/* _PAUSE_END.search(text, lo, e): ``, N secs`` (or ms) and blanks just before ``e``. */
static int pause_end(Text t, Py_ssize_t lo, Py_ssize_t e, double *out) {
    Py_ssize_t i = e;
    while (i > lo && is_ws(t.s[i - 1])) i--;
    Text before = {t.s + lo, i - lo};
    int ms = ends(before, " ms");
    if (!ms && !ends(before, " secs")) return 0;
    i -= ms ? 3 : 5;
    Py_ssize_t digits_end = i;
    while (i > lo && is_digit(t.s[i - 1])) i--;
    if (i == digits_end || i <= lo || (t.s[i - 1] != '.' && t.s[i - 1] != ',')) return 0;
    i--;
    Py_ssize_t sep = i;
    while (i > lo && is_digit(t.s[i - 1])) i--;
    if (i == sep || i < lo + 2 || t.s[i - 1] != ' ' || t.s[i - 2] != ',') return 0;
    Py_ssize_t num_at = i;
    int r = number(t, &num_at, out);
    if (r <= 0) return r;
    if (num_at != digits_end) return 0;
    if (ms) *out = *out / 1000;
    return 1;
}

/* The line that ends at ``nl`` (its ``\n``), less its trailing ``\r``s: what the parser
 * reads (``rstrip("\r\n")``). */
static Text line_before(const char *start, const char *nl) {
    Text line = {start, nl - start};
    while (line.n && (line.s[line.n - 1] == '\r' || line.s[line.n - 1] == '\n')) line.n--;
    return line;
}

/* Whether the 30 bytes at ``d`` are a JDK 8 date stamp and its ``: ``
 * (``\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[.,]\d{3}[+-]\d{4}: ``, gc_jdk8's _DATE). */
static int date_stamp(const char *d) {
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.ddd+dddd: ";
    for (int k = 0; k < 30; k++) {
        char c = d[k], want = shape[k];
        int ok = want == 'd'   ? is_digit(c)
                 : want == '.' ? (c == '.' || c == ',')
                 : want == '+' ? (c == '+' || c == '-')
                               : c == want;
        if (!ok) return 0;
    }
    return 1;
}

/* _STAMPS at the start of a JDK 8 line: ``[date: ][uptime: ][#id: ]``; 0 for PYTHON. */
static int jdk8_stamps(Text t, Py_ssize_t *at, Stamp *stamp) {
    Py_ssize_t i = 0;
    memset(stamp, 0, sizeof *stamp);
    if (t.n > 30 && is_digit(t.s[0]) && t.s[4] == '-') {
        if (!date_stamp(t.s)) return 0;
        stamp->date = (Text){t.s, 28};
        stamp->has_date = 1;
        i = 30;
    }
    if (i < t.n && is_digit(t.s[i])) {
        if (number(t, &i, &stamp->up) != 1 || !starts(t, i, ": ")) return 0;
        i += 2;
        stamp->has_up = 1;
    }
    if (starts(t, i, "#")) {
        long long id;
        i++;
        if (integer(t, &i, INT64_MAX, &id) != 1 || !starts(t, i, ": ")) return 0;
        i += 2;
    }
    *at = i;
    return 1;
}

static const struct {
    const char *name, *mark;
} JDK8_PROBLEMS[] = {
    {"to-space exhausted", "(to-space exhausted)"},
    {"to-space exhausted", "(to-space overflow)"},
    {"promotion failed", "promotion failed"},
    {"concurrent mode failure", "concurrent mode failure"},
    {"concurrent mode failure", "concurrent mode interrupted"},
    {"humongous allocation", "G1 Humongous Allocation"},
};

static int problem(Scanner *self, const char *name, int timed, double t) {
    PyObject *when = timed ? PyFloat_FromDouble(t) : Py_NewRef(Py_None);
    if (when == NULL) return -1;
    PyObject *r = PyObject_CallMethod(self->stats, "problem", "sO", name, when);
    Py_DECREF(when);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* _EVENT's ``GC(?=\s*[\[(\d]|\s*$|--)`` at ``head`` (an end or ``--``: Python's). */
static int generic_gc(Text text, Py_ssize_t head) {
    if (!starts(text, head, "GC")) return 0;
    Py_ssize_t i = head + 2;
    while (i < text.n && is_ws(text.s[i])) i++;
    return i < text.n && (text.s[i] == '(' || text.s[i] == '[' || is_digit(text.s[i]));
}

#define MAX_INNER 8

/* A JDK 8 collection whose brackets close on its line (gc_jdk8: _close, _inner, _finish). */
/* What a collection's lines hold besides itself, in the order the parser adds them: the
 * concurrent phases another thread's output cut into them, the collections inside it. */
typedef struct {
    int concurrent;
    Stamp stamp;  /* a concurrent phase's */
    double value; /* its seconds, or the inner collection's pause */
} Action;
#define MAX_ACTIONS 16

static int jdk8_finish(Scanner *self, Text text, unsigned m, Stamp *stamp,
                       const Action *actions, int nactions, double inner_total, double pause_s);

/* The stamps of _NESTED_CONCURRENT's match that ends at ``b`` (its bracket), read backwards:
 * ``[date: ][uptime: ][#id: ]``, from no earlier than ``lo``; 0 for PYTHON. */
static int stamps_before(Text t, Py_ssize_t lo, Py_ssize_t b, Stamp *stamp) {
    memset(stamp, 0, sizeof *stamp);
    Py_ssize_t i = b;
    /* #id: */
    if (i - 2 >= lo && t.s[i - 1] == ' ' && t.s[i - 2] == ':') {
        Py_ssize_t k = i - 2;
        while (k > lo && is_digit(t.s[k - 1])) k--;
        if (k < i - 2 && k - 1 >= lo && t.s[k - 1] == '#') i = k - 1;
    }
    /* uptime: */
    if (i - 2 >= lo && t.s[i - 1] == ' ' && t.s[i - 2] == ':') {
        Py_ssize_t k = i - 2, digits_end = k;
        while (k > lo && is_digit(t.s[k - 1])) k--;
        if (k < digits_end && k - 1 > lo && (t.s[k - 1] == '.' || t.s[k - 1] == ',')) {
            Py_ssize_t sep = k - 1, j = sep;
            while (j > lo && is_digit(t.s[j - 1])) j--;
            if (j < sep) {
                if (j > 0 && is_digit(t.s[j - 1])) return 0; /* a number cut at ``lo`` */
                Py_ssize_t at = j;
                if (number(t, &at, &stamp->up) != 1) return 0;
                stamp->has_up = 1;
                i = j;
            }
        }
    }
    /* date: */
    if (i - 30 >= lo && date_stamp(t.s + i - 30)) {
        const char *d = t.s + i - 30;
        double unix_s;
        long long offset;
        if (!date_value((Text){d, 28}, &unix_s, &offset)) return 0;
        stamp->has_date = 1;
        stamp->date = (Text){d, 28};
        i -= 30;
    }
    if (i > lo && is_digit(t.s[i - 1])) return 0; /* a stamp the regex may read otherwise */
    return 1;
}

/* gc_jdk8._concurrent over ``text``: each concurrent phase in it (_NESTED_CONCURRENT), added
 * to ``actions``; 0 for PYTHON. */
static int nested(Text text, Action *actions, int *n) {
    Py_ssize_t pos = 0;
    while (pos < text.n) {
        const char *a = memmem(text.s + pos, (size_t)(text.n - pos), "[GC concurrent-", 15);
        const char *b = memmem(text.s + pos, (size_t)(text.n - pos), "[CMS-concurrent-", 16);
        const char *first = a == NULL ? b : (b == NULL || a < b ? a : b);
        if (first == NULL) break;
        Py_ssize_t at = first - text.s;
        Py_ssize_t name = at + (first == a ? 15 : 16), i = name;
        while (i < text.n && (is_word(text.s[i]) || text.s[i] == '-')) i++;
        if (i == name) {
            pos = at + 1;
            continue;
        }
        Action *action = &actions[*n];
        if (*n == MAX_ACTIONS || !stamps_before(text, pos, at, &action->stamp)) return 0;
        Py_ssize_t end;
        if (phase_seconds(text, i, &action->value, &end) < 0) return 0;
        action->concurrent = 1;
        (*n)++;
        pos = end > i ? end : i;
    }
    return 1;
}

/* gc_jdk8._close over one line ``text`` from ``*depth``: the pauses of the collections inside
 * it into ``inner`` (their sum added to ``*inner_total``, as the parser sums each line's), and
 * where the event's own bracket closes, its pause (``*closed``). PYTHON where it cannot say. */
static int close_line(Text text, int *depth, Action *actions, int *nactions,
                      double *inner_total, double *pause, int *closed) {
    int nopen = 0, opened[MAX_INNER];
    double line_sum = 0.0;
    for (Py_ssize_t i = 0; i < text.n; i++) {
        char c = text.s[i];
        if (c == '[') {
            (*depth)++;
            if (*depth > 1 && starts(text, i, "[GC")) {
                Py_ssize_t k = i + 3; /* _INNER_GC: \[GC(?=\s*[\[(\d]|\s*$) */
                while (k < text.n && is_ws(text.s[k])) k++;
                if (k >= text.n || text.s[k] == '[' || text.s[k] == '(' || is_digit(text.s[k])) {
                    if (nopen == MAX_INNER) return PYTHON;
                    opened[nopen++] = *depth;
                }
            }
        } else if (c == ']') {
            (*depth)--;
            if (nopen && *depth == opened[nopen - 1] - 1) {
                nopen--;
                double value;
                int r = pause_end(text, 0, i, &value);
                if (r < 0) return PYTHON;
                if (r == 1) {
                    if (*nactions == MAX_ACTIONS) return PYTHON;
                    actions[*nactions].concurrent = 0;
                    actions[(*nactions)++].value = value;
                    line_sum += value;
                }
            }
            if (*depth == 0) {
                /* no pause: Shenandoah's start, a line read badly: Python's */
                if (pause_end(text, 0, i, pause) != 1) return PYTHON;
                *closed = 1;
                break;
            }
        }
    }
    *inner_total += line_sum;
    return TAKEN;
}

/* Whether a line that follows an open event starts one of its own (gc_jdk8's ``stamped``:
 * a date or an uptime, then a bracket), without reading its date. */
static int stamped(Text t) {
    Py_ssize_t i = 0;
    int any = 0;
    if (t.n >= 30 && date_stamp(t.s)) {
        i = 30;
        any = 1;
    }
    Py_ssize_t j = i;
    while (j < t.n && is_digit(t.s[j])) j++;
    if (j > i && j < t.n && (t.s[j] == '.' || t.s[j] == ',')) {
        Py_ssize_t k = j + 1;
        while (k < t.n && is_digit(t.s[k])) k++;
        if (k > j + 1 && starts(t, k, ": ")) {
            i = k + 2;
            any = 1;
        }
    }
    if (starts(t, i, "#")) {
        Py_ssize_t k = i + 1;
        while (k < t.n && is_digit(t.s[k])) k++;
        if (k > i + 1 && starts(t, k, ": ")) i = k + 2;
    }
    return any && starts(t, i, "[");
}

#define MAX_JOINED (1 << 18)

/* A JDK 8 collection (gc_jdk8: _close, _inner, _finish): its brackets close on its line or on
 * the lines after it in ``[next, end)`` (G1's and CMS's tenuring distribution, G1's
 * ergonomics); those lines are taken with it (``self->resume``, ``self->extra_lines``). */
static int jdk8_event(Scanner *self, Text t, unsigned m, Stamp *stamp, Py_ssize_t lb,
                      const char *next, const char *end) {
    Text text = {t.s + lb, t.n - lb}; /* from its bracket: gc_jdk8's ``rest`` */
    int depth = 0, nactions = 0, closed = 0;
    Action actions[MAX_ACTIONS];
    double inner_total = 0.0, pause_s = 0.0;
    if ((m & M_CONCURRENT) && !nested(text, actions, &nactions)) return PYTHON;
    if (close_line(text, &depth, actions, &nactions, &inner_total, &pause_s, &closed) != TAKEN)
        return PYTHON;
    char *joined = NULL;
    long long extra = 0;
    if (!closed && ends(text, ", start]")) return PYTHON; /* Shenandoah's start: dropped */
    if (!closed) {
        /* it goes on over the next lines: those that start no event of their own */
        Py_ssize_t n = text.n;
        if (self->joined == NULL && (self->joined = PyMem_Malloc(MAX_JOINED)) == NULL)
            return PYTHON;
        joined = self->joined;
        memcpy(joined, text.s, (size_t)(n < MAX_JOINED ? n : 0));
        while (!closed) {
            const char *nl = next < end ? memchr(next, '\n', (size_t)(end - next)) : NULL;
            if (nl == NULL || n >= MAX_JOINED) goto python;
            Text line = line_before(next, nl);
            unsigned lm = marks(line);
            if ((lm & M_HIGH) || stamped(line)) goto python;
            if ((lm & M_CONCURRENT) && !nested(line, actions, &nactions)) goto python;
            if (n + 1 + line.n > MAX_JOINED) goto python;
            joined[n++] = ' ';
            memcpy(joined + n, line.s, (size_t)line.n);
            n += line.n;
            if (close_line(line, &depth, actions, &nactions, &inner_total, &pause_s,
                           &closed) != TAKEN)
                goto python;
            extra++;
            next = nl + 1;
        }
        text = (Text){joined, n};
        m = marks(text);
    }
    int r = jdk8_finish(self, text, m, stamp, actions, nactions, inner_total, pause_s);
    if (r == TAKEN && extra) {
        self->resume = next;
        self->extra_lines = extra;
    }
    return r;
python:
    return PYTHON;
}

/* gc_jdk8._finish, with the collections inside it first (_inner). */
static int jdk8_finish(Scanner *self, Text text, unsigned m, Stamp *stamp,
                       const Action *actions, int nactions, double inner_total, double pause_s) {
    Py_ssize_t head = 1; /* in text */
    Pause p = {.cause = {"", 0}};
    int from = -1;
    if (starts(text, head, "Full GC")) {
        p.kind = K_FULL;
        from = head + 7;
    } else if (starts(text, head, "GC pause")) {
        Text first = {text.s + head, text.n - head < 120 ? text.n - head : 120};
        p.kind = (has(first, "(mixed)") || has(first, "(partial)")) ? K_MIXED : K_YOUNG;
        from = head + 8;
    } else if (starts(text, head, "GC remark") ||
               ((m & M_CMS) && (has(text, "CMS-remark") || has(text, "CMS Final Remark")))) {
        if (!starts(text, head, "GC remark") && !starts(text, head, "GC cleanup") &&
            !generic_gc(text, head))
            return PYTHON;
        p.kind = K_REMARK;
    } else if (starts(text, head, "GC cleanup")) {
        p.kind = K_CLEANUP;
    } else if (generic_gc(text, head)) {
        if ((m & M_CMS) && (has(text, "CMS-initial-mark") || has(text, "CMS Initial Mark"))) {
            p.kind = K_INITIAL_MARK;
        } else {
            p.kind = K_YOUNG;
            from = head + 2;
            static const char *young[] = {"[DefNew", "[ParNew", "[PSYoungGen", "[ASParNew"};
            int is_young = 0;
            for (size_t k = 0; k < 4; k++) is_young |= has(text, young[k]);
            if (is_young) {
                /* _OLD_GEN: \[(?:Tenured|CMS(?!-concurrent| Perm)|ParOldGen|PSOldGen|ASCMS) */
                for (Py_ssize_t i2 = 0; i2 + 1 < text.n; i2++) {
                    if (text.s[i2] != '[') continue;
                    Py_ssize_t a = i2 + 1;
                    if (starts(text, a, "Tenured") || starts(text, a, "ParOldGen") ||
                        starts(text, a, "PSOldGen") || starts(text, a, "ASCMS") ||
                        (starts(text, a, "CMS") && !starts(text, a + 3, "-concurrent") &&
                         !starts(text, a + 3, " Perm"))) {
                        p.kind = K_FULL;
                        break;
                    }
                }
            }
        }
    } else {
        return PYTHON;
    }
    double main_p = pause_s - inner_total;
    p.p = main_p > 0.0 ? main_p : 0.0;
    if (from >= 0) {
        Text rest = {text.s + from, text.n - from};
        Text cause = cause_of(rest, 0);
        p.cause = is_cause(cause) ? cause : (Text){"", 0};
    }
    /* what can send it to Python is decided before anything is added */
    int meta = (m & (M_META | M_PERM)) != 0;
    Pause heap = p;
    if (m & M_HEAP && has(text, "Heap: ")) return PYTHON; /* G1's summary */
    if (!heap_jdk8(text, (m & (M_META_WORD | M_PERM)) != 0, &heap)) return PYTHON;
    long long meta_after = 0, meta_total = 0;
    int meta_found = meta ? metaspace_jdk8(text, &meta_after, &meta_total) : 0;
    if (meta_found < 0) return PYTHON;
    int timed;
    double when;
    TIMESTAMP(stamp, &timed, &when);
    for (int k = 0; k < nactions; k++) {
        if (actions[k].concurrent) {
            Stamp at = actions[k].stamp;
            int phase_timed;
            double phase_t;
            /* its date was read once already: this reading cannot fail */
            if (timestamp(self, &at, &phase_timed, &phase_t) <= 0) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "a date read twice");
                return -1;
            }
            concurrent(self, phase_timed, phase_t, actions[k].value);
            continue;
        }
        Pause before_remark = {.timed = timed, .t = when, .p = actions[k].value, .kind = K_YOUNG,
                               .cause = {"before remark", 13}, .has_unix = stamp->has_unix,
                               .unix_s = stamp->unix_s};
        if (add_pause(self, &before_remark)) return -1;
    }
    int maybe = (m & (M_TO_SPACE | M_PROMOTION | M_CONC_MODE | M_HUMONGOUS)) != 0;
    for (size_t k = 0; maybe && k < sizeof JDK8_PROBLEMS / sizeof *JDK8_PROBLEMS; k++) {
        if (!has(text, JDK8_PROBLEMS[k].mark)) continue;
        if (problem(self, JDK8_PROBLEMS[k].name, timed, when)) return -1;
        if (p.kind == K_FULL && p.cause.n == 0)
            p.cause = (Text){JDK8_PROBLEMS[k].name, (Py_ssize_t)strlen(JDK8_PROBLEMS[k].name)};
    }
    if (((m & M_METADATA) && has(text, "Metadata GC Threshold")) || has(p.cause, "Metaspace"))
        if (problem(self, "metaspace", timed, when)) return -1;
    if (self->seen % self->stride == 0) { /* GcStats.keeps_next: the heap is kept */
        p.heap_known = heap.heap_known;
        p.before = heap.before;
        p.after = heap.after;
        p.total = heap.total;
    }
    if (meta_found) {
        self->meta_set = 1;
        self->meta_after = meta_after;
        self->meta_total = meta_total;
    }
    p.timed = timed;
    p.t = when;
    p.has_unix = stamp->has_unix;
    p.unix_s = stamp->unix_s;
    return add_pause(self, &p) ? -1 : TAKEN;
}

static int jdk8_line(Scanner *self, Text t, unsigned m, const char *next, const char *end) {
    int bracket = (m & M_BRACKET) != 0;
    int total_time = (m & M_TOTAL_TIME) != 0;
    if (!bracket && !total_time) return TAKEN;
    Stamp stamp;
    Py_ssize_t at;
    if (total_time) {
        double seconds;
        int timed;
        double when;
        if (!jdk8_stamps(t, &at, &stamp) || !starts(t, at, STOPPED) ||
            stop_seconds(t, at, &seconds) != 1)
            return PYTHON;
        TIMESTAMP(&stamp, &timed, &when);
        return stopped(self, timed, when, seconds, stamp.has_unix, stamp.unix_s) ? -1 : TAKEN;
    }
    if (is_ws(t.s[0])) return TAKEN; /* G1's details */
    if (self->events < self->min_events) return PYTHON;
    if (!jdk8_stamps(t, &at, &stamp) || !starts(t, at, "[")) return PYTHON;
    if (m & M_CONCURRENT) {
        if (starts(t, at, "[GC concurrent-") || starts(t, at, "[CMS-concurrent-")) {
            /* a concurrent phase alone on its line; any other line with one: Python's */
            const char *close = memchr(t.s + at, ']', (size_t)(t.n - at));
            if (close == NULL || memchr(t.s + at + 1, '[', (size_t)(t.n - at - 1)) != NULL)
                return PYTHON;
            for (const char *c = close + 1; c < t.s + t.n; c++)
                if (!is_ws(*c)) return PYTHON;
            return jdk8_concurrent(self, t, &stamp, at + 1, close - t.s);
        }
    }
    if (m & M_PAUSE) return PYTHON; /* Shenandoah's */
    return jdk8_event(self, t, m, &stamp, at, next, end);
}

/* ---- unified ---- */

/* The decorations ``[a][b]... `` and what gc_unified._decorations takes of them: the uptime
 * (``timed``, ``t``) and whether a date is there; ``*body`` where the message starts.
 * PYTHON where the decorations are of another shape. */
static int decorations(Scanner *self, Text t, Stamp *stamp, int *odd, Py_ssize_t *body) {
    Py_ssize_t at = 0;
    Text dates[4];
    int ndates = 0;
    memset(stamp, 0, sizeof *stamp);
    *odd = 0;
    while (at < t.n && t.s[at] == '[') {
        const char *close = memchr(t.s + at + 1, ']', (size_t)(t.n - at - 1));
        if (close == NULL) return PYTHON;
        Py_ssize_t a = at + 1, b = close - t.s;
        while (a < b && is_ws(t.s[a])) a++;
        while (b > a && is_ws(t.s[b - 1])) b--;
        Text part = {t.s + a, b - a};
        if (part.n && is_digit(part.s[0])) {
            if (part.s[part.n - 1] == 's') {
                if (part.s[part.n - 2] == 'm') {
                    long long ms;
                    Py_ssize_t i = 0;
                    if (part.n < 13 && integer(part, &i, INT64_MAX, &ms) == 1 &&
                        i == part.n - 2) {
                        stamp->up = (double)ms / 1000;
                        stamp->has_up = 1;
                    }
                } else {
                    Py_ssize_t i = 0;
                    double value;
                    int r = number(part, &i, &value);
                    if (r < 0) return PYTHON;
                    if (r == 1 && i == part.n - 1) {
                        stamp->up = value;
                        stamp->has_up = 1;
                    }
                }
            } else if (part.n > 10 && part.s[4] == '-') {
                if (ndates == 4) return PYTHON;
                dates[ndates++] = part; /* read once the decorations are known whole */
            }
        }
        at = close - t.s + 1;
        if (at < t.n && t.s[at] != '[') {
            while (at < t.n && is_ws(t.s[at])) at++;
            if (at < t.n && t.s[at] == '[') return PYTHON; /* blanks between: odd */
            break;
        }
    }
    /* GcStats.date_seconds of each date, in order: the first read keeps its UTC offset, the
     * last one stands */
    for (int k = 0; k < ndates; k++) {
        double unix_s;
        long long offset;
        if (!date_value(dates[k], &unix_s, &offset)) {
            if (!self->utc_known) return PYTHON; /* Python may read it: the offset */
            *odd = 1;                             /* what Python reads of it is its own */
            stamp->has_unix = 0;
            continue;
        }
        date_seconds(self, dates[k], &stamp->unix_s);
        stamp->has_unix = 1;
        *odd = 0;
    }
    *body = at;
    return TAKEN;
}

/* `` NUMms`` closing ``t`` at ``at``: 1 (``*ms`` set), 0, -1 (not finite). */
static int ms_at_end(Text t, Py_ssize_t at, double *ms) {
    if (at >= t.n || t.s[at] != ' ') return 0;
    at++;
    int r = number(t, &at, ms);
    if (r <= 0) return r;
    return (at == t.n - 2 && t.s[at] == 'm' && t.s[at + 1] == 's') ? 1 : 0;
}

/* ``GC(n) Concurrent <name>[ (...)][ N.NNNms]`` (gc_unified._CONCURRENT), from ``at`` (the
 * name). */
static int unified_concurrent(Scanner *self, Text line, Text body, Py_ssize_t at,
                              Stamp *stamp, int odd) {
    Py_ssize_t run = at;
    while (run < body.n && (is_word(body.s[run]) || body.s[run] == ' ' || body.s[run] == '-'))
        run++;
    Py_ssize_t name_end;
    double ms = 0.0;
    int has_ms = 0;
    if (run == body.n) {
        name_end = run; /* no time, no parentheses */
    } else if (body.s[run] == '(' && run > at + 12 && body.s[run - 1] == ' ') {
        name_end = run - 1;
        Py_ssize_t close = run + 1;
        while (close < body.n && body.s[close] != ')' && body.s[close] != '(') close++;
        if (close >= body.n || body.s[close] != ')') return PYTHON;
        if (close + 1 < body.n) {
            int r = ms_at_end(body, close + 1, &ms);
            if (r != 1) return PYTHON;
            has_ms = 1;
        }
    } else if (body.s[run] == '.' || body.s[run] == ',') {
        /* `` N.NNNms``: the name ends before the last blank of the run */
        Py_ssize_t digits = run;
        while (digits > at && is_digit(body.s[digits - 1])) digits--;
        if (digits == run || body.s[digits - 1] != ' ' || digits - 1 <= at + 11) return NO_MATCH;
        name_end = digits - 1;
        int r = ms_at_end(body, name_end, &ms);
        if (r < 0) return PYTHON;
        if (r == 0) return NO_MATCH;
        has_ms = 1;
    } else if (body.s[run] == '(') {
        return NO_MATCH; /* the name must end in a blank before its parentheses */
    } else {
        /* a character neither the name nor what may follow it has (``10M->5M``): the name
         * would have to end there */
        return NO_MATCH;
    }
    double seconds = has_ms ? ms / 1000 : 0.0;
    /* a phase's start line counts where GCViewer reads it: at gc level, not gc,start */
    Text decorations = {line.s, line.n - body.n};
    int started = !has_ms && has(decorations, "gc,start");
    PyObject *name = PyUnicode_DecodeASCII(body.s + at, name_end - at, NULL);
    if (name == NULL) return -1;
    int span = PySet_Contains(self->span_phases, name);
    Py_DECREF(name);
    if (span < 0) return -1;
    if (span && !started) {
        if (odd) return PYTHON;
        int timed;
        double when;
        TIMESTAMP(stamp, &timed, &when);
        concurrent(self, timed, when, seconds);
    } else {
        self->concurrent_s += seconds;
    }
    return TAKEN;
}

/* gc_unified's _KINDS by a pause's name, and what any other name is: Shenandoah's pauses
 * (``concurrent-pause``), its degenerated cycle (``full``). */
static const struct {
    const char *what;
    const char *kind;
} UNIFIED_KINDS[] = {{"Young", "young"},
                     {"Full", "full"},
                     {"Remark", "remark"},
                     {"Cleanup", "cleanup"},
                     {"Initial Mark", "initial-mark"},
                     {"Mixed", "mixed"},
                     {"Init Mark", "concurrent-pause"},
                     {"Final Mark", "concurrent-pause"},
                     {"Init Update Refs", "concurrent-pause"},
                     {"Final Update Refs", "concurrent-pause"},
                     {"Final Roots", "concurrent-pause"},
                     {"Degenerated GC", "full"}};

static PyObject *kind_object(const char *kind) {
    if (strcmp(kind, "young") == 0) return K_YOUNG;
    if (strcmp(kind, "full") == 0) return K_FULL;
    if (strcmp(kind, "remark") == 0) return K_REMARK;
    if (strcmp(kind, "cleanup") == 0) return K_CLEANUP;
    if (strcmp(kind, "mixed") == 0) return K_MIXED;
    if (strcmp(kind, "concurrent-pause") == 0) return K_CONCURRENT_PAUSE;
    return K_INITIAL_MARK;
}

/* ``before->after(total)`` or ``before->after`` as the whole of ``t`` (gc_unified._heap). */
static int unified_heap(Text t, Pause *p) {
    Py_ssize_t i = 0;
    p->total = -1;
    if (size(t, &i, 1, &p->before) != 1 || !starts(t, i, "->")) return PYTHON;
    i += 2;
    if (size(t, &i, 1, &p->after) != 1) return PYTHON;
    if (i < t.n) {
        if (t.s[i] != '(') return PYTHON;
        i++;
        if (size(t, &i, 1, &p->total) != 1 || i != t.n - 1 || t.s[i] != ')') return PYTHON;
    }
    p->heap_known = 1;
    return TAKEN;
}

/* ``GC(n) Pause <what>[ (cause)...][ before->after(total)] N.NNNms`` (gc_unified._PAUSE) for
 * the kinds of UNIFIED_KINDS, from ``at`` (after ``Pause ``). */
static int unified_pause(Scanner *self, Text body, Py_ssize_t at, long long gc_id,
                         Stamp *stamp, unsigned m) {
    if (m & (M_TO_SPACE_EX | M_EVACUATION | M_HUMONGOUS | M_METADATA)) return PYTHON;
    Pause p = {.cause = {"", 0}};
    Py_ssize_t i = -1;
    for (size_t k = 0; k < sizeof UNIFIED_KINDS / sizeof *UNIFIED_KINDS; k++) {
        size_t n = strlen(UNIFIED_KINDS[k].what);
        if (starts(body, at, UNIFIED_KINDS[k].what) && at + (Py_ssize_t)n < body.n &&
            body.s[at + n] == ' ' && (at + (Py_ssize_t)n + 1 < body.n) &&
            (body.s[at + n + 1] == '(' || is_digit(body.s[at + n + 1]))) {
            p.kind = kind_object(UNIFIED_KINDS[k].kind);
            i = at + (Py_ssize_t)n;
            break;
        }
    }
    if (i < 0) return PYTHON;
    /* the parentheses: the first that is not one of G1's or Shenandoah's kinds is the cause */
    static const char *not_causes[] = {"Normal", "Concurrent Start", "Prepare Mixed", "Mixed",
                                       "unload classes", "update refs", "process weakrefs"};
    int have_cause = 0;
    while (starts(body, i, " (")) {
        Py_ssize_t open = i + 2, j = open;
        while (j < body.n && body.s[j] != ')' && body.s[j] != '(') j++;
        if (j + 1 < body.n && body.s[j] == '(' && body.s[j + 1] == ')') j += 2; /* gc() */
        if (j >= body.n || body.s[j] != ')') return PYTHON;
        Text inside = {body.s + open, j - open};
        if (memchr(inside.s, '(', (size_t)inside.n) &&
            !(inside.n >= 2 && inside.s[inside.n - 2] == '(' && inside.s[inside.n - 1] == ')'))
            return PYTHON;
        if (!have_cause) {
            int skip = 0;
            for (size_t k = 0; k < sizeof not_causes / sizeof *not_causes; k++)
                if ((size_t)inside.n == strlen(not_causes[k]) &&
                    memcmp(inside.s, not_causes[k], (size_t)inside.n) == 0)
                    skip = 1;
            if (!skip) {
                p.cause = inside;
                have_cause = 1;
            }
        }
        i = j + 1;
    }
    /* the heap, a token with ``->``, then the pause */
    double ms;
    if (ms_at_end(body, i, &ms) != 1) {
        if (i >= body.n || body.s[i] != ' ') return PYTHON;
        const char *blank = memchr(body.s + i + 1, ' ', (size_t)(body.n - i - 1));
        if (blank == NULL) return PYTHON;
        Text heap = {body.s + i + 1, blank - body.s - i - 1};
        if (unified_heap(heap, &p) != TAKEN) return PYTHON;
        if (ms_at_end(body, blank - body.s, &ms) != 1) return PYTHON;
    } else {
        p.total = -1;
    }
    p.p = ms / 1000;
    TIMESTAMP(stamp, &p.timed, &p.t);
    p.has_unix = stamp->has_unix;
    p.unix_s = stamp->unix_s;
    if (p.kind == K_YOUNG && self->last_id > gc_id && PyUnicode_Check(self->last_kind) &&
        PyUnicode_CompareWithASCIIString(self->last_kind, "full") == 0) {
        double beyond = p.p - self->last_full_s;
        p.p = beyond > 0.0 ? beyond : 0.0;
    }
    if (add_pause(self, &p)) return -1;
    self->last_id = gc_id;
    Py_XSETREF(self->last_kind, Py_NewRef(p.kind));
    self->last_full_s = p.kind == K_FULL ? p.p : 0.0;
    self->last_collection_new = 1;
    return TAKEN;
}

static void zgc(Scanner *self) {
    if (!self->collector_known) self->collector_known = self->zgc_named = 1;
}

/* ZGC's ``Pause Mark Start|Mark End|Relocate Start[ (...)] N.NNNms`` (_ZGC_PHASE), from
 * ``at`` (after ``Pause ``); 0 where it is another pause. */
static int zgc_phase(Scanner *self, Text body, Py_ssize_t at, Stamp *stamp, int *done) {
    static const char *phases[] = {"Mark Start", "Mark End", "Relocate Start"};
    *done = 0;
    for (size_t k = 0; k < 3; k++) {
        if (!starts(body, at, phases[k])) continue;
        Py_ssize_t i = at + (Py_ssize_t)strlen(phases[k]);
        double ms;
        if (starts(body, i, " (")) {
            const char *close = memchr(body.s + i + 2, ')', (size_t)(body.n - i - 2));
            if (close == NULL) return PYTHON;
            i = close - body.s + 1;
        }
        if (ms_at_end(body, i, &ms) != 1) return PYTHON;
        *done = 1;
        Pause p = {.p = ms / 1000, .kind = K_CONCURRENT_PAUSE,
                   .cause = {phases[k], (Py_ssize_t)strlen(phases[k])}};
        TIMESTAMP(stamp, &p.timed, &p.t);
        p.has_unix = stamp->has_unix;
        p.unix_s = stamp->unix_s;
        zgc(self);
        if (add_pause(self, &p)) return -1;
        self->zgc_phases++;
        return TAKEN;
    }
    return TAKEN;
}

/* ZGC's cycle: ``Garbage Collection (cause) 10M(5%)->8M(4%)`` (_ZGC_CYCLE_END), from ``at``
 * (after ``GC(n) ``). */
static int zgc_cycle(Scanner *self, Text body, Py_ssize_t at, Stamp *stamp, unsigned m) {
    static const char *cycles[] = {"Garbage Collection (", "Major Collection (",
                                   "Minor Collection ("};
    if (m & (M_TO_SPACE_EX | M_EVACUATION | M_HUMONGOUS | M_METADATA)) return PYTHON;
    for (size_t k = 0; k < 3; k++) {
        if (!starts(body, at, cycles[k])) continue;
        Py_ssize_t i = at + (Py_ssize_t)strlen(cycles[k]);
        while (i < body.n && body.s[i] != ')' && body.s[i] != '(') i++;
        if (i >= body.n || body.s[i] == '(') return PYTHON;
        if (!starts(body, i, ") ")) return NO_MATCH; /* gc,start's line: no heap after it */
        i += 2;
        Py_ssize_t run = i;
        while (run < body.n && !is_ws(body.s[run])) run++;
        Text token = {body.s + i, run - i};
        /* \S+->\S+: an arrow with a character before it and one after it (any arrow) */
        int arrow = 0;
        for (Py_ssize_t k = 1; k + 2 < token.n && !arrow; k++)
            arrow = token.s[k] == '-' && token.s[k + 1] == '>';
        if (!arrow) return NO_MATCH;
        int timed;
        double when;
        TIMESTAMP(stamp, &timed, &when);
        zgc(self);
        self->zgc_cycles++;
        concurrent(self, timed, when, 0.0);
        return TAKEN;
    }
    return PYTHON;
}

static int unified_line(Scanner *self, Text t, unsigned m) {
    if (t.n == 0 || t.s[0] != '[') {
        for (Py_ssize_t i = 0; i < t.n; i++)
            if (!is_ws(t.s[i])) return PYTHON;
        return TAKEN; /* a blank line */
    }
    Stamp stamp;
    int odd;
    Py_ssize_t at;
    if (decorations(self, t, &stamp, &odd, &at) != TAKEN) return PYTHON;
    Text body = {t.s + at, t.n - at};
    if (!starts(body, 0, "GC(")) {
        if (starts(body, 0, "Using ")) return PYTHON;
        /* _STALL: "Allocation Stall (" or "Relocation Stall (" (ZGC's statistics table has
         * "Critical: Allocation Stall" lines without them) */
        if ((m & M_STALL) && (has(body, "Allocation Stall (") || has(body, "Relocation Stall (")))
            return PYTHON;
        if (!(m & M_TOTAL_TIME)) return TAKEN;
        const char *found = memmem(body.s, (size_t)body.n, STOPPED, strlen(STOPPED));
        if (found == NULL) return TAKEN;
        double seconds;
        if (odd || stop_seconds(body, found - body.s, &seconds) != 1) return PYTHON;
        int timed;
        double when;
        TIMESTAMP(&stamp, &timed, &when);
        return stopped(self, timed, when, seconds, stamp.has_unix, stamp.unix_s) ? -1 : TAKEN;
    }
    int pause_line = (m & M_PAUSE) && ends(body, "ms");
    int concurrent_line = (m & M_CONCURRENT_) != 0;
    int cycle_line = (m & M_COLLECTION) != 0;
    if (m & (M_TO_SPACE_EX | M_EVACUATION)) return PYTHON;
    Py_ssize_t i = 3;
    long long gc_id = 0;
    int id_read = (pause_line || concurrent_line || cycle_line) ? integer(body, &i, INT64_MAX, &gc_id) : 0;
    if (id_read < 0) return PYTHON; /* an id past 64 bits */
    int numbered = id_read == 1 && starts(body, i, ") ");
    if (numbered) {
        /* GC(n) then the event, as gc_unified tries them; generational ZGC's "y: ": Python's */
        i += 2;
        if (odd) return PYTHON;
        if (i + 2 < body.n && strchr("yoYO", body.s[i]) && body.s[i + 1] == ':') return PYTHON;
        if (pause_line && starts(body, i, "Pause ")) {
            int done;
            int r = zgc_phase(self, body, i + 6, &stamp, &done);
            if (r != TAKEN || done) return r;
            return unified_pause(self, body, i + 6, gc_id, &stamp, m);
        }
        if (cycle_line && (starts(body, i, "Garbage Collection (") ||
                           starts(body, i, "Major Collection (") ||
                           starts(body, i, "Minor Collection ("))) {
            int r = zgc_cycle(self, body, i, &stamp, m);
            if (r != NO_MATCH) return r;
        }
        if (concurrent_line && starts(body, i, "Concurrent ")) {
            int r = unified_concurrent(self, t, body, i, &stamp, odd);
            if (r != NO_MATCH) return r;
        }
    }
    if (!(m & M_METASPACE)) return TAKEN;
    /* _METASPACE.search: Metaspace: 1K(2K)->3K(4K) */
    const char *from = body.s;
    const char *found;
    while ((found = memmem(from, (size_t)(body.s + body.n - from), "Metaspace: ", 11))) {
        Py_ssize_t i = found - body.s + 11;
        long long used, after, total;
        from = found + 1;
        int r = size(body, &i, 0, &used);
        if (r < 0) return PYTHON;
        if (r == 0) continue;
        if (i < body.n && body.s[i] == '(') {
            Py_ssize_t j = i + 1;
            long long ignored;
            r = size(body, &j, 0, &ignored);
            if (r < 0) return PYTHON;
            if (r == 1 && j < body.n && body.s[j] == ')') i = j + 1;
        }
        if (!starts(body, i, "->")) continue;
        i += 2;
        r = size(body, &i, 0, &after);
        if (r < 0) return PYTHON;
        if (r == 0 || i >= body.n || body.s[i] != '(') continue;
        i++;
        r = size(body, &i, 0, &total);
        if (r < 0) return PYTHON;
        if (r == 0 || i >= body.n || body.s[i] != ')') continue;
        self->meta_set = 1;
        self->meta_after = after;
        self->meta_total = total;
        break;
    }
    return TAKEN;
}

/* ---- the type ---- */

static PyObject *Scanner_scan(Scanner *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    if (!PyArg_ParseTuple(args, "y*n", &view, &pos)) return NULL;
    const char *data = view.buf;
    Py_ssize_t n = view.len;
    if (pos < 0 || pos > n) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "pos out of the buffer");
        return NULL;
    }
    if (self->stats == NULL) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "Scanner() was not initialised");
        return NULL;
    }
    if (load(self)) {
        Py_CLEAR(self->timeline);
        Py_CLEAR(self->longest);
        Py_CLEAR(self->causes);
        Py_CLEAR(self->last_kind);
        PyBuffer_Release(&view);
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
        /* a size or id the parser read past 64 bits: the parser reads on */
        PyErr_Clear();
        return PyLong_FromSsize_t(pos);
    }
    int failed = 0;
    while (pos < n) {
        const char *nl = memchr(data + pos, '\n', (size_t)(n - pos));
        if (nl == NULL) break;
        Text line = line_before(data + pos, nl);
        unsigned m = marks(line);
        if (m & M_HIGH) break;
        self->resume = NULL;
        int r = self->family == JDK8 ? jdk8_line(self, line, m, nl + 1, data + n)
                                     : unified_line(self, line, m);
        if (r < 0) {
            failed = 1;
            break;
        }
        if (r == PYTHON) break;
        self->lines++;
        pos = nl - data + 1;
        if (self->resume != NULL) {
            self->lines += self->extra_lines;
            pos = self->resume - data;
        }
    }
    PyBuffer_Release(&view);
    if (failed) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        store(self);
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    if (store(self)) return NULL;
    return PyLong_FromSsize_t(pos);
}

static int Scanner_init(Scanner *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"stats", "family", "pause_type", "cause_type", "heappush",
                            "heapreplace", "kept", "longest_kept", "min_events", "span_phases",
                            NULL};
    PyObject *stats, *pause_type, *cause_type, *push, *replace, *span;
    int family;
    Py_ssize_t kept, longest;
    long long min_events;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OiOOOOnnLO!", names, &stats, &family,
                                     &pause_type, &cause_type, &push, &replace, &kept, &longest,
                                     &min_events, &PyFrozenSet_Type, &span))
        return -1;
    if (family != JDK8 && family != UNIFIED) {
        PyErr_SetString(PyExc_ValueError, "family: 0 (JDK 8) or 1 (unified)");
        return -1;
    }
    if (!PyType_Check(pause_type) || PyObject_HasAttrString(pause_type, "__post_init__")) {
        PyErr_SetString(PyExc_TypeError, "pause_type: a dataclass type without __post_init__");
        return -1;
    }
    if (kept < 2 || longest < 1) {
        PyErr_SetString(PyExc_ValueError, "kept >= 2 and longest_kept >= 1");
        return -1;
    }
    Py_XSETREF(self->stats, Py_NewRef(stats));
    Py_XSETREF(self->pause_type, Py_NewRef(pause_type));
    Py_XSETREF(self->cause_type, Py_NewRef(cause_type));
    Py_XSETREF(self->heappush, Py_NewRef(push));
    Py_XSETREF(self->heapreplace, Py_NewRef(replace));
    Py_XSETREF(self->span_phases, Py_NewRef(span));
    PyObject *builtins = PyEval_GetBuiltins(); /* borrowed */
    PyObject *round = builtins ? PyDict_GetItemString(builtins, "round") : NULL;
    if (round == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "builtins.round is not there");
        return -1;
    }
    Py_XSETREF(self->round, Py_NewRef(round));
    self->family = family;
    self->kept = kept;
    self->longest_kept = longest;
    self->min_events = min_events;
    return 0;
}

static void Scanner_dealloc(Scanner *self) {
    Py_XDECREF(self->stats);
    Py_XDECREF(self->pause_type);
    Py_XDECREF(self->cause_type);
    Py_XDECREF(self->heappush);
    Py_XDECREF(self->heapreplace);
    Py_XDECREF(self->span_phases);
    Py_XDECREF(self->last_kind);
    Py_XDECREF(self->round);
    PyMem_Free(self->joined);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Scanner_methods[] = {
    {"scan", (PyCFunction)Scanner_scan, METH_VARARGS,
     "scan(buffer, pos) -> where the first whole line it leaves to Python begins"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stepdoctor.logs._gcscan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The GC log parsers' fast path over one GcStats.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gcscan",
                                    "The GC log parsers' fast path (gc_jdk8, gc_unified).", -1,
                                    NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__gcscan(void) {
    if (PyType_Ready(&ScannerType) < 0) return NULL;
    K_YOUNG = PyUnicode_InternFromString("young");
    K_MIXED = PyUnicode_InternFromString("mixed");
    K_FULL = PyUnicode_InternFromString("full");
    K_REMARK = PyUnicode_InternFromString("remark");
    K_CLEANUP = PyUnicode_InternFromString("cleanup");
    K_SAFEPOINT = PyUnicode_InternFromString("safepoint");
    static const char *fields[] = {"t_s", "pause_s", "kind", "cause", "heap_before_bytes",
                                   "heap_after_bytes", "heap_total_bytes", "unix_s"};
    for (int i = 0; i < 8; i++)
        if ((PAUSE_FIELDS[i] = PyUnicode_InternFromString(fields[i])) == NULL) return NULL;
    K_INITIAL_MARK = PyUnicode_InternFromString("initial-mark");
    K_CONCURRENT_PAUSE = PyUnicode_InternFromString("concurrent-pause");
    if (!K_YOUNG || !K_MIXED || !K_FULL || !K_REMARK || !K_CLEANUP || !K_SAFEPOINT ||
        !K_INITIAL_MARK || !K_CONCURRENT_PAUSE)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "JDK8", JDK8) || PyModule_AddIntConstant(m, "UNIFIED", UNIFIED) ||
        PyModule_AddObjectRef(m, "Scanner", (PyObject *)&ScannerType)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
