"""Encoders, projection head, parameter groups and the tiny local models (`mscl.models`)."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
import torchvision
from torch import nn
from transformers import AutoTokenizer

from mscl.models import ENCODER_KINDS, Encoder, LabelWiseLinear, ProjectionHead, build_encoder, count_parameters, parameter_groups
from mscl.models.image import resolve_weights
from mscl.models.plm_icd import LabelWiseAttention, masked_label_attention, to_chunks
from mscl.models import text as text_models
from mscl.models.text import checked_model_path
from mscl.demo.tiny_models import llama_8b_design_config, roberta_base_config
from mscl.demo.tiny_models import main as tiny_main
from mscl.demo.tiny_models import seeded_models

TEXTS = ["the patient was admitted with acute myocardial infarction and chest pain", "fracture of the left femur"]


@pytest.fixture(scope="module")
def tiny(tiny_models: dict[str, Path]) -> dict[str, Path]:
    return tiny_models


def build(spec: dict, num_labels: int = 5, seed: int = 0) -> Encoder:
    torch.manual_seed(seed)
    return build_encoder(spec, num_labels)


def hf_spec(tiny: dict[str, Path], **extra) -> dict:
    return {"kind": "hf", "path": str(tiny["roberta"]), **extra}


def llama_spec(tiny: dict[str, Path], **extra) -> dict:
    return {"kind": "llama_lora", "path": str(tiny["llama"]), **extra}


def plm_spec(tiny: dict[str, Path], **extra) -> dict:
    return {"kind": "plm_icd", "path": str(tiny["roberta"]), "attention_dim": 16, **extra}


def resnet_spec(**extra) -> dict:
    return {"kind": "resnet", "arch": "resnet18", "weights": "none", "small_input": True, **extra}


def images(count: int = 2) -> dict[str, torch.Tensor]:
    return {"images": torch.randn(count, 3, 32, 32, generator=torch.Generator().manual_seed(1))}


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def perturb_lora_b(encoder: Encoder) -> None:
    """LoRA starts with B = 0 (adapters are a no-op); move B as one optimiser step would."""
    with torch.no_grad():
        for name, parameter in encoder.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(2))


# ---------------------------------------------------------------------------------- tiny models


def test_tiny_models_layout_configs_and_tokenizers(tiny: dict[str, Path]) -> None:
    info = json.loads((tiny["roberta"].parent / "info.json").read_text())
    assert 2000 <= info["vocab_size"] <= 4000 and info["seed"] == 0
    roberta = json.loads((tiny["roberta"] / "config.json").read_text())
    assert (roberta["num_hidden_layers"], roberta["hidden_size"], roberta["num_attention_heads"], roberta["intermediate_size"]) == (2, 64, 2, 128)
    assert roberta["max_position_embeddings"] >= 128 + 2
    llama = json.loads((tiny["llama"] / "config.json").read_text())
    assert (llama["num_hidden_layers"], llama["hidden_size"], llama["num_attention_heads"], llama["num_key_value_heads"], llama["intermediate_size"]) == (2, 64, 4, 2, 128)
    tokenizer = AutoTokenizer.from_pretrained(tiny["tokenizer"])
    assert tokenizer.convert_tokens_to_ids(["<s>", "<pad>", "</s>", "<unk>", "<mask>"]) == [0, 1, 2, 3, 4]
    ids = AutoTokenizer.from_pretrained(tiny["roberta"])("the patient was admitted")["input_ids"]
    assert ids[0] == 0 and ids[-1] == 2 and len(ids) == 6  # common words are whole tokens
    llama_tokenizer = AutoTokenizer.from_pretrained(tiny["llama"])
    assert llama_tokenizer.pad_token is None and llama_tokenizer("the patient")["input_ids"] == [0, ids[1], ids[2]]


def test_tiny_models_same_seed_identical_files_other_seed_other_weights(tiny: dict[str, Path], tmp_path: Path) -> None:
    assert tiny_main(["--out", str(tmp_path / "again"), "--seed", "0"]) == 0
    assert digest(tmp_path / "again") == digest(tiny["roberta"].parent)
    vocab = json.loads((tiny["roberta"].parent / "info.json").read_text())["vocab_size"]
    seed0, seed1 = seeded_models(vocab, 0), seeded_models(vocab, 1)
    assert torch.equal(seed0["llama"].embed_tokens.weight, seeded_models(vocab, 0)["llama"].embed_tokens.weight)
    assert not torch.equal(seed0["llama"].embed_tokens.weight, seed1["llama"].embed_tokens.weight)
    assert not torch.equal(seed0["roberta"].embeddings.word_embeddings.weight, seed1["roberta"].embeddings.word_embeddings.weight)


def test_paper_stand_in_configs_keep_the_paper_models_class_width_and_layer_design() -> None:
    """roberta-base's published config (but the vocabulary); Llama-3.1-8B's layer design
    (meta-llama/Llama-3.1-8B config.json) at a CPU's width and depth."""
    roberta = roberta_base_config(3000)
    assert (roberta.num_hidden_layers, roberta.hidden_size, roberta.num_attention_heads, roberta.intermediate_size) == (12, 768, 12, 3072)
    assert (roberta.max_position_embeddings, roberta.type_vocab_size, roberta.layer_norm_eps, roberta.hidden_dropout_prob) == (514, 1, 1e-5, 0.1)
    llama = llama_8b_design_config(3000)
    eight_b = {"hidden": 4096, "heads": 32, "kv_heads": 8, "intermediate": 14336}
    assert llama.num_attention_heads // llama.num_key_value_heads == eight_b["heads"] // eight_b["kv_heads"]  # GQA 4:1
    assert llama.head_dim == eight_b["hidden"] // eight_b["heads"] == 128
    assert llama.intermediate_size / llama.hidden_size == eight_b["intermediate"] / eight_b["hidden"]  # SwiGLU 3.5x
    assert llama.hidden_act == "silu" and llama.rms_norm_eps == 1e-5 and not llama.tie_word_embeddings
    assert llama.rope_parameters["rope_type"] == "llama3" and llama.rope_parameters["rope_theta"] == 500000.0
    assert (llama.hidden_size, llama.num_hidden_layers) == (512, 4)
    models = seeded_models(3000, 0, "paper")
    assert type(models["llama-3.1-8b-design"]).__name__ == "LlamaForCausalLM"  # the real checkpoint's class
    assert type(models["roberta-base"]).__name__ == "RobertaModel"
    with pytest.raises(ValueError, match="unknown model set 'huge'"):
        seeded_models(3000, 0, "huge")


