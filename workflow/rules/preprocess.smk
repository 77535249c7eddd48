# Raw published formats -> one manifest per dataset setting (mscl.data.*).


# The split lists may be downloaded: run that on the submit host, which has internet where
# compute nodes often do not.
localrules:
    mimic_split_lists,


# The published datasets kept in one root folder each: one rule per source, named
# prepare_<source> (the SLURM profiles' set-resources and the job list use these names), all
# from this one definition. Their options beyond root, out and seed: prepare_options.
for _source in ("coco", "voc", "nuswide", "aapd"):

    rule:
        name:
            f"prepare_{_source}"
        input:
            raw=source_input(_source, _source),
        output:
            manifest(_source),
        log:
            f"{LOGS}/preprocess/{_source}.log",
        benchmark:
            f"{BENCHMARKS}/preprocess/{_source}.tsv"
        conda:
            CONDA_ENV
        params:
            root=raw_root(_source),
            out=folder_of("output"),
            seed=config["seed"],
            options=prepare_options(_source),
            # A param, not an f-string in `shell:`: Snakemake evaluates the shell string again
            # when the job runs, when `_source` holds the loop's last value.
            command=f"prepare-{_source}",
        # --from-config: messages name the `sources.<source>` keys (no param: it changes no output).
        shell:
            "python -m mscl {params.command} --root {params.root} --out {params.out} --seed {params.seed} "
            "{params.options} --from-config > {log} 2>&1"


# Datasets of one's own: a `sources` entry of kind csv (one CSV/TSV file) or manifest (a folder
# in the manifest format), named by its key (docs/extending.md). No code, one rule.
rule prepare_own_dataset:
    input:
        own_source_input,
    output:
        manifest("{dataset}"),
    log:
        f"{LOGS}/preprocess/{{dataset}}.log",
    benchmark:
        f"{BENCHMARKS}/preprocess/{{dataset}}.tsv"
    wildcard_constraints:
        dataset="|".join(OWN_SOURCES) or "NO_SOURCE_OF_ONES_OWN",
    conda:
        CONDA_ENV
    params:
        out=folder_of("output"),
        command=own_source_command,
    shell:
        "python -m mscl {params.command} --out {params.out} --from-config > {log} 2>&1"


rule mimic_split_lists:
    input:
        split_list_input,
    output:
        expand(f"{PROCESSED}/splits/{{{{version}}}}/{{name}}", name=SPLIT_LIST_FILES),
    log:
        f"{LOGS}/preprocess/{{version}}_splits.log",
    conda:
        CONDA_ENV
    params:
        out=folder_of("output"),
        source=lambda wildcards: split_list_option(wildcards.version),
    shell:
        "python -m mscl fetch-mimic-splits --version {wildcards.version} --out {params.out} "
        "{params.source} > {log} 2>&1"


rule prepare_mimic:
    input:
        splits=rules.mimic_split_lists.output,
        raw=source_input(None, "{version}_full"),
    output:
        full=manifest("{version}_full"),
        top50=manifest("{version}_50"),
    log:
        f"{LOGS}/preprocess/{{version}}.log",
    benchmark:
        f"{BENCHMARKS}/preprocess/{{version}}.tsv"
    conda:
        CONDA_ENV
    resources:
        mem_mb=rule_resource("prepare_mimic", "mem_mb", wildcard="version"),
        runtime=rule_resource("prepare_mimic", "runtime", wildcard="version"),
    params:
        root=mimic_root,
        splits=folder_of("input.splits"),
        label_space=lambda wildcards: config["sources"][source_of(wildcards.version)]["label_space"],
        full=folder_of("output.full"),
        top50=folder_of("output.top50"),
    shell:
        "python -m mscl prepare-mimic --version {wildcards.version} --root {params.root} "
        "--splits {params.splits} --out-full {params.full} --out-50 {params.top50} "
        "--label-space {params.label_space} > {log} 2>&1"


# The claim check's datasets (config/claim.yaml, docs/claim-check.md): real public data that
# reaches the machine through package registries. The parsers name the install command when
# a source is missing.


