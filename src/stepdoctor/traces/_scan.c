/* A streaming scanner of Kineto / Chrome-trace JSON in C (docs/traces.md).
 *
 * It does what loader.py's ijson loop and ``_take`` do, without making a Python object of
 * every event: the whole document is validated (JSON grammar, UTF-8 in strings, integers
 * within 64-bit signed as ijson's parser wants), and only the items of the top-level
 * ``traceEvents`` arrays are looked into. Of each event object only ``ph``, ``cat``,
 * ``name``, ``ts``, ``dur``, ``tid`` and ``args.stream`` / ``args.correlation`` are read,
 * and ``_take``'s rules applied to them in C; the results are the loader's own objects
 * (``GpuEvent``, ``Launch``, step tuples).
 *
 * What it does not handle itself it hands back, never guesses:
 * - an event with an unusual shape (a key or a wanted string with escapes, a repeated key,
 *   a non-string name, a time beyond 64 bits) is passed as its bytes to ``take(bytes)``,
 *   which parses it with ``json`` and runs ``_take``;
 * - a document it finds invalid raises ``InvalidError``: the loader then reads the file again
 *   with ijson, which says what is wrong and where, in the words the loader always used.
 *
 * The top-level ``distributedInfo`` and ``deviceProperties`` before the first ``traceEvents``
 * are passed as their bytes to ``header(key, bytes)`` (the rank, world size and device).
 *
 * Feeding: ``Scanner.feed(buffer, final)`` parses the complete units in ``buffer`` (a
 * top-level member, or one item of ``traceEvents``) and returns how many bytes it used; the
 * caller keeps the rest and feeds it again with the next chunk of the (decompressed) file.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#define MAX_DEPTH 512

static PyObject *InvalidError;

/* A parsed scalar of an event field. */
enum Kind { K_MISSING = 0, K_NULL, K_BOOL, K_INT, K_FLOAT, K_STRING, K_ESCAPED, K_OTHER };

typedef struct {
    int kind;
    int64_t i;
    double d;
    const char *s; /* K_STRING: the raw bytes between the quotes (no escapes) */
    Py_ssize_t len;
} Value;

typedef struct {
    const char *p;
    const char *end;
    int incomplete; /* ran out of input: not an error until the input is final */
    int invalid;
} Cursor;

enum State {
    S_START,       /* the top-level value */
    S_OBJ_FIRST,   /* after '{': a key or '}' */
    S_OBJ_KEY,     /* after ',': a key */
    S_OBJ_NEXT,    /* after a member: ',' or '}' */
    S_ARR_FIRST,   /* after "traceEvents": [ : an item or ']' */
    S_ARR_ITEM,    /* after ',': an item */
    S_ARR_NEXT,    /* after an item: ',' or ']' */
    S_END,         /* after the top-level value: whitespace only */
};

typedef struct {
    PyObject_HEAD
    int state;
    Py_ssize_t offset;   /* bytes of the document consumed before this buffer */
    Py_ssize_t events;   /* items of traceEvents that are objects */
    Py_ssize_t odd;      /* items that are not */
    PyObject *first_ts;  /* None, or an int */
    PyObject *gpu;       /* list of GpuEvent */
    PyObject *launches;  /* dict correlation -> Launch */
    PyObject *steps;     /* list of (name, ts) */
    PyObject *gpu_type;
    PyObject *launch_type;
    PyObject *take;      /* take(bytes): the Python way, for unusual events */
    PyObject *header;    /* header(key, bytes) for distributedInfo/deviceProperties, or None */
    int seen_events;     /* a traceEvents array has begun */
} Scanner;

/* ---- lexing ------------------------------------------------------------------------ */

static inline void
skip_ws(Cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) {
        c->p++;
    }
}

static inline int
fail(Cursor *c)
{
    c->invalid = 1;
    return -1;
}

static inline int
need_more(Cursor *c)
{
    c->incomplete = 1;
    return -1;
}

/* Length of the UTF-8 sequence at p (strict: no overlongs, surrogates or > U+10FFFF);
 * 0: invalid; -1: cut by the end of the buffer. */
