# The compiled core's clocks, computed in C bit for bit as the Python reads they
# replace, so the compiled timer reads the very values the pure one reads, without
# a Python call. cimported by clock.pxd in place of the pure module's readers; a
# ClockReader uses them only on Linux, where the two facts below hold (clock.C_CLOCKS).
#
# The C is Linux's: built elsewhere (macOS, whose CPython reads another clock;
# Windows, whose compiler has no <sys/time.h> and no clock_gettime), or with
# PURGATORY_NO_POSIX_CLOCKS defined, it is a stub that includes no time header and
# says so: monotonic_is_time is 0, so clock.C_CLOCKS is False and clock.py never
# calls these functions (its readers call time.monotonic and loop.time instead).
# tests/core/test_build_portability.py compiles both sides.
#
# time.monotonic(): CPython on Linux reads clock_gettime(CLOCK_MONOTONIC) as
# integer nanoseconds t and returns the double t / 1e9 (t exactly, as a double,
# when t is a whole number of seconds: CPython's _PyTime_AsSecondsDouble, the
# same lines). ClockReader.monotonic() then reads int(monotonic() * 1000).
#
# uvloop's loop.time(): uvloop calls uv_update_time (libuv sets the loop's time to
# uv__hrtime(UV_CLOCK_FAST) // 10**6, integer milliseconds) and returns
# uv_now() / 1000. libuv's fast clock on Linux is CLOCK_MONOTONIC_COARSE when its
# resolution is 1 ms or finer, else CLOCK_MONOTONIC (chosen once), and 0 if the
# read fails. libuv_now_ms() is that uv_now, the same clock read the same way;
# ClockReader.libuv() divides it by 1000 and multiplies back as the pure core does
# with loop.time().
cdef extern from *:
    """
    #if defined(__linux__) && !defined(PURGATORY_NO_POSIX_CLOCKS)
    #include <stdint.h>
    #include <time.h>
    #define PURGATORY_C_CLOCKS 1

    static CYTHON_INLINE double purgatory_monotonic(void) {
        struct timespec ts;
        int64_t t;
        volatile double d;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        if (t % 1000000000 == 0) {
            d = (double)(t / 1000000000);
        } else {
            d = (double)t;
            d /= 1e9;
        }
        return d;
    }

    static clockid_t purgatory_libuv_clock_id = (clockid_t)-1;

    static CYTHON_INLINE long long purgatory_libuv_now_ms(void) {
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
    #else
    /* no POSIX clocks here (or not CPython's): never called, see above */
    #define PURGATORY_C_CLOCKS 0
    static CYTHON_INLINE double purgatory_monotonic(void) { return -1.0; }
    static CYTHON_INLINE long long purgatory_libuv_now_ms(void) { return -1; }
    #endif
    """
    # 1 where the functions below are the clocks, 0 where they are the stub
    const bint monotonic_is_time "PURGATORY_C_CLOCKS"
    double monotonic "purgatory_monotonic" () noexcept nogil
    long long libuv_now_ms "purgatory_libuv_now_ms" () noexcept nogil
