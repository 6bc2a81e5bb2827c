# Static types for the compiled build of cache_sim.py (see setup.py); the .py is the source.
cimport cython


cdef class _Group:
    cdef public tuple blocks
    cdef public double stamp
    cdef public Py_ssize_t live


cdef class _ReplicaLru:
    cdef public dict held
    cdef public list groups
    cdef public Py_ssize_t first
    cdef public Py_ssize_t taken


cdef class ReplicaCaches:
    cdef public list _lrus
    cdef public Py_ssize_t replicas
    cdef public object capacity
    cdef public dict holders

    cpdef Py_ssize_t held(self, Py_ssize_t replica) except -1

    @cython.locals(
        lru=_ReplicaLru, held=dict, holders=dict, group=_Group, last=_Group,
        run=Py_ssize_t, leading=bint, repeated=bint,
    )
    cpdef Py_ssize_t admit(self, blocks, Py_ssize_t replica, double stamp=*) except -1

    @cython.locals(
        held=dict, holders=dict, groups=list, first=Py_ssize_t, taken=Py_ssize_t,
        group=_Group, blocks=tuple,
    )
    cdef _evict(self, _ReplicaLru lru, Py_ssize_t replica, Py_ssize_t count)

    @cython.locals(
        lru=_ReplicaLru, size=Py_ssize_t, evicted=Py_ssize_t, groups=list, index=Py_ssize_t,
        newest=Py_ssize_t, left=Py_ssize_t, group=_Group,
    )
    cpdef tuple newest_evicted(self, Py_ssize_t replica, Py_ssize_t run, Py_ssize_t length)