static inline int
utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned char b = p[0];
    int n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b < 0xC2) {
        return 0;
    }
    else if (b < 0xE0) {
        n = 2;
    }
    else if (b < 0xF0) {
        n = 3;
        if (b == 0xE0) {
            lo = 0xA0;
        }
        else if (b == 0xED) {
            hi = 0x9F;
        }
    }
    else if (b < 0xF5) {
        n = 4;
        if (b == 0xF0) {
            lo = 0x90;
        }
        else if (b == 0xF4) {
            hi = 0x8F;
        }
    }
    else {
        return 0;
    }
    if (end - p < n) {
        for (const unsigned char *q = p + 1; q < end; q++) { /* invalid already? */
            if ((*q & 0xC0) != 0x80 || (q == p + 1 && (*q < lo || *q > hi))) {
                return 0;
            }
        }
        return -1;
    }
    if (p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (int k = 2; k < n; k++) {
        if ((p[k] & 0xC0) != 0x80) {
            return 0;
        }
    }
    return n;
}

static inline int
is_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

static unsigned int
hex4(const char *p)
{
    unsigned int value = 0;
    for (int k = 0; k < 4; k++) {
        char ch = p[k];
        value = value * 16 + (unsigned int)(ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10);
    }
    return value;
}

/* The bytes a valid \uXXXX escape at p (6 bytes, hex checked) takes, as ijson's yajl decodes
 * it: a high surrogate followed by another \u escape takes both (12 bytes, whatever the
 * second is), a high surrogate alone becomes '?'; a low surrogate alone is encoded as invalid
 * UTF-8, which ijson then refuses: invalid here too. -1 for fail/need_more (set in c). */
static int
surrogate_escape(Cursor *c, const char *p, const char *end)
{
    unsigned int code = hex4(p + 2);
    if (code >= 0xDC00 && code <= 0xDFFF) {
        return fail(c);
    }
    if (code < 0xD800 || code > 0xDBFF) {
        return 6;
    }
    const char *q = p + 6;
    if (q < end && *q != '\\') {
        return 6;
    }
    if (end - q < 2) {
        return need_more(c);
    }
    if (q[1] != 'u') {
        return 6;
    }
    if (end - q < 6) {
        for (const char *k = q + 2; k < end; k++) {
            if (!is_hex(*k)) {
                return fail(c);
            }
        }
        return need_more(c);
    }
    if (!is_hex(q[2]) || !is_hex(q[3]) || !is_hex(q[4]) || !is_hex(q[5])) {
        return fail(c);
    }
    return 12;
}

/* A string at c->p (which is '"'). On success: *s and *len the raw bytes, *escaped whether it
 * holds a backslash. */
static int
lex_string(Cursor *c, const char **s, Py_ssize_t *len, int *escaped)
{
    const char *p = c->p + 1;
    const char *end = c->end;
    int esc = 0;
    while (1) {
        /* the common run of plain ASCII */
        while (p < end && (unsigned char)*p >= 0x20 && *p != '"' && *p != '\\'
               && (unsigned char)*p < 0x80) {
            p++;
        }
        if (p >= end) {
            return need_more(c);
        }
        unsigned char ch = (unsigned char)*p;
        if (ch == '"') {
            *s = c->p + 1;
            *len = p - (c->p + 1);
            *escaped = esc;
            c->p = p + 1;
            return 0;
        }
        if (ch < 0x20) {
            return fail(c);
        }
        if (ch == '\\') {
            esc = 1;
            if (p + 1 >= end) {
                return need_more(c);
            }
            char e = p[1];
            if (e == 'u') {
                if (end - p < 6) {
                    for (const char *q = p + 2; q < end; q++) {
                        if (!is_hex(*q)) {
                            return fail(c);
                        }
                    }
                    return need_more(c);
                }
                if (!is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) || !is_hex(p[5])) {
                    return fail(c);
                }
                int r = surrogate_escape(c, p, end);
                if (r < 0) {
                    return r;
                }
                p += r;
            }
            else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n'
                     || e == 'r' || e == 't') {
                p += 2;
            }
            else {
                return fail(c);
            }
            continue;
        }
        int n = utf8_len((const unsigned char *)p, (const unsigned char *)end);
        if (n == 0) {
            return fail(c);
        }
        if (n < 0) {
            return need_more(c);
        }
        p += n;
    }
}

/* A number at c->p: JSON's grammar; integers must fit in 64-bit signed (ijson stops at
 * larger ones, so they are invalid here too and ijson says so). */
