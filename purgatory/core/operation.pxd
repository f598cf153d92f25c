# Declarations for compiling operation.py with Cython; see timer_list.pxd.
cimport cython

from .timer_list cimport TimerTask


cdef class CompletionListener:
    cpdef _operation_completed(self, Operation op, bint from_timer)
    cpdef _operation_cancelled(self, Operation op, bint from_timer)


cdef class Operation(TimerTask):
    cdef public int _state
    cdef public bint _expiring
    cdef public Py_ssize_t _nkeys
    cdef public object _outcome
    cdef public object _error
    cdef public object _waiter
    cdef public list _waiters
    cdef public Py_ssize_t _prune_at
    cdef public CompletionListener _purgatory
    cdef public object _keys

    @cython.locals(was_scheduled=cython.bint, purgatory=CompletionListener)
    cpdef bint force_complete(self) except -1

    cpdef run(self)

    cpdef cancel(self)

    @cython.locals(was_scheduled=cython.bint, purgatory=CompletionListener)
    cpdef bint _cancel_with(self, error) except -1

    @cython.locals(waiters=list)
    cpdef _settle(self)

    @cython.locals(waiters=list)
    cpdef add_waiter(self, waiter)
