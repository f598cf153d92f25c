# Declarations for compiling this module with Cython (pure-Python mode; the .py is the
# one source): the class below becomes an extension type whose fields, the names in its
# __slots__, are C struct members, so the compiled code reads and writes them without a
# lookup in the type's dictionary. Fields stay Python objects: only the access changes.
# Keep them in step with __slots__ (tests/broker/test_compiled_classes.py checks).
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
