# Static types for the compiled build of policies.py (see setup.py); the .py is the source.
cimport cython

from .cache_sim cimport ReplicaCaches
from .replica_load cimport ReplicaLoad
from prefixkit.engine_adapter.routing.policy cimport WorkShares
from prefixkit.engine_adapter.routing.reuse cimport ReuseModel


cdef class Precise:
    cdef public Py_ssize_t replicas
    cdef public ReplicaCaches caches
    cdef public ReplicaLoad load
    cdef public object params
    cdef public Py_ssize_t requests
    cdef public list _runs
    cdef public Py_ssize_t _length
    cdef public double _clock
    cdef public WorkShares shares
    cdef public ReuseModel reuse

    @cython.locals(count=Py_ssize_t, stamp=double)
    cpdef tuple _eviction(self, Py_ssize_t replica)
