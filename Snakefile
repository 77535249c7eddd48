# Reproduction pipeline for "Similarity-Dissimilarity Loss for Multi-label Supervised
# Contrastive Learning" (TMLR 2026). Logic lives in the `mscl` package (src/mscl); the rules
# only call its `python -m mscl ...` commands. See README.md.
import os
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

sys.path.insert(0, os.path.join(workflow.basedir, "src"))
from mscl.errors import config_validation_problem

min_version("9.0")


# The embedded default applies only when no config file is named on the command line:
# `--configfile config/paper.yaml` gives exactly the paper's grid, nothing merged in from the
# demo (list several files to layer them: `--configfile config.yaml my_overrides.yaml`).
# `--config key=value` still overrides whichever config is in force.
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config.yaml")


# A bad value stops the run here, named with its config file, not under the schema's dump.
try:
    validate(config, "workflow/schemas/config.schema.yaml")
except WorkflowError as error:
    raise WorkflowError(config_validation_problem(error, workflow.configfiles)) from None


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