static int
lex_number(Cursor *c, Value *v)
{
    const char *p = c->p;
    const char *end = c->end;
    const char *start = p;
    int is_float = 0;
    if (p < end && *p == '-') {
        p++;
    }
    if (p >= end) {
        return need_more(c);
    }
    if (*p == '0') {
        p++;
    }
    else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    else {
        return fail(c);
    }
    if (p < end && *p == '.') {
        is_float = 1;
        p++;
        if (p >= end) {
            return need_more(c);
        }
        if (!(*p >= '0' && *p <= '9')) {
            return fail(c);
        }
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) {
            p++;
        }
        if (p >= end) {
            return need_more(c);
        }
        if (!(*p >= '0' && *p <= '9')) {
            return fail(c);
        }
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    if (p >= end) {
        return need_more(c); /* the number may go on in the next chunk */
    }
    char buf[64];
    Py_ssize_t n = p - start;
    if (is_float) {
        /* strtod on a NUL-terminated copy; long mantissas go through Python's parser */
        if (n < (Py_ssize_t)sizeof(buf)) {
            memcpy(buf, start, n);
            buf[n] = '\0';
            v->d = PyOS_string_to_double(buf, NULL, NULL);
        }
        else {
            PyObject *text = PyUnicode_DecodeASCII(start, n, NULL);
            PyObject *f = text == NULL ? NULL : PyFloat_FromString(text);
            Py_XDECREF(text);
            if (f == NULL) {
                return -2;
            }
            v->d = PyFloat_AS_DOUBLE(f);
            Py_DECREF(f);
        }
        if (v->d == -1.0 && PyErr_Occurred()) {
            return -2;
        }
        if (!isfinite(v->d)) {
            return fail(c); /* ijson's parser: "numeric (floating point) overflow" */
        }
        v->kind = K_FLOAT;
    }
    else {
        const char *q = start;
        int neg = 0;
        if (*q == '-') {
            neg = 1;
            q++;
        }
        uint64_t acc = 0;
        uint64_t limit = (uint64_t)INT64_MAX; /* ijson's parser refuses INT64_MIN too */
        for (; q < p; q++) {
            uint64_t digit = (uint64_t)(*q - '0');
            if (acc > (limit - digit) / 10) {
                return fail(c); /* beyond int64: ijson's "integer overflow" */
            }
            acc = acc * 10 + digit;
        }
        v->i = neg ? (int64_t)(0 - acc) : (int64_t)acc;
        v->kind = K_INT;
    }
    c->p = p;
    return 0;
}

static int
lex_literal(Cursor *c, const char *word, Py_ssize_t n)
{
    Py_ssize_t have = c->end - c->p;
    if (have < n) {
        return memcmp(c->p, word, have) == 0 ? need_more(c) : fail(c);
    }
    if (memcmp(c->p, word, n) != 0) {
        return fail(c);
    }
    c->p += n;
    return 0;
}

static int skip_value(Cursor *c, int depth);

/* A member's key and its ':' (whitespace before each allowed). */
static int
lex_key(Cursor *c, const char **s, Py_ssize_t *len, int *escaped)
{
    skip_ws(c);
    if (c->p >= c->end) {
        return need_more(c);
    }
    if (*c->p != '"') {
        return fail(c);
    }
    if (lex_string(c, s, len, escaped) < 0) {
        return -1;
    }
    skip_ws(c);
    if (c->p >= c->end) {
        return need_more(c);
    }
    if (*c->p != ':') {
        return fail(c);
    }
    c->p++;
    return 0;
}

/* After a member or an item: ',' (1: another follows) or ``close`` (0: the container ends). */
static int
lex_after_member(Cursor *c, char close)
{
    skip_ws(c);
    if (c->p >= c->end) {
        return need_more(c);
    }
    if (*c->p == ',') {
        c->p++;
        return 1;
    }
    if (*c->p == close) {
        c->p++;
        return 0;
    }
    return fail(c);
}

/* A value, kept in *v when it is a scalar (containers are skipped and marked K_OTHER). */
static int
lex_value(Cursor *c, Value *v, int depth)
{
    skip_ws(c);
    if (c->p >= c->end) {
        return need_more(c);
    }
    int escaped = 0;
    switch (*c->p) {
    case '"':
        if (lex_string(c, &v->s, &v->len, &escaped) < 0) {
            return -1;
        }
        v->kind = escaped ? K_ESCAPED : K_STRING; /* escapes: the Python way decodes them */
        return 0;
    case '{':
    case '[':
        v->kind = K_OTHER;
        return skip_value(c, depth);
    case 't':
        v->kind = K_BOOL;
        return lex_literal(c, "true", 4);
    case 'f':
        v->kind = K_BOOL;
        return lex_literal(c, "false", 5);
    case 'n':
        v->kind = K_NULL;
        return lex_literal(c, "null", 4);
    default:
        return lex_number(c, v);
    }
}