# ---------------------------------------------------------------------------------------- resnet


def test_resnet_small_input_stem_and_output() -> None:
    encoder = build(resnet_spec())
    assert encoder.modality == "image" and encoder.output_dim == 512
    conv1 = encoder.backbone.conv1
    assert conv1.kernel_size == (3, 3) and conv1.stride == (1, 1) and isinstance(encoder.backbone.maxpool, nn.Identity)
    h = encoder(images())
    assert h.shape == (2, 512) and torch.isfinite(h).all()
    standard = build(resnet_spec(small_input=False))
    assert standard.backbone.conv1.kernel_size == (7, 7) and isinstance(standard.backbone.maxpool, nn.MaxPool2d)
    with pytest.raises(TypeError, match="no tokenizer"):
        encoder.tokenize(["text"])


def test_resnet_local_state_dict_round_trip(tmp_path: Path) -> None:
    source = build(resnet_spec(), seed=0).eval()
    own, torchvision_style = tmp_path / "encoder.pt", tmp_path / "torchvision.pt"
    torch.save(source.state_dict(), own)  # keys prefixed "backbone."
    torch.save({**source.backbone.state_dict(), "fc.weight": torch.zeros(10, 512), "fc.bias": torch.zeros(10)}, torchvision_style)
    with torch.no_grad():
        expected = source(images())
        for path in (own, torchvision_style):
            loaded = build(resnet_spec(weights=str(path)), seed=1).eval()  # another seed: weights must come from the file
            assert torch.equal(loaded(images()), expected)
    with pytest.raises(ValueError, match="does not fit resnet18"):
        build(resnet_spec(weights=str(own), small_input=False))


def test_resnet_weights_names_resolve_without_download() -> None:
    assert resolve_weights("resnet50", "IMAGENET1K_V2") is torchvision.models.ResNet50_Weights.IMAGENET1K_V2
    assert resolve_weights("resnet18", "DEFAULT") is torchvision.models.ResNet18_Weights.IMAGENET1K_V1
    assert resolve_weights("resnet50", "none") is None
    with pytest.raises(ValueError, match=r"'weights'.*IMAGENET1K_V3.*IMAGENET1K_V1"):
        build({"kind": "resnet", "arch": "resnet50", "weights": "IMAGENET1K_V3"})


