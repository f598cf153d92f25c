# Declarations for compiling this module with Cython (pure-Python mode; the .py is the
# one source): the class below becomes an extension type whose fields, the names in its
# __slots__, are C struct members, so the compiled code reads and writes them without a
# lookup in the type's dictionary. Fields stay Python objects (the ISR typed set and the
# replicas dict, so their lookups are C calls): only the access changes.
# Keep them in step with __slots__ (broker/broker_tests/broker/test_compiled_classes.py checks).
cdef class LeaderPartition:
    cdef public object _high_watermark
    cdef public object _high_watermark_metadata
    cdef public object _is_leader
    cdef public set _isr
    cdef public object _leader_epoch
    cdef public dict _replicas
    cdef public object isr_expands
    cdef public object isr_shrinks
    cdef public object log
    cdef public object min_insync_replicas
    cdef public object replica_lag_time_max_ms
    cdef public object topic_partition

    # a C call from DelayedProduce.try_complete (delayed.py), which types its partition
    cpdef object check_enough_replicas_reach_offset(self, object required_offset)