/* Skip any value, validating it. */
static int
skip_value(Cursor *c, int depth)
{
    skip_ws(c);
    if (c->p >= c->end) {
        return need_more(c);
    }
    if (depth > MAX_DEPTH) {
        return fail(c); /* the streaming parser decides about such documents */
    }
    char open = *c->p;
    if (open != '{' && open != '[') {
        Value v;
        return lex_value(c, &v, depth);
    }
    char close = open == '{' ? '}' : ']';
    c->p++;
    skip_ws(c);
    if (c->p >= c->end) {
        return need_more(c);
    }
    if (*c->p == close) {
        c->p++;
        return 0;
    }
    while (1) {
        if (open == '{') {
            const char *s;
            Py_ssize_t len;
            int escaped;
            if (lex_key(c, &s, &len, &escaped) < 0) {
                return -1;
            }
        }
        int r = skip_value(c, depth + 1);
        if (r < 0) {
            return r;
        }
        r = lex_after_member(c, close);
        if (r <= 0) {
            return r;
        }
    }
}

/* ---- events ------------------------------------------------------------------------ */

enum Field { F_PH, F_CAT, F_NAME, F_TS, F_DUR, F_TID, F_ARGS, F_STREAM, F_CORR, N_FIELDS };

typedef struct {
    Value f[N_FIELDS];
    int unusual; /* hand the event to the Python way */
} Event;

static int
key_is(const char *s, Py_ssize_t len, const char *word)
{
    return (Py_ssize_t)strlen(word) == len && memcmp(s, word, len) == 0;
}

/* Parse an object's members into ev (top: the event; else its "args"). */
static int
lex_object(Cursor *c, Event *ev, int top)
{
    c->p++; /* '{' */
    skip_ws(c);
    if (c->p >= c->end) {
        return need_more(c);
    }
    if (*c->p == '}') {
        c->p++;
        return 0;
    }
    while (1) {
        const char *s;
        Py_ssize_t len;
        int escaped;
        if (lex_key(c, &s, &len, &escaped) < 0) {
            return -1;
        }
        int field = -1;
        if (escaped) {
            ev->unusual = 1; /* a key written with escapes may be one we want */
        }
        else if (top) {
            if (key_is(s, len, "ph")) field = F_PH;
            else if (key_is(s, len, "cat")) field = F_CAT;
            else if (key_is(s, len, "name")) field = F_NAME;
            else if (key_is(s, len, "ts")) field = F_TS;
            else if (key_is(s, len, "dur")) field = F_DUR;
            else if (key_is(s, len, "tid")) field = F_TID;
            else if (key_is(s, len, "args")) field = F_ARGS;
        }
        else {
            if (key_is(s, len, "stream")) field = F_STREAM;
            else if (key_is(s, len, "correlation")) field = F_CORR;
        }
        int r;
        if (field < 0) {
            r = skip_value(c, 2);
        }
        else {
            if (ev->f[field].kind != K_MISSING) {
                ev->unusual = 1; /* a repeated key: the last one counts, as in a dict */
            }
            if (field == F_ARGS) {
                skip_ws(c);
                if (c->p >= c->end) {
                    return need_more(c);
                }
                if (*c->p == '{') {
                    ev->f[F_ARGS].kind = K_OTHER;
                    r = lex_object(c, ev, 0);
                }
                else {
                    r = lex_value(c, &ev->f[F_ARGS], 2);
                    ev->f[F_ARGS].kind = K_OTHER;
                    ev->f[F_STREAM].kind = K_MISSING; /* args that are not an object: {} */
                    ev->f[F_CORR].kind = K_MISSING;
                }
            }
            else {
                r = lex_value(c, &ev->f[field], 2);
                if (ev->f[field].kind == K_ESCAPED) {
                    ev->unusual = 1;
                }
            }
        }
        if (r < 0) {
            return r;
        }
        r = lex_after_member(c, '}');
        if (r <= 0) {
            return r;
        }
    }
}

static inline int
finite_number(const Value *v)
{
    return v->kind == K_INT || (v->kind == K_FLOAT && isfinite(v->d));
}

static inline int
str_is(const Value *v, const char *word)
{
    return v->kind == K_STRING && key_is(v->s, v->len, word);
}