# ------------------------------------------------------------------------------------ hf / views


def test_hf_loads_from_folder_and_pools_first_token_or_mean(tiny: dict[str, Path]) -> None:
    encoder = build(hf_spec(tiny)).eval()
    assert encoder.modality == "text" and encoder.output_dim == 64 and encoder.model.pooler is None
    batch = encoder.tokenize(TEXTS)
    assert set(batch) == {"input_ids", "attention_mask"} and batch["input_ids"][:, 0].tolist() == [0, 0]
    with torch.no_grad():
        h = encoder(batch)
        hidden = encoder.model(**batch).last_hidden_state
    assert h.shape == (2, 64) and h.dtype == torch.float32 and torch.isfinite(h).all()
    assert torch.allclose(h, hidden[:, 0])
    mean_encoder = build(hf_spec(tiny, pooling="mean")).eval()
    with torch.no_grad():
        mean_h = mean_encoder(batch)
        hidden = mean_encoder.model(**batch).last_hidden_state
    short = int(batch["attention_mask"][1].sum())
    assert torch.allclose(mean_h[1], hidden[1, :short].mean(dim=0), atol=1e-6)


@pytest.mark.parametrize("kind", ["hf", "llama_lora"])
def test_two_passes_differ_in_train_mode_and_match_in_eval_mode(tiny: dict[str, Path], kind: str) -> None:
    encoder = build(hf_spec(tiny) if kind == "hf" else llama_spec(tiny, bf16=False))
    perturb_lora_b(encoder)
    batch = encoder.tokenize(TEXTS)
    encoder.train()
    assert not torch.allclose(encoder(batch), encoder(batch))
    encoder.eval()
    with torch.no_grad():
        assert torch.equal(encoder(batch), encoder(batch))


# ---------------------------------------------------------------------------------- llama + LoRA


def test_llama_lora_only_adapters_train(tiny: dict[str, Path]) -> None:
    encoder = build(llama_spec(tiny))
    trainable = [name for name, p in encoder.named_parameters() if p.requires_grad]
    assert trainable and all("lora_A" in name or "lora_B" in name for name in trainable)
    # r * (in + out) per projection: q, o 64 -> 64; k, v 64 -> 32 (2 kv heads x 16); 2 layers.
    assert count_parameters(encoder, trainable_only=True) == 2 * 16 * ((64 + 64) * 2 + (64 + 32) * 2)
    base = encoder.model.get_base_model()
    assert base.embed_tokens.weight.dtype == torch.bfloat16 and base.config.use_cache is False
    assert {p.dtype for p in encoder.parameters() if p.requires_grad} == {torch.float32}  # peft keeps adapters fp32
    assert encoder.tokenizer.pad_token == encoder.tokenizer.eos_token
    h = encoder(encoder.tokenize(TEXTS))
    assert h.shape == (2, 64) and h.dtype == torch.float32 and torch.isfinite(h).all()
    full = build(llama_spec(tiny, bf16=False, lora_r=4, lora_target_modules=["q_proj", "v_proj"]))
    assert full.model.get_base_model().embed_tokens.weight.dtype == torch.float32
    assert count_parameters(full, trainable_only=True) == 2 * 4 * ((64 + 64) + (64 + 32))


@pytest.mark.parametrize("native", [True, False])
def test_llama_bf16_auto_follows_native_bf16_support(tiny: dict[str, Path], native: bool, monkeypatch, capsys) -> None:
    monkeypatch.setattr(text_models, "native_bf16", lambda: native)
    encoder = build(llama_spec(tiny, bf16="auto"))
    expected = torch.bfloat16 if native else torch.float32
    assert encoder.model.get_base_model().embed_tokens.weight.dtype == expected
    assert f"bf16 auto -> {str(expected).removeprefix('torch.')}" in capsys.readouterr().err


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_llama_last_token_pooling_ignores_padding(tiny: dict[str, Path], padding_side: str) -> None:
    encoder = build(llama_spec(tiny, bf16=False)).eval()
    perturb_lora_b(encoder)
    encoder.tokenizer.padding_side = padding_side
    with torch.no_grad():
        together = encoder(encoder.tokenize(TEXTS))
        alone = torch.cat([encoder(encoder.tokenize([text])) for text in TEXTS])
    assert torch.allclose(together, alone, atol=1e-5)


