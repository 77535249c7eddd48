# Contrastive pretraining and linear probing, one job per dataset x encoder x loss x batch x
# seed (mscl.train), plus the claim check's tuning runs and their selection on val. Every
# training command runs through `python -m mscl launch` (mscl.train.launch), which holds the
# job's own GPUs of this machine's pool (none on a cluster, whose scheduler assigns them) and
# runs a pretrain job of N > 1 GPUs under torchrun, one process per GPU (docs/training.md). The
# GPU request comes from `resources: gpu` (0 in the embedded default; the SLURM profiles ask for
# at least 1 for pretrain and the probe).


localrules:
    select_setting,


rule local_models:
    output:
        directory(f"{MODELS}/{{model_set}}"),
    log:
        f"{LOGS}/models/{{model_set}}.log",
    conda:
        CONDA_ENV
    params:
        seed=config["seed"],
        model_set=lambda wildcards: LOCAL_MODEL_SETS[wildcards.model_set],
    shell:
        "python -m mscl make-tiny-models --out {output} --seed {params.seed} --set {params.model_set} > {log} 2>&1"


rule cache_prefix:
    input:
        data=lambda wildcards: manifest(wildcards.dataset),
        models=local_models_input,
    output:
        f"{PROCESSED}/{{dataset}}/prefix/{{encoder}}.pt",
    log:
        f"{LOGS}/prefix/{{dataset}}/{{encoder}}.log",
    benchmark:
        f"{BENCHMARKS}/prefix/{{dataset}}/{{encoder}}.tsv"
    conda:
        CONDA_ENV
    threads: encoder_threads
    resources:
        **encoder_resources("cache_prefix"),
    params:
        data=folder_of("input.data"),
        spec=lambda wildcards: shlex.quote(json.dumps(encoder_spec(wildcards.encoder), sort_keys=True)),
    shell:
        "OMP_NUM_THREADS={threads} python -m mscl launch --gpus {resources.job_gpus} -- "
        "python -m mscl cache-prefix --data {params.data} --encoder-spec {params.spec} --out {output} > {log} 2>&1"


rule pretrain:
    input:
        data=lambda wildcards: manifest(wildcards.dataset),
        models=local_models_input,
        prefix=prefix_cache_input,
        selected=selected_input,
    output:
        # Only the final file: Snakemake deletes a failed job's outputs, and the epoch
        # checkpoint beside it must survive so that a rerun resumes.
        encoder=f"{RUN_DIR}/pretrain/encoder.pt",
    log:
        run_log("pretrain"),
    benchmark:
        run_benchmark("pretrain")
    wildcard_constraints:
        loss="|".join(method for method in KNOWN_METHODS if method not in UNTRAINED_METHODS),
    conda:
        CONDA_ENV
    threads: encoder_threads
    resources:
        **encoder_resources("pretrain"),
    params:
        data=folder_of("input.data"),
        out=folder_of("output.encoder"),
        spec=run_spec("pretrain"),
        prefix=prefix_cache_option,
        selected=selected_option,
    shell:
        "OMP_NUM_THREADS={threads} python -m mscl launch --gpus {resources.job_gpus} --torchrun -- "
        "python -m mscl pretrain --data {params.data} --out {params.out} --spec {params.spec} "
        "{params.prefix} {params.selected} > {log} 2>&1"


# The untrained references (`none`: the encoder as initialised; `logreg`: the identity encoder
# over the inputs) through the same command, which trains nothing and saves the initial
# encoder: no GPU, never torchrun, and on a cluster the CPU partition (no set-resources entry).
rule initial_encoder:
    input:
        data=lambda wildcards: manifest(wildcards.dataset),
        models=local_models_input,
    output:
        encoder=f"{RUN_DIR}/pretrain/encoder.pt",
    log:
        run_log("pretrain"),
    benchmark:
        run_benchmark("pretrain")
    wildcard_constraints:
        loss="|".join(UNTRAINED_METHODS),
    conda:
        CONDA_ENV
    resources:
        **encoder_resources("initial_encoder"),
    params:
        data=folder_of("input.data"),
        out=folder_of("output.encoder"),
        spec=run_spec("pretrain"),
    shell:
        "python -m mscl launch --gpus {resources.job_gpus} -- "
        "python -m mscl pretrain --data {params.data} --out {params.out} --spec {params.spec} > {log} 2>&1"


rule probe:
    input:
        data=lambda wildcards: manifest(wildcards.dataset),
        encoder=rules.pretrain.output.encoder,
        models=local_models_input,
        prefix=prefix_cache_input,
        selected=selected_input,
    output:
        metrics=f"{RUN_DIR}/probe/metrics.json",
        scores=f"{RUN_DIR}/probe/test_scores.parquet",
    log:
        run_log("probe"),
    benchmark:
        run_benchmark("probe")
    conda:
        CONDA_ENV
    threads: encoder_threads
    resources:
        **encoder_resources("probe"),
    params:
        data=folder_of("input.data"),
        pretrained=folder_of("input.encoder"),
        out=folder_of("output.metrics"),
        spec=run_spec("probe"),
        prefix=prefix_cache_option,
        selected=selected_option,
    shell:
        "OMP_NUM_THREADS={threads} python -m mscl launch --gpus {resources.job_gpus} -- "
        "python -m mscl probe --data {params.data} --pretrained {params.pretrained} --out {params.out} "
        "--spec {params.spec} {params.prefix} {params.selected} > {log} 2>&1"


# Tuning runs (the claim check's equal tuning per method, common.smk): the same jobs, one per
# setting x tuning seed, under tuning/ with the setting as a path component; their spec carries
# the setting's values (run_spec) and no selection (selected_input).
use rule pretrain as tuning_pretrain with:
    output:
        encoder=f"{TUNE_DIR}/pretrain/encoder.pt",
    log:
        run_log("pretrain", TUNE_RUN_NAME),
    benchmark:
        run_benchmark("pretrain", TUNE_RUN_NAME)


use rule probe as tuning_probe with:
    input:
        data=lambda wildcards: manifest(wildcards.dataset),
        encoder=rules.tuning_pretrain.output.encoder,
        models=local_models_input,
        prefix=prefix_cache_input,
        selected=selected_input,
    output:
        metrics=f"{TUNE_DIR}/probe/metrics.json",
        scores=f"{TUNE_DIR}/probe/test_scores.parquet",
    log:
        run_log("probe", TUNE_RUN_NAME),
    benchmark:
        run_benchmark("probe", TUNE_RUN_NAME)


rule select_setting:
    input:
        tuning_metrics,
    output:
        SELECTION,
    log:
        f"{LOGS}/tuning/select/{{dataset}}/{{encoder}}/{{loss}}/bs{{batch}}.log",
    # Cheap, and it unlocks a method's test runs: without a priority the greedy scheduler, which
    # prefers jobs with large inputs, leaves every selection until all tuning has run.
    priority: 10
    conda:
        CONDA_ENV
    params:
        grid_keys=tuning_keys,
        metric=config["tuning"]["metric"],
    shell:
        "python -m mscl select-setting --metrics {input} --keys {params.grid_keys} --metric {params.metric} --out {output} > {log} 2>&1"