/* loader._times: 1 with *ts and *dur set, 0 for (None, 0), -1: unusual (beyond 64 bits). */
static int
event_times(const Event *ev, int64_t *ts, int64_t *dur)
{
    const Value *t = &ev->f[F_TS];
    Value zero = {K_INT, 0, 0.0, NULL, 0};
    const Value *d = ev->f[F_DUR].kind == K_MISSING ? &zero : &ev->f[F_DUR];
    if (t->kind == K_INT && d->kind == K_INT) {
        *ts = t->i;
        *dur = d->i;
        return 1;
    }
    if (!finite_number(t) || !finite_number(d)) {
        return 0;
    }
    /* a float among them: start = ceil(ts), end = floor(ts + dur) */
    double start_d = t->kind == K_INT ? (double)t->i : ceil(t->d);
    double tsum = (t->kind == K_INT ? (double)t->i : t->d) + (d->kind == K_INT ? (double)d->i : d->d);
    double end_d = floor(tsum);
    if (!isfinite(end_d) || fabs(start_d) > 9.0e15 || fabs(end_d) > 9.0e15) {
        return -1;
    }
    int64_t start = t->kind == K_INT ? t->i : (int64_t)start_d;
    *ts = start;
    *dur = (int64_t)end_d - start;
    return 1;
}

/* int(x) of a finite number (truncation); -1: beyond 64 bits. */
static int
as_int(const Value *v, int64_t *out)
{
    if (v->kind == K_INT) {
        *out = v->i;
        return 0;
    }
    if (fabs(v->d) >= 9.0e18) {
        return -1;
    }
    *out = (int64_t)v->d; /* C truncates toward zero, as int() does */
    return 0;
}

static PyObject *
interned(const Value *v)
{
    PyObject *s = PyUnicode_DecodeUTF8(v->s, v->len, "strict");
    if (s != NULL) {
        PyUnicode_InternInPlace(&s);
    }
    return s;
}

static int
is_gpu_category(const Value *cat)
{
    return str_is(cat, "kernel") || str_is(cat, "gpu_memcpy") || str_is(cat, "gpu_memset")
        || str_is(cat, "cuda_sync") || str_is(cat, "Kernel") || str_is(cat, "Memcpy")
        || str_is(cat, "Memset");
}

static int
is_launch_category(const Value *cat)
{
    return str_is(cat, "cuda_runtime") || str_is(cat, "cuda_driver") || str_is(cat, "Runtime")
        || str_is(cat, "Driver");
}

