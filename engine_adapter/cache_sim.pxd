# Static types for the compiled build of cache_sim.py (see setup.py); the .py is the source.
cimport cython


cdef class LruReplicas:
    cdef public list lru
    cdef public list _limits
    cdef public list _oldest

    cpdef _changed(self, Py_ssize_t replica)

    @cython.locals(held=Py_ssize_t, evicted=Py_ssize_t, oldest=list)
    cpdef tuple newest_evicted(self, Py_ssize_t replica, Py_ssize_t run, Py_ssize_t length)


cdef class ReplicaCaches(LruReplicas):
    cdef public Py_ssize_t replicas
    cdef public object capacity
    cdef public dict holders

    @cython.locals(run=Py_ssize_t, evicted=Py_ssize_t, newest_read=double, holders=dict, oldest=list)
    cpdef Py_ssize_t admit(self, blocks, Py_ssize_t replica, double stamp=*) except -1


@cython.locals(runs=list, index=Py_ssize_t, length=Py_ssize_t)
cpdef list cached_runs(dict holders, blocks, Py_ssize_t replicas)
