# The compiled build's batch primitives in C, cimported by records.pxd and segment.pxd in
# place of the pure module's functions of the same names (records.py defines those, under
# `if not cython.compiled`): a batch header's fields read big-endian straight from the
# bytes, the CRC-32C of a span of bytes or of a bytearray, and a batch's copy with a new
# base offset and leader epoch, each without a Python call, a memoryview or a slice.
#
# CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial and final value
# 0xFFFFFFFF: the checksum of Kafka's batches). On x86-64 with SSE 4.2 (checked once, at
# the first call) the CPU's crc32 instruction takes 8 bytes a step (built with GCC or
# Clang; tests/core/test_build_portability.py compiles the C without it too); elsewhere
# a table does 8 bytes a step too ("slicing by 8": eight 256-entry tables, table k the CRC
# of a byte followed by k zero bytes, so the 8 bytes' contributions can be looked up
# independently and XORed). Both give exactly the crc32c package's value, which
# broker/broker_tests/broker/storage/test_cbatch.py checks on every span of random data, each path
# forced in turn.
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>

    static uint32_t purgatory_crc32c_tables[8][256];
    static int purgatory_crc32c_tables_ready = 0;
    /* -1: not checked yet; 0: the tables; 1: the CPU's crc32 instruction */
    static int purgatory_crc32c_hw = -1;

    static void purgatory_crc32c_make_tables(void) {
        for (uint32_t n = 0; n < 256; n++) {
            uint32_t c = n;
            for (int k = 0; k < 8; k++)
                c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            purgatory_crc32c_tables[0][n] = c;
        }
        for (uint32_t n = 0; n < 256; n++) {
            uint32_t c = purgatory_crc32c_tables[0][n];
            for (int k = 1; k < 8; k++) {
                c = purgatory_crc32c_tables[0][c & 0xFF] ^ (c >> 8);
                purgatory_crc32c_tables[k][n] = c;
            }
        }
        purgatory_crc32c_tables_ready = 1;
    }

    /* c: the running CRC, already inverted */
    static uint32_t purgatory_crc32c_table(uint32_t c, const unsigned char *p, size_t n) {
        if (!purgatory_crc32c_tables_ready)
            purgatory_crc32c_make_tables();
        while (n >= 8) {
            uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8
                               | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
            c = purgatory_crc32c_tables[7][lo & 0xFF]
                ^ purgatory_crc32c_tables[6][(lo >> 8) & 0xFF]
                ^ purgatory_crc32c_tables[5][(lo >> 16) & 0xFF]
                ^ purgatory_crc32c_tables[4][lo >> 24]
                ^ purgatory_crc32c_tables[3][p[4]]
                ^ purgatory_crc32c_tables[2][p[5]]
                ^ purgatory_crc32c_tables[1][p[6]]
                ^ purgatory_crc32c_tables[0][p[7]];
            p += 8;
            n -= 8;
        }
        while (n--)
            c = purgatory_crc32c_tables[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        return c;
    }

    /* the CPU's instruction: GCC's and Clang's builtins, on x86-64; elsewhere (another
       CPU, MSVC) or with PURGATORY_NO_CPU_CRC32C defined, the tables alone */
    #if defined(__x86_64__) && defined(__GNUC__) && !defined(PURGATORY_NO_CPU_CRC32C)
    __attribute__((target("sse4.2")))
    static uint32_t purgatory_crc32c_sse42(uint32_t c, const unsigned char *p, size_t n) {
        uint64_t c64 = c;
        while (n >= 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            c64 = __builtin_ia32_crc32di(c64, v);
            p += 8;
            n -= 8;
        }
        c = (uint32_t)c64;
        while (n--)
            c = __builtin_ia32_crc32qi(c, *p++);
        return c;
    }
    static int purgatory_crc32c_cpu_has_it(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("sse4.2") ? 1 : 0;
    }
    #else
    static uint32_t purgatory_crc32c_sse42(uint32_t c, const unsigned char *p, size_t n) {
        return purgatory_crc32c_table(c, p, n);
    }
    static int purgatory_crc32c_cpu_has_it(void) { return 0; }
    #endif

    /* hardware: 1 the CPU's instruction if it has it, 0 the tables */
    static uint32_t purgatory_crc32c(const unsigned char *p, size_t n, int hardware) {
        if (purgatory_crc32c_hw < 0)
            purgatory_crc32c_hw = purgatory_crc32c_cpu_has_it();
        if (hardware && purgatory_crc32c_hw)
            return purgatory_crc32c_sse42(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
        return purgatory_crc32c_table(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
    }

    static int purgatory_crc32c_uses_cpu(void) {
        if (purgatory_crc32c_hw < 0)
            purgatory_crc32c_hw = purgatory_crc32c_cpu_has_it();
        return purgatory_crc32c_hw;
    }

    static int64_t purgatory_be64(const unsigned char *p) {
        return (int64_t)((uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40
                         | (uint64_t)p[3] << 32 | (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16
                         | (uint64_t)p[6] << 8 | (uint64_t)p[7]);
    }
    static uint32_t purgatory_be32(const unsigned char *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
    }
    static void purgatory_put_be64(unsigned char *p, uint64_t v) {
        for (int i = 7; i >= 0; i--) {
            p[i] = (unsigned char)(v & 0xFF);
            v >>= 8;
        }
    }
    static void purgatory_put_be32(unsigned char *p, uint32_t v) {
        p[0] = (unsigned char)(v >> 24);
        p[1] = (unsigned char)(v >> 16);
        p[2] = (unsigned char)(v >> 8);
        p[3] = (unsigned char)v;
    }
    """
    uint32_t c_crc32c "purgatory_crc32c" (const unsigned char *p, size_t n, int hardware) noexcept nogil
    int crc32c_uses_cpu "purgatory_crc32c_uses_cpu" () noexcept nogil
    int64_t be64 "purgatory_be64" (const unsigned char *p) noexcept nogil
    uint32_t be32 "purgatory_be32" (const unsigned char *p) noexcept nogil
    void put_be64 "purgatory_put_be64" (unsigned char *p, uint64_t v) noexcept nogil
    void put_be32 "purgatory_put_be32" (unsigned char *p, uint32_t v) noexcept nogil


# The CRC-32C of data[start:end]; the caller keeps 0 <= start <= end <= len(data)
# (checked here all the same: out of range gives -1, which no CRC equals). hardware
# False forces the table (for the tests).
cdef inline long long crc32c_span(
    bytes data, Py_ssize_t start, Py_ssize_t end, bint hardware=True
) noexcept:
    if data is None or start < 0 or end < start or end > PyBytes_GET_SIZE(data):
        return -1
    return c_crc32c(<const unsigned char *>PyBytes_AS_STRING(data) + start, end - start, hardware)


# The same for a bytearray (a batch being built).
cdef inline long long crc32c_span_of_bytearray(
    bytearray data, Py_ssize_t start, Py_ssize_t end
) noexcept:
    if data is None or start < 0 or end < start or end > PyByteArray_GET_SIZE(data):
        return -1
    return c_crc32c(<const unsigned char *>PyByteArray_AS_STRING(data) + start, end - start, 1)


# A copy of the batch ``buf`` with base offset ``base_offset`` and, if ``set_epoch``,
# partition leader epoch ``leader_epoch`` (the caller checked buf is a whole header).
cdef inline bytes stamped(bytes buf, int64_t base_offset, int32_t leader_epoch, bint set_epoch):
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf)
    cdef bytes out
    cdef unsigned char *o
    if n < 16:
        raise ValueError(f"a batch header needs 16 bytes to stamp, not {n}")
    out = PyBytes_FromStringAndSize(NULL, n)
    o = <unsigned char *>PyBytes_AS_STRING(out)
    memcpy(o, PyBytes_AS_STRING(buf), n)
    put_be64(o, <uint64_t>base_offset)
    if set_epoch:
        put_be32(o + 12, <uint32_t>leader_epoch)
    return out


# A v2 batch header's (base offset, batch length, magic, crc, last offset delta, records
# count) at data[p:]; the caller keeps p + 61 <= len(data) (checked here all the same: out
# of range gives magic -1, which the caller refuses as a bad magic).
cdef inline (int64_t, int32_t, int, uint32_t, int32_t, int32_t) batch_fields(
    bytes data, Py_ssize_t p
) noexcept:
    cdef const unsigned char *h
    if data is None or p < 0 or p + 61 > PyBytes_GET_SIZE(data):
        return 0, 0, -1, 0, 0, 0
    h = <const unsigned char *>PyBytes_AS_STRING(data) + p
    return (
        be64(h),
        <int32_t>be32(h + 8),
        <signed char>h[16],
        be32(h + 17),
        <int32_t>be32(h + 23),
        <int32_t>be32(h + 57),
    )
