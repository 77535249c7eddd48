"""Every paper table and figure, regenerated from a run's own results.

Stages, each a `python -m mscl <command>` CLI the Snakemake aggregation rules call:

* `chance` (`mscl.report.chance`): the label-prior reference run of a dataset, in the probe's format;
* `collect` (`mscl.report.collect`): every probe's metrics.json (+ test scores) -> one tidy CSV;
* `table` (`mscl.report.tables`): one paper table as LaTeX, CSV and Markdown;
* `figure` (`mscl.report.figures`): one paper figure as PDF and PNG.

`mscl.report.paper` holds the paper's own numbers (packaged `paper_results.csv`),
`mscl.report.style` the shared names, colours and fonts, `mscl.report.cost` the benchmark
(compute cost) reader. See docs/report.md.
"""
