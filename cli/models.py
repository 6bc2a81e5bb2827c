"""List the models prefixkit knows: minimum cacheable length, prices, cache multipliers.

    prefixkit models                         # a table of every model in sdk/data/models.json
    prefixkit models --provider anthropic    # one provider's
    prefixkit models --format json           # every fact, with its source and the date read

Prices are USD per million tokens ("-" when not known: costs are then reported
in input-token units, and `price_note` in the JSON says why). `read`/`write`
are the cache read and write multipliers of the input price; a `*` marks a
fact seen only in secondary sources (listed under `unverified`). A model that
is not listed gets an `UnknownModelWarning` from the renderers.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from prefixkit.sdk import ModelInfo, known_models

__all__ = ["configure", "model_record", "models_table", "run"]

_COLUMNS = ("provider", "model", "min tokens", "input", "output", "read", "write", "read on")


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the `prefixkit models` arguments."""
    parser.add_argument(
        "--provider",
        choices=("anthropic", "openai"),
        default=None,
        help="only this provider's models (default: both)",
    )
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="a table for people (default), or JSON with every fact and its source",
    )


def model_record(info: ModelInfo) -> dict[str, Any]:
    """One model's facts as plain JSON values."""
    pricing = info.pricing
    long = pricing.long_prompt
    return {
        "provider": info.provider,
        "model": info.name,
        "min_cache_tokens": info.min_cache_tokens,
        "input_usd_per_mtok": pricing.input_usd_per_mtok,
        "output_usd_per_mtok": pricing.output_usd_per_mtok,
        "cache_read_multiplier": pricing.cache_read_multiplier,
        "cache_write_multipliers": dict(pricing.cache_write_multipliers),
        "long_prompt": None
        if long is None
        else {
            "above_tokens": long.above_tokens,
            "input_usd_per_mtok": long.input_usd_per_mtok,
            "output_usd_per_mtok": long.output_usd_per_mtok,
        },
        "explicit_breakpoints": info.explicit_breakpoints,
        "encoding": info.encoding,
        "unverified": list(info.unverified),
        "price_note": info.price_note,
        "source": info.source,
        "read_on": info.read_on,
    }


def _cell(info: ModelInfo, fact: str, value: object, unit: str = "") -> str:
    text = "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
    return text + (unit if value is not None else "") + ("*" if fact in info.unverified else "")


def _row(info: ModelInfo) -> tuple[str, ...]:
    pricing = info.pricing
    writes = "/".join(
        f"{ttl} {multiplier:g}x" for ttl, multiplier in pricing.cache_write_multipliers.items()
    )
    return (
        info.provider,
        info.name,
        _cell(info, "min_cache_tokens", info.min_cache_tokens),
        _cell(info, "input_usd_per_mtok", pricing.input_usd_per_mtok),
        _cell(info, "output_usd_per_mtok", pricing.output_usd_per_mtok),
        _cell(info, "cache_read_multiplier", pricing.cache_read_multiplier, "x"),
        writes,
        info.read_on or "-",
    )


def models_table(infos: Sequence[ModelInfo]) -> str:
    """An aligned text table of the models, one row each."""
    rows = [_COLUMNS, *(_row(info) for info in infos)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.append("")
    lines.append(
        "USD per million tokens; read/write: multiples of the input price; "
        "* seen only in secondary sources; --format json for sources and notes"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print the models of the data table."""
    infos = known_models(args.provider)
    if args.format == "json":
        print(json.dumps([model_record(info) for info in infos], indent=2))
    else:
        print(models_table(infos))
    return 0
