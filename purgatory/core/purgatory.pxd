# Declarations for compiling purgatory.py with Cython; see timer_list.pxd.
cimport cython

from .histogram cimport Histogram
from .operation cimport CompletionListener, Operation
from .timer cimport WheelTimer


# CPython's cyclic garbage collector (Purgatory.untrack_pending): tracking an object
# already tracked is a fatal error, so gc_track is only called after gc_is_tracked
cdef extern from "Python.h":
    void gc_untrack "PyObject_GC_UnTrack" (object)
    bint gc_is_tracked "PyObject_GC_IsTracked" (object)
    void gc_track "PyObject_GC_Track" (object)


cdef class Purgatory(CompletionListener):
    cdef public Py_ssize_t _cancelled
    cdef public bint _closed
    cdef public Py_ssize_t _completed_early
    cdef public Py_ssize_t _depth
    cdef public list _done_watched
    cdef public Py_ssize_t _estimated
    cdef public Py_ssize_t _expired
    cdef public Py_ssize_t _expired_early
    cdef public Histogram _lateness
    cdef public Py_ssize_t _num_delayed
    cdef public bint _purge_due
    cdef public Py_ssize_t _purged
    cdef public Py_ssize_t _purges
    cdef public Py_ssize_t _watchers_version
    cdef public bint _untrack
    cdef public Py_ssize_t _watched
    cdef public dict _watchers
    cdef public WheelTimer _wheel_timer
    cdef public object name
    cdef public Py_ssize_t purge_interval
    cdef public object timer
    cdef public bint timer_enabled

    @cython.locals(ops=dict, nkeys=Py_ssize_t, watchers_version=Py_ssize_t)
    cpdef bint try_complete_else_watch(self, Operation operation, keys) except -1

    # try_complete_else_watch's steps: final, so called in C directly (no vtable) and
    # open to the C compiler's inlining; those without a result return 0, or -1 raising
    @cython.final
    cdef inline int _check_fresh(self, Operation operation) except -1

    @cython.final
    cdef inline dict _check_keys(self, tuple keys, Py_ssize_t nkeys)

    @cython.final
    @cython.locals(wheel_timer=WheelTimer)
    cdef inline int _add_to_timer(self, Operation operation) except -1

    @cython.final
    cdef inline int _watch_one(self, Operation operation, key, dict ops, Py_ssize_t watchers_version) except -1

    @cython.final
    @cython.locals(watchers=dict, ops=dict)
    cdef int _watch_each(self, Operation operation, tuple keys) except -1

    @cython.locals(ops=dict, op=Operation, completed=Py_ssize_t, errors=list)
    cpdef Py_ssize_t check_and_complete(self, key) except -1

    @cython.locals(ops=dict, listed=list, op=Operation)
    cpdef list cancel_for_key(self, key)

    @cython.locals(removed=Py_ssize_t, done=list, op=Operation)
    cpdef Py_ssize_t purge_completed(self) except -1

    @cython.final
    @cython.locals(op=Operation)
    cdef int _let_go(self, list done) except -1

    @cython.locals(watchers=dict, ops=dict)
    cdef Py_ssize_t _unwatch(self, Operation op, key) except -1

    cpdef _operation_cancelled(self, Operation op, bint from_timer)

    @cython.locals(wheel=WheelTimer, now_ms=cython.longlong, lateness_ms=cython.longlong)
    cpdef _operation_completed(self, Operation op, bint from_timer)

    cpdef _request_purge(self)

    cpdef _purge_if_deferred(self)

    cpdef _purge(self)