def checkpointing(model) -> bool:
    """Whether activation checkpointing is on, by transformers' name of the moment (5.23 renamed
    `is_gradient_checkpointing`, which warns there; the GPU image's 5.17 has only the old name)."""
    flag = getattr(type(model), "is_activation_checkpointing", None)
    return model.is_activation_checkpointing if flag is not None else model.is_gradient_checkpointing


def test_llama_gradient_checkpointing_toggles_and_lora_gets_gradients(tiny: dict[str, Path]) -> None:
    assert not checkpointing(build(llama_spec(tiny)).model.get_base_model())
    encoder = build(llama_spec(tiny, bf16=False, gradient_checkpointing=True)).train()
    base = encoder.model.get_base_model()
    assert checkpointing(base)
    seen: list[bool] = []
    base.embed_tokens.register_forward_hook(lambda module, args, output: seen.append(output.requires_grad))
    encoder(encoder.tokenize(TEXTS)).pow(2).sum().backward()
    assert seen == [True]  # input grads enabled although the embeddings are frozen
    grads = [p.grad for name, p in encoder.named_parameters() if "layers.0" in name and "lora_A" in name]
    assert grads and all(g is not None for g in grads)


# --------------------------------------------------------------------------------------- PLM-ICD


def test_plm_icd_chunks_a_300_token_document_into_3_chunks(tiny: dict[str, Path]) -> None:
    encoder = build(plm_spec(tiny), num_labels=7).eval()
    document = " ".join(["the"] * 298)  # 298 word tokens + <s> + </s> = 300 tokens
    batch = encoder.tokenize([document, "fracture"])
    assert batch["input_ids"].shape == (2, 384) and batch["attention_mask"].sum(dim=1).tolist() == [300, 3]
    rows, row_mask = to_chunks(batch["input_ids"], batch["attention_mask"], 128)
    assert rows.shape == (6, 128) and row_mask.any(dim=1).tolist() == [True, True, True, True, False, False]
    encoded_rows: list[int] = []
    encoder.model.register_forward_hook(lambda module, args, kwargs, output: encoded_rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True)
    with torch.no_grad():
        h, vectors = encoder(batch), encoder.label_vectors(batch)
    assert encoded_rows == [4, 4]  # the two all-padding chunks are skipped
    assert h.shape == (2, 64) and torch.isfinite(h).all() and vectors.shape == (2, 7, 64)
    truncated = build(plm_spec(tiny, max_length=256)).tokenize([document])
    assert truncated["input_ids"].shape == (1, 256) and truncated["input_ids"][0, -1].item() == 2  # </s> kept


