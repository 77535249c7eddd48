# Aggregation: tables regenerated from the run's own outputs (mscl.data.stats_table, ...).


localrules:
    statistics_table,


rule statistics_table:
    input:
        expand(f"{PROCESSED}/{{dataset}}/stats.json", dataset=config["datasets"]),
    output:
        tex=report(f"{RESULTS}/tables/statistics.tex", caption="../report/statistics.rst", category="Tables"),
        csv=report(f"{RESULTS}/tables/statistics.csv", caption="../report/statistics.rst", category="Tables"),
        md=f"{RESULTS}/tables/statistics.md",
    conda:
        CONDA_ENV
    log:
        f"{LOGS}/tables/statistics.log",
    params:
        datasets=lambda wildcards, input: " ".join(
            f"--dataset {os.path.basename(os.path.dirname(p))}={os.path.dirname(p)}" for p in input
        ),
        prefix=lambda wildcards, output: os.path.splitext(output.tex)[0],
    shell:
        "python -m mscl stats-table {params.datasets} --out-prefix {params.prefix} > {log} 2>&1"
