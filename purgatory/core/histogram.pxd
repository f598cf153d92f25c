# Declarations for compiling histogram.py with Cython; see timer_list.pxd.
cimport cython


cdef class Histogram:
    cdef public list _counts
    cdef public Py_ssize_t count
    cdef public object max

    @cython.locals(counts=list)
    cpdef record(self, value)
