# Aggregation: every paper table and figure from the runs' own results (mscl.report).


localrules:
    collect_runs,
    benchmark_table,
    paper_table,
    cost_table,
    claim_export,
    claim_report,
    paper_figure,
    loss_curves,
    check_complete,


rule collect_runs:
    input:
        metrics=run_outputs("probe/metrics.json") + chance_outputs("metrics.json"),
        chance_scores=chance_outputs("test_scores.parquet"),  # read beside metrics.json
        stats=expand(f"{PROCESSED}/{{dataset}}/stats.json", dataset=sorted({run[0] for run in RUNS})),
    output:
        f"{RESULTS}/metrics/all_runs.csv",
    log:
        f"{LOGS}/report/collect.log",
    conda:
        CONDA_ENV
    params:
        roles=roles_option(RUNS, ENCODER_ROLE_OF) + (f" {CHANCE_ROLE}" if chance_outputs("metrics.json") else ""),
        counts=lambda wildcards, input: "--train-counts "
        + " ".join(f"{os.path.basename(os.path.dirname(path))}={path}" for path in input.stats),
        names=collect_options(
            RUNS, NAMED_DATASETS, NAMED_ENCODERS, {loss: registry.method_display(loss) for loss in KNOWN_METHODS}
        ),
    shell:
        "python -m mscl collect --metrics {input.metrics} {params.roles} {params.counts} {params.names} --out {output} > {log} 2>&1"


rule paper_table:
    input:
        runs=rules.collect_runs.output,
    output:
        tex=f"{RESULTS}/tables/{{table}}.tex",
        csv=f"{RESULTS}/tables/{{table}}.csv",
        md=f"{RESULTS}/tables/{{table}}.md",
        html=report(
            f"{RESULTS}/tables/{{table}}.html",
            caption="../report/tables.rst",
            category="Tables",
            labels={"table": "{table}"},
        ),
    log:
        f"{LOGS}/report/table_{{table}}.log",
    wildcard_constraints:
        table="|".join(t for t in TABLE_NAMES if t != "cost"),
    conda:
        CONDA_ENV
    params:
        prefix=lambda wildcards, output: os.path.splitext(output.tex)[0],
        batch=batch_size_option,
        ran=lambda wildcards: ran_line(wildcards.table, RUNS, NAMED_DATASETS, NAMED_ENCODERS, ENCODER_ROLE_OF),
    shell:
        "python -m mscl table {wildcards.table} --runs {input.runs} --out-prefix {params.prefix} "
        "{params.batch} > {log} 2>&1"


rule cost_table:
    input:
        metrics=run_outputs("probe/metrics.json"),  # the runs; their benchmarks are read beside
        pretrain=run_benchmarks("pretrain"),
        probe=run_benchmarks("probe"),
    output:
        tex=f"{RESULTS}/tables/cost.tex",
        csv=f"{RESULTS}/tables/cost.csv",
        md=f"{RESULTS}/tables/cost.md",
        html=report(
            f"{RESULTS}/tables/cost.html", caption="../report/tables.rst", category="Tables", labels={"table": "cost"}
        ),
    log:
        f"{LOGS}/report/table_cost.log",
    conda:
        CONDA_ENV
    params:
        prefix=lambda wildcards, output: os.path.splitext(output.tex)[0],
        ran=ran_line("cost", RUNS, NAMED_DATASETS, NAMED_ENCODERS, ENCODER_ROLE_OF),
    shell:
        "python -m mscl table cost --metrics {input.metrics} --out-prefix {params.prefix} > {log} 2>&1"


rule paper_figure:
    input:
        runs=rules.collect_runs.output,
    output:
        pdf=f"{RESULTS}/figures/{{figure}}.pdf",
        png=f"{RESULTS}/figures/{{figure}}.png",
        html=report(
            f"{RESULTS}/figures/{{figure}}.html",
            caption="../report/figures.rst",
            category="Figures",
            labels={"figure": "{figure}"},
        ),
    log:
        f"{LOGS}/report/figure_{{figure}}.log",
    wildcard_constraints:
        figure="|".join(FIGURE_NAMES),
    conda:
        CONDA_ENV
    params:
        prefix=lambda wildcards, output: os.path.splitext(output.pdf)[0],
        batch=batch_size_option,
        ran=lambda wildcards: ran_line(wildcards.figure, RUNS, NAMED_DATASETS, NAMED_ENCODERS, ENCODER_ROLE_OF),
    shell:
        "python -m mscl figure {wildcards.figure} --runs {input.runs} --out-prefix {params.prefix} "
        "{params.batch} > {log} 2>&1"


