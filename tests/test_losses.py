"""The loss family against naive loops written from the paper's equations (GUIDE §2).

The reference implementations here loop over anchors, positives and labels with Python sets;
they share no code with `mscl.losses` beyond `make_loss`.
"""

from __future__ import annotations

import math
import zlib

import pytest
import torch
import torch.nn.functional as F

import mscl.losses
from mscl.bench.losses import long_tailed_labels
from mscl.bench.memory import peak_rss_bytes, reset_peak_rss
from mscl.losses import LOSS_NAMES, LOSSES, csr_labels, index_labels, make_loss, pair_weights

TAU = 0.07


# ------------------------------------------------------------------------------ naive loops


def anchors_of(features: torch.Tensor, labels: torch.Tensor):
    """View-major anchors: anchor v*B + b is view v of sample b; its label set is sample b's."""
    batch, views, _ = features.shape
    z = [features[b, v] for v in range(views) for b in range(batch)]
    sets = [frozenset(torch.nonzero(labels[b]).flatten().tolist()) for v in range(views) for b in range(batch)]
    return z, sets


def log_prob(z, i, p, tau):
    denominator = sum(torch.exp(z[i] @ z[a] / tau) for a in range(len(z)) if a != i)
    return z[i] @ z[p] / tau - torch.log(denominator)


def naive_pair_loss(features, labels, weight, tau=TAU, literal=False):
    z, sets = anchors_of(features, labels)
    per_anchor = []
    for i in range(len(z)):
        positives = [(p, weight(sets[i], sets[p])) for p in range(len(z)) if p != i]
        positives = [(p, w) for p, w in positives if w > 0]
        if not positives:
            continue
        if literal:  # Eq. 12 as printed: the weight inside the log
            terms = [torch.log(w * torch.exp(log_prob(z, i, p, tau))) for p, w in positives]
        else:
            terms = [w * log_prob(z, i, p, tau) for p, w in positives]
        per_anchor.append(-sum(terms) / len(positives))
    if not per_anchor:
        return features.sum() * 0
    return sum(per_anchor) / len(per_anchor)


def w_all(s, t):
    return 1.0 if s == t and s else 0.0


def w_any(s, t):
    return 1.0 if s & t else 0.0


def w_jaccard(s, t):
    return len(s & t) / len(s | t) if s & t else 0.0


def w_sim(s, t):
    return len(s & t) / len(s) if s & t else 0.0


def w_dissim(s, t):
    return 1.0 / (1 + len(t - s)) if s & t else 0.0


def w_simdissim(s, t):
    return w_sim(s, t) * (1.0 / (1 + len(t - s)))


PAIR_WEIGHTS = {"all": w_all, "any": w_any, "jaccard": w_jaccard, "sim": w_sim, "dissim": w_dissim, "simdissim": w_simdissim}


def naive_mulsupcon(features, labels, tau=TAU):
    z, sets = anchors_of(features, labels)
    total = features.sum() * 0
    for i in range(len(z)):
        for c in sets[i]:
            positives = [p for p in range(len(z)) if p != i and c in sets[p]]
            if positives:
                total = total - sum(log_prob(z, i, p, tau) for p in positives) / len(positives)
    label_count = sum(len(s) for s in sets)
    return total / label_count if label_count else features.sum() * 0


def naive_prototype_loss(features, labels, prototypes, anchor_loss):
    """Mean of `anchor_loss(z, sets, normalised prototypes, i)` over the anchors with labels."""
    z, sets = anchors_of(features, labels)
    protos = F.normalize(prototypes, dim=1)
    per_anchor = [anchor_loss(z, sets, protos, i) for i in range(len(z)) if sets[i]]
    return sum(per_anchor) / len(per_anchor) if per_anchor else features.sum() * 0


def naive_proto(features, labels, prototypes, tau=TAU):
    def anchor_loss(z, sets, protos, i):
        logits = [z[i] @ protos[c] / tau for c in range(len(protos))]
        lse = torch.logsumexp(torch.stack(logits), 0)
        return sum(lse - logits[c] for c in sets[i]) / len(sets[i])

    return naive_prototype_loss(features, labels, prototypes, anchor_loss)


