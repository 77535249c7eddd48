# Reproduction pipeline for "Similarity-Dissimilarity Loss for Multi-label Supervised
# Contrastive Learning" (TMLR 2026). Logic lives in the `mscl` package (src/mscl); the rules
# only call its `python -m mscl ...` commands. See README.md.
import os

from snakemake.utils import min_version, validate

min_version("9.0")


# The embedded default applies only when no config file is named on the command line:
# `--configfile config/paper.yaml` gives exactly the paper's grid, nothing merged in from the
# demo (list several files to layer them: `--configfile config.yaml my_overrides.yaml`).
# `--config key=value` still overrides whichever config is in force.
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config.yaml")


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/demo.smk"
include: "workflow/rules/preprocess.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/reference.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        all_targets(),
    default_target: True
