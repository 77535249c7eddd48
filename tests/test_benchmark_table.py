"""The benchmark table and figure built from what ran, and what the paper's tables say about runs
they do not show (issue 46): losses and encoders beyond the paper's grid, several encoders of one
role on a dataset, and the loss names `collect` records."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from mscl.errors import InputError
from mscl.report import benchmark, collect, complete, figures, names, tables
from mscl.report.collect import RUN_COLUMNS
from mscl.report.style import method_name

CSV_COLUMNS = ["dataset", "encoder", "method", "batch_size", "metric", "mean", "sd", "n"]
# Encoders of the synthetic runs: key -> (role, display name, paper model).
ENCODERS = {
    "resnet_a": ("resnet", "ResNet-A", False),
    "resnet_b": ("resnet", "ResNet-B", False),
    "roberta_x": ("roberta", "RoBERTa-X", False),
    "vit_tiny": ("resnet", "ViT-tiny (plugin)", False),
    "chance": ("reference", "label prior (no encoder)", False),
}
DATASETS = {"coco": "MS-COCO-demo", "aapd": "AAPD-demo", "my_csv": "My CSV data"}
METHODS = {"my_loss": "My Loss"}


def runs_of(rows: list[tuple], encoders: dict = ENCODERS, order: tuple[str, ...] = tuple(ENCODERS)) -> pd.DataFrame:
    """all_runs.csv rows from (dataset, encoder, loss, batch, seed, metric, value[, split]) tuples,
    named as `collect` names them (encoder_order: the place in `order`, the --roles order)."""
    records = []
    for dataset, encoder, loss, batch, seed, metric, value, *split in rows:
        role, display, paper = encoders[encoder]
        records.append(
            {"dataset": dataset, "encoder": encoder, "encoder_role": role, "loss": loss, "batch_size": batch, "seed": seed,
             "split": split[0] if split else "test", "metric": metric, "value": value, "dataset_display": DATASETS.get(dataset, dataset),
             "encoder_display": display, "paper_dataset": False, "paper_encoder": paper,
             "method_display": METHODS.get(loss, method_name(loss)), "encoder_order": order.index(encoder)}
        )  # fmt: skip
    return pd.DataFrame(records, columns=list(RUN_COLUMNS))


def grid(datasets_encoders, losses, metrics, seeds=(0, 1, 2), batch=64, base=0.5) -> list[tuple]:
    """One row per combination, each value different (a loss's place sets its level)."""
    rows = []
    for d, (dataset, encoder) in enumerate(datasets_encoders):
        for i, loss in enumerate(losses):
            for seed in seeds:
                for k, metric in enumerate(metrics):
                    rows.append((dataset, encoder, loss, batch, seed, metric, base + 0.05 * i + 0.01 * seed + 0.003 * k - 0.02 * d))
    return rows


def naive_benchmark(runs: pd.DataFrame, split: str = "test") -> dict[tuple, tuple[float, float, int]]:
    """(dataset, encoder, loss, batch_size, metric) -> (mean, sd, n) in percent over the finite
    values, written from the definitions (sample sd, n - 1; NaN when n < 2)."""
    values: dict[tuple, list[float]] = {}
    for row in runs.itertuples(index=False):
        if row.split != split or row.metric in ("threshold", "num_examples") or row.metric.endswith("_labels"):
            continue
        finite = values.setdefault((row.dataset, row.encoder, row.loss, int(row.batch_size), row.metric), [])
        if not math.isnan(row.value):
            finite.append(row.value * 100)
    result = {}
    for key, found in values.items():
        n = len(found)
        mean = sum(found) / n if n else math.nan
        sd = math.sqrt(sum((x - mean) ** 2 for x in found) / (n - 1)) if n > 1 else math.nan
        result[key] = (mean, sd, n)
    return result


def test_the_csv_is_tidy_and_each_row_is_the_naive_mean_sd_and_n_of_its_seeds(tmp_path):
    rows = grid([("coco", "resnet_a"), ("my_csv", "vit_tiny")], ["all", "simdissim", "my_loss", "none"], ["micro_f1", "map", "threshold", "num_labels", "map_skipped_labels"])
    rows += grid([("coco", "resnet_a")], ["all"], ["micro_f1"], seeds=(0, 1), batch=128)  # a second batch size, n = 2
    rows += grid([("aapd", "roberta_x")], ["any"], ["micro_f1"], seeds=(5,))  # one seed: no sd
    rows += [("coco", "chance", "chance", 0, 0, metric, 0.1) for metric in ("micro_f1", "map")]
    rows += [("coco", "resnet_a", "simdissim", 64, 3, "map", math.nan), ("aapd", "roberta_x", "all", 32, 0, "micro_f1", math.nan)]  # a NaN seed; an all-NaN cell
    rows += [("coco", "resnet_a", "all", 64, 0, "micro_f1", 0.99, "val")]  # another split: not in the test benchmark
    runs = runs_of(rows)
    path = tmp_path / "all_runs.csv"
    collect.write_runs(runs, path)
    prefix, figure_prefix = tmp_path / "tables" / "benchmark", tmp_path / "figures" / "benchmark"
    assert benchmark.main(["--runs", str(path), "--out-prefix", str(prefix), "--figure-prefix", str(figure_prefix)]) == 0
    assert all((tmp_path / "tables" / f"benchmark{s}").exists() for s in (".csv", ".md", ".html"))
    assert all((tmp_path / "figures" / f"benchmark{s}").exists() for s in (".pdf", ".png", ".html"))
    csv = pd.read_csv(prefix.with_suffix(".csv"), keep_default_na=False, na_values={"mean": [""], "sd": [""]})
    assert list(csv.columns) == CSV_COLUMNS
    expected = naive_benchmark(runs)
    assert len(csv) == len(expected) and not csv.duplicated(CSV_COLUMNS[:5]).any()
    for row in csv.itertuples(index=False):
        mean, sd, n = expected[(row.dataset, row.encoder, row.method, row.batch_size, row.metric)]
        assert row.n == n
        assert (math.isnan(row.mean) and math.isnan(mean)) or row.mean == pytest.approx(mean, rel=1e-12)
        assert (math.isnan(row.sd) and math.isnan(sd)) or row.sd == pytest.approx(sd, rel=1e-9)
    assert set(csv["metric"]) == {"micro_f1", "map"}  # the threshold and the label counts are not scores
    (single,) = [line.split(",") for line in prefix.with_suffix(".csv").read_text().splitlines() if line.startswith("aapd,roberta_x,any,")]
    assert single[5:] == [single[5], "", "1"] and float(single[5]) == pytest.approx(55.0)  # n = 1: sd empty
    assert csv.loc[(csv["method"] == "all") & (csv["dataset"] == "aapd"), "n"].tolist() == [0]  # ran, every value NaN
    # Keys as the config names them, in order: datasets as the paper's then others, encoders as --roles, references last.
    assert list(dict.fromkeys(csv["dataset"])) == ["coco", "aapd", "my_csv"]
    assert list(dict.fromkeys(csv.loc[csv["dataset"] == "coco", "encoder"])) == ["resnet_a", "chance"]
    methods = csv.loc[(csv["dataset"] == "coco") & (csv["encoder"] == "resnet_a"), "method"]
    assert list(dict.fromkeys(methods)) == ["all", "simdissim", "my_loss", "none"]


def test_best_per_column_is_bold_among_the_methods_never_a_reference_row():
    rows = grid([("coco", "resnet_a")], ["all", "any", "simdissim"], ["map"])
    rows += grid([("coco", "resnet_a")], ["bce"], ["map"], base=0.9)  # the highest value of the column, a reference
    rows += [("coco", "chance", "chance", 0, 0, "map", 0.95)]
    rows += grid([("coco", "resnet_b")], ["all", "simdissim"], ["map"], base=0.3)  # a second column, its own best
    built = benchmark.build_benchmark(runs_of(rows))
    (section,) = built.sections
    best = {(row[0].text, cell.record["encoder"]) for row in section.table.body if isinstance(row, list) for cell in row[1:] if cell.bold}
    assert best == {("Sim-Dissim", "resnet_a"), ("Sim-Dissim", "resnet_b")}
    markdown, page = built.markdown(), built.html()
    assert "| Sim-Dissim | **61.00 ± 1.0** | **36.00 ± 1.0** |" in markdown  # 0.5 + 0.1 (its place) + 0.01 (seed mean)
    assert "| Supervised BCE | 91.00 ± 1.0 | not run |" in markdown and "**91.00" not in markdown
    assert "<strong>" in page and "<strong>91.00" not in page and "<strong>95.00" not in page
    # References below the methods, under their rule; Chance shown in every column of its dataset.
    labels = [row[0].text if isinstance(row, list) else type(row).__name__ for row in section.table.body]
    assert labels == ["ALL", "ANY", "Sim-Dissim", "ReferenceRule", "Chance (label prior)", "Supervised BCE"]
    assert "| Chance (label prior) | 95.00 | 95.00 |" in markdown
    # The caption says what ± is and the n.
    assert "± is the sample standard deviation over seeds (ddof 1)" in built.caption and "n = 3 seeds" in built.caption


def test_a_method_dataset_and_encoder_no_list_names_appear_by_their_names_everywhere(tmp_path):
    rows = grid([("my_csv", "vit_tiny")], ["my_loss", "all"], ["micro_f1", "map"])
    built = benchmark.build_benchmark(runs_of(rows))
    assert set(built.frame["dataset"]) == {"my_csv"} and set(built.frame["encoder"]) == {"vit_tiny"} and set(built.frame["method"]) == {"my_loss", "all"}
    for text in (built.markdown(), built.html()):
        assert "My Loss" in text and "My CSV data" in text and html.escape("ViT-tiny (plugin)") in text and "my_loss" not in text
    # No family known: micro-F1 by default; the family the config gives picks mAP for images.
    assert built.sections[0].metric == "micro_f1" and "My CSV data: Micro-F1" in built.caption
    assert benchmark.build_benchmark(runs_of(rows), families={"my_csv": "image"}).sections[0].metric == "map"
    with pytest.raises(InputError, match="unknown family 'imag'"):
        benchmark.parse_families(["my_csv=imag"])
    chosen = benchmark.build_benchmark(runs_of(rows), metric="map")
    assert chosen.sections[0].metric == "map"
    with pytest.raises(InputError, match="'p_at_5'") as error:
        benchmark.build_benchmark(runs_of(rows), metric="p_at_5")
    assert "map" in error.value.fix
    figure, data = benchmark.benchmark_figure(runs_of(rows), built.sections, built.caption, built.notes)
    figures.plt.close(figure)
    assert set(data["method"]) == {"my_loss", "all"} and data.loc[data["best"], "method"].tolist() == ["all"]
    assert "My CSV data: Micro-F1" in data.attrs["caption"]


def paper_rows(extra: list[tuple] = ()) -> list[tuple]:
    """The image table's losses on MS-COCO and the AAPD table's on AAPD, then `extra`."""
    rows = grid([("coco", "resnet_a")], ["all", "any", "mulsupcon", "simdissim", "jaccard", "proto", "msc", "sim", "dissim"], ["micro_f1", "macro_f1", "map"])
    rows += grid([("aapd", "roberta_x")], ["all", "any", "mulsupcon", "simdissim", "sim", "dissim"], ["micro_f1", "macro_f1"])
    return rows + list(extra)


def test_a_loss_the_paper_tables_do_not_list_is_named_under_them_and_check_complete_still_counts_the_papers_cells(tmp_path):
    plain = runs_of(paper_rows())
    extended = runs_of(paper_rows(grid([("coco", "resnet_a")], ["my_loss"], ["micro_f1", "macro_f1", "map"]) + grid([("aapd", "roberta_x")], ["jaccard"], ["micro_f1"])))
    notes = {}
    for name in ("image", "aapd", "ablation", "mimic_full"):
        before, after = tables.build_table(name, plain), tables.build_table(name, extended)
        assert not any("also ran" in note for note in before.notes)
        pd.testing.assert_frame_equal(before.records, after.records)  # the paper's cells, no more
        notes[name] = [note for note in after.notes if note.startswith("also ran")]
        for rendered in (tables.to_markdown(after), tables.to_html(after), tables.to_latex(after)):
            assert all(note.split(" (")[0] in rendered for note in notes[name])
    assert notes["image"] == ["also ran: My Loss (see benchmark)"]
    assert notes["aapd"] == ["also ran: Jaccard (see benchmark)"]  # Jaccard is in the image table, not in AAPD's
    assert notes["ablation"] == ["also ran: My Loss, Jaccard (see benchmark)"]  # ALL, MulSupCon, ... are in image/AAPD
    assert notes["mimic_full"] == []  # nothing ran on MIMIC
    image_csv = tmp_path / "image.csv"
    image_csv.write_text(tables.to_csv(tables.build_table("image", extended)))
    problems, cells = complete.table_problems(image_csv)
    assert len(pd.read_csv(image_csv)) == 63 and cells == 7 * 3 and len(problems) == 63 - 7 * 3


def two_encoder_runs(paper_b: bool = False) -> pd.DataFrame:
    """MS-COCO with ResNet-A (listed first) and ResNet-B (listed second, better), both role resnet;
    ResNet-B optionally the paper's model."""
    encoders = {**ENCODERS, "resnet_b": ("resnet", "ResNet-B", paper_b)}
    rows = grid([("coco", "resnet_a")], ["all", "any", "mulsupcon", "simdissim"], ["micro_f1", "macro_f1", "map"], base=0.4)
    rows += grid([("coco", "resnet_b")], ["all", "any", "mulsupcon", "simdissim"], ["micro_f1", "macro_f1", "map"], base=0.6, batch=32)
    rows += grid([("aapd", "roberta_x")], ["all", "simdissim"], ["micro_f1", "macro_f1"])
    runs = runs_of(rows, encoders)
    # Seed-to-seed differences that vary, so that the paired improvement has a spread.
    return runs.assign(value=runs["value"] + 0.002 * runs["seed"] ** 2 * (runs["loss"] == "mulsupcon"))


def test_two_encoders_of_one_role_the_tables_and_figures_show_one_and_name_the_other():
    runs = two_encoder_runs()
    table = tables.build_table("image", runs)
    cells = table.records.set_index(["dataset", "method", "metric"])
    assert cells.loc[("coco", "simdissim", "map"), "mean"] == pytest.approx((0.4 + 0.15 + 0.01 + 0.006) * 100)  # ResNet-A's, seed mean
    assert "Ran: ResNet-A on MS-COCO-demo." in table.caption and "ResNet-B" not in table.caption
    assert "also ran: ResNet-B (see benchmark)" in table.notes
    assert not any("also ran" in note for note in tables.build_table("aapd", runs).notes)  # not in AAPD's scope
    # The paper's own model is shown wherever the config lists it.
    paper = tables.build_table("image", two_encoder_runs(paper_b=True))
    assert paper.records.set_index(["dataset", "method", "metric"]).loc[("coco", "simdissim", "map"), "mean"] == pytest.approx((0.6 + 0.15 + 0.01 + 0.006) * 100)
    assert "also ran: ResNet-A (see benchmark)" in paper.notes
    for name in ("std", "improvement", "batch_size"):
        figure, data = figures.build_figure(name, runs)
        figures.plt.close(figure)
        assert "also ran: ResNet-B (see benchmark)" in data.attrs["notes"], name
    figure, data = figures.build_figure("text_encoders", runs)
    figures.plt.close(figure)
    assert not any("also ran" in note for note in data.attrs["notes"])
    problems, _ = complete.figure_problems("std", runs, None)
    assert problems and not [p for p in problems if "coco" in p]  # only the image datasets that did not run
    # The benchmark shows each encoder in its own column.
    built = benchmark.build_benchmark(runs)
    coco = built.sections[0]
    assert [(s.encoder, s.batch_size) for s in coco.settings] == [("resnet_a", 64), ("resnet_b", 32)]
    assert "| Method | ResNet-A batch 64 | ResNet-B batch 32 |" in built.markdown()


def test_an_encoder_of_a_role_of_ones_own_is_in_the_benchmark_and_under_no_paper_table():
    """`role: mine` (a role the paper has no column for) on MS-COCO and AAPD, beside the paper
    roles' encoders: every paper table and figure is what it is without it, with no "also ran"
    and no "Ran:" naming it; the benchmark gives it its own column on both datasets."""
    encoders = {**ENCODERS, "my_net": ("mine", "MyNet (own role)", False), "my_net2": ("mine", "MyNet-2 (own role)", False)}
    plain = runs_of(paper_rows(), encoders, tuple(encoders))
    own = grid([("coco", "my_net"), ("aapd", "my_net"), ("coco", "my_net2")], ["all", "simdissim", "my_loss"], ["micro_f1", "macro_f1", "map"])
    extended = runs_of(paper_rows(own), encoders, tuple(encoders))
    for name in ("image", "aapd", "ablation", "paper_vs_run", "mimic_full", "sota"):
        before, after = tables.build_table(name, plain), tables.build_table(name, extended)
        pd.testing.assert_frame_equal(before.records, after.records)
        assert after.notes == before.notes and after.caption == before.caption, name
        assert "MyNet" not in tables.to_markdown(after) + tables.to_html(after), name
    for name in ("std", "improvement", "batch_size", "text_encoders", "frequency_buckets"):
        figure, data = figures.build_figure(name, extended)
        figures.plt.close(figure)
        assert "MyNet" not in " ".join([data.attrs["caption"], *data.attrs["notes"]]), name
    named = {d: names.Named(DATASETS[d], False) for d in ("coco", "aapd")}, {e: names.Named(v[1], False) for e, v in encoders.items()}
    config_runs = [("coco", "resnet_a"), ("aapd", "roberta_x"), ("coco", "my_net"), ("aapd", "my_net"), ("coco", "my_net2")]
    for artifact in names.ARTIFACT_SCOPE:  # the report's "Ran:" line of each paper table and figure
        if artifact != "cost":
            assert "MyNet" not in names.ran_line(artifact, config_runs, *named, {e: v[0] for e, v in encoders.items()}), artifact
    built = benchmark.build_benchmark(extended)
    columns = {s.dataset: [setting.encoder for setting in s.settings] for s in built.sections}
    assert columns == {"coco": ["resnet_a", "my_net", "my_net2"], "aapd": ["roberta_x", "my_net"]}
    assert "MyNet (own role)" in built.markdown() and "MyNet-2 (own role)" in built.html()
    assert collect.parse_roles(["my_net=mine", "chance=reference"]) == {"my_net": "mine", "chance": "reference"}
    for bad, message in ((["my_net=reference"], "reserved for the label prior"), (["my_net=my net"], "is not a name")):
        with pytest.raises(InputError, match=message):
            collect.parse_roles(bad)


def write_metrics(root: Path, encoder: str, loss: str) -> Path:
    path = root / encoder / loss / "metrics.json"
    path.parent.mkdir(parents=True)
    spec = {"dataset": "coco", "encoder_name": encoder, "loss": loss, "batch_size": 32, "seed": 0}
    path.write_text(json.dumps({"test": {"micro_f1": 0.5, "macro_f1_per_class": 0.4, "map": 0.3}, "val_best": {}, "spec": spec}))
    return path


def test_collect_records_the_method_names_and_the_encoder_order_and_reads_older_files(tmp_path):
    paths = [write_metrics(tmp_path, encoder, loss) for encoder in ("resnet_b", "resnet_a") for loss in ("my_loss", "simdissim", "other")]
    out = tmp_path / "all_runs.csv"
    argv = ["--metrics", *map(str, paths), "--roles", "resnet_b=resnet", "resnet_a=resnet", "--method-names", "my_loss=My Loss", "--out", str(out)]
    assert collect.main(argv) == 0
    runs = collect.load_runs(out)
    assert list(runs.columns) == list(RUN_COLUMNS)
    assert dict(zip(runs["loss"], runs["method_display"])) == {"my_loss": "My Loss", "simdissim": "Sim-Dissim", "other": "other"}
    assert dict(zip(runs["encoder"], runs["encoder_order"])) == {"resnet_b": 0, "resnet_a": 1}  # the --roles order
    what = collect.what_ran(runs)
    assert what.encoder("resnet") == "resnet_b" and what.also_ran[("coco", "resnet")][0].display == "resnet_a" and what.method("my_loss") == "My Loss"
    # An all_runs.csv written before these columns: losses by the paper's names, encoders in key order.
    runs.drop(columns=["method_display", "encoder_order"]).to_csv(out, index=False)
    older = collect.load_runs(out)
    assert dict(zip(older["loss"], older["method_display"])) == {"my_loss": "my_loss", "simdissim": "Sim-Dissim", "other": "other"}
    assert dict(zip(older["encoder"], older["encoder_order"])) == {"resnet_a": 0, "resnet_b": 1}
    with pytest.raises(InputError, match="--method-names"):
        collect.main([*argv[:-2], "my_loss", "--out", str(out)])
    runs.assign(encoder_order="first").to_csv(out, index=False)
    with pytest.raises(InputError, match="'encoder_order'"):
        collect.load_runs(out)