def naive_msc(features, labels, prototypes, tau=TAU, alpha=1.0, beta=0.1):
    def anchor_loss(z, sets, protos, i):
        sample_mass = sum(torch.exp(z[i] @ z[k] / tau) for k in range(len(z)) if k != i)
        proto_mass = sum(torch.exp(z[i] @ protos[c] / tau) for c in range(len(protos)))
        log_denominator = torch.log(beta * sample_mass + proto_mass)
        label_terms = []
        for c in sets[i]:
            positives = [(z[i] @ protos[c] / tau, 1.0)]
            positives += [(z[i] @ z[k] / tau, alpha / len(sets[i] | sets[k])) for k in range(len(z)) if k != i and c in sets[k]]
            mass = sum(w for _, w in positives)
            label_terms.append(-sum((w / mass) * (score - log_denominator) for score, w in positives))
        return sum(label_terms) / len(sets[i])

    return naive_prototype_loss(features, labels, prototypes, anchor_loss)


def naive(name, features, labels, loss_module):
    if name in PAIR_WEIGHTS:
        return naive_pair_loss(features, labels, PAIR_WEIGHTS[name])
    if name == "eq12":  # the paper's Eq. 12 as printed: Sim-Dissim's weight inside the log
        return naive_pair_loss(features, labels, w_simdissim, literal=True)
    if name == "mulsupcon":
        return naive_mulsupcon(features, labels)
    if name == "proto":
        return naive_proto(features, labels, loss_module.prototypes)
    return naive_msc(features, labels, loss_module.prototypes)


# ------------------------------------------------------------------------------ batches


def random_batch(batch, views, num_labels, dtype, seed, empty_rows=(), duplicate=None, dim=6):
    generator = torch.Generator().manual_seed(seed)
    features = F.normalize(torch.randn(batch, views, dim, generator=generator, dtype=dtype), dim=-1)
    labels = (torch.rand(batch, num_labels, generator=generator) < 0.35).to(dtype)
    for row in empty_rows:
        labels[row] = 0
    if duplicate is not None:
        labels[duplicate[1]] = labels[duplicate[0]]
    return features.requires_grad_(), labels


BATCHES = {
    "mixed_v2": dict(batch=7, views=2, num_labels=5, empty_rows=(0,), duplicate=(1, 2)),
    "views3": dict(batch=5, views=3, num_labels=4, empty_rows=(3,), duplicate=(0, 4)),
    "views1": dict(batch=6, views=1, num_labels=4, empty_rows=(5,), duplicate=(1, 3)),
    "single_sample_v2": dict(batch=1, views=2, num_labels=3),
    "single_sample_v1": dict(batch=1, views=1, num_labels=3),
    "all_empty": dict(batch=4, views=2, num_labels=3, empty_rows=(0, 1, 2, 3)),
}


def build(name, num_labels, dim, dtype):
    options = {"num_labels": num_labels, "dim": dim} if name in ("proto", "msc") else {}
    loss = make_loss(name, **options)
    return loss.to(dtype)


def naive_case(name, case, dtype, seed_key):
    """(features, labels, loss module) of one BATCHES case, seeded by `seed_key`."""
    spec = dict(BATCHES[case])
    features, labels = random_batch(dtype=dtype, seed=zlib.crc32(seed_key.encode()) % 1000, **spec)
    if case == "single_sample_v2":
        labels[0, 1] = 1  # a non-empty set: the other view is its only positive
    return features, labels, build(name, spec["num_labels"], features.shape[-1], dtype)


