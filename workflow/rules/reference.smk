# Reference runs without an encoder: the label prior ("chance", mscl.report.chance) of every
# dataset the grid runs, in a probe's output layout (CHANCE_DIR, common.smk) so that `collect`
# reads it as a run with the role `reference`. The other references, `none` (no pretraining)
# and `bce`, are methods of the grid and run through pretrain + probe.


rule chance:
    input:
        data=lambda wildcards: manifest(wildcards.dataset),
    output:
        metrics=f"{CHANCE_DIR}/metrics.json",
        scores=f"{CHANCE_DIR}/test_scores.parquet",
    log:
        f"{LOGS}/chance/{{dataset}}.log",
    benchmark:
        f"{BENCHMARKS}/chance/{{dataset}}.tsv"
    conda:
        CONDA_ENV
    resources:
        mem_mb=rule_resource("chance", "mem_mb"),
        runtime=rule_resource("chance", "runtime"),
    params:
        data=folder_of("input.data"),
        out=folder_of("output.metrics"),
        # A dataset of one's own names its family (built-in settings have theirs in mscl.layout).
        family=lambda wildcards: (
            f"--dataset-family {OWN_FAMILIES[wildcards.dataset]}" if OWN_FAMILIES.get(wildcards.dataset) else ""
        ),
    shell:
        "python -m mscl chance --data {params.data} --out {params.out} {params.family} > {log} 2>&1"
