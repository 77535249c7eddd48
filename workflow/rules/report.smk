# Aggregation: every paper table and figure from the runs' own results (mscl.report).


localrules:
    collect_runs,
    paper_table,
    cost_table,
    claim_report,
    paper_figure,


rule collect_runs:
    input:
        metrics=run_outputs("probe/metrics.json") + chance_outputs("metrics.json"),
        chance_scores=chance_outputs("test_scores.parquet"),  # read beside metrics.json
        stats=expand(f"{PROCESSED}/{{dataset}}/stats.json", dataset=sorted({run[0] for run in RUNS})),
    output:
        f"{RESULTS}/metrics/all_runs.csv",
    conda:
        CONDA_ENV
    log:
        f"{LOGS}/report/collect.log",
    params:
        roles="--roles "
        + " ".join(f"{name}={encoder['role']}" for name, encoder in config["encoders"].items())
        + (f" {CHANCE_ROLE}" if chance_outputs("metrics.json") else ""),
        counts=lambda wildcards, input: "--train-counts "
        + " ".join(f"{os.path.basename(os.path.dirname(path))}={path}" for path in input.stats),
        names=collect_options(RUNS, NAMED_DATASETS, NAMED_ENCODERS),
    shell:
        "python -m mscl collect --metrics {input.metrics} {params.roles} {params.counts} {params.names} --out {output} > {log} 2>&1"


rule paper_table:
    input:
        runs=rules.collect_runs.output,
    output:
        tex=f"{RESULTS}/tables/{{table}}.tex",
        csv=f"{RESULTS}/tables/{{table}}.csv",
        md=f"{RESULTS}/tables/{{table}}.md",
        html=report(f"{RESULTS}/tables/{{table}}.html", caption="../report/tables.rst", category="Tables", labels={"table": "{table}"}),
    wildcard_constraints:
        table="|".join(t for t in TABLES if t != "cost"),
    conda:
        CONDA_ENV
    log:
        f"{LOGS}/report/table_{{table}}.log",
    params:
        prefix=lambda wildcards, output: os.path.splitext(output.tex)[0],
        batch=batch_size_option,
        ran=lambda wildcards: ran_line(wildcards.table, RUNS, NAMED_DATASETS, NAMED_ENCODERS, ENCODER_ROLE_OF),
    shell:
        "python -m mscl table {wildcards.table} --runs {input.runs} --out-prefix {params.prefix} "
        "{params.batch} > {log} 2>&1"


rule cost_table:
    input:
        pretrain=run_benchmarks("pretrain"),
        probe=run_benchmarks("probe"),
    output:
        tex=f"{RESULTS}/tables/cost.tex",
        csv=f"{RESULTS}/tables/cost.csv",
        md=f"{RESULTS}/tables/cost.md",
        html=report(f"{RESULTS}/tables/cost.html", caption="../report/tables.rst", category="Tables", labels={"table": "cost"}),
    conda:
        CONDA_ENV
    log:
        f"{LOGS}/report/table_cost.log",
    params:
        prefix=lambda wildcards, output: os.path.splitext(output.tex)[0],
        ran=ran_line("cost", RUNS, NAMED_DATASETS, NAMED_ENCODERS, ENCODER_ROLE_OF),
    shell:
        "python -m mscl table cost --benchmarks {input.pretrain} {input.probe} --out-prefix {params.prefix} > {log} 2>&1"


rule paper_figure:
    input:
        runs=rules.collect_runs.output,
    output:
        pdf=f"{RESULTS}/figures/{{figure}}.pdf",
        png=f"{RESULTS}/figures/{{figure}}.png",
        html=report(f"{RESULTS}/figures/{{figure}}.html", caption="../report/figures.rst", category="Figures", labels={"figure": "{figure}"}),
    wildcard_constraints:
        figure="|".join(FIGURES),
    conda:
        CONDA_ENV
    log:
        f"{LOGS}/report/figure_{{figure}}.log",
    params:
        prefix=lambda wildcards, output: os.path.splitext(output.pdf)[0],
        batch=batch_size_option,
        ran=lambda wildcards: ran_line(wildcards.figure, RUNS, NAMED_DATASETS, NAMED_ENCODERS, ENCODER_ROLE_OF),
    shell:
        "python -m mscl figure {wildcards.figure} --runs {input.runs} --out-prefix {params.prefix} "
        "{params.batch} > {log} 2>&1"


rule claim_report:
    input:
        runs=rules.collect_runs.output,
    output:
        [
            report(f"{RESULTS}/claim_check/{name}", caption="../report/claim.rst", category="Claim check")
            if name.endswith((".md", ".png"))
            else f"{RESULTS}/claim_check/{name}"
            for name in CLAIM_FILES
        ],
    conda:
        CONDA_ENV
    log:
        f"{LOGS}/report/claim.log",
    params:
        out=folder_of("output"),
        reference=config["report"]["claim"]["reference"],
        metrics=" ".join(config["report"]["claim"]["metrics"]),
        alpha=config["report"]["claim"]["alpha"],
    shell:
        "python -m mscl claim-report --runs {input.runs} --out-dir {params.out} --reference {params.reference} "
        "--metrics {params.metrics} --alpha {params.alpha} > {log} 2>&1"
