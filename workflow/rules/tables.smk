# Aggregation: tables regenerated from the run's own outputs (mscl.data.stats_table, ...).
from mscl.report.names import collect_options, ran_line, roles_option, workflow_names

# How tables and figures call each dataset and encoder, and which are the paper's own data and
# models (mscl.report.names); report.smk hands both to `collect` and names what ran in the
# report's descriptions.
NAMED_DATASETS, NAMED_ENCODERS = workflow_names(config)
ENCODER_ROLE_OF = {name: encoder["role"] for name, encoder in config["encoders"].items()}


localrules:
    statistics_table,


rule statistics_table:
    input:
        expand(f"{PROCESSED}/{{dataset}}/stats.json", dataset=config["datasets"]),
    output:
        tex=f"{RESULTS}/tables/statistics.tex",
        csv=f"{RESULTS}/tables/statistics.csv",
        md=f"{RESULTS}/tables/statistics.md",
        html=report(
            f"{RESULTS}/tables/statistics.html",
            caption="../report/statistics.rst",
            category="Tables",
            labels={"table": "statistics"},
        ),
    log:
        f"{LOGS}/tables/statistics.log",
    conda:
        CONDA_ENV
    params:
        datasets=lambda wildcards, input: " ".join(
            f"--dataset {os.path.basename(os.path.dirname(p))}={os.path.dirname(p)}" for p in input
        ),
        names=" ".join(f"--name {shlex.quote(f'{d}={named.display}')}" for d, named in NAMED_DATASETS.items()),
        prefix=lambda wildcards, output: os.path.splitext(output.tex)[0],
    shell:
        "python -m mscl stats-table {params.datasets} {params.names} --out-prefix {params.prefix} > {log} 2>&1"
