"""What rules see: one `LintContext` per Python module, one `PromptContext` per prompt file.

A `LintContext` computes, lazily and once, everything the rules share: the
module index, the taint analysis (libcst's scopes, see `analysis.syntax.scopes`;
qualified names on demand; imports of other modules of the project followed, see
`analysis.project_imports`), the cached segments with the taints that reach them, and the provider requests
laid out as blocks. A module whose index holds no cached-segment candidate
never resolves metadata at all; positions (`PositionProvider`, through one
`MetadataWrapper` that does not copy the module) are resolved only when
something is reported.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import (
    CodeRange,
    MetadataWrapper,
    PositionProvider,
)

from .analysis.bindings import Env
from .analysis.cached_segments import Block, CachedSegment, cached_segments, request_blocks
from .analysis.call_sites import CallSites
from .analysis.history_tail import history_tail
from .analysis.module_index import ModuleIndex
from .analysis.position import Following, following_text
from .analysis.project_imports import (
    Project,
    ProjectImports,
    may_import_prompt_code,
    project_boundary,
)
from .analysis.syntax import FunctionNode, scopes
from .analysis.taint import PERIODS, Taint, TaintAnalysis
from .catalog import CACHED_KEYWORDS, segment_call_tails
from .config import LintConfig
from .finding import Finding, Fix, Position
from .prompt_values import Placement, position_in

__all__ = ["LintContext", "ProjectState", "PromptContext", "Request"]


@dataclass(frozen=True)
class Request:
    """A provider request call and its blocks in prefix order."""

    call: cst.Call
    function: FunctionNode | None
    blocks: tuple[Block, ...]


class LintContext:
    """Shared, lazily computed analysis of one module for all Python rules."""

    def __init__(self, module: cst.Module, filename: str, config: LintConfig) -> None:
        self.module = module
        self.filename = filename
        self.config = config
        self.wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self._parents: dict[int, dict[cst.CSTNode, cst.CSTNode]] = {}
        # (id of segment, id of taint) -> both, and what follows the taint there
        self._following: dict[tuple[int, int], tuple[CachedSegment, Taint, Following | None]] = {}

    @functools.cached_property
    def cached_keywords(self) -> frozenset[str]:
        """Argument names whose values are cached (built-in plus configured)."""
        return CACHED_KEYWORDS | self.config.extra_cached_keywords

    @functools.cached_property
    def index(self) -> ModuleIndex:
        """The one-pass module index."""
        tails = segment_call_tails(self.config.extra_cached_callables)
        imports = self.project_imports
        roles = imports.imported_roles(self.module) if imports is not None else None
        return ModuleIndex.build(self.module, self.cached_keywords, tails, roles)

    @functools.cached_property
    def analysis(self) -> TaintAnalysis:
        """Taint analysis over the module's scope and qualified-name metadata."""
        return TaintAnalysis(
            self.index,
            scopes(self.module),
            self.config.extra_volatile_callables,
            self.project_imports,
        )

    @functools.cached_property
    def project(self) -> Project | None:
        """The project the module's imports are followed in (the file must exist)."""
        path = Path(self.filename)
        if not path.is_file():
            return None
        return Project(
            project_boundary(path.absolute(), self.config.root),
            self.config.extra_volatile_callables,
            self.config.extra_cached_callables,
        )

    @functools.cached_property
    def project_imports(self) -> ProjectImports | None:
        """Imports followed into the other modules of the project (the file must exist)."""
        if self.project is None:
            return None
        return ProjectImports(Path(self.filename).absolute(), self.project, record=True)

    def imports_cross(self) -> bool:
        """Whether a call of the module may pass an argument into a cached segment of
        another module of the project (see `ProjectImports.crosses`)."""
        imports = self.project_imports
        return imports is not None and imports.crosses(self.index)

    def may_import_prompt_code(self, source: str) -> bool:
        """Whether the module imports (within the depth) a module of the project that may
        build a prompt: its calls there may then pass a cached segment."""
        if self.project is None:
            return False
        return may_import_prompt_code(Path(self.filename).absolute(), source, self.project)

    @functools.cached_property
    def call_sites(self) -> CallSites:
        """The module's calls by the local function they run (one traversal, on first use)."""
        return CallSites(self.module, self.analysis)

    @functools.cached_property
    def segments(self) -> list[CachedSegment]:
        """Every cached segment the module builds."""
        tail = history_tail(self.module, self.analysis)
        extra = self.config.extra_cached_callables
        return cached_segments(
            self.index, self.analysis, self.call_sites, extra, tail, self.project_imports
        )

    @functools.cached_property
    def segment_taints(self) -> list[tuple[CachedSegment, Taint]]:
        """Each taint reaching a cached segment, once per (kind, origin), in source order.

        A volatile origin reached with several periods (a clock formatted to the
        day in one place, in full in another) keeps the most frequent change.
        """
        found: dict[tuple[str, int], tuple[CachedSegment, Taint]] = {}
        for segment in self.segments:
            for taint in self.analysis.taints(segment.node, Env(segment.function)):
                key = (taint.kind, id(taint.origin))
                if key not in found or _preferred(taint, found[key][1]):
                    found[key] = (segment, taint)
        return list(found.values())

    @functools.cached_property
    def requests(self) -> list[Request]:
        """Provider request calls (with `messages=`, `system=` or `tools=`) as blocks."""
        return [
            Request(call, function, tuple(request_blocks(call, function, self.analysis)))
            for call, function in self.index.requests
        ]

    def following(self, segment: CachedSegment, taint: Taint) -> Following | None:
        """`following_text` of `taint` in `segment`, computed once for every rule that
        asks (PFX001, PFX002 and PFX005 ask it of the same pairs)."""
        key = (id(segment), id(taint))
        known = self._following.get(key)
        if known is None:
            known = (segment, taint, following_text(segment, taint, self.analysis))
            self._following[key] = known
        return known[2]

    def built_for_later(self, segment: CachedSegment) -> bool:
        """Whether the segment is an argument of an object built and returned by its function
        (`def agent_for(tenant): return Agent(instructions=f"... {tenant.name}")`): a
        factory; each agent keeps its prompt for every request it serves."""
        parents = self.parents(segment.function)
        arg = parents.get(segment.node)
        call = parents.get(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call):
            return False
        func = call.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else None
        if isinstance(func, cst.Name):
            tail = func.value
        if tail is None or not tail[:1].isupper():
            return False
        holder = parents.get(call)
        if isinstance(holder, cst.Return):
            return True
        function = segment.function
        if not isinstance(holder, cst.Assign) or function is None or len(holder.targets) != 1:
            return False
        target = holder.targets[0].target
        return isinstance(target, cst.Name) and any(
            isinstance(value, cst.Name) and value.value == target.value
            for value in self.index.returns.get(id(function), [])
        )

    def parents(self, function: FunctionNode | None) -> Mapping[cst.CSTNode, cst.CSTNode]:
        """Each node's parent within `function` (the module when None), computed on first
        use for that function only: just where a finding needs its place."""
        key = id(function)
        found = self._parents.get(key)
        if found is None:
            found = {}
            stack: list[cst.CSTNode] = [function if function is not None else self.module]
            while stack:
                node = stack.pop()
                for child in node.children:
                    found[child] = node
                    stack.append(child)
            self._parents[key] = found
        return found

    @functools.cached_property
    def _positions(self) -> Mapping[cst.CSTNode, CodeRange]:
        return self.wrapper.resolve(PositionProvider)

    def span(self, node: cst.CSTNode) -> tuple[Position, Position]:
        """Start and end (1-based row and column) of `node` in the source."""
        code_range = self._positions[node]
        return (
            Position(code_range.start.line, code_range.start.column + 1),
            Position(code_range.end.line, code_range.end.column + 1),
        )

    def line_of(self, node: cst.CSTNode) -> int:
        """The row where `node` starts."""
        return self.span(node)[0].row

    def finding(
        self, code: str, node: cst.CSTNode, message: str, fix: Fix | None = None
    ) -> Finding:
        """A finding spanning `node`."""
        start, end = self.span(node)
        return Finding(code, message, self.filename, start, end, fix)


