"""Functions and constants imported from other modules of the linted tree.

A call to a function, a static or class method (`Class.method(...)`), a
method called on an instance of a class (`store = Store()`, then
`store.render(...)`: the whole class is analysed), or a read of a module-level
constant that the linted module imports from another module of the same
project is followed into that module:

    from .utils import get_today_str          # relative to the importing package
    from pkg.utils import get_today_str       # <ancestor>/pkg/utils.py or .../utils/__init__.py
    import pkg.utils as u; u.get_today_str()
    from pkg import utils; utils.get_today_str()

A module is looked up next to the importing file (relative imports) or under
the importing file's folders (absolute ones, which covers `src/` layouts), and
never outside the project: the nearest folder holding `.git`, else the lint
root, else the file's own folder. Installed packages are never followed.

The other module's function summary (`TaintAnalysis.summary`) is used with the
call's arguments substituted for its parameters, as for a local helper. Of what
the other module computes, only volatile values cross (identity and request
data depend on the caller's meaning, which another module does not show), each
re-anchored on the call or name in the linted module with a `Via` saying where
it is computed; a constant computed when that module is loaded changes on
every process start. Of what the call passes, volatile values, sets and
unsorted JSON cross (`_CARRIED`), reported where they are made. The message
roles the other modules bind to names the linted module imports (an enum's
members, constants: `imported_roles`) are read too, so `Role.SYS` is the system
role where `roles.py` has `SYS = "system"`.

Each other module is parsed once per process (a cache keyed by path and checked
against the file's size and modification time), and a module linted just before
is not parsed again (`parse_module`). Only the part an imported name
needs is analysed (`module_slice`), and only when something can change it: a
call passing an argument that carries one of `_CARRIED`, or a part that reads a
volatile callable through its imports or imports another module of the project.
An import chain is followed `MAX_DEPTH` modules deep at most (which also ends
cycles), and every file used is recorded as a dependency of the linted file, so
the re-lint cache lints it again when one changes.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import libcst as cst
import libcst.matchers as matchers
from libcst.metadata import (
    CodeRange,
    GlobalScope,
    ImportAssignment,
    MetadataWrapper,
    PositionProvider,
    QualifiedNameSource,
    Scope,
)

from ..catalog import (
    CACHED_KEYWORDS,
    PROMPT_TEMPLATE_CLASSES,
    SYSTEM_MESSAGE_CLASSES,
    TRIGGER_WORDS,
    TURN_ROLES,
    is_system_role,
    is_volatile_callable,
    segment_call_tails,
)
from ..dependencies import record_dependency
from .bindings import Env
from .cached_segments import (
    ImportedCall,
    ParameterSinks,
    cached_segments,
    parameter_sinks,
)
from .call_sites import CallSites
from .guards import passes_literals
from .history_tail import history_tail
from .module_index import ModuleIndex, role_spelling
from .module_slice import TopLevel, Uses
from .syntax import FunctionNode, all_params, binds_first, dotted_parts, scopes, string_value
from .taint import Taint, TaintAnalysis, Via

__all__ = [
    "MAX_DEPTH",
    "Project",
    "ProjectImports",
    "may_import_prompt_code",
    "parse_module",
    "project_boundary",
]

# Modules followed from the linted one: an import of an import of an import.
MAX_DEPTH = 3
# Larger modules are not followed (generated code, vendored bundles).
_MAX_MODULE_BYTES = 1_000_000
# A class of another module longer than this is a sink only by a role its own field
# holds: what its constructor passes on is not analysed (a message or agent class is
# short; a framework-sized class costs more to analyse than it finds).
_MAX_CLASS_LINES = 150

_CALL_TAILS = segment_call_tails()
_NO_SINKS = ParameterSinks({}, {})
# `SYS = "system"`, `LEAD: str = 'developer'`: a name bound to a role literal (read from a
# module's text before parsing it for `_bound_roles`)
_ROLE_ASSIGNMENT = re.compile(r"""=[ \t]*[rRuU]?["'](?i:system|developer)["']""")
# `from .llm import ask, Message` / `import pkg.llm`: what a module imports, read from
# its text (for the cheap test of whether it may call into prompt code of the project).
_IMPORT_LINE = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([\w, \t]*)|import[ \t]+([\w.]+))",
    re.MULTILINE,
)
# What an argument carries through another module's function into its return value.
_CARRIED = frozenset({"volatile", "set", "json"})

_Stamp = tuple[int, int]


def project_boundary(path: Path, root: Path) -> Path:
    """The folder imports are never followed above: the repository holding `path`
    (the nearest folder with `.git`), else `root` when `path` is under it, else
    `path`'s folder."""
    path = path.absolute()
    root = root.absolute()
    for folder in path.parents:
        if (folder / ".git").exists():
            return folder
    return root if root in path.parents else path.parent


@dataclass(frozen=True)
class Project:
    """Where modules are looked up (`boundary`, which paths in messages are relative
    to), the configured extra volatile callables and extra cached callables."""

    boundary: Path
    extra_volatile: frozenset[str] = frozenset()
    extra_cached_callables: frozenset[str] = frozenset()

    def contains(self, folder: Path) -> bool:
        """Whether `folder` is the boundary or inside it."""
        return folder == self.boundary or self.boundary in folder.parents

    def display(self, path: Path) -> str:
        """`path` as shown in messages: relative to the boundary."""
        return path.relative_to(self.boundary).as_posix()


def _stamp(path: Path) -> _Stamp | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size)


@dataclass(frozen=True)
class _Slice:
    module: cst.Module
    index: ModuleIndex
    scopes: Mapping[cst.CSTNode, Scope | None]


