"""The config a Snakemake run of this workflow is in force with, for the commands that run beside
it (`python -m mscl stale`): the same files, layered the same way, with the schema's defaults.

As in workflow/main.smk: `--configfile A B` gives exactly A then B, each later file's keys
overriding (nested mappings merged key by key, as Snakemake merges them); no file named gives
the checkout's config.yaml (the embedded default). Relative paths in the config are relative
to the working directory, where Snakemake runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from mscl.errors import InputError
from mscl.provenance import CHECKOUT

SCHEMA = CHECKOUT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = CHECKOUT / "config.yaml"


class ConfigError(Exception):
    """A config the schema refuses; the message names the key, the files and the fix."""


def load_config(configfiles: Sequence[str | Path] | None) -> tuple[dict[str, Any], list[Path]]:
    """The config in force and the files it came from. InputError for a missing or unreadable
    file, ConfigError for one the schema refuses (named as the workflow names it)."""
    from snakemake.common.configfile import load_configfile
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import update_config, validate

    from mscl.errors import config_validation_problem

    files = [Path(name) for name in configfiles] if configfiles else [DEFAULT_CONFIG]
    config: dict[str, Any] = {}
    for path in files:
        if not path.is_file():
            raise InputError(path, "config file not found", "name the config files you run snakemake with (--configfile A B ...)")
        try:
            update_config(config, load_configfile(str(path)))
        except WorkflowError as error:
            raise InputError(path, f"cannot read the config file ({str(error).splitlines()[0]})", "fix its YAML") from None
    try:
        validate(config, str(SCHEMA))
    except WorkflowError as error:
        raise ConfigError(config_validation_problem(error, files)) from None
    return config, files
