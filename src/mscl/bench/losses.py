"""`python -m mscl bench losses`: forward+backward time and peak memory of every loss.

Prints one row per (loss, n, L): the median wall time of forward + backward over repeated
runs, the peak resident memory above the inputs, and ratios against ANY and against the
feature-only part of the loss (similarity, masked log-softmax and backward with a
precomputed pair-weight matrix: no label work). At the smallest size a naive per-anchor loop
is timed too. `name:sparse` rows pass the labels as a sparse COO tensor (what a data
pipeline can hand over for MIMIC-size label spaces), skipping the dense scan. Figures, not pass/fail: the "target" column only says how a ratio compares
with the goal set in the issue.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F

from mscl.bench.memory import current_rss_bytes, peak_rss_bytes, reset_peak_rss
from mscl.losses import LOSS_NAMES, make_loss, pair_weights, weighted_neg_log_prob

# Label cardinality per label-space size: MS-COCO-like for 80 labels, MIMIC-like (15.7 and
# 16.1 codes per admission) for the MIMIC-III and MIMIC-IV ICD-10 Full label spaces.
LABELS_PER_SAMPLE = {80: 3, 8692: 16, 25230: 16}


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


def time_backward(step: Callable[[], torch.Tensor], features: torch.Tensor, warmup: int, repeats: int) -> tuple[float, float]:
    """(median seconds, peak bytes above the starting RSS) of forward + backward."""
    for _ in range(warmup):
        step().backward()
        features.grad = None
    reset_peak_rss()
    start_rss = current_rss_bytes()
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        step().backward()
        times.append(time.perf_counter() - begin)
        features.grad = None
    return statistics.median(times), max(0, peak_rss_bytes() - start_rss)


def measure(anchors: int, num_labels: int, dim: int, repeats: int, names: list[str], with_loop: bool) -> list[dict]:
    views = 2
    batch = anchors // views
    torch.manual_seed(0)
    features = F.normalize(torch.randn(batch, views, dim), dim=-1).requires_grad_()
    labels = long_tailed_labels(batch, num_labels, LABELS_PER_SAMPLE.get(num_labels, 3), seed=0)
    rows = []

    anchor_weights = pair_weights("any", labels, dtype=torch.float32).repeat(views, views).fill_diagonal_(0)

    def feature_only() -> torch.Tensor:
        z = features.transpose(0, 1).reshape(anchors, dim)
        return weighted_neg_log_prob(z, anchor_weights, 0.07).mean()

    seconds, peak = time_backward(feature_only, features, warmup=2, repeats=repeats)
    rows.append(dict(loss="feature-only", n=anchors, L=num_labels, seconds=seconds, peak=peak))
    sparse_labels = labels.to_sparse()
    for name in names:
        base, *variants = name.split(":")
        options = {"num_labels": num_labels, "dim": dim} if base in ("proto", "msc") else {}
        if "literal" in variants:
            options["form"] = "literal"
        loss = make_loss(base, **options)
        batch_labels = sparse_labels if "sparse" in variants else labels
        seconds, peak = time_backward(lambda: loss(features, batch_labels), features, warmup=2, repeats=repeats)
        rows.append(dict(loss=name, n=anchors, L=num_labels, seconds=seconds, peak=peak))
    if with_loop:
        seconds, peak = time_backward(lambda: naive_simdissim_loop(features, labels, 0.07), features, warmup=1, repeats=3)
        rows.append(dict(loss="naive loop (simdissim)", n=anchors, L=num_labels, seconds=seconds, peak=peak))
    return rows


def targets(rows: list[dict]) -> list[str]:
    """How the measured ratios compare with the issue's goals."""
    by_key = {(r["loss"], r["n"], r["L"]): r["seconds"] for r in rows}
    lines = []
    for n, num_labels in sorted({(r["n"], r["L"]) for r in rows}):
        def ratio(a: str, b: str) -> float | None:
            if (a, n, num_labels) in by_key and (b, n, num_labels) in by_key:
                return by_key[(a, n, num_labels)] / by_key[(b, n, num_labels)]
            return None

        for label, a, b, goal in [
            ("simdissim / any", "simdissim", "any", 1.10),
            ("mulsupcon / any", "mulsupcon", "any", 1.5),
            ("simdissim / feature-only", "simdissim", "feature-only", 1.5 if (n, num_labels) == (1024, 25230) else None),
            ("simdissim:sparse / feature-only", "simdissim:sparse", "feature-only", 1.5 if (n, num_labels) == (1024, 25230) else None),
            ("naive loop / simdissim", "naive loop (simdissim)", "simdissim", None),
        ]:
            value = ratio(a, b)
            if value is None:
                continue
            if label.startswith("naive"):
                verdict = "meets >= 20x" if value >= 20 else "below 20x"
            elif goal is None:
                verdict = ""
            else:
                verdict = f"meets <= {goal}x" if value <= goal else f"above {goal}x"
            lines.append(f"n={n:5d} L={num_labels:6d}  {label:<33} {value:7.2f}x  {verdict}")
    return lines


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
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mscl bench losses", description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", type=int, nargs="+", default=[256, 1024], help="n = B*V anchors (V = 2)")
    parser.add_argument("--labels", type=int, nargs="+", default=[80, 8692, 25230], help="label-space sizes L")
    parser.add_argument("--dim", type=int, default=256, help="projection dimension D")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per cell (median reported)")
    parser.add_argument(
        "--losses",
        nargs="+",
        default=[*LOSS_NAMES, "simdissim:literal", "any:sparse", "simdissim:sparse"],
        help="loss names; ':literal' = simdissim form=literal, ':sparse' = labels passed as a sparse COO tensor",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, D={args.dim}, V=2, median of {args.repeats}")
    rows: list[dict] = []
    smallest = (min(args.anchors), min(args.labels))
    for anchors in args.anchors:
        for num_labels in args.labels:
            rows += measure(anchors, num_labels, args.dim, args.repeats, args.losses, (anchors, num_labels) == smallest)
            print(f"  measured n={anchors} L={num_labels}", flush=True)
    print(format_table(rows))
    print()
    print("\n".join(targets(rows)))
    return 0
