"""The `torchvision` encoder kind: any torchvision classifier, its final Linear layer removed.

h is checked against the torchvision model itself: given the encoder's weights, the full
classifier's final Linear layer (named here by hand, per arch) receives exactly h. The archs cover
the shapes of torchvision's classifier heads: a plain `fc` (resnet18), an MLP head whose last
layer is `classifier.3` (mobilenet_v3_small), `classifier.1` after dropout (efficientnet_b0), a
vision transformer's `heads.head` (vit_b_32 at its own architecture, with `image_size: 32` so one
patch per image: its 88M parameters take about 1.5 s to initialise, the slowest case) and a model
with auxiliary classifiers (googlenet; `init_weights: false` skips its slow scipy initialisation).
Inputs are 32-pixel images, batch 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torchvision
from torch import nn

from mscl.models import ENCODER_MODALITY, build_encoder
from mscl.train.spec import RunSpec

# arch -> (builder options, name of the final Linear layer in torchvision's model, its in_features)
ARCHS = {
    "resnet18": ({}, "fc", 512),
    "mobilenet_v3_small": ({}, "classifier.3", 1024),
    "efficientnet_b0": ({}, "classifier.1", 1280),
    "vit_b_32": ({"image_size": 32}, "heads.head", 768),
    "googlenet": ({"init_weights": False}, "fc", 1024),
}
IMAGES = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))


def spec(arch: str, **extra) -> dict:
    return {"kind": "torchvision", "arch": arch, "options": ARCHS[arch][0], **extra}


def seeded(build, seed: int = 0):
    torch.manual_seed(seed)
    return build()


def final_layer_input(model: nn.Module, layer: str, images: torch.Tensor) -> torch.Tensor:
    """What torchvision's own model feeds its final Linear layer (eval mode)."""
    seen = []
    handle = model.get_submodule(layer).register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    with torch.no_grad():
        model.eval()(images)
    handle.remove()
    return seen[0]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread: on batches of two 32-pixel images, a second thread only adds waiting
    (on the loaded 2-core machine the forwards took 10x longer with two)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("arch", ARCHS)
def test_h_is_the_input_of_the_torchvision_models_final_linear_layer(arch: str) -> None:
    options, layer, width = ARCHS[arch]
    encoder = build_encoder(spec(arch), num_labels=5).eval()
    assert encoder.output_dim == width and encoder.modality == "image"
    assert not any(isinstance(module, nn.Linear) and module.out_features == 1000 for module in encoder.modules())  # no classifier left
    # torchvision's own model (built on the meta device: no second initialisation) with the encoder's weights and a final layer.
    with torch.device("meta"):
        reference = torchvision.models.get_model(arch, **options)
    final = reference.get_submodule(layer)
    weights = {**encoder.backbone.state_dict(), f"{layer}.weight": torch.zeros(final.weight.shape), f"{layer}.bias": torch.zeros(final.bias.shape)}
    loaded = reference.load_state_dict(weights, strict=False, assign=True)
    assert not loaded.unexpected_keys and all(key.startswith("aux") for key in loaded.missing_keys)  # googlenet's unused auxiliary classifiers
    with torch.no_grad():
        torch.testing.assert_close(encoder({"images": IMAGES}), final_layer_input(reference, layer, IMAGES))
    encoder.train()  # training mode gives one tensor too (googlenet's auxiliary classifiers are gone)
    assert encoder({"images": IMAGES}).shape == (2, width)


def test_weights_load_from_the_full_classifier_the_headless_model_or_the_encoder(tmp_path: Path) -> None:
    full = seeded(lambda: torchvision.models.get_model("mobilenet_v3_small"), seed=7).eval()
    expected = final_layer_input(full, "classifier.3", IMAGES)
    torch.save(full.state_dict(), tmp_path / "full.pt")
    headless = {key: value for key, value in full.state_dict().items() if not key.startswith("classifier.3.")}
    torch.save(headless, tmp_path / "headless.pt")
    for name in ("full.pt", "headless.pt"):
        encoder = seeded(lambda: build_encoder(spec("mobilenet_v3_small", weights=str(tmp_path / name)), 5), seed=1).eval()  # another seed: weights come from the file
        with torch.no_grad():
            torch.testing.assert_close(encoder({"images": IMAGES}), expected)
    torch.save(encoder.state_dict(), tmp_path / "own.pt")  # `backbone.`-prefixed keys
    again = seeded(lambda: build_encoder(spec("mobilenet_v3_small", weights=str(tmp_path / "own.pt")), 5), seed=2).eval()
    with torch.no_grad():
        torch.testing.assert_close(again({"images": IMAGES}), expected)

    # googlenet's full state dict holds its auxiliary classifiers' keys: dropped with them.
    googlenet = seeded(lambda: torchvision.models.get_model("googlenet", init_weights=False), seed=3).eval()
    assert any(key.startswith("aux1.") for key in googlenet.state_dict())
    torch.save(googlenet.state_dict(), tmp_path / "googlenet.pt")
    encoder = build_encoder(spec("googlenet", weights=str(tmp_path / "googlenet.pt")), 5).eval()
    with torch.no_grad():
        torch.testing.assert_close(encoder({"images": IMAGES}), final_layer_input(googlenet, "fc", IMAGES))


