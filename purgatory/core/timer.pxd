# Declarations for compiling timer.py with Cython; see timer_list.pxd.
cimport cython

from .clock cimport ClockReader
from .delay_queue cimport DelayQueue
from .timer_list cimport TaskCounter, TaskSink, TimerTask, TimerTaskList
from .timing_wheel cimport TimingWheel


# the fast path's bound on a delay, a C integer (compared in C)
cdef long long _SHORT_MS


cdef class WheelTimer(TaskSink):
    cdef public object _clock
    cdef public TaskCounter _counter
    cdef public TimerTaskList _due
    cdef public list _errors
    cdef public Py_ssize_t _flushed
    cdef public object _poll_now_ms
    cdef public long long _pad_ms
    cdef public DelayQueue _queue
    cdef public Py_ssize_t _ran
    cdef public object _read_ms
    cdef public object _read_s
    cdef public ClockReader _reader
    cdef public list _wakeups
    cdef public TimingWheel _wheel
    cdef public object name

    @cython.locals(read_s=object, read_ms=object, now_s=cython.double)
    cpdef long long now_ms(self) except? -1

    @cython.locals(
        delay=object,
        delay_ms=cython.longlong,
        read_s=object,
        read_ms=object,
        now_s=cython.double,
        now_ms=cython.longlong,
        deadline_ms=cython.longlong,
    )
    cpdef add(self, TimerTask task)

    @cython.locals(deadline_ms=cython.longlong)
    cpdef _add_checked(self, TimerTask task, long long delay_ms)

    @cython.locals(due=TimerTaskList, was_empty=cython.bint)
    cpdef _add_due(self, TimerTask task, long long deadline_ms)

    cpdef _reinsert(self, TimerTask task)

    @cython.locals(
        now_ms=cython.longlong,
        errors=list,
        due=TimerTaskList,
        queue=DelayQueue,
        wheel=TimingWheel,
        wheels_ms=cython.longlong,
        bucket=TimerTaskList,
        ran=Py_ssize_t,
    )
    cpdef Py_ssize_t poll(self) except -1

    cpdef _run_due(self, TimerTask task)

    cpdef long long poll_now_ms(self) except? -1