/* loader._take for a usual event. 1: done; 0: unusual after all (hand it over); -1: error. */
static int
take_event(Scanner *self, Event *ev)
{
    Value *cat = &ev->f[F_CAT];
    Value *name = &ev->f[F_NAME];
    int64_t ts, dur;
    if (self->first_ts == Py_None && ev->f[F_DUR].kind != K_MISSING
        && ev->f[F_DUR].kind != K_NULL && cat->kind != K_MISSING && cat->kind != K_NULL
        && !str_is(cat, "Trace")) {
        int r = event_times(ev, &ts, &dur);
        if (r < 0) {
            return 0;
        }
        if (r > 0) {
            PyObject *first = PyLong_FromLongLong(ts);
            if (first == NULL) {
                return -1;
            }
            Py_SETREF(self->first_ts, first);
        }
    }
    if (!str_is(&ev->f[F_PH], "X")) {
        return 1;
    }
    int gpu = is_gpu_category(cat);
    int launch = !gpu && is_launch_category(cat);
    if ((gpu || launch) && name->kind != K_STRING && name->kind != K_MISSING) {
        return 0; /* str() of a non-string name: the Python way */
    }
    if (gpu) {
        Value *stream = &ev->f[F_STREAM];
        if (stream->kind == K_MISSING || stream->kind == K_NULL) {
            stream = str_is(cat, "cuda_sync") ? NULL : &ev->f[F_TID];
        }
        if (stream == NULL || !finite_number(stream)) {
            return 1; /* a sync with no stream is not on the GPU timeline */
        }
        int r = event_times(ev, &ts, &dur);
        if (r < 0) {
            return 0;
        }
        if (r == 0) {
            return 1;
        }
        int64_t stream_id, corr_id = 0;
        int has_corr = finite_number(&ev->f[F_CORR]);
        if (as_int(stream, &stream_id) < 0 || (has_corr && as_int(&ev->f[F_CORR], &corr_id) < 0)) {
            return 0;
        }
        PyObject *args[6] = {NULL};
        args[0] = PyLong_FromLongLong(ts);
        args[1] = PyLong_FromLongLong(dur);
        args[2] = PyLong_FromLongLong(stream_id);
        args[3] = has_corr ? PyLong_FromLongLong(corr_id) : Py_NewRef(Py_None);
        args[4] = name->kind == K_STRING ? interned(name) : PyUnicode_InternFromString("");
        args[5] = interned(cat);
        PyObject *event = NULL;
        if (args[0] && args[1] && args[2] && args[3] && args[4] && args[5]) {
            event = PyObject_Vectorcall(self->gpu_type, args, 6, NULL);
        }
        for (int k = 0; k < 6; k++) {
            Py_XDECREF(args[k]);
        }
        if (event == NULL) {
            return -1;
        }
        int failed = PyList_Append(self->gpu, event);
        Py_DECREF(event);
        return failed ? -1 : 1;
    }
    if (launch) {
        Value *corr = &ev->f[F_CORR];
        if (!finite_number(corr)) {
            return 1;
        }
        int r = event_times(ev, &ts, &dur);
        if (r < 0) {
            return 0;
        }
        if (r == 0) {
            return 1;
        }
        int64_t corr_id;
        if (as_int(corr, &corr_id) < 0) {
            return 0;
        }
        PyObject *args[3];
        args[0] = PyLong_FromLongLong(ts);
        args[1] = PyLong_FromLongLong(dur);
        args[2] = name->kind == K_STRING ? interned(name) : PyUnicode_InternFromString("");
        PyObject *key = PyLong_FromLongLong(corr_id);
        PyObject *item = NULL;
        if (args[0] && args[1] && args[2] && key) {
            item = PyObject_Vectorcall(self->launch_type, args, 3, NULL);
        }
        for (int k = 0; k < 3; k++) {
            Py_XDECREF(args[k]);
        }
        int failed = item == NULL || PyDict_SetItem(self->launches, key, item) < 0;
        Py_XDECREF(item);
        Py_XDECREF(key);
        return failed ? -1 : 1;
    }
    /* ProfilerStep#N spans */
    static const char prefix[] = "ProfilerStep#";
    Py_ssize_t plen = (Py_ssize_t)sizeof(prefix) - 1;
    if (name->kind == K_STRING && name->len >= plen && memcmp(name->s, prefix, plen) == 0) {
        int r = event_times(ev, &ts, &dur);
        if (r < 0) {
            return 0;
        }
        if (r == 0) {
            return 1;
        }
        PyObject *text = PyUnicode_DecodeUTF8(name->s, name->len, "strict");
        PyObject *start = PyLong_FromLongLong(ts);
        PyObject *pair = text && start ? PyTuple_Pack(2, text, start) : NULL;
        Py_XDECREF(text);
        Py_XDECREF(start);
        int failed = pair == NULL || PyList_Append(self->steps, pair) < 0;
        Py_XDECREF(pair);
        return failed ? -1 : 1;
    }
    return 1;
}

/* One item of traceEvents. 0: done (c->p after it); -1: incomplete/invalid; -2: error. */
static int
scan_item(Scanner *self, Cursor *c)
{
    skip_ws(c);
    if (c->p >= c->end) {
        return need_more(c);
    }
    const char *start = c->p;
    if (*c->p != '{') {
        int r = skip_value(c, 1);
        if (r < 0) {
            return r;
        }
        self->odd++;
        return 0;
    }
    Event ev;
    memset(&ev, 0, sizeof(ev));
    int r = lex_object(c, &ev, 1);
    if (r < 0) {
        return r;
    }
    self->events++;
    int done = ev.unusual ? 0 : take_event(self, &ev);
    if (done < 0) {
        return -2;
    }
    if (done == 0) {
        PyObject *raw = PyBytes_FromStringAndSize(start, c->p - start);
        PyObject *res = raw == NULL ? NULL : PyObject_CallOneArg(self->take, raw);
        Py_XDECREF(raw);
        if (res == NULL) {
            return -2;
        }
        Py_DECREF(res);
    }
    return 0;
}

/* ---- the document ------------------------------------------------------------------- */

