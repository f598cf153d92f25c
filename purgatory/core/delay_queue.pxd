# Declarations for compiling delay_queue.py with Cython; see timer_list.pxd.
cimport cython

from .timer_list cimport TimerTaskList


cdef class DelayQueue:
    cdef public list _heap
    cdef public object _seq
    cdef public object on_earlier

    @cython.locals(heap=list, expiration_ms=cython.longlong, earlier=cython.bint)
    cpdef offer(self, TimerTaskList bucket)

    @cython.locals(heap=list, expiration_ms=cython.longlong, bucket=TimerTaskList)
    cpdef earliest_with_work(self)

    @cython.locals(heap=list, expiration_ms=cython.longlong, bucket=TimerTaskList)
    cpdef TimerTaskList poll_expired(self, long long now_ms)
