"""The top-level statements of a module that one of its names needs.

Following an import into another module needs the analysis of one function,
class or constant there, not of the whole module: scope analysis of a large
module costs more than parsing it. `TopLevel(module).slice("get_today_str")`
is a module made of the statements that bind the name and, transitively,
every top-level name those statements mention (imports, helpers, constants),
in source order. Names are matched syntactically (any name read counts), so
the slice may hold more than needed, never less of what the module binds at
its top level. The statements are the module's own nodes (not copies), so
positions resolved on the whole module apply to them. For a method called on
its class (`Class.method()`), the class keeps only its class-level statements
and that method.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .syntax import target_names, walk

__all__ = ["Import", "TopLevel", "Uses"]

# An imported module: the number of leading dots and the dotted parts.
Import = tuple[int, tuple[str, ...]]


class TopLevel:
    """The top-level bindings of one module, computed once; slices on demand."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._binders: dict[str, list[int]] = {}
        for position, statement in enumerate(module.body):
            for name in _bound(statement):
                self._binders.setdefault(name, []).append(position)
        self._reads: dict[int, _Reads] = {}

    def statements(self, name: str) -> list[cst.BaseStatement]:
        """The top-level statements that bind `name`, in source order."""
        body = self.module.body
        return [body[p] for p in self._binders.get(name, [])]

    def slice(self, name: str, member: str | None = None) -> tuple[cst.Module, Uses]:
        """The statements `name` needs, as a module (empty when nothing binds it), and
        what they import and read through imports (in function bodies too).

        With `member`, a class `name` keeps only its class-level assignments and
        the method `member`, so the slice holds what that method needs.
        """
        needed: set[int] = set()
        narrowed: dict[int, tuple[cst.BaseStatement, _Reads]] = {}
        pending: list[int] = []
        for position in self._binders.get(name, []):
            statement = self.module.body[position]
            if member is not None and isinstance(statement, cst.ClassDef):
                kept = _narrowed(statement, member)
                narrowed[position] = (kept, _read(kept))
                needed.add(position)
                pending += self._binders_of(narrowed[position][1].names)
            else:
                pending.append(position)
        while pending:
            position = pending.pop()
            if position in needed:
                continue
            needed.add(position)
            pending += self._binders_of(self._read(position).names)
        body = self.module.body
        statements = [narrowed[p][0] if p in narrowed else body[p] for p in sorted(needed)]
        reads = [narrowed[p][1] if p in narrowed else self._read(p) for p in needed]
        return self.module.with_changes(body=statements), _uses(reads)

    def _binders_of(self, names: set[str]) -> list[int]:
        return [p for name in names for p in self._binders.get(name, [])]

    def _read(self, position: int) -> _Reads:
        found = self._reads.get(position)
        if found is None:
            found = self._reads[position] = _read(self.module.body[position])
        return found


@dataclass(frozen=True)
class Uses:
    """What a slice imports: the modules (dots, dotted parts), and the qualified names
    it reads through those imports (`dt.now` read with `from datetime import datetime
    as dt` gives `datetime.datetime.now`)."""

    imports: frozenset[Import]
    qualified: frozenset[str]


def _uses(reads: list[_Reads]) -> Uses:
    bindings: dict[str, set[str]] = {}
    for read in reads:
        for local, targets in read.bindings.items():
            bindings.setdefault(local, set()).update(targets)
    qualified: set[str] = set()
    for read in reads:
        for dotted in read.chains | read.names:
            root, _, rest = dotted.partition(".")
            for target in bindings.get(root, ()):
                qualified.add(f"{target}.{rest}" if rest else target)
    return Uses(frozenset(m for read in reads for m in read.imports), frozenset(qualified))


def _read(statement: cst.CSTNode) -> _Reads:
    collector = _Reads()
    walk(statement, collector)
    return collector


def _narrowed(owner: cst.ClassDef, member: str) -> cst.ClassDef:
    """`owner` with its class-level statements and the method `member` only."""
    kept = [
        statement
        for statement in owner.body.body
        if not isinstance(statement, (cst.FunctionDef, cst.ClassDef))
        or (isinstance(statement, cst.FunctionDef) and statement.name.value == member)
    ]
    return owner.with_changes(body=owner.body.with_changes(body=kept))


class _Reads(cst.CSTVisitor):
    """Names a statement may read (not attribute names or keyword argument names), the
    dotted names it reads (`time.time`), the modules it imports and the names those
    imports bind (`dt` -> `datetime.datetime`)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.chains: set[str] = set()
        self.imports: set[Import] = set()
        self.bindings: dict[str, set[str]] = {}

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            dotted = _dotted(alias.name)
            self.imports.add((0, tuple(dotted.split("."))))
            local = _alias(alias.asname) or dotted.split(".")[0]
            self.bindings.setdefault(local, set()).add(dotted if alias.asname else local)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = _dotted(node.module) if node.module is not None else ""
        self.imports.add((len(node.relative), tuple(module.split(".")) if module else ()))
        if node.relative or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = _dotted(alias.name)
            local = _alias(alias.asname) or name
            self.bindings.setdefault(local, set()).add(f"{module}.{name}")

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        dotted = _dotted(node)
        if dotted and not dotted.startswith(".") and "" not in dotted.split("."):
            self.chains.add(dotted)
        walk(node.value, self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        walk(node.value, self)
        return False


def _bound(statement: cst.CSTNode) -> set[str]:
    """Names a top-level statement binds (in `if`, `try`, `with` and loops too)."""
    collector = _Binders()
    walk(statement, collector)
    return collector.names


class _Binders(cst.CSTVisitor):
    """Bindings outside function and class bodies."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.names.add(node.name.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.names.add(node.name.value)
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.names |= target_names(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.names |= target_names(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.names |= target_names(node.target)

    def visit_For(self, node: cst.For) -> None:
        self.names |= target_names(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self.names |= target_names(node.name)

    def visit_Import(self, node: cst.Import) -> None:
        self.names |= {
            _dotted(alias.name).split(".")[0] for alias in node.names if not alias.asname
        }

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not isinstance(node.names, cst.ImportStar):
            self.names |= {_dotted(alias.name) for alias in node.names if not alias.asname}


def _alias(asname: cst.AsName | None) -> str | None:
    if asname is not None and isinstance(asname.name, cst.Name):
        return asname.name.value
    return None


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return node.value if isinstance(node, cst.Name) else ""