@dataclass
class _Parsed:
    """One module of the project, parsed once per run (shared with linting it, see
    `parse_module`); its top-level bindings read when first followed, its positions
    resolved only to report a value."""

    path: Path
    stamp: _Stamp
    text: str
    module: cst.Module
    _slices: dict[tuple[str, ...], tuple[cst.Module, Uses]] = field(default_factory=dict)
    _indexes: dict[tuple[str, ...], ModuleIndex] = field(default_factory=dict)
    _scoped: dict[tuple[str, ...], _Slice] = field(default_factory=dict)
    _class_sinks: dict[tuple[int, Project], ParameterSinks] = field(default_factory=dict)

    def slice(self, attributes: tuple[str, ...]) -> cst.Module:
        """What `attributes` needs of the module (see `module_slice`)."""
        return self._slice(attributes)[0]

    def uses(self, attributes: tuple[str, ...]) -> Uses:
        """What the slice imports and reads through its imports (in functions too)."""
        return self._slice(attributes)[1]

    def _slice(self, attributes: tuple[str, ...]) -> tuple[cst.Module, Uses]:
        found = self._slices.get(attributes)
        if found is None:
            member = attributes[1] if len(attributes) == 2 else None
            found = self._slices[attributes] = self.top_level.slice(attributes[0], member)
        return found

    def index(self, attributes: tuple[str, ...]) -> ModuleIndex:
        """The slice indexed, once for every depth (no metadata needed)."""
        found = self._indexes.get(attributes)
        if found is None:
            module = self.slice(attributes)
            found = self._indexes[attributes] = ModuleIndex.build(
                module, CACHED_KEYWORDS, _CALL_TAILS
            )
        return found

    def scoped(self, attributes: tuple[str, ...]) -> _Slice:
        """The slice indexed and scoped, once for every depth."""
        found = self._scoped.get(attributes)
        if found is None:
            module = self.slice(attributes)
            index = self.index(attributes)
            found = self._scoped[attributes] = _Slice(module, index, scopes(module))
        return found

    def line_of(self, node: cst.CSTNode) -> int:
        """The line `node` starts on: positions of the one top-level statement holding
        it, placed by CPython's parser (the whole module's positions cost more)."""
        starts = self._starts
        for position, statement in enumerate(self.module.body):
            if starts is not None and _holds(statement, node):
                wrapper = MetadataWrapper(cst.Module(body=[statement]), unsafe_skip_copy=True)
                lines = wrapper.resolve(PositionProvider)
                return lines[node].start.line - lines[statement].start.line + starts[position]
        return self._positions[node].start.line

    def class_sinks(self, owner: cst.ClassDef, project: Project) -> ParameterSinks:
        """What a class of the module, analysed on its own (its methods, not the module's
        other names), passes from its constructor and fields into a cached segment."""
        key = (id(owner), project)
        found = self._class_sinks.get(key)
        if found is None:
            module = cst.Module(body=[owner])
            index = ModuleIndex.build(module, CACHED_KEYWORDS, _CALL_TAILS)
            analysis = TaintAnalysis(index, scopes(module), project.extra_volatile, None)
            sites = CallSites(module, analysis)
            tail = history_tail(module, analysis)
            extra = project.extra_cached_callables
            segments = cached_segments(index, analysis, sites, extra, tail)
            found = self._class_sinks[key] = parameter_sinks(segments, analysis, sites)
        return found

    def mentions(self, statement: cst.CSTNode, words: tuple[str, ...]) -> bool:
        """Whether the source text of a top-level statement mentions one of `words`
        (True when its place in the text is not known)."""
        lines = self._span(statement)
        if lines is None:
            return True
        return any(word in "".join(lines) for word in words)

    def lines_of(self, statement: cst.CSTNode) -> int | None:
        """How many lines a top-level statement spans (None when not known)."""
        lines = self._span(statement)
        return len(lines) if lines is not None else None

    def _span(self, statement: cst.CSTNode) -> list[str] | None:
        starts = self._starts
        position = self._position_of.get(id(statement))
        if starts is None or position is None:
            return None
        lines = self._lines
        end = starts[position + 1] - 1 if position + 1 < len(starts) else len(lines)
        return lines[starts[position] - 1 : end]

    @functools.cached_property
    def bound_roles(self) -> dict[str, dict[str, str]]:
        """The system and developer roles the module binds to names: its constants
        (`LEAD_ROLE = "system"`, under `""`) and the members of its enums (`SYS` of `class
        Role(Enum): SYS = "system"`, under `"Role"`), each name's role."""
        roles: dict[str, dict[str, str]] = {}
        for statement in self.module.body:
            if isinstance(statement, cst.ClassDef):
                if _is_enum(statement):
                    found = _role_constants(statement.body.body)
                    if found:
                        roles[statement.name.value] = found
            elif isinstance(statement, cst.SimpleStatementLine):
                roles.setdefault("", {}).update(_role_constants([statement]))
        return roles

    @functools.cached_property
    def top_level(self) -> TopLevel:
        """The module's top-level bindings (read on first use: a linted module may never
        be followed)."""
        return TopLevel(self.module)

    @functools.cached_property
    def _lines(self) -> list[str]:
        return self.text.splitlines(keepends=True)

    @functools.cached_property
    def _position_of(self) -> dict[int, int]:
        return {id(statement): p for p, statement in enumerate(self.module.body)}

    @functools.cached_property
    def _starts(self) -> list[int] | None:
        """The line each top-level statement starts on (its `def`/`class` line)."""
        try:
            tree = ast.parse(self.text)
        except (SyntaxError, ValueError):
            return None
        starts: list[int] = []
        index = 0  # a line of `a = 1; b = 2` is one statement here, two in `ast`
        for statement in self.module.body:
            if index >= len(tree.body):
                return None
            starts.append(tree.body[index].lineno)
            index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        return starts if index == len(tree.body) else None

    @functools.cached_property
    def _positions(self) -> Mapping[cst.CSTNode, CodeRange]:
        wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        return wrapper.resolve(PositionProvider)


def _holds(statement: cst.CSTNode, node: cst.CSTNode) -> bool:
    pending = [statement]
    while pending:
        current = pending.pop()
        if current is node:
            return True
        pending += current.children
    return False


def _parse(path: Path, stamp: _Stamp) -> _Parsed | None:
    if stamp[1] > _MAX_MODULE_BYTES:
        return None
    try:
        text = path.read_text(encoding="utf-8")
        module = cst.parse_module(text)
    except (OSError, UnicodeDecodeError, cst.ParserSyntaxError):
        return None
    return _Parsed(path, stamp, text, module)


def parse_module(source: str, path: Path | None = None) -> cst.Module:
    """`source` parsed (raises `libcst.ParserSyntaxError`); with `path`, the file it is
    the text of: parsed once per run, whether it is linted, followed from another
    module's import, or both (the parse is shared when `source` is the file's text)."""
    if path is None:
        return cst.parse_module(source)
    path = path.absolute()
    stamp = _stamp(path)
    parsed = _parsed.get(path) or _linted.get(path)
    if parsed is not None and parsed.stamp == stamp and parsed.text == source:
        return parsed.module
    module = cst.parse_module(source)
    if stamp is not None and stamp[1] <= _MAX_MODULE_BYTES and _file_text(path) == source:
        _linted[path] = _Parsed(path, stamp, source, module)
        while len(_linted) > _LINTED_KEPT:
            del _linted[next(iter(_linted))]
    return module


def _file_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


