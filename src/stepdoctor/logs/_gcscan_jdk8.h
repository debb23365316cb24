/* _gcscan.c's JDK 8 lines (gc_jdk8.py): -XX:+PrintGCDetails collections, concurrent
 * phases, the safepoint line (included once, by _gcscan.c: one translation unit, its helpers
 * static). */
#ifndef TD_GCSCAN_JDK8_H
#define TD_GCSCAN_JDK8_H

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
        /* gc_jdk8._CAUSE_NAMES: JDK 6 and 7's ``Full GC (System)`` */
        if (p.cause.n == 6 && memcmp(p.cause.s, "System", 6) == 0)
            p.cause = (Text){"System.gc()", 11};
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

#endif /* TD_GCSCAN_JDK8_H */