def assert_same_gradient(got, want, features):
    """float64 gradients of the loss and of the naive loop agree (when the loop has one)."""
    if want.requires_grad:
        grad_got = torch.autograd.grad(got, features, retain_graph=True)[0]
        grad_want = torch.autograd.grad(want, features)[0]
        torch.testing.assert_close(grad_got, grad_want, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("case", sorted(BATCHES))
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_loss_equals_naive_loop(name, case, dtype):
    features, labels, loss_module = naive_case(name, case, dtype, f"{name}/{case}")
    got = loss_module(features, labels)
    want = naive(name, features, labels, loss_module)
    tolerance = dict(rtol=1e-9, atol=1e-9) if dtype == torch.float64 else dict(rtol=2e-5, atol=2e-5)
    assert got.dtype == dtype and got.dim() == 0
    torch.testing.assert_close(got, torch.as_tensor(want, dtype=dtype), **tolerance)
    if dtype == torch.float64:
        assert_same_gradient(got, want, features)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_bool_float_and_sparse_labels_agree(name):
    features, labels = random_batch(6, 2, 5, torch.float64, seed=3, empty_rows=(4,))
    loss_module = build(name, 5, 6, torch.float64)
    want = loss_module(features, labels)
    for variant in (labels.bool(), labels.to_sparse(), labels.to_sparse_csr(), labels.float().to_sparse()):
        torch.testing.assert_close(loss_module(features, variant), want)


# ------------------------------------------------------------------------------ label forms


def value_and_grad(loss_module, features, labels):
    loss = loss_module(features, labels)
    return loss.detach(), torch.autograd.grad(loss, features)[0]


def label_ids(labels):
    """Each sample's label ids, reversed and with the first one repeated: order and duplicates
    must not matter to `csr_labels`."""
    ids = [torch.nonzero(row).flatten().tolist()[::-1] for row in labels]
    return [sample + sample[:1] for sample in ids]


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("case", sorted(BATCHES))
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_csr_labels_from_label_ids_equal_the_naive_loop(name, case):
    """The collate-function form: `csr_labels` gives the naive loop's value and gradient."""
    features, labels, loss_module = naive_case(name, case, torch.float64, f"csr/{name}/{case}")
    got = loss_module(features, csr_labels(label_ids(labels), labels.shape[1]))
    want = naive(name, features, labels, loss_module)
    torch.testing.assert_close(got, torch.as_tensor(want, dtype=torch.float64), rtol=1e-9, atol=1e-9)
    assert_same_gradient(got, want, features)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_every_label_form_gives_the_same_value_and_gradient(name):
    """Long-tailed labels (some held by one sample only, an empty set, a column holding only
    -0.0) in every dtype and layout the losses accept."""
    num_labels = 60
    labels = long_tailed_labels(10, num_labels, 4, seed=8).double()
    labels[6] = 0
    labels[:, 59] = 0
    labels[2, 59] = -0.0
    generator = torch.Generator().manual_seed(8)
    features = F.normalize(torch.randn(10, 2, 6, dtype=torch.float64, generator=generator), dim=-1).requires_grad_()
    loss_module = build(name, num_labels, 6, torch.float64)
    want_value, want_grad = value_and_grad(loss_module, features, labels)
    forms = {
        "float32": labels.float(),
        "float16": labels.half(),
        "bfloat16": labels.bfloat16(),
        "bool": labels.bool(),
        "uint8": labels.to(torch.uint8),
        "non-contiguous": labels.T.contiguous().T,
        "coo": labels.to_sparse(),
        "csr": labels.to_sparse_csr(),
        "csr_labels": csr_labels(label_ids(labels), num_labels),
    }
    for form, variant in forms.items():
        value, grad = value_and_grad(loss_module, features, variant)
        torch.testing.assert_close(value, want_value, rtol=1e-12, atol=1e-12, msg=form)
        torch.testing.assert_close(grad, want_grad, rtol=1e-12, atol=1e-12, msg=form)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("name", ["any", "mulsupcon", "simdissim"])
def test_mimic_size_label_forms_agree(name):
    """L = 25,230 with 16 labels per sample: dense float32, dense bool and CSR agree."""
    labels = long_tailed_labels(64, 25_230, 16, seed=1)
    features = F.normalize(torch.randn(64, 2, 32, generator=torch.Generator().manual_seed(1)), dim=-1).requires_grad_()
    loss_module = make_loss(name)
    want_value, want_grad = value_and_grad(loss_module, features, labels)
    for variant in (labels.bool(), labels.to_sparse_csr(), csr_labels(label_ids(labels), 25_230)):
        value, grad = value_and_grad(loss_module, features, variant)
        torch.testing.assert_close(value, want_value)
        torch.testing.assert_close(grad, want_grad)


@pytest.mark.parametrize("views", [1, 2, 3])
@pytest.mark.parametrize("name", ["all", "any", "jaccard", "sim", "dissim", "simdissim", "mulsupcon"])
def test_pair_weights_equal_the_set_definitions_on_long_tailed_labels(name, views):
    """Labels shared by many, by two and by one sample only (the product covers the shared
    ones, the diagonal the rest): every weight equals its definition on Python sets."""
    labels = long_tailed_labels(40, 300, 5, seed=views).double()
    labels[7] = 0
    weights = pair_weights(name, labels, views=views)
    sets = [frozenset(torch.nonzero(row).flatten().tolist()) for row in labels]
    holders = {c: sum(c in s for s in sets) for c in range(300)}
    for b, s in enumerate(sets):
        for b2, t in enumerate(sets):
            if name == "mulsupcon":
                # n_c(i) = views * holders - 1 (the anchor itself excluded).
                want = sum(1 / (views * holders[c] - 1) for c in s & t if views * holders[c] > 1)
            else:
                want = PAIR_WEIGHTS[name](s, t)
            assert weights[b, b2].item() == pytest.approx(want, rel=1e-12, abs=1e-15), (b, b2)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("rows_per_slice", [1, 3, 10])
def test_dense_labels_read_in_slices_give_the_same_batch(monkeypatch, rows_per_slice):
    """A dense matrix is read in slices of rows (sized for the CPU cache): any slicing gives
    the same label index as the sparse path, and the same loss."""
    labels = long_tailed_labels(10, 60, 4, seed=5)
    labels[4] = 0
    monkeypatch.setattr(mscl.losses, "DENSE_SLICE_BYTES", rows_per_slice * 60 * labels.element_size())
    dense, sparse = index_labels(labels), index_labels(labels.to_sparse_csr())
    for field in ("rows", "columns", "present", "counts"):
        assert torch.equal(getattr(dense, field), getattr(sparse, field)), field
    features = F.normalize(torch.randn(10, 2, 6, generator=torch.Generator().manual_seed(5)), dim=-1)
    loss = make_loss("mulsupcon")
    torch.testing.assert_close(loss(features, labels), loss(features, labels.to_sparse_csr()))


@pytest.mark.parametrize("rows_per_slice", [1, 4])
@pytest.mark.parametrize("flaw", ["half_on_a_lone_label", "cancelling_entries", "nan"])
def test_every_dense_column_is_checked(monkeypatch, flaw, rows_per_slice):
    """Only the columns a batch uses are read, yet no non-0/1 entry slips through."""
    monkeypatch.setattr(mscl.losses, "DENSE_SLICE_BYTES", rows_per_slice * 6 * 4)
    features = F.normalize(torch.randn(4, 2, 8, generator=torch.Generator().manual_seed(0)), dim=-1)
    labels = torch.zeros(4, 6)
    labels[:, 0] = 1
    if flaw == "half_on_a_lone_label":
        labels[2, 5] = 0.5
    elif flaw == "cancelling_entries":
        labels[1, 3], labels[2, 3] = 1.0, -1.0  # the column sums to 0
    else:
        labels[3, 4] = float("nan")
    with pytest.raises(ValueError, match="multi-hot"):
        make_loss("simdissim")(features, labels)


def test_explicitly_stored_zeros_are_not_labels():
    features, labels = random_batch(5, 2, 4, torch.float64, seed=9)
    present = labels != 0
    indices = torch.cat([torch.nonzero(present), torch.nonzero(~present)[:2]]).T  # + two stored zeros
    values = torch.cat([torch.ones(int(present.sum()), dtype=torch.float64), torch.zeros(2, dtype=torch.float64)])
    stored = torch.sparse_coo_tensor(indices, values, labels.shape, check_invariants=True).coalesce()
    assert stored._nnz() == int(present.sum()) + 2
    loss = make_loss("simdissim")
    torch.testing.assert_close(loss(features, stored), loss(features, labels))


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_csr_labels_reject_ids_outside_the_vocabulary():
    with pytest.raises(ValueError, match=r"label ids must lie in \[0, 5\)"):
        csr_labels([[1, 5]], 5)
    with pytest.raises(ValueError, match="label ids"):
        csr_labels([[-1]], 5)
    assert csr_labels([], 5).shape == (0, 5)


@pytest.mark.parametrize("name", [n for n in LOSS_NAMES if n not in ("proto", "msc")])
def test_no_positive_pair_gives_zero_that_backpropagates(name):
    # Single view, disjoint single labels: no anchor has a positive at all.
    features = F.normalize(torch.randn(3, 1, 4, dtype=torch.float64), dim=-1).requires_grad_()
    labels = torch.eye(3, dtype=torch.float64)
    loss = make_loss(name)(features, labels)
    assert loss.item() == 0.0
    (grad,) = torch.autograd.grad(loss, features)
    assert torch.equal(grad, torch.zeros_like(grad))


@pytest.mark.parametrize("name", ["proto", "msc"])
def test_prototype_losses_skip_empty_label_sets(name):
    features, labels = random_batch(4, 2, 3, torch.float64, seed=5, empty_rows=(0, 1, 2, 3))
    loss = build(name, 3, 6, torch.float64)(features, labels)
    assert loss.item() == 0.0
    loss.backward()  # still part of the graph


def test_per_anchor_values_are_view_major_and_match_the_naive_anchor_loss():
    features, labels = random_batch(4, 2, 4, torch.float64, seed=11, empty_rows=(2,))
    anchors = make_loss("simdissim").per_anchor(features, labels)
    z, sets = anchors_of(features, labels)
    for i in range(len(z)):
        positives = [(p, w_simdissim(sets[i], sets[p])) for p in range(len(z)) if p != i]
        positives = [(p, w) for p, w in positives if w > 0]
        assert bool(anchors.valid[i]) == bool(positives)
        if positives:
            want = -sum(w * log_prob(z, i, p, TAU) for p, w in positives) / len(positives)
            torch.testing.assert_close(anchors.values[i], want)
    assert not anchors.valid[2] and not anchors.valid[2 + 4]  # sample 2 (empty set), both views


# ------------------------------------------------------------------------------ the finding about Eq. 12


def test_literal_form_has_exactly_the_gradient_of_any_and_weighted_does_not():
    features, labels = random_batch(8, 2, 6, torch.float64, seed=21, empty_rows=(7,))
    grads, values = {}, {}
    for key, loss_module in {
        "any": make_loss("any"),
        "literal": make_loss("simdissim", form="literal"),
        "weighted": make_loss("simdissim", form="weighted"),
    }.items():
        loss = loss_module(features, labels)
        values[key] = loss.item()
        grads[key] = torch.autograd.grad(loss, features)[0]
    assert torch.equal(grads["literal"], grads["any"])
    assert (grads["weighted"] - grads["any"]).abs().max() > 1e-3
    # The literal loss is ANY shifted by the batch mean of -(1/N_i) sum_{p in P(i)} log w_ip.
    z, sets = anchors_of(features, labels)
    shifts = []
    for i in range(len(z)):
        weights = [w_simdissim(sets[i], sets[p]) for p in range(len(z)) if p != i]
        weights = [w for w in weights if w > 0]
        if weights:
            shifts.append(-sum(math.log(w) for w in weights) / len(weights))
    assert values["literal"] - values["any"] == pytest.approx(sum(shifts) / len(shifts), rel=1e-10)
    assert values["literal"] > values["any"]  # some weights are < 1 on this batch


# ------------------------------------------------------------------------------ robustness


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_gradients_reach_features_and_prototypes(name):
    features, labels = random_batch(6, 2, 5, torch.float32, seed=7, empty_rows=(0,))
    loss_module = build(name, 5, 6, torch.float32)
    loss_module(features, labels).backward()
    assert features.grad is not None and features.grad.abs().sum() > 0
    if name in ("proto", "msc"):
        assert loss_module.prototypes.grad.abs().sum() > 0


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_identical_features_at_temperature_007_are_finite(name):
    features = F.normalize(torch.ones(8, 2, 16), dim=-1).requires_grad_()
    labels = torch.zeros(8, 4)
    labels[:, 0] = 1
    labels[::2, 1] = 1
    loss_module = build(name, 4, 16, torch.float32)
    loss = loss_module(features, labels)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(features.grad).all()


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_bf16_autocast_on_cpu_is_finite(name):
    torch.manual_seed(0)
    encoder = torch.nn.Linear(12, 16)
    inputs = torch.randn(10, 2, 12)
    labels = (torch.rand(10, 6) < 0.4).float()
    loss_module = build(name, 6, 16, torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        features = F.normalize(encoder(inputs), dim=-1)
        assert features.dtype == torch.bfloat16
        loss = loss_module(features, labels)
    loss.backward()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert torch.isfinite(encoder.weight.grad).all() and encoder.weight.grad.abs().sum() > 0


def test_single_label_batches_reduce_to_supcon():
    """Eq. 16: with one label per sample Sim-Dissim == ANY == ALL (== SupCon)."""
    generator = torch.Generator().manual_seed(2)
    features = F.normalize(torch.randn(9, 2, 8, generator=generator, dtype=torch.float64), dim=-1)
    classes = torch.tensor([0, 1, 2, 0, 1, 0, 3, 3, 2])
    labels = F.one_hot(classes, 5).double()
    values = {name: make_loss(name)(features, labels) for name in ("simdissim", "any", "all", "jaccard")}
    supcon = naive_pair_loss(features, labels, lambda s, t: 1.0 if s == t else 0.0)
    for value in values.values():
        torch.testing.assert_close(value, supcon, rtol=1e-12, atol=1e-12)


def test_bad_inputs_have_clear_errors():
    features = F.normalize(torch.randn(4, 2, 8), dim=-1)
    with pytest.raises(ValueError, match="loss 'supcon', which is neither built in nor registered"):
        make_loss("supcon")
    with pytest.raises(ValueError, match="does not take option"):
        make_loss("any", form="literal")
    with pytest.raises(ValueError, match="form must be one of"):
        make_loss("simdissim", form="inside")
    with pytest.raises(ValueError, match="needs option"):
        make_loss("msc", num_labels=3)
    with pytest.raises(ValueError, match="'pretrain.temperature' is 0; fix"):
        make_loss("any", temperature=0)
    with pytest.raises(ValueError, match=r"features must be \[B, V, D\]"):
        make_loss("any")(features[:, 0], torch.ones(4, 3))
    with pytest.raises(ValueError, match="B = 4"):
        make_loss("any")(features, torch.ones(5, 3))
    with pytest.raises(ValueError, match="multi-hot"):
        make_loss("any")(features, torch.full((4, 3), 0.5))
    with pytest.raises(ValueError, match="multi-hot"):
        make_loss("any")(features, torch.full((4, 3), 0.5).to_sparse())
    with pytest.raises(ValueError, match="prototypes"):
        make_loss("proto", num_labels=7, dim=8)(features, torch.ones(4, 3))


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_mimic_icd10_full_label_space_runs_without_an_n_n_l_tensor(name):
    """n = 1024 anchors, L = 25,230 labels, 16 per sample: an n x n x L float tensor would be
    106 GB (26 GB as bool) on this 24 GiB machine; the loss must stay far below that."""
    batch, views, num_labels, dim = 512, 2, 25_230, 256
    labels = long_tailed_labels(batch, num_labels, 16, seed=0)
    features = F.normalize(torch.randn(batch, views, dim), dim=-1).requires_grad_()
    loss_module = build(name, num_labels, dim, torch.float32)
    reset_peak_rss()
    before = peak_rss_bytes()
    loss = loss_module(features, labels)
    loss.backward()
    extra = peak_rss_bytes() - before
    assert torch.isfinite(loss) and torch.isfinite(features.grad).all()
    assert extra < 2 * 1024**3, f"{name} peaked {extra / 1e9:.1f} GB above its inputs"


def test_every_built_in_loss_refuses_an_option_it_does_not_take():
    """Each loss's declared options (mscl.losses.LOSSES) are all it takes; the names themselves
    are listed once, in mscl.registry (tests/test_registry.py)."""
    for name, (_, takes) in LOSSES.items():
        with pytest.raises(ValueError, match="does not take"):
            make_loss(name, not_an_option=1)
        assert takes <= {"form", "num_labels", "dim", "alpha", "beta"}


def test_the_temperature_default_is_written_once():
    """0.07 (paper: tau) stands once in the package, as mscl.train.settings.DEFAULT_TEMPERATURE:
    the losses, the run spec and the loss benchmark all take it from there."""
    import ast
    from pathlib import Path

    from mscl.train.settings import DEFAULT_TEMPERATURE, LossSpec, PretrainSpec

    package = Path(mscl.losses.__file__).parent
    places = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value == 0.07 and type(node.value) is float
    ]
    assert places == ["train/settings.py"] and DEFAULT_TEMPERATURE == TAU
    assert make_loss("any").temperature == LossSpec("any").temperature == DEFAULT_TEMPERATURE
    assert "temperature" not in PretrainSpec.__dataclass_fields__  # the loss's, not the pretrain block's