@dataclass
class _Other:
    """The part of another module one of its names needs (`module_slice`), analysed
    when first asked, following its own imports one module less deep."""

    parsed: _Parsed
    attributes: tuple[str, ...]
    project: Project
    imports: ProjectImports | None

    @property
    def module(self) -> cst.Module:
        return self.parsed.slice(self.attributes)

    @functools.cached_property
    def analysis(self) -> TaintAnalysis:
        part = self.parsed.scoped(self.attributes)
        return TaintAnalysis(part.index, part.scopes, self.project.extra_volatile, self.imports)

    @functools.cached_property
    def takes_arguments(self) -> bool:
        """Whether an argument of a call may flow into the value."""
        return _takes_arguments(self.parsed.top_level, self.attributes)

    @functools.cached_property
    def may_change(self) -> bool:
        """Whether the value may be volatile whatever the arguments."""
        return _may_change(self.parsed.uses(self.attributes), self.imports, self.project)

    @property
    def global_scope(self) -> Scope | None:
        return self.analysis.scopes.get(self.module)

    @functools.cached_property
    def may_sink(self) -> bool:
        """Whether the part may build a cached segment: its statements mention a word
        one needs (`catalog.TRIGGER_WORDS`), or it imports a module of the project that
        mentions one, or imports one that does (within the depth)."""
        if any(
            not _is_import(statement) and self.parsed.mentions(statement, TRIGGER_WORDS)
            for statement in self.module.body
        ):
            return True
        imports = self.imports
        if imports is None:
            return False
        for level, parts in self.parsed.uses(self.attributes).imports:
            for split in range(len(parts), -1 if level else 0, -1):
                found = imports.module_file(level, parts[:split])
                if found is not None and _prompt_file(found, self.project, imports.depth):
                    return True
        return False

    @functools.cached_property
    def sinks(self) -> ParameterSinks:
        """Which parameters and fields of the part's functions and classes reach a
        cached segment there (its own imports followed one module less deep).

        A summary whose computation found no module of the project to follow is the
        same at every depth that follows imports: it is computed once for them all."""
        imports = self.imports
        key = (self.parsed.path, self.parsed.stamp, self.attributes, self.project)
        shared = _depthless.get(key) if imports is not None else None
        if shared is not None and shared[0] is self.parsed:
            return shared[1]
        found = self._sinks()
        if imports is not None and not any(imports._files.values()):
            _depthless[key] = (self.parsed, found)
        return found

    def _sinks(self) -> ParameterSinks:
        if not self.may_sink:
            return _NO_SINKS
        index = self.parsed.index(self.attributes)
        if not index.sites and (self.imports is None or not self.imports.crosses(index)):
            return _NO_SINKS  # no cached segment there: none of its own, none it passes on
        part = self.parsed.scoped(self.attributes)
        analysis = self.analysis
        sites = CallSites(part.module, analysis)
        tail = history_tail(part.module, analysis)
        extra = self.project.extra_cached_callables
        segments = cached_segments(part.index, analysis, sites, extra, tail, self.imports)
        return parameter_sinks(segments, analysis, sites)

    def valid(self) -> bool:
        """Whether neither the module nor a file its analysis used has changed."""
        if _stamp(self.parsed.path) != self.parsed.stamp:
            return False
        used = self.imports.used if self.imports is not None else {}
        return all(_stamp(path) == stamp for path, stamp in used.items())


# The process-wide caches: each module parsed once, each name's slice scoped once,
# and analysed once per depth and project.
_parsed: dict[Path, _Parsed | None] = {}
# The modules linted last, kept for an import that follows one of them (a linted module
# no import follows is not kept for the whole run).
_linted: dict[Path, _Parsed] = {}
_LINTED_KEPT = 32
_others: dict[tuple[Path, tuple[str, ...], int, Project], _Other] = {}
# The summaries that found no module of the project to follow, whatever the depth.
_depthless: dict[tuple[Path, _Stamp, tuple[str, ...], Project], tuple[_Parsed, ParameterSinks]] = {}


def _parsed_file(path: Path) -> _Parsed | None:
    """The module at `path`, parsed once per run while the file is unchanged; None when it
    is missing, too large or does not parse."""
    stamp = _stamp(path)
    if stamp is None:
        return None
    parsed = _parsed.get(path)
    if parsed is None or parsed.stamp != stamp:
        linted = _linted.pop(path, None)
        parsed = linted if linted is not None and linted.stamp == stamp else None
        parsed = _parsed[path] = parsed or _parse(path, stamp)
    return parsed


def _load(path: Path, attributes: tuple[str, ...], depth: int, project: Project) -> _Other | None:
    """What `attributes` (a name, or a class and its method) needs in the module at
    `path`, parsed once; None when the module does not bind the name or does not parse."""
    key = (path, attributes, depth, project)
    other = _others.get(key)
    if other is None or not other.valid():
        parsed = _parsed_file(path)
        if parsed is None or not parsed.top_level.statements(attributes[0]):
            return None
        imports = ProjectImports(path, project, depth - 1) if depth > 1 else None
        other = _others[key] = _Other(parsed, attributes, project, imports)
    return other


def _other(
    path: Path,
    attributes: tuple[str, ...],
    depth: int,
    project: Project,
    arguments: bool,
    instance: bool = False,
) -> _Other | None:
    """What `attributes` needs in the module at `path` (`_load`; the whole class for a
    method called on an instance, `instance`: it reads what the other methods store on
    `self`); None when the module does not define such a function or constant, or when
    nothing volatile can reach it (`arguments`: the call passes a tainted argument)."""
    other = _load(path, _needed(attributes, instance), depth, project)
    top_level = other.parsed.top_level if other is not None else None
    if other is None or top_level is None or not _defines(top_level, attributes):
        return None
    if instance and not all(
        _short_class(other.parsed, statement)
        for statement in top_level.statements(attributes[0])
        if isinstance(statement, cst.ClassDef)
    ):
        return None  # a long class is not analysed whole
    takes = _takes_arguments(top_level, attributes)
    if not (arguments and takes) and not other.may_change:
        return None
    return other


def _short_class(parsed: _Parsed, owner: cst.ClassDef) -> bool:
    """Whether a class is short enough to analyse whole (`_MAX_CLASS_LINES`)."""
    size = parsed.lines_of(owner)
    return size is not None and size <= _MAX_CLASS_LINES


def _needed(attributes: tuple[str, ...], instance: bool) -> tuple[str, ...]:
    """What a name's part of its module is cut for: a method called on an instance needs
    its whole class (the fields its other methods store on `self`)."""
    return attributes[:1] if instance else attributes


