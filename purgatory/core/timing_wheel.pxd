# Declarations for compiling timing_wheel.py with Cython; see timer_list.pxd.
cimport cython

from .delay_queue cimport DelayQueue
from .timer_list cimport TaskCounter, TimerTask, TimerTaskList, _Link


cdef class TimingWheel:
    cdef public list _buckets
    cdef public TaskCounter _counter
    cdef public DelayQueue _queue
    cdef public long long current_ms
    cdef public long long interval_ms
    cdef public TimingWheel overflow
    cdef public long long tick_ms
    cdef public Py_ssize_t wheel_size

    cpdef TimingWheel _add_overflow_wheel(self)

    @cython.locals(
        wheel=TimingWheel,
        overflow=TimingWheel,
        current_ms=cython.longlong,
        tick_ms=cython.longlong,
        virtual_id=cython.longlong,
        bucket=TimerTaskList,
        tail=_Link,
        bucket_ms=cython.longlong,
    )
    cpdef bint add(self, TimerTask task, long long deadline_ms) except -1

    cpdef advance_clock(self, long long time_ms)