def test_plm_icd_padding_content_does_not_change_label_vectors(tiny: dict[str, Path]) -> None:
    encoder = build(plm_spec(tiny, chunk_size=16, max_length=64), num_labels=3).eval()
    batch = encoder.tokenize(["the patient was admitted with acute myocardial infarction and chest pain " * 3, "fracture"])
    noisy_ids = batch["input_ids"].clone()
    padded = batch["attention_mask"] == 0
    noisy_ids[padded] = torch.randint(5, 3000, (int(padded.sum()),), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        clean = encoder.label_vectors(batch)
        noisy = encoder.label_vectors({**batch, "input_ids": noisy_ids})
        hidden, mask = encoder.token_states(batch)
        attention = encoder.label_attention.attention(hidden, mask)
    assert torch.equal(mask, batch["attention_mask"])
    assert clean.shape == (2, 3, 64) and torch.allclose(clean, noisy, atol=1e-6)
    assert torch.all(attention[padded.unsqueeze(1).expand_as(attention)] == 0)
    assert torch.allclose(attention.sum(dim=-1), torch.ones(2, 3))


def test_masked_label_attention_hand_checked() -> None:
    scores = torch.tensor([[[0.0, math.log(3.0), 5.0]]])  # one document, one label, three tokens
    weights = masked_label_attention(scores, torch.tensor([[1, 1, 0]]))
    assert torch.allclose(weights, torch.tensor([[[0.25, 0.75, 0.0]]]))
    attention = LabelWiseAttention(hidden_dim=2, attention_dim=1, num_labels=2, init_std=0.02)
    output = LabelWiseLinear(num_labels=2, dim=2)
    with torch.no_grad():
        attention.first.weight.fill_(1.0)
        attention.second.weight.copy_(torch.tensor([[0.0], [100.0]]))  # label 0: uniform; label 1: peaked
        output.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
        output.bias.copy_(torch.tensor([0.5, -1.0]))
    hidden = torch.tensor([[[1.0, 0.0], [3.0, 2.0], [9.0, 9.0]]])
    with torch.no_grad():
        vectors = attention(hidden, torch.tensor([[1, 1, 0]]))
    assert torch.allclose(vectors[0, 0], torch.tensor([2.0, 1.0]))  # mean of the two real tokens
    assert torch.allclose(vectors[0, 1], torch.tensor([3.0, 2.0]), atol=1e-4)  # the larger tanh score wins
    assert torch.allclose(output(vectors), torch.tensor([[2.5, 3.0]]), atol=1e-3)  # PLM-ICD's <W3_l, V_l> + b_l


def test_label_attention_without_gradients_goes_by_label_blocks_and_gives_the_same_vectors(monkeypatch) -> None:
    """Under no_grad V is made LABEL_BLOCK labels at a time (the softmax runs over tokens, label
    by label): the same V as the whole [B, L, T] attention, padded tokens masked, a last block
    shorter than the others."""
    from mscl.models import plm_icd

    torch.manual_seed(0)
    attention = LabelWiseAttention(hidden_dim=6, attention_dim=4, num_labels=11, init_std=0.5)
    hidden = torch.randn(3, 9, 6)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 5:] = 0
    whole = attention(hidden, mask).detach()  # with gradients: one block
    monkeypatch.setattr(plm_icd, "LABEL_BLOCK", 4)  # blocks of 4, 4 and 3 labels
    with torch.no_grad():
        blocked = attention(hidden, mask)
    torch.testing.assert_close(blocked, whole, rtol=1e-6, atol=1e-7)


def test_label_wise_linear_equals_a_loop_over_labels() -> None:
    torch.manual_seed(0)
    output = LabelWiseLinear(num_labels=7, dim=5)
    assert output.weight.shape == (7, 5) and output.bias.shape == (7,)
    assert output.weight.abs().max() <= 5**-0.5 and output.bias.abs().max() <= 5**-0.5  # nn.Linear(5, 1)'s draw
    vectors = torch.randn(4, 7, 5)
    with torch.no_grad():
        naive = torch.stack([vectors[:, label] @ output.weight[label] + output.bias[label] for label in range(7)], dim=1)
        torch.testing.assert_close(output(vectors), naive)
    # Label l's logit reads only V_l: changing another label's vector leaves it alone.
    changed = vectors.clone()
    changed[:, 3] += 10.0
    with torch.no_grad():
        moved = (output(changed) - output(vectors)).abs().amax(dim=0)
    assert moved[3] > 0 and torch.all(moved[torch.arange(7) != 3] == 0)


# ------------------------------------------------------------------------ head and param groups


def test_projection_head_unit_norm_and_dims() -> None:
    head = ProjectionHead(64)
    z = head(torch.randn(5, 64))
    assert z.shape == (5, 256) and torch.allclose(z.norm(dim=-1), torch.ones(5))
    assert head.layers[0].out_features == 64 and isinstance(head.layers[1], nn.ReLU)
    assert ProjectionHead(64, out_dim=32, hidden_dim=16)(torch.randn(3, 64)).shape == (3, 32)


class LlamaStyleRMSNorm(nn.Module):
    """Stands in for Hugging Face's own norm classes, which do not subclass nn.RMSNorm."""

    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))