@dataclass(frozen=True)
class _Callee:
    """What an imported name calls in its module: a function (`method`: called with its
    first parameter bound) or a class (built)."""

    other: _Other
    node: FunctionNode | cst.ClassDef
    method: bool = False


@dataclass(frozen=True)
class _Target:
    """What an imported name is in its module: a function (`method`: called with
    its first parameter bound, a classmethod) or a module-level value."""

    other: _Other
    node: FunctionNode | cst.Name
    method: bool = False


@dataclass
class ProjectImports:
    """Follows the imports of one module (`path`) into the project, `depth` modules deep.

    `record` (the linted module's own instance) records every file used as a
    dependency of the lint result.
    """

    path: Path
    project: Project
    depth: int = MAX_DEPTH
    record: bool = False
    used: dict[Path, _Stamp | None] = field(default_factory=dict)
    _targets: dict[tuple[str, bool, bool], list[_Target]] = field(default_factory=dict)
    _callees: dict[tuple[str, bool], list[_Callee]] = field(default_factory=dict)
    _located: dict[str, tuple[Path, tuple[str, ...]] | None] = field(default_factory=dict)
    _files: dict[tuple[int, tuple[str, ...]], Path | None] = field(default_factory=dict)

    # queries ----------------------------------------------------------------
    def call_taints(
        self, analysis: TaintAnalysis, call: cst.Call, position: int | None = None
    ) -> set[Taint] | None:
        """Taints of `call` when it calls a function of another project module (of item
        `position` of the tuple it returns, when given and every `return` of it writes out
        that item), else None."""
        names = self._import_names(analysis, call.func)
        instance = self._instance_names(analysis, call.func)
        if not any(self.locate(name) for name in [*names, *instance]):
            return None
        functions = self._functions(names, False) + self._functions(instance, False, True)
        if not functions and any(analysis.carries(arg.value, _CARRIED) for arg in call.args):
            functions = self._functions(names, True) + self._functions(instance, True, True)
        if not functions:
            return None
        if position is not None and not all(
            other.analysis.returns_item(function, position) for other, function, _ in functions
        ):
            return None
        spelled = f"{_spelling(call.func)}()"
        result: set[Taint] = set()
        for other, function, method in functions:
            passed, own = analysis.through(other.analysis, function, call, method, position)
            result |= {taint for taint in passed if taint.kind in _CARRIED}
            result |= {
                self._anchored(analysis, call, spelled, other, taint)
                for taint in own
                if taint.kind == "volatile"
            }
            self._use(other)
        return result

    def call_sinks(self, analysis: TaintAnalysis, call: cst.Call) -> ImportedCall | None:
        """What `call` passes into a cached position of another project module, when it
        calls a function, a static or class method or a class defined there (else None):
        the arguments for the parameters that module's summary says reach one."""
        root = _root_name(call.func)
        if root is None:
            return None
        callees = [
            callee
            for name in self._instance_names(analysis, call.func)
            for callee in self._callees_of(name, instance=True)
        ]
        if any(isinstance(a, ImportAssignment) for a in analysis.assignments(root)):
            names = self._import_names(analysis, call.func)
            callees += [callee for name in names for callee in self._callees_of(name)]
        if not callees:
            return None
        spelled = _spelling(call.func)
        segments: list[tuple[cst.BaseExpression, str]] = []
        decides = True
        for callee in callees:
            self._use(callee.other)
            where = self.project.display(callee.other.parsed.path)
            if isinstance(callee.node, cst.ClassDef):
                found, closed = _built(analysis, call, callee, spelled, where)
            elif _binds_any(analysis, call, callee.node, callee.method):
                summary = callee.other.sinks
                found = _passed(analysis, call, summary, callee.node, callee.method, spelled, where)
                closed = False  # a keyword it is given counts by its spelling too
            else:
                found, closed = [], False  # no argument: nothing to pass, no summary needed
            segments += found
            decides = decides and closed
        return ImportedCall(tuple(segments), decides)

    def crosses(self, index: ModuleIndex) -> bool:
        """Whether a call of the indexed module may pass an argument into a cached
        segment of another project module (False: `call_sinks` finds none for any of its
        calls). Read from the index alone: the call's dotted name is matched against
        what the module's imports bind, by a dict lookup of its first name, and only the
        callees found are summarised."""
        for parts in index.dotted_calls:
            for imported in index.imported.get(parts[0], ()):
                if self._any_may_pass(self._callees_of(".".join((imported, *parts[1:])))):
                    return True
        # `convo.system(x)` with `convo = Conversation()`: a method of an imported class
        # called on an instance, by the method's name
        called = {parts[-1] for parts in index.dotted_calls if parts[0] not in index.imported}
        built = {
            ".".join((imported, *dotted[1:]))
            for call, _function in (index.calls if called else [])
            if (dotted := dotted_parts(call.func)) and dotted[0] in index.imported
            for imported in index.imported[dotted[0]]
        }
        for qualified in sorted(built):
            for owner in self._callees_of(qualified):
                if not isinstance(owner.node, cst.ClassDef):
                    continue
                methods = called & {
                    s.name.value for s in owner.node.body.body if isinstance(s, cst.FunctionDef)
                }
                for method in sorted(methods):
                    if self._any_may_pass(self._callees_of(f"{qualified}.{method}", True)):
                        return True
        return False

    def _any_may_pass(self, callees: list[_Callee]) -> bool:
        """Whether one of `callees` may put an argument into a cached segment (`_may_pass`),
        noting each one's files as used up to the first that may."""
        for callee in callees:
            passes = _may_pass(callee)
            self._use(callee.other)
            if passes:
                return True
        return False

    def _callees_of(self, qualified: str, instance: bool = False) -> list[_Callee]:
        """The functions and classes of the project the imported dotted name stands for
        (`instance`: `Class.method` called on an instance of the class)."""
        key = (qualified, instance)
        cached = self._callees.get(key)
        if cached is None:
            cached = self._callees[key] = self._find_callees(qualified, instance)
        return cached

    def _find_callees(self, qualified: str, instance: bool) -> list[_Callee]:
        located = self.locate(qualified)
        if located is None:
            return []
        path, attributes = located
        other = _load(path, _needed(attributes, instance), self.depth, self.project)
        if other is None:
            self._note({path: _stamp(path)})
            return []
        self._use(other)
        found: list[_Callee] = []
        for statement in other.parsed.top_level.statements(attributes[0]):
            if isinstance(statement, cst.FunctionDef) and len(attributes) == 1:
                found.append(_Callee(other, statement))
            elif isinstance(statement, cst.ClassDef) and len(attributes) == 1:
                if not _framework_subclass(statement):
                    found.append(_Callee(other, statement))
            elif isinstance(statement, cst.ClassDef):
                method = next(
                    (
                        s
                        for s in statement.body.body
                        if isinstance(s, cst.FunctionDef) and s.name.value == attributes[1]
                    ),
                    None,
                )
                # a long class is not analysed whole for a method called on an instance
                whole = not instance or _short_class(other.parsed, statement)
                first = binds_first(method, instance) if method is not None and whole else None
                if method is not None and first is not None:
                    found.append(_Callee(other, method, first))
            elif _is_import(statement) and other.imports is not None:
                found += self._reexported(other, attributes, instance)
        return found

    def _reexported(
        self, other: _Other, attributes: tuple[str, ...], instance: bool
    ) -> list[_Callee]:
        """A name a package's `__init__` imports from one of its modules."""
        scope = other.global_scope
        imports = other.imports
        if not isinstance(scope, GlobalScope) or imports is None or attributes[0] not in scope:
            return []
        return [
            callee
            for name in sorted(
                q.name
                for q in scope.get_qualified_names_for(attributes[0])
                if q.source is QualifiedNameSource.IMPORT
            )
            for callee in imports._callees_of(".".join([name, *attributes[1:]]), instance)
        ]

    def _functions(
        self, names: list[str], arguments: bool, instance: bool = False
    ) -> list[tuple[_Other, FunctionNode, bool]]:
        return [
            (t.other, t.node, t.method)
            for name in names
            for t in self._resolve(name, arguments, instance)
            if not isinstance(t.node, cst.Name)
        ]

    def _instance_names(self, analysis: TaintAnalysis, func: cst.BaseExpression) -> list[str]:
        """`pkg.store.Store.render` for a method called on an instance of a class the
        module imports from the project (`store.render(...)` with `store = Store()`,
        `self.store.render(...)`, `Store().render(...)`)."""
        if not isinstance(func, cst.Attribute):
            return []
        return sorted(
            {
                f"{name}.{func.attr.value}"
                for call in analysis.constructed_by(func.value)
                for name in self._import_names(analysis, call.func)
            }
        )

    def value_taints(
        self, analysis: TaintAnalysis, node: cst.Name | cst.Attribute
    ) -> set[Taint] | None:
        """Taints of `node` when it reads a constant of another project module, else None."""
        targets = [
            t
            for name in self._import_names(analysis, node)
            for t in self._resolve(name, False)
            if isinstance(t.node, cst.Name)
        ]
        if not targets:
            return None
        spelled = _spelling(node)
        result: set[Taint] = set()
        for target in targets:
            for taint in target.other.analysis.taints(target.node, Env(None)):
                if taint.kind == "volatile":
                    result.add(self._anchored(analysis, node, spelled, target.other, taint))
            self._use(target.other)
        return result

    def value_text(self, analysis: TaintAnalysis, node: cst.Name) -> str | None:
        """The text of the constant `node` imports from another project module (a string,
        constants joined with `+`, a prompt file or a document's value read there), when
        that module shows it; else None."""
        names = [name for name in self._import_names(analysis, node) if self.locate(name)]
        texts = {self._text_of(name) for name in names}
        return texts.pop() if len(texts) == 1 else None

    def _text_of(self, qualified: str) -> str | None:
        located = self.locate(qualified)
        if located is None or len(located[1]) != 1:
            return None
        path, attributes = located
        other = _load(path, attributes, self.depth, self.project)
        if other is None:
            self._note({path: _stamp(path)})
            return None
        self._use(other)
        scope = other.global_scope
        name = attributes[0]
        if not isinstance(scope, GlobalScope) or name not in scope:
            return None
        texts: set[str | None] = set()
        for assignment in scope[name]:
            target = getattr(assignment, "node", None)
            if isinstance(assignment, ImportAssignment):
                # a re-export (`from .qa import QA_PROMPT` in a package's __init__)
                texts |= {
                    other.imports._text_of(q.name) if other.imports is not None else None
                    for q in scope.get_qualified_names_for(name)
                    if q.source is QualifiedNameSource.IMPORT
                }
            else:
                texts.add(
                    other.analysis.constant_text(target) if isinstance(target, cst.Name) else None
                )
        return texts.pop() if len(texts) == 1 else None

    def _anchored(
        self,
        analysis: TaintAnalysis,
        node: cst.BaseExpression,
        spelled: str,
        other: _Other,
        taint: Taint,
    ) -> Taint:
        """`taint` of another module, reported on `node` of this one."""
        via = taint.via
        if via is None:
            line = other.parsed.line_of(taint.origin)
            # computed in the other module's body, or by a call made there at import
            at_import = other.analysis.at_import(taint.origin) or isinstance(taint.once, cst.Call)
            cached = isinstance(taint.once, cst.FunctionDef)
            via = Via(spelled, self.project.display(other.parsed.path), line, at_import, cached)
        period = "process" if analysis.at_import(node) else taint.period
        return Taint("volatile", node, taint.detail, period, via=replace(via, name=spelled))

    # resolution -------------------------------------------------------------
    def _import_names(self, analysis: TaintAnalysis, node: cst.BaseExpression) -> list[str]:
        scope = analysis.scopes.get(node)
        if scope is None:
            return []
        return sorted(
            q.name
            for q in scope.get_qualified_names_for(node)
            if q.source is QualifiedNameSource.IMPORT
        )

    def _resolve(self, qualified: str, arguments: bool, instance: bool = False) -> list[_Target]:
        """What the imported dotted name stands for in the project (empty: not followed,
        or nothing volatile can reach it; `arguments`: the call passes a tainted one;
        `instance`: `Class.method` called on an instance of the class)."""
        key = (qualified, arguments, instance)
        cached = self._targets.get(key)
        if cached is None:
            cached = self._targets[key] = self._find(qualified, arguments, instance)
        return cached

    def _find(self, qualified: str, arguments: bool, instance: bool) -> list[_Target]:
        located = self.locate(qualified)
        if located is None:
            return []
        path, attributes = located
        other = _other(path, attributes, self.depth, self.project, arguments, instance)
        if other is None:  # not defined there (yet), does not parse, or cannot change
            self._note({path: _stamp(path)})
            return []
        self._use(other)
        return self._lookup(other, list(attributes), arguments, instance)

    def imported_roles(self, module: cst.Module) -> dict[str, str]:
        """What `module` (the one at `path`) may read as a message role from the project
        modules it imports from, by the last name it reads it with, as `ModuleIndex` keys
        the roles a module binds itself: the members of an enum it imports (or of the enums
        of a module it imports), and the constants it imports by name (or of a module it
        imports), that hold a system or developer role (`_Parsed.bound_roles`).
        `Role.SYS` and `Role.SYS.value` are the system role in `app.py` when it imports
        `Role` (or `roles`) and `roles.py` has `class Role(Enum): SYS = "system"`."""
        roles: dict[str, str] = {}
        linted = self.path.absolute()
        for level, parts, names in _imported_modules(module.body):
            whole = [parts] if not names or names == (("*", "*"),) else []
            whole += [(*parts, name) for name, _bound in names]
            wholly = self._files_of(level, whole, linted)
            for path in wholly:
                for members in _bound_roles(path).values():
                    roles.update(members)
            named = self._files_of(level, [parts], linted) if names else []
            for path in named:
                bound = _bound_roles(path)
                constants = bound.get("", {})
                for name, as_name in names:
                    roles.update(bound.get(name, {}))
                    if name in constants:
                        roles[as_name] = constants[name]
            self._note({path: _stamp(path) for path in [*named, *wholly]})
        return roles

    def _files_of(self, level: int, modules: list[tuple[str, ...]], linted: Path) -> list[Path]:
        """The project files of `modules` (each a module's dotted parts, imported with
        `level` dots), but the `linted` one, in order."""
        files = {self.module_file(level, parts) for parts in modules}
        return sorted(f for f in files if f is not None and f != linted)

    def locate(self, qualified: str) -> tuple[Path, tuple[str, ...]] | None:
        """The project file and the name (or class and method) in it that the imported
        dotted name stands for; None outside the project."""
        if qualified not in self._located:
            self._located[qualified] = self._locate(qualified)
        return self._located[qualified]

    def _locate(self, qualified: str) -> tuple[Path, tuple[str, ...]] | None:
        level = len(qualified) - len(qualified.lstrip("."))
        parts = qualified[level:].split(".") if qualified[level:] else []
        # the longest module prefix that is a file of the project wins
        for split in range(len(parts), -1 if level else 0, -1):
            path = self.module_file(level, tuple(parts[:split]))
            if path is None:
                continue
            attributes = tuple(parts[split:])
            if not attributes or len(attributes) > 2 or path == self.path.absolute():
                return None
            return path, attributes
        return None

    def module_file(self, level: int, parts: tuple[str, ...]) -> Path | None:
        """The project file of the module `parts` imported with `level` dots, or None."""
        key = (level, parts)
        if key not in self._files:
            self._files[key] = self._search(level, parts)
        return self._files[key]

    def _search(self, level: int, parts: tuple[str, ...]) -> Path | None:
        folder = self.path.absolute().parent
        if level:
            for _ in range(level - 1):
                folder = folder.parent
            bases = [folder] if self.project.contains(folder) else []
        else:
            bases = [f for f in (folder, *folder.parents) if self.project.contains(f)]
        for base in bases:
            candidates = [base.joinpath(*parts, "__init__.py")]
            if parts:
                candidates.insert(0, base.joinpath(*parts[:-1], f"{parts[-1]}.py"))
            for candidate in candidates:
                if candidate.is_file():
                    return candidate
        return None

    def _lookup(
        self, other: _Other, attributes: list[str], arguments: bool, instance: bool = False
    ) -> list[_Target]:
        scope = other.global_scope
        if not attributes or not isinstance(scope, GlobalScope) or attributes[0] not in scope:
            return []
        found: list[_Target] = []
        for assignment in scope[attributes[0]]:
            if isinstance(assignment, ImportAssignment):
                # a re-export (`from .dates import today` in a package's __init__)
                if other.imports is not None:
                    for name in sorted(
                        q.name
                        for q in scope.get_qualified_names_for(attributes[0])
                        if q.source is QualifiedNameSource.IMPORT
                    ):
                        qualified = ".".join([name, *attributes[1:]])
                        found += other.imports._resolve(qualified, arguments, instance)
                continue
            node = getattr(assignment, "node", None)
            if len(attributes) == 2:
                if isinstance(node, cst.ClassDef):
                    found += _class_method(other, node, attributes[1], instance)
                    found += [_Target(other, n) for n in _class_level(node, attributes[1])]
            elif isinstance(node, cst.FunctionDef):
                found.append(_Target(other, node))
            elif isinstance(node, cst.Name):
                lambdas = [
                    source.value
                    for source in other.analysis.index.values.get(id(node), [])
                    if isinstance(source.value, cst.Lambda)
                ]
                found += [_Target(other, f) for f in lambdas] or [_Target(other, node)]
        return found

    # dependencies -----------------------------------------------------------
    def _use(self, other: _Other) -> None:
        """Note `other`'s file, and every file its analysis used so far, as used."""
        self._note({other.parsed.path: other.parsed.stamp})
        if other.imports is not None:
            self._note(other.imports.used)

    def _note(self, used: Mapping[Path, _Stamp | None]) -> None:
        self.used.update(used)
        if self.record:
            for path in used:
                record_dependency(path)


