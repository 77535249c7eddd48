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
    log:
        "logs/tables/statistics.log",
    params:
        datasets=" ".join(f"--dataset {d}={PROCESSED}/{d}" for d in config["datasets"]),
        prefix=f"{RESULTS}/tables/statistics",
    shell:
        "python -m mscl stats-table {params.datasets} --out-prefix {params.prefix} > {log} 2>&1"
