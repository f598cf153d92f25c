# Declarations for compiling records.py with Cython (pure-Python mode; the .py is the one
# source): the header walk of next_offset, the checks and CRC of check_batch (and so of
# validate_batch), the CRC of build_batch and the copy of with_base_offset run in C, on
# the primitives of cbatch.pxd, which stand in for the pure module's functions of the
# same names. Everything else in the module compiles as it is.
cimport cython
from libc.stdint cimport int32_t, int64_t, uint32_t

from .cbatch cimport batch_fields, crc32c_span, crc32c_span_of_bytearray, stamped


@cython.locals(
    data=bytes,
    position=Py_ssize_t,
    end=Py_ssize_t,
    batch_length=int32_t,
    last_offset_delta=int32_t,
    header_bytes=Py_ssize_t,
    overhead=Py_ssize_t,
)
cpdef object next_offset(object records)


@cython.locals(
    size=Py_ssize_t,
    base_offset=int64_t,
    batch_length=int32_t,
    magic=int,
    crc=uint32_t,
    last_offset_delta=int32_t,
    records_count=int32_t,
    actual="long long",
)
cpdef tuple check_batch(bytes data, bint check_crc=*)
