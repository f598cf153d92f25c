# Cython declarations for the produce path's per-partition status (the .py is the one
# source; why and how: broker.pxd). Keep the fields in step with
# ProducePartitionStatus.__slots__ (broker/broker_tests/broker/test_compiled_classes.py checks).
# DelayedProduce.try_complete types its locals with these classes (@cython.locals), and
# the trace is written through a typed TraceRow.
from ..tracing cimport TraceRow
from .replication cimport LeaderPartition

cdef class ProducePartitionStatus:
    cdef public object acks_pending
    cdef public object base_offset
    cdef public object error_code
    cdef public object required_offset
    cdef public object size_bytes