def test_a_torchvision_weights_name_loads_from_the_hub_cache_without_downloading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
    cached = seeded(lambda: torchvision.models.resnet18(), seed=5).eval()
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # torch.hub's cache: $TORCH_HOME/hub/checkpoints/<file of the url>
    (tmp_path / "hub" / "checkpoints").mkdir(parents=True)
    torch.save(cached.state_dict(), tmp_path / "hub" / "checkpoints" / Path(weights.url).name)
    encoder = build_encoder({"kind": "torchvision", "arch": "resnet18", "weights": "IMAGENET1K_V1"}, 5).eval()
    with torch.no_grad():
        torch.testing.assert_close(encoder({"images": IMAGES}), final_layer_input(cached, "fc", IMAGES))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"arch": "resnet_18"}, "'arch': 'resnet_18' is not a classification model of torchvision.models. Fix: use one of"),
        ({"arch": "squeezenet1_1"}, "final layer 'classifier.1' is a Conv2d, not a Linear classification layer"),
        ({"weights": "/no/such/file.pt"}, "'weights': file '/no/such/file.pt' not found"),
        ({"weights": "IMAGENET9K"}, "'weights': 'IMAGENET9K' is not a torchvision weights name for resnet18"),
        ({"options": {"no_such_option": 1}}, "'options': torchvision's resnet18 builder refused"),
        ({"options": {"weights": None}}, "'options': holds 'weights'"),
        ({"options": [1]}, "'options': must be a mapping"),
        ({"small_input": True}, "'small_input': is not a known key"),
    ],
)
def test_spec_errors_name_the_key_and_the_fix(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match="Fix: ") as error:
        build_encoder({"kind": "torchvision", "arch": "resnet18", **changes}, 5)
    assert message in str(error.value)
    if changes.get("arch") == "squeezenet1_1":
        assert "resnet18, mobilenet_v3_small, efficientnet_b0" in str(error.value)  # alternatives named


def test_weights_of_another_model_or_not_a_state_dict_are_refused_naming_the_file(tmp_path: Path) -> None:
    torch.save(torchvision.models.get_model("shufflenet_v2_x0_5").state_dict(), tmp_path / "other.pt")
    with pytest.raises(ValueError, match=r"'.*other\.pt' does not fit torchvision's resnet18: keys missing conv1\.weight, bn1\.weight, bn1\.bias and \d+ more; unexpected .*Fix: give a state dict of torchvision\.models\.resnet18"):
        build_encoder({"kind": "torchvision", "arch": "resnet18", "weights": str(tmp_path / "other.pt")}, 5)
    torch.save({"model": torch.zeros(1), "epoch": 3, "optimizer": {}}, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match=r"checkpoint\.pt' holds a dict, not a state dict of tensors"):
        build_encoder({"kind": "torchvision", "arch": "resnet18", "weights": str(tmp_path / "checkpoint.pt")}, 5)


def test_torchvision_runs_train_with_the_image_settings_of_resnet() -> None:
    assert ENCODER_MODALITY["torchvision"] == ENCODER_MODALITY["resnet"] == "image"
    run = {"dataset": "coco", "encoder_name": "e", "loss": "simdissim", "batch_size": 64, "pretrain": {"image_size": 64}}
    torchvision_run = RunSpec.from_mapping({**run, "encoder": {"kind": "torchvision", "arch": "efficientnet_b0"}})
    resnet_run = RunSpec.from_mapping({**run, "encoder": {"kind": "resnet", "arch": "resnet50", "weights": "none"}})
    assert torchvision_run.modality == "image" and torchvision_run.pretrain == resnet_run.pretrain  # SGD, lr 0.05 * 64 / 256, image size
    assert (torchvision_run.pretrain.optimizer, torchvision_run.pretrain.lr, torchvision_run.pretrain.image_size) == ("sgd", 0.0125, 64)
