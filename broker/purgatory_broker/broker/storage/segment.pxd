# Declarations for compiling this module with Cython (pure-Python mode; the .py is the
# one source): the class below becomes an extension type whose fields, the names in its
# __slots__, are C struct members, so the compiled code reads and writes them without a
# lookup in the type's dictionary. Fields stay Python objects: only the access changes.
# Keep them in step with __slots__ (broker/broker_tests/broker/test_compiled_classes.py checks).
cimport cython
from libc.stdint cimport int32_t, int64_t, uint32_t

from .cbatch cimport batch_fields, crc32c_span


cdef class LogSegment:
    cdef public object _active
    cdef public object _base_offset
    cdef public object _bytes_since_index_entry
    cdef public object _closed
    cdef public object _fd
    cdef public object _files
    cdef public object _index
    cdef public object _index_interval_bytes
    cdef public object _log_path
    cdef public object _max_index_size_bytes
    cdef public object _needs_sync
    cdef public object _next_offset
    cdef public object _size_bytes

    # the read loop in C: the header's fields and the positions are C integers
    @cython.locals(
        data=bytes,
        size=Py_ssize_t,
        limit=int64_t,
        stop=int64_t,
        p=Py_ssize_t,
        end=Py_ssize_t,
        batch_bytes=Py_ssize_t,
        expected=int64_t,
        base_offset=int64_t,
        batch_length=int32_t,
        magic=int,
        crc=uint32_t,
        delta=int32_t,
        header_bytes=Py_ssize_t,
        overhead=Py_ssize_t,
        magic_v2=int,
        crc_start=Py_ssize_t,
    )
    cpdef tuple read(self, Py_ssize_t position, object max_bytes, object max_offset, bint include_first)
