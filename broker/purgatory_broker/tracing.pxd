# Cython declarations for the trace's row and writer (the .py is the one source; why
# and how: broker/broker.pxd). The broker makes a row per request and records it through
# the writer, so both are extension types. Keep the fields in step with __slots__
# (broker/broker_tests/broker/test_compiled_classes.py checks).

cdef class TraceRow:
    cdef public object op_id
    cdef public object purgatory
    cdef public object kind
    cdef public object keys
    cdef public object created_ms
    cdef public object deadline_ms
    cdef public object completed_ms
    cdef public object outcome
    cdef public object error_codes
    cdef public object bytes


cdef class TraceWriter:
    cdef public list rows