def test_parameter_groups_exempt_biases_and_norms(tiny: dict[str, Path]) -> None:
    model = nn.ModuleDict(
        {"linear": nn.Linear(4, 4), "ln": nn.LayerNorm(4), "bn": nn.BatchNorm1d(4), "rms": LlamaStyleRMSNorm(4), "frozen": nn.Linear(4, 2)}
    )
    model["frozen"].requires_grad_(False)
    decay, no_decay = parameter_groups(model, weight_decay=0.01)
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert [id(p) for p in decay["params"]] == [id(model["linear"].weight)]
    expected = {model["linear"].bias, model["ln"].weight, model["ln"].bias, model["bn"].weight, model["bn"].bias, model["rms"].weight}
    assert {id(p) for p in no_decay["params"]} == {id(p) for p in expected}
    encoder = build(hf_spec(tiny))
    groups = parameter_groups(encoder, 0.01)
    exempt = {id(p) for p in groups[1]["params"]}
    assert all(id(p) in exempt for n, p in encoder.named_parameters() if "LayerNorm" in n or n.endswith("bias"))
    assert sum(p.numel() for g in groups for p in g["params"]) == count_parameters(encoder, trainable_only=True)


# ----------------------------------------------------------------------------------- bad specs


def test_hub_names_pass_through_and_local_paths_are_checked(tiny: dict[str, Path], tmp_path: Path) -> None:
    for name in ("roberta-base", "meta-llama/Llama-3.1-8B"):
        assert checked_model_path("hf", {"path": name}) == name
    for missing in ("./no-such-model", str(tmp_path / "absent"), "models/tiny/absent"):
        with pytest.raises(ValueError, match="'path'.*not found"):
            checked_model_path("hf", {"path": missing})
    no_weights = tmp_path / "no_weights"
    no_weights.mkdir()
    shutil.copy(tiny["roberta"] / "config.json", no_weights)
    with pytest.raises(ValueError, match="no weights file"):
        build({"kind": "hf", "path": str(no_weights)})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "bert"}, "encoder kind 'bert', which is neither built in nor registered"),
        ({"arch": "resnet18"}, "encoder kind None, which is neither built in nor registered"),
        ({"kind": "resnet", "arch": "resnet18"}, "'weights': is missing"),
        ({"kind": "resnet", "arch": "vgg16", "weights": "none"}, "'arch': unknown ResNet"),
        ({"kind": "resnet", "arch": "resnet18", "weights": "/no/such/file.pt"}, "'weights': file"),
        ({"kind": "resnet", "arch": "resnet18", "weights": "none", "small_input": "yes"}, "'small_input': must be true or false"),
        ({"kind": "hf"}, "'path': is missing"),
        ({"kind": "hf", "path": "TINY/roberta", "pooling": "max"}, "'pooling': unknown pooling"),
        ({"kind": "hf", "path": "TINY/roberta", "max_length": 600}, "'max_length': 600 tokens exceed the 512"),
        ({"kind": "hf", "path": "TINY/roberta", "dropout": 0.2}, "'dropout': is not a known key"),
        ({"kind": "llama_lora", "path": "TINY/llama", "lora_r": 0}, "'lora_r': must be a positive integer"),
        ({"kind": "llama_lora", "path": "TINY/llama", "lora_dropout": 1.5}, "'lora_dropout': must be a number in"),
        ({"kind": "llama_lora", "path": "TINY/llama", "bf16": "true"}, "'bf16': must be true, false or auto"),
        ({"kind": "llama_lora", "path": "TINY/llama", "lora_target_modules": ["nope_proj"]}, "'lora_target_modules'"),
        ({"kind": "plm_icd", "path": "TINY/roberta", "chunk_size": 600, "max_length": 3000}, "'chunk_size': 600 tokens exceed"),
        ({"kind": "plm_icd", "path": "TINY/roberta", "chunk_size": 128, "max_length": 200}, "'max_length': 200 is not a multiple of chunk_size 128"),
    ],
)
def test_bad_specs_raise_clear_errors(tiny: dict[str, Path], spec: dict, message: str) -> None:
    if isinstance(spec.get("path"), str):
        spec = {**spec, "path": spec["path"].replace("TINY", str(tiny["roberta"].parent))}
    with pytest.raises(ValueError, match=message) as caught:
        build_encoder(spec, num_labels=3)
    assert "Fix:" in str(caught.value)


def test_encoder_kinds_and_num_labels_checked() -> None:
    assert ENCODER_KINDS == ("resnet", "torchvision", "cifar_resnet", "hf", "llama_lora", "plm_icd", "mlp")
    with pytest.raises(ValueError, match="num_labels"):
        build_encoder(resnet_spec(), num_labels=0)