/* Parse complete units; returns the bytes used, -1 (invalid: InvalidError set) or -2. */
static Py_ssize_t
scan(Scanner *self, const char *buf, Py_ssize_t n, int final)
{
    Cursor c = {buf, buf + n, 0, 0};
    const char *committed = buf;
    while (1) {
        c.incomplete = 0;
        const char *unit = c.p;
        int r = 0;
        skip_ws(&c);
        committed = c.p; /* whitespace between units is used up */
        unit = c.p;
        if (c.p >= c.end) {
            break;
        }
        char ch = *c.p;
        switch (self->state) {
        case S_START:
            if (ch == '{') {
                c.p++;
                self->state = S_OBJ_FIRST;
            }
            else {
                r = skip_value(&c, 0); /* not an object: no traceEvents in it */
                if (r == 0) {
                    self->state = S_END;
                }
            }
            break;
        case S_OBJ_FIRST:
        case S_OBJ_KEY: {
            if (ch == '}' && self->state == S_OBJ_FIRST) {
                c.p++;
                self->state = S_END;
                break;
            }
            if (ch != '"') {
                r = fail(&c);
                break;
            }
            const char *s;
            Py_ssize_t len;
            int escaped;
            r = lex_key(&c, &s, &len, &escaped);
            if (r == 0 && escaped) {
                r = fail(&c); /* a top-level key with escapes: the streaming parser reads it */
            }
            if (r == 0 && key_is(s, len, "traceEvents")) {
                skip_ws(&c);
                if (c.p >= c.end) {
                    r = need_more(&c);
                }
                else if (*c.p == '[') {
                    c.p++;
                    self->state = S_ARR_FIRST;
                    self->seen_events = 1;
                    break;
                }
                else {
                    r = fail(&c); /* not an array: the streaming way says what the file is */
                }
            }
            if (r == 0) {
                skip_ws(&c);
                const char *value = c.p;
                r = skip_value(&c, 1);
                if (r == 0 && !self->seen_events && self->header != Py_None
                    && (key_is(s, len, "distributedInfo") || key_is(s, len, "deviceProperties"))) {
                    /* the keys before traceEvents the loader reads, as its header pass did */
                    PyObject *res = PyObject_CallFunction(self->header, "s#y#", s, len, value,
                                                          (Py_ssize_t)(c.p - value));
                    if (res == NULL) {
                        return -2;
                    }
                    Py_DECREF(res);
                }
                if (r == 0) {
                    self->state = S_OBJ_NEXT;
                }
            }
            break;
        }
        case S_OBJ_NEXT:
            c.p++;
            if (ch == ',') {
                self->state = S_OBJ_KEY;
            }
            else if (ch == '}') {
                self->state = S_END;
            }
            else {
                r = fail(&c);
            }
            break;
        case S_ARR_FIRST:
        case S_ARR_ITEM:
            if (ch == ']' && self->state == S_ARR_FIRST) {
                c.p++;
                self->state = S_OBJ_NEXT;
                break;
            }
            r = scan_item(self, &c);
            if (r == 0) {
                self->state = S_ARR_NEXT;
            }
            break;
        case S_ARR_NEXT:
            c.p++;
            if (ch == ',') {
                self->state = S_ARR_ITEM;
            }
            else if (ch == ']') {
                self->state = S_OBJ_NEXT;
            }
            else {
                r = fail(&c);
            }
            break;
        default: /* S_END: only whitespace may follow */
            r = fail(&c);
        }
        if (r == -2) {
            return -2;
        }
        if (r < 0) {
            if (c.invalid || final) {
                PyErr_Format(InvalidError, "invalid JSON near byte %zd",
                             self->offset + (c.p - buf));
                return -1;
            }
            c.p = unit; /* incomplete: this unit starts again with the next chunk */
            committed = unit;
            break;
        }
        committed = c.p;
    }
    if (final && self->state != S_END) {
        PyErr_Format(InvalidError, "the document ends early near byte %zd", self->offset + n);
        return -1;
    }
    self->offset += committed - buf;
    return committed - buf;
}

static PyObject *
scanner_feed(Scanner *self, PyObject *args)
{
    Py_buffer view;
    int final = 0;
    if (!PyArg_ParseTuple(args, "y*|p:feed", &view, &final)) {
        return NULL;
    }
    Py_ssize_t used = scan(self, (const char *)view.buf, view.len, final);
    PyBuffer_Release(&view);
    if (used < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(used);
}

static int
scanner_init(Scanner *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"gpu_type", "launch_type", "take", "header", NULL};
    PyObject *gpu_type, *launch_type, *take, *header = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O:Scanner", kwlist, &gpu_type,
                                     &launch_type, &take, &header)) {
        return -1;
    }
    if (header != Py_None && !PyCallable_Check(header)) {
        PyErr_SetString(PyExc_TypeError, "header must be callable or None");
        return -1;
    }
    self->seen_events = 0;
    Py_XSETREF(self->header, Py_NewRef(header));
    if (!PyCallable_Check(gpu_type) || !PyCallable_Check(launch_type) || !PyCallable_Check(take)) {
        PyErr_SetString(PyExc_TypeError, "gpu_type, launch_type and take must be callable");
        return -1;
    }
    self->state = S_START;
    self->offset = 0;
    self->events = 0;
    self->odd = 0;
    Py_XSETREF(self->first_ts, Py_NewRef(Py_None));
    Py_XSETREF(self->gpu, PyList_New(0));
    Py_XSETREF(self->launches, PyDict_New());
    Py_XSETREF(self->steps, PyList_New(0));
    Py_XSETREF(self->gpu_type, Py_NewRef(gpu_type));
    Py_XSETREF(self->launch_type, Py_NewRef(launch_type));
    Py_XSETREF(self->take, Py_NewRef(take));
    if (self->gpu == NULL || self->launches == NULL || self->steps == NULL) {
        return -1;
    }
    return 0;
}

