# Static types for the compiled build of policy.py (see setup.py); the .py is the source.
cimport cython


cdef class WorkShares:
    cdef public object balance
    cdef public double slack_blocks
    cdef public list assigned
    cdef public list uncached
    cdef public Py_ssize_t total_assigned
    cdef public Py_ssize_t clock

    @cython.locals(
        replicas=Py_ssize_t, top_assigned=double, top_uncached=double, mean_uncached=double,
        r=Py_ssize_t,
    )
    cpdef object within(self, runs, Py_ssize_t length, bint evenly=*)

    cpdef record(self, Py_ssize_t replica, Py_ssize_t length, Py_ssize_t run)


@cython.locals(
    replicas=Py_ssize_t, bound=Py_ssize_t, r=Py_ssize_t, scale=double, qw=double, rw=double,
    best=double, score=double, cost=double, stamp=double, candidates=list, tied=list, stamps=list,
)
cpdef Py_ssize_t choose_replica(
    runs, queued_blocks, inflight, params, Py_ssize_t turn, eviction=*, within_budget=*
) except -1


@cython.locals(runs=list, index=Py_ssize_t, length=Py_ssize_t)
cpdef list cached_runs(dict holders, blocks, Py_ssize_t replicas)