def _binds_any(
    analysis: TaintAnalysis, call: cst.Call, function: FunctionNode, method: bool
) -> bool:
    """Whether `call` passes an argument (not a default) for a parameter of `function`:
    a call that passes none puts nothing into the callee's prompt, whatever its summary."""
    defaults = {id(p): p.default for p in all_params(function)}
    return any(
        argument is not defaults.get(key)
        for key, argument in analysis.arguments(function, call, method).items()
    )


def _passed(
    analysis: TaintAnalysis,
    call: cst.Call,
    summary: ParameterSinks,
    function: FunctionNode,
    method: bool,
    spelled: str,
    where: str,
) -> list[tuple[cst.BaseExpression, str]]:
    """The arguments `call` passes for the parameters of `function` (of another module)
    that reach a cached segment there (`summary`: that module's)."""
    sinks = summary.parameters.get(id(function), ())
    if not sinks:
        return []
    bound = analysis.arguments(function, call, method)
    found: list[tuple[cst.BaseExpression, str]] = []
    for param, label in sinks:
        argument = bound.get(id(param))
        if argument is None or argument is param.default:
            continue
        if passes_literals(bound, param) and summary.excluded(function, param, bound):
            continue  # `add("user", text)` of `if role == "system": self.system = text`
        found.append(
            (argument, f"{label} in {where}, through parameter `{param.name.value}` of `{spelled}`")
        )
    return found


