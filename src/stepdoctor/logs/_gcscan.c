/* The GC log parsers' fast path in C (gc_jdk8.py, gc_unified.py; docs/logs.md): the text
 * helpers, the running sums and the type here, each family's lines in _gcscan_jdk8.h and
 * _gcscan_unified.h.
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

#include "_gcscan_jdk8.h"

/* ---- unified ---- */

#include "_gcscan_unified.h"

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
