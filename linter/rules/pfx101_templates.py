"""PFX101's template scanner: a prompt template read as what it renders.

The scanner lives in `prefixkit.linter.analysis.template_inputs` (the taint
analysis reads the templates a module renders with it too); PFX101 and its
tests use it from here.
"""

from __future__ import annotations

from ..analysis.template_inputs import KEYWORDS, Piece, PieceKind, is_jinja, names, scan

__all__ = ["KEYWORDS", "Piece", "PieceKind", "is_jinja", "names", "scan"]
