"""`python -m mscl bench losses`: what the label bookkeeping adds to each loss, and an overview.

First table: for ANY, MulSupCon and Sim-Dissim at n = 1024 anchors, the forward + backward
time of the loss over its feature-only reference, per label-space size and per label form
(`dense` float32 [B, L]; `csr`: a sparse CSR tensor built once per batch, as a collate
function would; `dense-bool`: a dense bool matrix). The feature-only reference is the
loss's own feature code (similarity matrix, masked log-softmax, weighted sum and backward)
given a fixed, precomputed [B, B] weight matrix: everything but the label work. Each
repetition times the reference and the three losses back to back (in alternating order) and
keeps each loss's ratio to that reference, so machine load hits both alike; the table shows
the medians, and Sim-Dissim / ANY is the median of the paired ratios of those two.

Second table (the overview): every loss at every size, median wall time, peak resident
memory above the inputs and ratios against ANY and the feature-only reference; at the
smallest size a naive per-anchor loop is timed too. Figures, not pass/fail: the "target"
columns only say how a ratio compares with the goal set in the issue.
"""

from __future__ import annotations

import statistics
import time
import warnings
from typing import Callable

import torch
import torch.nn.functional as F

from mscl import cli
from mscl.bench.memory import current_rss_bytes, peak_rss_bytes, reset_peak_rss
from mscl.losses import LOSS_NAMES, make_loss, pair_weights, weighted_neg_log_prob
from mscl.train.settings import DEFAULT_TEMPERATURE as TEMPERATURE  # the losses' own default

# Label cardinality per label-space size: MS-COCO-like for 80 labels, MIMIC-like (15.7 and
# 16.1 codes per admission) for the MIMIC-III and MIMIC-IV ICD-10 Full label spaces.
LABELS_PER_SAMPLE = {80: 3, 8692: 16, 25230: 16}
VIEWS = 2
OVERHEAD_LOSSES = ("any", "mulsupcon", "simdissim")
# The overview's rows unless --losses names others: every loss, then three variants.
OVERVIEW_LOSSES = (*LOSS_NAMES, "simdissim:literal", "any:csr", "simdissim:csr")
OVERHEAD_GOAL = 1.5  # loss / feature-only
SIMDISSIM_GOAL = 1.10  # simdissim / any
# The label tensors the bookkeeping table times, by --forms name (mscl.defaults.LABEL_FORM_NAMES).
LABEL_FORMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "dense": lambda labels: labels,
    "csr": lambda labels: labels.to_sparse_csr(),
    "dense-bool": lambda labels: labels.bool(),
}


def long_tailed_labels(batch: int, num_labels: int, per_sample: int, seed: int) -> torch.Tensor:
    """[batch, num_labels] multi-hot with `per_sample` distinct labels drawn with p(rank r) ~ 1/r."""
    generator = torch.Generator().manual_seed(seed)
    probabilities = 1.0 / torch.arange(1, num_labels + 1, dtype=torch.float64)
    picks = torch.multinomial(probabilities.expand(batch, -1), per_sample, replacement=False, generator=generator)
    return torch.zeros(batch, num_labels).scatter_(1, picks, 1.0)


