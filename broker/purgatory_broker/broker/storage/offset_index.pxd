# Declarations for compiling this module with Cython (pure-Python mode; the .py is the
# one source): the class below becomes an extension type whose fields, the names in its
# __slots__, are C struct members, so the compiled code reads and writes them without a
# lookup in the type's dictionary. Fields stay Python objects: only the access changes.
# Keep them in step with __slots__ (broker/broker_tests/broker/test_compiled_classes.py checks).
cdef class OffsetIndex:
    cdef public object _base_offset
    cdef public object _closed
    cdef public object _entries
    cdef public object _last_offset
    cdef public object _last_position
    cdef public object _max_entries
    cdef public object _mmap
    cdef public object _open_files
    cdef public object _page_hook
    cdef public object _path
