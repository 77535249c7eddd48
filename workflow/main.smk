# Reproduction pipeline for "Similarity-Dissimilarity Loss for Multi-label Supervised
# Contrastive Learning" (TMLR 2026). Logic lives in the `mscl` package (src/mscl); the rules
# only call its `python -m mscl ...` commands. See README.md.
#
# Everything but the default target: workflow/Snakefile (the workflow catalog's layout) and the
# repository root's Snakefile both include this file and define `rule all` themselves (a
# default target set in an included file does not count), so `snakemake` from the root and
# `snakemake -s workflow/Snakefile` plan the same jobs. Paths of the checkout come from
# REPO_ROOT, never from `workflow.basedir` (the folder of whichever Snakefile Snakemake got).
import os
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

REPO_ROOT = os.path.dirname(str(workflow.current_basedir))
sys.path.insert(0, os.path.join(REPO_ROOT, "src"))
from mscl.errors import InputError, config_validation_problem
from mscl.plugins import load_plugins

min_version("9.0")


# The embedded default applies only when no config file is named on the command line:
# `--configfile config/paper.yaml` gives exactly the paper's grid, nothing merged in from the
# demo (list several files to layer them: `--configfile config.yaml my_overrides.yaml`).
# `--config key=value` still overrides whichever config is in force.
if not workflow.overwrite_configfiles:

    configfile: os.path.join(REPO_ROOT, "config.yaml")


# A bad value stops the run here, named with its config file, not under the schema's dump.
try:
    validate(config, "schemas/config.schema.yaml")
except WorkflowError as error:
    raise WorkflowError(config_validation_problem(error, workflow.configfiles)) from None

# The losses and encoder kinds of the config's plugins are registered before any name is
# checked (common.smk) or any job's spec is written (mscl.plugins, docs/extending.md).
try:
    PLUGINS = load_plugins(
        config["plugins"], where=f"config key `plugins` in {', '.join(map(str, workflow.configfiles))}"
    )
except InputError as error:
    raise WorkflowError(str(error)) from None


include: "rules/common.smk"
include: "rules/demo.smk"
include: "rules/preprocess.smk"
include: "rules/train.smk"
include: "rules/reference.smk"
include: "rules/tables.smk"
include: "rules/report.smk"
