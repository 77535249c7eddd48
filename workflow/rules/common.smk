import os

# Shared definitions: paths, the dataset -> source map, input functions, target lists.
# No logic beyond that: everything else lives in the mscl package.

RAW = config["paths"]["raw"]
PROCESSED = config["paths"]["processed"]
RESULTS = config["paths"]["results"]

# A prepared dataset is a folder of these files (see mscl.data.manifest).
MANIFEST_FILES = ["train.parquet", "val.parquet", "test.parquet", "labels.txt", "stats.json"]
SPLIT_LIST_FILES = [
    f"{split}_{space}_hadm_ids.csv" for split in ("train", "dev", "test") for space in ("full", "50")
] + ["top50_code_list.txt"]
MIMIC_VERSIONS = ["mimic3", "mimic4_icd9", "mimic4_icd10"]
DEMO_KINDS = ["coco", "voc", "nuswide", "aapd", "mimic3", "mimic4"]
# Used with `--sdm conda`; otherwise jobs run in the environment snakemake runs in.
CONDA_ENV = "../../envs/mscl.yaml"


wildcard_constraints:
    dataset="|".join(config["datasets"]),
    version="|".join(MIMIC_VERSIONS),
    kind="|".join(DEMO_KINDS),


def source_of(dataset_or_version):
    """The raw source a dataset setting (or MIMIC version) is prepared from."""
    for prefix in ("mimic3", "mimic4"):
        if dataset_or_version.startswith(prefix):
            return prefix
    return dataset_or_version


def is_demo(source):
    return config["sources"][source]["root"] == "demo"


def raw_root(source):
    """Params function: the generated demo folder (the rule's input) or the configured root."""

    def root(wildcards, input):
        return input.raw[0] if is_demo(source) else config["sources"][source]["root"]

    return root


def folder_of(name):
    """Params function: the folder holding the rule's first file of input/output `name`."""

    def folder(wildcards, input, output):
        files = {"input": input, "output": output}[name.split(".")[0]]
        if "." in name:
            files = getattr(files, name.split(".")[1])
        return os.path.dirname(files[0])

    return folder


def demo_input(source):
    """The generated demo folder when a source runs on demo data, else nothing."""
    return [f"{RAW}/demo/{source}"] if is_demo(source) else []


def mimic_root(wildcards, input):
    source = source_of(wildcards.version)
    return input.raw[0] if is_demo(source) else config["sources"][source]["root"]


def manifest(dataset):
    return [f"{PROCESSED}/{dataset}/{name}" for name in MANIFEST_FILES]


def split_list_option(version):
    """Command-line source of the MIMIC split lists for one version (see the schema)."""
    source = source_of(version)
    splits = config["sources"][source]["splits"]
    if splits == "download":
        return ""
    if splits == "demo":
        # The demo's lists are generated, so there is no published checksum to verify.
        return f"--source {RAW}/demo/{source}/splits/{version} --no-verify"
    return f"--source {splits}/{version}"


def split_list_input(version):
    source = source_of(version)
    return demo_input(source) if config["sources"][source]["splits"] == "demo" else []


def all_targets():
    return [f"{RESULTS}/tables/statistics.{ext}" for ext in ("tex", "csv", "md")]
