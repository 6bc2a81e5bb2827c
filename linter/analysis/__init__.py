"""The analyses the rules share: what one module, and the project around it, computes.

Every rule reads a module through these analyses (`prefixkit.linter.context`
builds them once per module, lazily). The modules import only downward, in
this order (a module imports only modules of the lines below its own; each
line's modules are independent of each other):

    position  project_imports                     what follows a value in the cached prefix; other modules
    cached_segments  key_order                    where a cached prefix is built; key order
    history_tail  taint                           a history's tail; where a value comes from
    template_inputs                               a template's text; values given when rendered
    call_sites  sets  shapes                      calls of a function; sets; what a value is built from
    bindings                                      what names and calls refer to; parameters bound
    module_index                                  one pass recording what the others look up
    module_slice  guards                          the part of a module a name needs; the tests guarding a node
    syntax  documents                             one node's meaning; a read-only traversal; scopes; a document's values

Below all of them, and never importing them: `prefixkit.linter.catalog`
(what is known of the SDKs and frameworks) and `prefixkit.linter.dependencies`
(the files a result depends on). `LAYERS` is the same order, bottom first;
`tests/linter/test_analysis_layers.py` checks every import against it.
"""

from __future__ import annotations

__all__ = ["LAYERS"]

LAYERS: tuple[tuple[str, ...], ...] = (
    ("syntax", "documents"),
    ("module_slice", "guards"),
    ("module_index",),
    ("bindings",),
    ("call_sites", "sets", "shapes"),
    ("template_inputs",),
    ("history_tail", "taint"),
    ("cached_segments", "key_order"),
    ("position", "project_imports"),
)
"""The analysis modules by layer, bottom first: each imports only from layers below."""
