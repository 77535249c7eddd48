# Reproduction pipeline for "Similarity-Dissimilarity Loss for Multi-label Supervised
# Contrastive Learning" (TMLR 2026). Logic lives in the `mscl` package (src/mscl); the rules
# only call its `python -m mscl ...` commands. See README.md.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/demo.smk"
include: "workflow/rules/preprocess.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        all_targets(),
    default_target: True