def _preferred(taint: Taint, than: Taint) -> bool:
    """Whether `taint` is kept over `than` (the same kind and origin): the one that
    changes more often; between equals, the first by where it is computed, so that a run
    reports the same message as the last whatever order the analysis found them in."""
    return _preference(taint) < _preference(than)


def _preference(taint: Taint) -> tuple[int, str, int, str]:
    period = PERIODS.index(taint.period) if taint.period is not None else len(PERIODS)
    via = taint.via
    return (period, via.path if via else "", via.line if via else 0, taint.detail)


@dataclass
class ProjectState:
    """Per-run state shared by prompt files: the parsed lock, read once."""

    config: LintConfig
    _lock: dict[str, object] = field(default_factory=dict)

    @property
    def prompt_root(self) -> Path:
        """The prompt registry root (absolute)."""
        return (self.config.root / self.config.prompt_root).absolute()

    def lock(self) -> object | None:
        """The parsed `prefixkit.lock` beside the prompt root, or None when there is none.

        Raises `LockfileError` (from prefixkit.sdk) when the lock is malformed.
        """
        if "lock" not in self._lock:
            from prefixkit.sdk import default_lock_path, read_lock

            path = default_lock_path(self.prompt_root)
            self._lock["lock"] = read_lock(path) if path.is_file() else None
        return self._lock["lock"]


@dataclass(frozen=True)
class PromptContext:
    """One prompt file: its text, where it is, and the project it belongs to."""

    path: Path
    filename: str
    text: str
    project: ProjectState
    # a prompt kept as a string value of a YAML or JSON file: where its text is in the file
    placement: Placement | None = None

    def position(self, offset: int) -> Position:
        """The 1-based row and column in the file of a character offset in the text."""
        if self.placement is not None:
            return self.placement.position(offset)
        return position_in(self.text, offset)

    def finding(self, code: str, start: int, end: int, message: str) -> Finding:
        """A finding spanning the characters `start:end`."""
        return Finding(code, message, self.filename, self.position(start), self.position(end))
