# Declarations for compiling clock.py with Cython; see timer_list.pxd.
cimport cython
from libc.stdint cimport int64_t

from .cmonotonic cimport libuv_now_ms, monotonic as monotonic_s, monotonic_is_time

# how a reader reads, C integers (compared in C)
cdef int _SECONDS
cdef int _CLOCK
cdef int _MONOTONIC
cdef int _LIBUV


# final: no subclass, so a call of now_ms never looks for a Python override
@cython.final
cdef class ClockReader:
    # how now_ms reads (_SECONDS, _CLOCK, _MONOTONIC, _LIBUV), a C int switched on
    cdef readonly int _how
    cdef readonly object _read
    cdef readonly object _source

    # int64_t: with long long, Cython 3.3 writes a final class's error value as
    # "-1LLLL", which no C compiler takes
    @cython.locals(how=cython.int, now_s=cython.double, uv_now_s=cython.double)
    cpdef int64_t now_ms(self) except? -1


@cython.locals(reader=ClockReader)
cdef ClockReader _made(int how, source)