# The convergence figure (mscl.report.loss_curves): every pretraining's loss per epoch, read from
# the train_log.csv beside each run's encoder.pt; all_runs.csv names what it draws.
rule loss_curves:
    input:
        runs=rules.collect_runs.output,
        encoders=run_outputs("pretrain/encoder.pt"),
    output:
        pdf=f"{RESULTS}/figures/{LOSS_CURVES_FIGURE}.pdf",
        png=f"{RESULTS}/figures/{LOSS_CURVES_FIGURE}.png",
        html=report(
            f"{RESULTS}/figures/{LOSS_CURVES_FIGURE}.html",
            caption="../report/loss_curves.rst",
            category="Figures",
            labels={"figure": LOSS_CURVES_FIGURE},
        ),
    log:
        f"{LOGS}/report/figure_{LOSS_CURVES_FIGURE}.log",
    conda:
        CONDA_ENV
    params:
        prefix=lambda wildcards, output: os.path.splitext(output.pdf)[0],
        folders=lambda wildcards, input: " ".join(sorted({os.path.dirname(path) for path in input.encoders})),
    shell:
        "python -m mscl loss-curves --pretrain {params.folders} --runs {input.runs} --out-prefix {params.prefix} > {log} 2>&1"


# The benchmark table and figure (mscl.report.benchmark): built from what ran, whatever the
# paper's tables list, so that a loss, dataset or encoder of one's own has its rows.
rule benchmark_table:
    input:
        runs=rules.collect_runs.output,
    output:
        csv=f"{RESULTS}/tables/benchmark.csv",
        md=f"{RESULTS}/tables/benchmark.md",
        html=report(
            f"{RESULTS}/tables/benchmark.html",
            caption="../report/benchmark.rst",
            category="Tables",
            labels={"table": "benchmark"},
        ),
        pdf=f"{RESULTS}/figures/benchmark.pdf",
        png=f"{RESULTS}/figures/benchmark.png",
        figure_html=report(
            f"{RESULTS}/figures/benchmark.html",
            caption="../report/benchmark.rst",
            category="Figures",
            labels={"figure": "benchmark"},
        ),
    log:
        f"{LOGS}/report/benchmark.log",
    conda:
        CONDA_ENV
    params:
        table=lambda wildcards, output: os.path.splitext(output.csv)[0],
        figure=lambda wildcards, output: os.path.splitext(output.pdf)[0],
        # The family of each dataset of one's own decides which metric its column shows.
        families=lambda wildcards: own_families_option(),
    shell:
        "python -m mscl benchmark --runs {input.runs} --out-prefix {params.table} --figure-prefix {params.figure} "
        "{params.families} > {log} 2>&1"


# Not part of `all` (a grid smaller than the paper's leaves holes by design): asked for by name,
# e.g. `make paper-smoke`, it checks that every table cell and figure item has a result
# (mscl.report.complete) and exists only if so.
rule check_complete:
    input:
        tables=[f"{RESULTS}/tables/{name}.csv" for name in TABLE_NAMES if name != "cost"],
        statistics=rules.statistics_table.output.csv,
        runs=rules.collect_runs.output,
        figures=[f"{RESULTS}/figures/{name}.png" for name in FIGURE_NAMES],
    output:
        f"{RESULTS}/complete.txt",
    log:
        f"{LOGS}/report/check_complete.log",
    conda:
        CONDA_ENV
    params:
        datasets=" ".join(config["datasets"]),
        figures=" ".join(
            f"--figure {name}" + (f"={size}" if (size := report_batch_size(name)) else "") for name in FIGURE_NAMES
        ),
    shell:
        "python -m mscl check-complete --tables {input.tables} --statistics {input.statistics} --datasets {params.datasets} "
        "--runs {input.runs} {params.figures} --out {output} > {log} 2>&1"


rule claim_export:
    input:
        metrics=run_outputs("probe/metrics.json"),
        selections=claim_selections(),
        stats=expand(f"{PROCESSED}/{{dataset}}/stats.json", dataset=sorted({run[0] for run in RUNS})),
    output:
        [f"{RESULTS}/claim_check/data/{name}" for name in CLAIM_DATA_FILES],
    log:
        f"{LOGS}/report/claim_export.log",
    conda:
        CONDA_ENV
    params:
        out=folder_of("output"),
        stats=claim_train_stats,
        mixed="--allow-mixed-commits" if config["report"]["claim"]["allow_mixed_commits"] else "",
    shell:
        "python -m mscl claim-export --metrics {input.metrics} --selections {input.selections} "
        "--train-stats {params.stats} --out-dir {params.out} {params.mixed} > {log} 2>&1"


rule claim_report:
    input:
        [f"{RESULTS}/claim_check/data/{name}" for name in CLAIM_DATA_FILES],
    output:
        [
            (
                report(f"{RESULTS}/claim_check/{name}", caption="../report/claim.rst", category="Claim check")
                if name.endswith((".md", ".png"))
                else f"{RESULTS}/claim_check/{name}"
            )
            for name in CLAIM_FILES
        ],
    log:
        f"{LOGS}/report/claim.log",
    conda:
        CONDA_ENV
    params:
        data=folder_of("input"),
        out=folder_of("output"),
        reference=config["report"]["claim"]["reference"],
        alpha=config["report"]["claim"]["alpha"],
        margin=config["report"]["claim"]["margin"],
    shell:
        "python -m mscl claim-report --data-dir {params.data} --out-dir {params.out} --reference {params.reference} "
        "--alpha {params.alpha} --margin {params.margin} > {log} 2>&1"