def _built(
    analysis: TaintAnalysis, call: cst.Call, callee: _Callee, spelled: str, where: str
) -> tuple[list[tuple[cst.BaseExpression, str]], bool]:
    """What building a class of another module with `call` puts into a cached segment
    (a class whose own field holds a system role: every argument; else what its
    constructor or its fields pass on), and whether the class decides that by its own
    code (its `__init__` takes no `**kwargs`, or it has no `__init__` and no base; not
    a class too long to analyse)."""
    owner = callee.node
    if not isinstance(owner, cst.ClassDef):
        return [], False
    other = callee.other
    init = _init_of(owner)
    closed = init.params.star_kwarg is None if init is not None else not owner.bases
    role = _field_role(owner)
    size = other.parsed.lines_of(owner)
    if role is None and (size is None or size > _MAX_CLASS_LINES):
        return [], False  # not analysed: a keyword it is given counts by its spelling
    if role is None and not other.parsed.mentions(owner, TRIGGER_WORDS):
        return [], closed  # nothing in the class can build a prompt
    if all(arg.star for arg in call.args):
        return [], closed  # no argument to put into it: the class need not be analysed
    sinks = other.parsed.class_sinks(owner, other.project)
    if role is not None:
        label = f"a `{role}` message (`{spelled}(...)`, a class of {where})"
        return [(arg.value, label) for arg in call.args if not arg.star], True
    if init is not None:
        return _passed(analysis, call, sinks, init, True, spelled, where), closed
    fields = sinks.fields.get(id(owner), {})
    if not fields:
        return [], closed
    order = _field_order(owner)
    found: list[tuple[cst.BaseExpression, str]] = []
    for position, arg in enumerate(call.args):
        if arg.star:
            continue
        name = arg.keyword.value if arg.keyword is not None else None
        if name is None and position < len(order):
            name = order[position]
        if name is not None and name in fields:
            label = f"{fields[name]} in {where}, through field `{name}` of `{spelled}`"
            found.append((arg.value, label))
    return found, closed


