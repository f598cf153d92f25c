# Cython declarations for the simulated producer (the .py is the one source; why and
# how: ../broker/broker.pxd). Keep the fields in step with Producer.__slots__
# (broker/broker_tests/broker/test_compiled_classes.py checks).
cdef class Producer:
    cdef public object _rate
    cdef public object _rng
    cdef public object acks
    cdef public object behind_s
    cdef public object broker
    cdef public object config
    cdef public object in_flight
    cdef public object next_s
    cdef public object partitions
    cdef public object producer_id
    cdef public object sent
    cdef public object timestamp_ms
    cdef public object unanswered
