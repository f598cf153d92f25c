# The compiled core's clock: time.monotonic() computed in C, bit for bit.
#
# CPython's time.monotonic() on Linux reads clock_gettime(CLOCK_MONOTONIC) as
# integer nanoseconds t and returns the double t / 1e9 (t exactly, as a double,
# when t is a whole number of seconds). timer.monotonic_ms() is then
# int(monotonic() * 1000). The function below does the same arithmetic on the
# same clock, so the compiled timer reads the very values the pure one reads,
# without a Python call. It is cimported by timer.pxd in place of the
# `from time import monotonic` the pure module uses.
from libc.stdint cimport int64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec


cdef inline double monotonic() noexcept nogil:
    cdef timespec ts
    cdef int64_t t
    cdef volatile double d
    clock_gettime(CLOCK_MONOTONIC, &ts)
    t = <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec
    if t % 1000000000 == 0:
        d = <double>(t // 1000000000)
    else:
        d = <double>t
        d /= 1e9
    return d