def _may_pass(callee: _Callee) -> bool:
    """Whether a call of `callee` with arguments may put one into a cached segment: the
    early answers of `_built` and `_passed`, from the callee's summary alone."""
    owner = callee.node
    other = callee.other
    if not isinstance(owner, cst.ClassDef):
        return bool(other.sinks.parameters.get(id(owner)))
    role = _field_role(owner)
    if role is not None:
        return True
    size = other.parsed.lines_of(owner)
    if size is None or size > _MAX_CLASS_LINES or not other.parsed.mentions(owner, TRIGGER_WORDS):
        return False
    sinks = other.parsed.class_sinks(owner, other.project)
    init = _init_of(owner)
    if init is not None:
        return bool(sinks.parameters.get(id(init)))
    return bool(sinks.fields.get(id(owner)))


def _init_of(owner: cst.ClassDef) -> cst.FunctionDef | None:
    return next(
        (
            s
            for s in owner.body.body
            if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
        ),
        None,
    )


def _field_role(owner: cst.ClassDef) -> str | None:
    """A system or developer role spelled in place in a class-level field
    (`role: str = "system"`, `kind = Kind.SYSTEM`), when no field spells a turn's role:
    a class whose fields spell several roles (`class Role(Enum)` with `SYSTEM = "system"`
    and `USER = "user"`) names the roles; calling it makes a role, not a message."""
    found = None
    for statement in owner.body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            value = small.value if isinstance(small, (cst.Assign, cst.AnnAssign)) else None
            spelled = role_spelling(value) if value is not None else None
            if spelled in TURN_ROLES:
                return None
            if found is None and is_system_role(spelled):
                found = spelled
    return found


def _field_order(owner: cst.ClassDef) -> list[str]:
    """The annotated class-level fields of a class, in order (a dataclass's parameters)."""
    return [
        small.target.value
        for statement in owner.body.body
        if isinstance(statement, cst.SimpleStatementLine)
        for small in statement.body
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name)
    ]


def _framework_subclass(owner: cst.ClassDef) -> bool:
    """Whether a class derives from a framework's message or template class by name
    (`class Brief(SystemMessage)`): a sink as its base is."""
    for base in owner.bases:
        parts = dotted_parts(base.value)
        if parts and parts[-1] in SYSTEM_MESSAGE_CLASSES | PROMPT_TEMPLATE_CLASSES:
            return True
    return False


