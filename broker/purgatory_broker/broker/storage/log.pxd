# Declarations for compiling this module with Cython (pure-Python mode; the .py is the
# one source): the class below becomes an extension type whose fields, the names in its
# __slots__, are C struct members, so the compiled code reads and writes them without a
# lookup in the type's dictionary. Fields stay Python objects: only the access changes.
# Keep them in step with __slots__ (broker/broker_tests/broker/test_compiled_classes.py checks).
cdef class PartitionLog:
    cdef public object _bases
    cdef public object _clock
    cdef public object _closed
    cdef public object _directory
    cdef public object _dirty_since_ms
    cdef public object _end_metadata
    cdef public object _flush_count
    cdef public object _flush_messages
    cdef public object _flush_ms
    cdef public object _flushed_offset
    cdef public object _recent
    cdef public object _recovery
    cdef public object _rolled_unflushed
    cdef public object _segment_bytes
    cdef public object _segment_settings
    cdef public object _segments
    cdef public object _size_bytes
