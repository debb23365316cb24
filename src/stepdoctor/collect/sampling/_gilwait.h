/* The stack sampler's wait (stacks.py): sleep without the GIL until a deadline, then take the
 * GIL back, asking the thread that holds it to give it up soon. Included by _sample.c
 * (sleep_until) and _frames.c (sleep_read); POSIX (clock_nanosleep).
 *
 * With switch_us > 0 on CPython 3.11, the interpreter's switch interval is that many
 * microseconds while a sampler waits for the GIL (then put back): a thread running Python
 * code gives the GIL up at its next bytecode boundary rather than after the default 5 ms, so
 * the sampler reads it where it was when the sample was due, not where it next released the
 * GIL. The interval is a plain field the interpreter reads when a thread starts waiting. The
 * first of the samplers waiting at once sets it and the last puts it back (a process may run
 * more than one); a child forked meanwhile gets it back at once. From 3.12 on the interval is
 * the interpreter's, and its setter must hold the GIL (3.12 aborts the process:
 * "PyInterpreterState_Get: the function must be called with the GIL held"); 3.13 no longer
 * exports it: there the interval is left as it is. */
#ifndef TD_GILWAIT_H
#define TD_GILWAIT_H

#include <errno.h>
#include <pthread.h>
#include <time.h>

#if PY_VERSION_HEX < 0x030C0000
#define TD_SHORT_SWITCH 1
#else
#define TD_SHORT_SWITCH 0
#endif

static long long
td_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#if TD_SHORT_SWITCH
static pthread_mutex_t td_switch_lock = PTHREAD_MUTEX_INITIALIZER;
static int td_waiting = 0;          /* samplers waiting with the short interval */
static unsigned long td_saved = 0;  /* the interval before the first of them */

static void
td_shorten(unsigned long switch_us)
{
    pthread_mutex_lock(&td_switch_lock);
    if (td_waiting++ == 0) {
        td_saved = _PyEval_GetSwitchInterval();
        _PyEval_SetSwitchInterval(switch_us);
    }
    pthread_mutex_unlock(&td_switch_lock);
}

static void
td_put_back(void)
{
    pthread_mutex_lock(&td_switch_lock);
    if (--td_waiting == 0) {
        _PyEval_SetSwitchInterval(td_saved);
    }
    pthread_mutex_unlock(&td_switch_lock);
}
#endif

/* In a child made by fork(): no sampler waits there (the lock may have been held by a
 * thread that does not exist in the child). */
static void
td_gilwait_after_fork(void)
{
#if TD_SHORT_SWITCH
    pthread_mutex_init(&td_switch_lock, NULL);
    if (td_waiting > 0) {
        _PyEval_SetSwitchInterval(td_saved);
    }
    td_waiting = 0;
#endif
}

/* Sleep without the GIL until CLOCK_MONOTONIC reaches deadline_ns, call woke_hook(hook_arg)
 * (if any), still without the GIL, then wait for the GIL (with the switch interval at
 * switch_us where TD_SHORT_SWITCH). Returns when the sleep ended; *got_ns: when the GIL was
 * held again. The caller holds the GIL. */
static long long
td_sleep_then_take(long long deadline_ns, long switch_us, void (*woke_hook)(void *),
                   void *hook_arg, long long *got_ns)
{
    struct timespec ts = {.tv_sec = deadline_ns / 1000000000LL,
                          .tv_nsec = deadline_ns % 1000000000LL};
    long long woke;
    int shorten = TD_SHORT_SWITCH && switch_us > 0;
    Py_BEGIN_ALLOW_THREADS
    while (deadline_ns > 0 &&
           clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
    woke = td_monotonic_ns();
    if (woke_hook != NULL) {
        woke_hook(hook_arg);
    }
#if TD_SHORT_SWITCH
    if (shorten) {
        td_shorten((unsigned long)switch_us);
    }
#endif
    Py_END_ALLOW_THREADS
#if TD_SHORT_SWITCH
    if (shorten) {
        td_put_back();
    }
#endif
    (void)shorten;
    *got_ns = td_monotonic_ns();
    return woke;
}

#endif /* TD_GILWAIT_H */
