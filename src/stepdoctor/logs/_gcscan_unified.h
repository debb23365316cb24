/* _gcscan.c's unified lines (gc_unified.py): JDK 9+ -Xlog:gc* decorations, events
 * and the metaspace (included once, by _gcscan.c: one translation unit, its helpers
 * static). */
#ifndef TD_GCSCAN_UNIFIED_H
#define TD_GCSCAN_UNIFIED_H

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
 * (``concurrent-pause``); its degenerated cycle (a kind and a problem of its own) is left to
 * Python. */
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
                     {"Final Roots", "concurrent-pause"}};

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

#endif /* TD_GCSCAN_UNIFIED_H */
