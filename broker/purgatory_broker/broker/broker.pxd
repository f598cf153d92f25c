# Declarations for compiling this module with Cython (pure-Python mode; the .py is the
# one source): the classes below become extension types whose fields, the names in their
# __slots__, are C struct members, so the compiled code reads and writes them without a
# lookup in the type's dictionary. Fields stay Python objects (counters is typed, so the
# broker's methods reach its fields in C too; the dictionaries are typed dict, so their
# lookups are C calls): only the access changes. Keep them in
# step with __slots__ (broker/broker_tests/broker/test_compiled_classes.py checks).
from ..tracing cimport TraceRow  # the rows it makes
from .delayed cimport ProducePartitionStatus  # Broker._wait_for_replication's status


cdef class BrokerCounters:
    cdef public object produce_requests
    cdef public object replication_waits
    cdef public object fetch_requests
    cdef public object bytes_in
    cdef public object bytes_out
    cdef public object flush_errors
    cdef public object storage_errors


cdef class Broker:
    cdef public object _closed
    cdef public dict _flush_tasks
    cdef public object _logged_storage_errors
    cdef public dict _names
    cdef public object _op_ids
    cdef public dict _open_rows
    cdef public object _origin_ms
    cdef public dict _partitions
    cdef public dict _replica_keys
    cdef public object _timer
    cdef public object clock
    cdef public BrokerCounters counters
    cdef public object data_dir
    cdef public object fetch_purgatory
    cdef public object flush_messages
    cdef public object flush_ms
    cdef public object open_files
    cdef public object produce_purgatory
    cdef public object recorder
    cdef public object segment_bytes
