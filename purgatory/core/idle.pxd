# Declarations for compiling idle.py with Cython; see timer_list.pxd.
cimport cython

from .timer cimport WheelTimer
from .timer_list cimport TimerTask


cdef class _IdleTask(TimerTask):
    cdef public _Tracker _tracker
    cdef public object key
    cdef public long long touched_ms


cdef class _Tracker:
    cdef public object _on_idle
    cdef public Py_ssize_t _reaped
    cdef public Py_ssize_t _rearmed
    cdef public dict _tasks
    cdef public long long _timeout_ms
    cdef public object _timer
    cdef public object _now_ms
    cdef public WheelTimer _wheel_timer

    @cython.locals(task=_IdleTask, wheel=WheelTimer)
    cpdef touch(self, key)

    @cython.locals(task=_IdleTask, remaining_ms=cython.longlong, now_ms=cython.longlong, tick_ms=cython.longlong, wheel=WheelTimer)
    cpdef _expire(self, _IdleTask task)