rule prepare_yeast:
    output:
        manifest("yeast"),
    log:
        f"{LOGS}/preprocess/yeast.log",
    conda:
        CONDA_ENV
    params:
        out=folder_of("output"),
        seed=config["seed"],
        source=lambda wildcards: (
            ""
            if config["sources"]["yeast"]["source"] == "package"
            else f"--source {config['sources']['yeast']['source']}"
        ),
    shell:
        "python -m mscl prepare-yeast --out {params.out} --seed {params.seed} {params.source} > {log} 2>&1"


# With `sources.debtags.embed` (an hf encoder spec) the descriptions are prepared as text under
# debtags_text/ and then embedded once by the frozen encoder into the `debtags` manifest, whose
# content is the embeddings (`features`): the claim check's CPU tier (docs/claim-check.md).
DEBTAGS_EMBED = config["sources"]["debtags"].get("embed")


rule prepare_debtags:
    output:
        manifest("debtags_text" if DEBTAGS_EMBED else "debtags"),
    log:
        f"{LOGS}/preprocess/debtags.log",
    conda:
        CONDA_ENV
    params:
        out=folder_of("output"),
        seed=config["seed"],
        source=dict(sorted(config["sources"]["debtags"].items())),  # sorted: reordered keys rerun nothing
    shell:
        "python -m mscl prepare-debtags --lists {params.source[lists]} --out {params.out} --seed {params.seed} "
        "--min-count {params.source[min_count]} --exclude-facets '{params.source[exclude_facets]}' "
        "--sample-fraction {params.source[sample_fraction]} > {log} 2>&1"


if DEBTAGS_EMBED:

    rule embed_debtags:
        input:
            manifest("debtags_text"),
        output:
            manifest("debtags"),
        log:
            f"{LOGS}/preprocess/debtags_embed.log",
        benchmark:
            f"{BENCHMARKS}/preprocess/debtags_embed.tsv"
        conda:
            CONDA_ENV
        threads: 2
        params:
            data=folder_of("input"),
            out=folder_of("output"),
            spec=shlex.quote(json.dumps(DEBTAGS_EMBED, sort_keys=True)),
        shell:
            "OMP_NUM_THREADS={threads} python -m mscl embed-text --data {params.data} --encoder-spec {params.spec} "
            "--out {params.out} > {log} 2>&1"


# With `sources.fashion_mnist.pixels` (a side in pixels) the canvases are prepared as PNGs under
# fashion_mnist_images/ and then box-averaged once into grey pixel vectors in the
# `fashion_mnist` manifest (`features`): the claim check's CPU tier (docs/claim-check.md).
FASHION_MNIST_PIXELS = config["sources"]["fashion_mnist"].get("pixels")


rule prepare_fashion_mnist:
    output:
        manifest("fashion_mnist_images" if FASHION_MNIST_PIXELS else "fashion_mnist"),
    log:
        f"{LOGS}/preprocess/fashion_mnist.log",
    conda:
        CONDA_ENV
    params:
        out=folder_of("output"),
        seed=config["seed"],
        source=dict(sorted(config["sources"]["fashion_mnist"].items())),  # sorted: reordered keys rerun nothing
    shell:
        "python -m mscl prepare-fashion-mnist --root {params.source[root]} --out {params.out} --seed {params.seed} "
        "--train-canvases {params.source[train_canvases]} --test-canvases {params.source[test_canvases]} "
        "--val-fraction {params.source[val_fraction]} "
        "--canvas-size {params.source[canvas_size]} --max-items {params.source[max_items]} "
        "--class-exponent {params.source[class_exponent]} > {log} 2>&1"


if FASHION_MNIST_PIXELS:

    rule pixels_fashion_mnist:
        input:
            manifest("fashion_mnist_images"),
        output:
            manifest("fashion_mnist"),
        log:
            f"{LOGS}/preprocess/fashion_mnist_pixels.log",
        conda:
            CONDA_ENV
        params:
            data=folder_of("input"),
            out=folder_of("output"),
            size=FASHION_MNIST_PIXELS,
        shell:
            "python -m mscl image-pixels --data {params.data} --size {params.size} --out {params.out} > {log} 2>&1"
