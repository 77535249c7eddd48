"""Errors that reach users: each names the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


class InputError(Exception):
    """Bad or missing input. Never put note text (PHI) in the message."""

    def __init__(self, path: str | Path | None, problem: str, fix: str, field: str | None = None):
        self.path = None if path is None else str(path)
        self.field = field
        self.problem = problem
        self.fix = fix
        where = f"{self.path}" if self.path else "<input>"
        if field:
            where += f" (field {field!r})"
        super().__init__(f"{where}: {problem}. Fix: {fix}")


class OptionNames:
    """How a message names a command's option: as the command line spells it (`--labels-column`)
    or, for a command the workflow runs from a config block (`--from-config`: the block
    `sources.shapes`), first as the config key the user wrote: "`sources.shapes.labels_column`
    (--labels-column)".
    A negative flag names the key's value: "`sources.shapes.verify_images: false`
    (--no-verify-images)"."""

    def __init__(self, config_key: str | None = None):
        self.config_key = config_key

    @classmethod
    def of_source(cls, source: str | None, from_config: bool) -> "OptionNames":
        """The names of a preparation's options: `sources.<source>`'s keys when it runs `--from-config`."""
        return cls(f"sources.{source}" if from_config and source else None)

    def __call__(self, option: str) -> str:
        if self.config_key is None:
            return option
        negated = option.startswith("--no-")
        key = f"{self.config_key}.{option.removeprefix('--no-' if negated else '--').replace('-', '_')}"
        return f"`{key}{': false' if negated else ''}` ({option})"


def shown(value: str, limit: int) -> str:
    """A cell's value as an error message may quote it: its repr when it is one token (no
    whitespace) of at most `limit` characters, else only its length. Ids, split values, labels
    and paths are such tokens; a value with spaces may be a note that landed in the wrong column
    (PHI), which a message must never print."""
    if len(value) <= limit and not any(character.isspace() for character in value):
        return repr(value)
    return f"<{len(value)} characters, not shown>"


def config_validation_problem(error: BaseException, config_files: Sequence[object]) -> str:
    """A config that fails the JSON schema, in a few lines: the key, what is wrong, the config
    files to fix it in and the schema's description of the key, instead of Snakemake's dump of
    the schema (over a thousand lines for some keys). `error` is what snakemake.utils.validate
    raised; anything else is returned as it reads."""
    validation = error.__cause__ or error.__context__  # the jsonschema ValidationError it wraps
    if not (hasattr(validation, "absolute_path") and hasattr(validation, "validator")):
        return str(error)
    if validation.context:  # anyOf/oneOf: the alternative that came closest
        from jsonschema.exceptions import best_match

        validation = best_match(validation.context)
    path = [str(part) for part in validation.absolute_path]
    problem = validation.message[:300]
    description = validation.schema.get("description") if isinstance(validation.schema, dict) else None
    if validation.validator == "additionalProperties" and isinstance(validation.instance, dict):
        allowed = sorted(validation.schema.get("properties", {}))
        path.append(sorted(set(validation.instance) - set(allowed))[0])
        problem, description = f"no such key{f' (allowed here: {allowed})' if allowed else ''}", None
    key = ".".join(path) or "(top level)"
    files = ", ".join(map(str, config_files)) or "your config file"
    return (
        f"invalid config key `{key}` in {files}: {problem}. "
        f"Fix: correct `{key}` in {files} (or in a --config override); workflow/schemas/config.schema.yaml documents every key"
        + (f". `{key}`: {' '.join(str(description).split())[:300]}" if description else "")
    )
