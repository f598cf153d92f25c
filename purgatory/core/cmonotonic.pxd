# The compiled core's clocks, computed in C bit for bit as the Python reads they
# replace, so the compiled timer reads the very values the pure one reads, without
# a Python call. cimported by timer.pxd in place of the pure module's readers; the
# timer uses them only on Linux, where the two facts below hold (timer.C_CLOCKS).
from libc.stdint cimport int64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec


# time.monotonic(): CPython on Linux reads clock_gettime(CLOCK_MONOTONIC) as
# integer nanoseconds t and returns the double t / 1e9 (t exactly, as a double,
# when t is a whole number of seconds). timer.monotonic_ms() is then
# int(monotonic() * 1000).
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


# uvloop's loop.time(): uvloop calls uv_update_time (libuv sets the loop's time to
# uv__hrtime(UV_CLOCK_FAST) // 10**6, integer milliseconds) and returns
# uv_now() / 1000. libuv's fast clock on Linux is CLOCK_MONOTONIC_COARSE when its
# resolution is 1 ms or finer, else CLOCK_MONOTONIC (chosen once), and 0 if the
# read fails. libuv_now_ms() is that uv_now, the same clock read the same way;
# timer.py divides it by 1000 and multiplies back as the pure core does with
# loop.time().
cdef extern from *:
    """
    #include <time.h>
    static clockid_t purgatory_libuv_clock_id = (clockid_t)-1;

    static long long purgatory_libuv_now_ms(void) {
        struct timespec ts;
        if (purgatory_libuv_clock_id == (clockid_t)-1) {
            clockid_t id = CLOCK_MONOTONIC;
    #ifdef CLOCK_MONOTONIC_COARSE
            if (clock_getres(CLOCK_MONOTONIC_COARSE, &ts) == 0 && ts.tv_nsec <= 1000000)
                id = CLOCK_MONOTONIC_COARSE;
    #endif
            purgatory_libuv_clock_id = id;
        }
        if (clock_gettime(purgatory_libuv_clock_id, &ts))
            return 0;
        return (long long)(((unsigned long long)ts.tv_sec * 1000000000ULL
                            + (unsigned long long)ts.tv_nsec) / 1000000ULL);
    }
    """
    long long libuv_now_ms "purgatory_libuv_now_ms" () noexcept nogil