static int
scanner_traverse(Scanner *self, visitproc visit, void *arg)
{
    Py_VISIT(self->first_ts);
    Py_VISIT(self->gpu);
    Py_VISIT(self->launches);
    Py_VISIT(self->steps);
    Py_VISIT(self->gpu_type);
    Py_VISIT(self->launch_type);
    Py_VISIT(self->take);
    Py_VISIT(self->header);
    return 0;
}

static int
scanner_clear(Scanner *self)
{
    Py_CLEAR(self->first_ts);
    Py_CLEAR(self->gpu);
    Py_CLEAR(self->launches);
    Py_CLEAR(self->steps);
    Py_CLEAR(self->gpu_type);
    Py_CLEAR(self->launch_type);
    Py_CLEAR(self->take);
    Py_CLEAR(self->header);
    return 0;
}

static void
scanner_dealloc(Scanner *self)
{
    PyObject_GC_UnTrack(self);
    scanner_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
scanner_get_first_ts(Scanner *self, void *closure)
{
    return Py_NewRef(self->first_ts ? self->first_ts : Py_None);
}

static int
scanner_set_first_ts(Scanner *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        value = Py_None;
    }
    Py_XSETREF(self->first_ts, Py_NewRef(value));
    return 0;
}

static PyObject *
scanner_get_done(Scanner *self, void *closure)
{
    return PyBool_FromLong(self->state == S_END);
}

static PyMethodDef scanner_methods[] = {
    {"feed", (PyCFunction)scanner_feed, METH_VARARGS,
     "feed(buffer, final=False) -> bytes used (the rest starts the next feed)."},
    {NULL},
};

static PyMemberDef scanner_members[] = {
    {"events", T_PYSSIZET, offsetof(Scanner, events), 0, "items of traceEvents that are objects"},
    {"odd_events", T_PYSSIZET, offsetof(Scanner, odd), 0, "items that are not objects"},
    {"gpu", T_OBJECT, offsetof(Scanner, gpu), READONLY, "GpuEvent list"},
    {"launches", T_OBJECT, offsetof(Scanner, launches), READONLY, "correlation -> Launch"},
    {"steps", T_OBJECT, offsetof(Scanner, steps), READONLY, "(name, ts) of ProfilerStep#N"},
    {NULL},
};

static PyGetSetDef scanner_getset[] = {
    {"first_ts", (getter)scanner_get_first_ts, (setter)scanner_set_first_ts,
     "start of the first event with a duration and a category (None: not yet)", NULL},
    {"done", (getter)scanner_get_done, NULL, "whether the whole document was read", NULL},
    {NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepdoctor.traces._scan.Scanner",
    .tp_doc = "Scanner(gpu_type, launch_type, take, header=None): a trace document fed in "
              "chunks.",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)scanner_init,
    .tp_traverse = (traverseproc)scanner_traverse,
    .tp_clear = (inquiry)scanner_clear,
    .tp_dealloc = (destructor)scanner_dealloc,
    .tp_methods = scanner_methods,
    .tp_members = scanner_members,
    .tp_getset = scanner_getset,
};

static int
scan_exec(PyObject *module)
{
    if (PyType_Ready(&ScannerType) < 0 || PyModule_AddType(module, &ScannerType) < 0) {
        return -1;
    }
    InvalidError = PyErr_NewException("stepdoctor.traces._scan.InvalidError", PyExc_ValueError, NULL);
    if (InvalidError == NULL || PyModule_AddObjectRef(module, "InvalidError", InvalidError) < 0) {
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot scan_slots[] = {
    {Py_mod_exec, scan_exec},
    {0, NULL},
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "stepdoctor.traces._scan",
    .m_doc = "A streaming scanner of trace JSON in C (see the comment at the top of _scan.c).",
    .m_size = 0,
    .m_slots = scan_slots,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    return PyModuleDef_Init(&scan_module);
}
