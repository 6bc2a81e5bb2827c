# Static types for the compiled build of reuse.py (see setup.py); the .py is the source.
cimport cython

cdef double _NOT_YET


cdef class _Prompt:
    cdef public double time
    cdef public Py_ssize_t id
    cdef public Py_ssize_t klass
    cdef public double continued_after


cdef class ReuseModel:
    cdef public object settings
    cdef public list _continued
    cdef public list _exposed
    cdef public list _rates
    cdef public double _forgotten_rate
    cdef public bint informed
    cdef public double _age_step
    cdef public Py_ssize_t _age_steps
    cdef public Py_ssize_t _last_age
    cdef public double _prior_hits
    cdef public double _prior_count
    cdef public dict _prompts
    cdef public list _order
    cdef public Py_ssize_t _first
    cdef public list _settled
    cdef public double _next_settle
    cdef public dict _links

    @cython.locals(
        links=dict, deepest=Py_ssize_t, link=Py_ssize_t, last=Py_ssize_t, index=Py_ssize_t,
        parent=_Prompt, prompt=_Prompt,
    )
    cpdef observe(self, Py_ssize_t prompt_id, full_blocks, double clock)

    @cython.locals(prompt=_Prompt, age=Py_ssize_t)
    cpdef double value(self, Py_ssize_t prompt_id, double clock)

    cpdef double eviction_cost(self, Py_ssize_t evicted, double newest_stamp, double clock)

    @cython.locals(
        prompt=_Prompt, index=Py_ssize_t, step=Py_ssize_t, steps=Py_ssize_t, cell=Py_ssize_t,
        lag=double, age_step=double, window=double, prior_hits=double, prior_count=double,
        hits=double, count=double, after=double,
        order=list, exposed=list, continued=list, rates=list,
    )
    cpdef _settle(self, double clock)

    @cython.locals(prompt=_Prompt, first=Py_ssize_t, done=Py_ssize_t, cutoff=double, order=list)
    cpdef _forget(self, double clock)
