# Declarations that let Cython compile timer_list.py (its pure-Python mode): the
# classes become extension types with C fields; the .py stays the one source of
# each algorithm. See purgatory/core/build.py.
cimport cython


cdef class TaskCounter:
    cdef public Py_ssize_t value


cdef class _Link:
    cdef public _Link _next
    cdef public _Link _prev


cdef class TimerTask(_Link):
    cdef public TimerTaskList _list
    cdef public long long deadline_ms
    cdef public object delay_ms

    cpdef cancel(self)

    @cython.locals(bucket=TimerTaskList, nxt=_Link, prv=_Link)
    cpdef bint _unlink(self) except -1


cdef class TaskSink:
    cpdef _run_due(self, TimerTask task)
    cpdef _reinsert(self, TimerTask task)


cdef class TimerTaskList(_Link):
    cdef public TaskCounter _counter
    cdef public long long expiration_ms
    cdef public bint finest

    @cython.locals(tail=_Link)
    cpdef add(self, TimerTask task, long long deadline_ms)

    @cython.locals(counter=TaskCounter, head=_Link, task=TimerTask, nxt=_Link, finest=cython.bint)
    cpdef flush(self, TaskSink sink)
