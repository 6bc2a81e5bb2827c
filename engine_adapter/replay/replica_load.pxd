# Static types for the compiled build of replica_load.py (see setup.py); the .py is the source.

cdef class ReplicaLoad:
    cdef public double prefill_s_per_block
    cdef public double decode_s_per_token
    cdef public list inflight
    cdef public list busy_until
    cdef public list finishing

    cpdef advance(self, double now)
    cpdef dispatch(self, Py_ssize_t replica, double now, Py_ssize_t uncached_blocks, Py_ssize_t output_tokens)
