"""All rules, one per module, in code order (`ALL_RULES`)."""

from __future__ import annotations

from ..rule import Rule
from .pfx000_syntax_error import SyntaxErrorRule
from .pfx001_volatile_value import VolatileValueInCachedSegment
from .pfx002_request_identity import RequestIdentityInCachedSegment
from .pfx003_unsorted_json import UnsortedJsonInCachedSegment
from .pfx004_set_order import SetOrderInCachedSegment
from .pfx005_dynamic_before_static import DynamicBeforeStatic
from .pfx006_too_many_markers import TooManyCacheMarkers
from .pfx007_ttl_order import LongTtlAfterShortTtl
from .pfx008_marker_on_changing_block import MarkerOnChangingBlock
from .pfx101_prompt_placeholder import VolatilePlaceholderInPrompt
from .pfx102_prompt_drift import PromptDriftedFromLock

__all__ = ["ALL_RULES", "SYNTAX_ERROR_CODE", "rule_for_code"]

ALL_RULES: tuple[type[Rule], ...] = (
    SyntaxErrorRule,
    VolatileValueInCachedSegment,
    RequestIdentityInCachedSegment,
    UnsortedJsonInCachedSegment,
    SetOrderInCachedSegment,
    DynamicBeforeStatic,
    TooManyCacheMarkers,
    LongTtlAfterShortTtl,
    MarkerOnChangingBlock,
    VolatilePlaceholderInPrompt,
    PromptDriftedFromLock,
)
SYNTAX_ERROR_CODE = SyntaxErrorRule.code


def rule_for_code(code: str) -> type[Rule]:
    """The rule class with this code (KeyError when there is none)."""
    for rule in ALL_RULES:
        if rule.code == code:
            return rule
    raise KeyError(code)