def naive_simdissim_loop(features: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """Sim-Dissim the obvious way: a Python loop over anchors, weights from Python sets."""
    batch, views, _ = features.shape
    z = torch.cat(features.unbind(1))
    sets = [set(torch.nonzero(labels[i % batch]).flatten().tolist()) for i in range(len(z))]
    per_anchor = []
    for i in range(len(z)):
        logits = z[i] @ z.T / temperature
        others = torch.arange(len(z)) != i
        log_prob = logits - torch.logsumexp(logits[others], 0)
        weights = [
            len(sets[i] & sets[p]) / len(sets[i]) / (1 + len(sets[p] - sets[i])) if p != i and sets[i] & sets[p] else 0.0
            for p in range(len(z))
        ]
        positives = sum(w > 0 for w in weights)
        if positives:
            per_anchor.append(-(torch.tensor(weights) * log_prob).sum() / positives)
    return torch.stack(per_anchor).mean()


def bench_inputs(anchors: int, num_labels: int, dim: int) -> tuple[torch.Tensor, torch.Tensor, Callable[[], torch.Tensor]]:
    """(features [B, V, D] requiring grad, float32 labels [B, L], the feature-only step)."""
    batch = anchors // VIEWS
    torch.manual_seed(0)
    features = F.normalize(torch.randn(batch, VIEWS, dim), dim=-1).requires_grad_()
    labels = long_tailed_labels(batch, num_labels, LABELS_PER_SAMPLE.get(num_labels, 3), seed=0)
    sample_weights = pair_weights("any", labels, views=VIEWS, dtype=torch.float32)

    def feature_only() -> torch.Tensor:
        z = features.transpose(0, 1).reshape(anchors, dim)
        return weighted_neg_log_prob(z, sample_weights, TEMPERATURE).mean()

    return features, labels, feature_only


def timed_backward(step: Callable[[], torch.Tensor], features: torch.Tensor) -> float:
    begin = time.perf_counter()
    step().backward()
    seconds = time.perf_counter() - begin
    features.grad = None
    return seconds


# ------------------------------------------------------------------------------ overhead table


def measure_overhead(anchors: int, num_labels: int, dim: int, repeats: int, forms: list[str]) -> list[dict]:
    """Per label form, time the feature-only reference and the overhead losses in turn, each
    repetition, and keep each loss's ratio to the reference of the same repetition."""
    features, labels, feature_only = bench_inputs(anchors, num_labels, dim)
    losses = {name: make_loss(name) for name in OVERHEAD_LOSSES}
    rows = []
    for form in forms:
        batch_labels = LABEL_FORMS[form](labels)
        steps = {name: (lambda loss=loss: loss(features, batch_labels)) for name, loss in losses.items()}
        steps["feature-only"] = feature_only
        times: dict[str, list[float]] = {name: [] for name in steps}
        for repetition in range(repeats + 2):  # the first two warm up
            # Alternate the order so that no step always follows the same one.
            for name in list(steps)[:: 1 if repetition % 2 else -1]:
                seconds = timed_backward(steps[name], features)
                if repetition >= 2:
                    times[name].append(seconds)
        reference = times["feature-only"]
        for name in OVERHEAD_LOSSES:
            rows.append(
                dict(
                    loss=name,
                    L=num_labels,
                    form=form,
                    seconds=statistics.median(times[name]),
                    reference=statistics.median(reference),
                    ratio=statistics.median(s / r for s, r in zip(times[name], reference)),
                    vs_any=statistics.median(s / a for s, a in zip(times[name], times["any"])),
                )
            )
    return rows


def format_overhead(rows: list[dict], anchors: int, dim: int) -> str:
    header = f"| {'loss':<10} | {'L':>6} | {'labels':<10} | {'loss ms':>8} | {'feature ms':>10} | {'x feature-only':>14} | {'target':<9} |"
    lines = [
        f"Label bookkeeping: loss / feature-only at n={anchors}, D={dim} (median of paired runs)",
        header,
        "|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|",
    ]
    order = {name: index for index, name in enumerate([*OVERHEAD_LOSSES, *LABEL_FORMS])}
    for r in sorted(rows, key=lambda r: (order[r["loss"]], r["L"], order[r["form"]])):
        verdict = f"{'<=' if r['ratio'] <= OVERHEAD_GOAL else '>'} {OVERHEAD_GOAL}x"
        lines.append(
            f"| {r['loss']:<10} | {r['L']:>6} | {r['form']:<10} | {1000 * r['seconds']:>8.2f} | "
            f"{1000 * r['reference']:>10.2f} | {r['ratio']:>14.2f} | {verdict:<9} |"
        )
    lines.append("")
    for r in sorted((r for r in rows if r["loss"] == "simdissim"), key=lambda r: (r["L"], order[r["form"]])):
        value = r["vs_any"]
        verdict = f"{'<=' if value <= SIMDISSIM_GOAL else '>'} {SIMDISSIM_GOAL}x"
        lines.append(f"L={r['L']:6d} {r['form']:<10}  simdissim / any {value:5.2f}x  {verdict}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ overview table


def time_backward(step: Callable[[], torch.Tensor], features: torch.Tensor, warmup: int, repeats: int) -> tuple[float, float]:
    """(median seconds, peak bytes above the starting RSS) of forward + backward."""
    for _ in range(warmup):
        timed_backward(step, features)
    reset_peak_rss()
    start_rss = current_rss_bytes()
    times = [timed_backward(step, features) for _ in range(repeats)]
    return statistics.median(times), max(0, peak_rss_bytes() - start_rss)


def measure(anchors: int, num_labels: int, dim: int, repeats: int, names: list[str], with_loop: bool) -> list[dict]:
    features, labels, feature_only = bench_inputs(anchors, num_labels, dim)
    rows = []
    seconds, peak = time_backward(feature_only, features, warmup=2, repeats=repeats)
    rows.append(dict(loss="feature-only", n=anchors, L=num_labels, seconds=seconds, peak=peak))
    for name in names:
        base, *variants = name.split(":")
        options = {"num_labels": num_labels, "dim": dim} if base in ("proto", "msc") else {}
        if "literal" in variants:
            options["form"] = "literal"
        loss = make_loss(base, **options)
        batch_labels = LABEL_FORMS["csr"](labels) if "csr" in variants else labels
        seconds, peak = time_backward(lambda: loss(features, batch_labels), features, warmup=2, repeats=repeats)
        rows.append(dict(loss=name, n=anchors, L=num_labels, seconds=seconds, peak=peak))
    if with_loop:
        seconds, peak = time_backward(lambda: naive_simdissim_loop(features, labels, TEMPERATURE), features, warmup=1, repeats=3)
        rows.append(dict(loss="naive loop (simdissim)", n=anchors, L=num_labels, seconds=seconds, peak=peak))
    return rows


def format_table(rows: list[dict]) -> str:
    any_time = {(r["n"], r["L"]): r["seconds"] for r in rows if r["loss"] == "any"}
    feature_time = {(r["n"], r["L"]): r["seconds"] for r in rows if r["loss"] == "feature-only"}
    header = f"| {'loss':<24} | {'n':>5} | {'L':>6} | {'fwd+bwd ms':>10} | {'peak MB':>8} | {'x any':>6} | {'x feature':>9} |"
    lines = [header, "|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|"]
    for r in rows:
        key = (r["n"], r["L"])
        vs_any = r["seconds"] / any_time[key] if key in any_time else float("nan")
        vs_feature = r["seconds"] / feature_time[key]
        lines.append(
            f"| {r['loss']:<24} | {r['n']:>5} | {r['L']:>6} | {1000 * r['seconds']:>10.2f} | "
            f"{r['peak'] / 2**20:>8.1f} | {vs_any:>6.2f} | {vs_feature:>9.2f} |"
        )
    simdissim_time = {(r["n"], r["L"]): r["seconds"] for r in rows if r["loss"] == "simdissim"}
    for loop in (r for r in rows if r["loss"].startswith("naive loop")):
        value = loop["seconds"] / simdissim_time.get((loop["n"], loop["L"]), float("nan"))
        verdict = "meets" if value >= 20 else "below"
        lines.append(f"\nnaive loop / simdissim at n={loop['n']} L={loop['L']}: {value:.1f}x ({verdict} >= 20x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = cli.parse_args("bench losses", argv)
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, D={args.dim}, V={VIEWS}, median of {args.repeats}")
    overhead: list[dict] = []
    for num_labels in args.labels:
        overhead += measure_overhead(args.overhead_anchors, num_labels, args.dim, args.repeats, args.forms)
    print(format_overhead(overhead, args.overhead_anchors, args.dim), flush=True)
    if args.no_overview:
        return 0
    rows: list[dict] = []
    smallest = (min(args.anchors), min(args.labels))
    for anchors in args.anchors:
        for num_labels in args.labels:
            rows += measure(anchors, num_labels, args.dim, args.repeats, args.losses or list(OVERVIEW_LOSSES), (anchors, num_labels) == smallest)
    print()
    print(format_table(rows))
    return 0