def _root_name(node: cst.BaseExpression) -> cst.Name | None:
    """The name a dotted callee starts with (`u` of `u.today()`)."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return node if isinstance(node, cst.Name) else None


def _imports_project(uses: Uses, imports: ProjectImports | None) -> bool:
    """Whether a slice imports (within the depth) another module of the project."""
    return imports is not None and any(
        level or any(imports.module_file(0, parts[:k]) for k in range(len(parts), 0, -1))
        for level, parts in uses.imports
    )


# Whether a file (by path, stamp and depth) may hold prompt code or import some.
_prompt_code: dict[tuple[Path, int], tuple[_Stamp | None, bool]] = {}


def may_import_prompt_code(path: Path, text: str, project: Project, depth: int = MAX_DEPTH) -> bool:
    """Whether a module (`text`, at `path`) imports, within `depth` modules, a module of the
    project whose text mentions a word a cached segment needs (`catalog.TRIGGER_WORDS`):
    a cheap test, on the text alone, of whether its calls may reach a prompt there."""
    finder = ProjectImports(path, project, depth)
    for match in _IMPORT_LINE.finditer(text):
        dots, dotted, names, module = match.groups()
        level = len(dots or "")
        parts = tuple(p for p in (dotted or module or "").split(".") if p)
        candidates = [parts, *((*parts, n.strip()) for n in (names or "").split(",") if n.strip())]
        for candidate in candidates:
            found = finder.module_file(level, candidate)
            if found is None or found == path.absolute():
                continue
            if _prompt_file(found, project, depth):
                return True
    return False


def _prompt_file(path: Path, project: Project, depth: int) -> bool:
    stamp = _stamp(path)
    key = (path, depth)
    cached = _prompt_code.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    _prompt_code[key] = (stamp, False)  # an import cycle ends here
    try:
        text = path.read_text(encoding="utf-8") if stamp and stamp[1] <= _MAX_MODULE_BYTES else ""
    except (OSError, UnicodeDecodeError):
        text = ""
    found = any(word in text for word in TRIGGER_WORDS) or (
        depth > 1 and may_import_prompt_code(path, text, project, depth - 1)
    )
    _prompt_code[key] = (stamp, found)
    return found


def _defines(top_level: TopLevel, attributes: tuple[str, ...]) -> bool:
    """Whether the module may define a function, constant or (with two attributes) a
    method by that name: skips classes called as constructors."""
    for statement in top_level.statements(attributes[0]):
        if isinstance(statement, cst.ClassDef):
            if len(attributes) == 2 and (
                any(
                    isinstance(s, cst.FunctionDef) and s.name.value == attributes[1]
                    for s in statement.body.body
                )
                or _class_level(statement, attributes[1])
            ):
                return True
        elif len(attributes) == 1 or _is_import(statement):
            return True
    return False


def _takes_arguments(top_level: TopLevel, attributes: tuple[str, ...]) -> bool:
    """Whether what `attributes` names may be a function with parameters (other than
    a method's first), whose arguments may flow into its return value."""
    for statement in top_level.statements(attributes[0]):
        if isinstance(statement, cst.ClassDef):
            functions = [
                s
                for s in statement.body.body
                if isinstance(s, cst.FunctionDef) and s.name.value == attributes[-1]
            ]
            if any(len(all_params(f)) > int(bool(binds_first(f))) for f in functions):
                return True
        elif isinstance(statement, cst.FunctionDef):
            if all_params(statement):
                return True
        elif _has_lambda(statement):
            return True
    return False


def _has_lambda(statement: cst.CSTNode) -> bool:
    return bool(matchers.findall(statement, matchers.Lambda()))


def _may_change(uses: Uses, imports: ProjectImports | None, project: Project) -> bool:
    """Whether a slice may compute a volatile value: it reads a callable of the volatile
    catalog through an import, or imports (within the depth) a module of the project."""
    extra = project.extra_volatile
    if any(is_volatile_callable(name, extra) for name in uses.qualified):
        return True
    return _imports_project(uses, imports)


def _is_import(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )


def _class_method(other: _Other, owner: cst.ClassDef, name: str, instance: bool) -> list[_Target]:
    """`Class.name(...)` (a staticmethod or a classmethod: callable without an instance),
    or `instance.name(...)` (any method of the class), with how it binds its first
    parameter (`binds_first`)."""
    method = other.analysis.index.class_methods.get(id(owner), {}).get(name)
    first = binds_first(method, instance) if method is not None else None
    if method is None or first is None:
        return []
    return [_Target(other, method, method=first)]


def _class_level(owner: cst.ClassDef, name: str) -> list[cst.Name]:
    """The targets `name` is assigned to in the class body (`STARTED = datetime.now()`):
    a class attribute read through the class, evaluated when the module is loaded."""
    return [
        target
        for line in owner.body.body
        if isinstance(line, cst.SimpleStatementLine)
        for small in line.body
        for target in _targets(small)
        if target.value == name
    ]


def _imported_modules(
    statements: Sequence[cst.BaseStatement],
) -> Iterator[tuple[int, tuple[str, ...], tuple[tuple[str, str], ...]]]:
    """Each import among `statements` (and in the `if` and `try` blocks among them) as its
    dots, the module's dotted parts and the names imported from it with the names they are
    bound to (`("*", "*")` for all): `from ..app import roles, Role as R` is
    (2, ('app',), (('roles', 'roles'), ('Role', 'R'))); `import a.b` is (0, ('a', 'b'), ())."""
    for statement in statements:
        if isinstance(statement, (cst.If, cst.Try)):
            blocks = [statement.body]
            if isinstance(statement, cst.Try):
                blocks += [handler.body for handler in statement.handlers]
            elif isinstance(statement.orelse, cst.Else):
                blocks.append(statement.orelse.body)
            for block in blocks:
                if isinstance(block, cst.IndentedBlock):
                    yield from _imported_modules(block.body)
            continue
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.ImportFrom):
                module = dotted_parts(small.module) if small.module is not None else []
                names: tuple[tuple[str, str], ...] = (("*", "*"),)
                if not isinstance(small.names, cst.ImportStar):
                    names = tuple(
                        (alias.name.value, _bound_name(alias) or alias.name.value)
                        for alias in small.names
                        if isinstance(alias.name, cst.Name)
                    )
                yield len(small.relative), tuple(module or ()), names
            elif isinstance(small, cst.Import):
                for alias in small.names:
                    yield 0, tuple(dotted_parts(alias.name) or ()), ()


def _bound_name(alias: cst.ImportAlias) -> str | None:
    asname = alias.asname
    if asname is not None and isinstance(asname.name, cst.Name):
        return asname.name.value
    return None


def _bound_roles(path: Path) -> dict[str, dict[str, str]]:
    """`_Parsed.bound_roles` of the module at `path`, parsed only when its text assigns a
    system or developer role literal to a name (most modules do not: remembered while the
    file is unchanged)."""
    stamp = _stamp(path)
    if stamp is None or _without_roles.get(path) == stamp:
        return {}
    parsed = _parsed.get(path) or _linted.get(path)
    if parsed is None or parsed.stamp != stamp:
        text = _file_text(path) if stamp[1] <= _MAX_MODULE_BYTES else None
        if text is None or not _ROLE_ASSIGNMENT.search(text):
            _without_roles[path] = stamp
            return {}
        parsed = _parsed_file(path)
    return parsed.bound_roles if parsed is not None else {}


# The modules whose text binds no name to a role literal, with the stamp they were read at.
_without_roles: dict[Path, _Stamp] = {}


def _is_enum(owner: cst.ClassDef) -> bool:
    """Whether a class derives from an enum (`Enum`, `StrEnum`, `enum.Enum`, ...)."""
    return any(
        (parts := dotted_parts(base.value)) is not None and parts[-1].endswith("Enum")
        for base in owner.bases
    )


def _role_constants(lines: Sequence[cst.CSTNode]) -> dict[str, str]:
    """The names `lines` assign a system or developer role literal, each name's role."""
    roles: dict[str, str] = {}
    for line in lines:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            value = small.value if isinstance(small, (cst.Assign, cst.AnnAssign)) else None
            role = string_value(value) if value is not None else None
            if role is not None and is_system_role(role):
                roles.update((target.value, role.lower()) for target in _targets(small))
    return roles


def _targets(statement: cst.BaseSmallStatement) -> list[cst.Name]:
    if isinstance(statement, cst.Assign):
        return [t.target for t in statement.targets if isinstance(t.target, cst.Name)]
    if isinstance(statement, cst.AnnAssign) and statement.value is not None:
        return [statement.target] if isinstance(statement.target, cst.Name) else []
    return []


def _spelling(node: cst.BaseExpression) -> str:
    parts = dotted_parts(node)
    return ".".join(parts) if parts else "the imported value"
