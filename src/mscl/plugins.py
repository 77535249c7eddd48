"""Plugins: Python files or modules that register losses and encoder kinds (`mscl.registry`).

The config lists them under `plugins:`: a path to a `.py` file, relative to the working
directory (where Snakemake runs), or the name of an importable module. The workflow imports
them while it parses, so that their names are valid everywhere the config names a loss or an
encoder kind. A run that uses what a plugin registered carries the plugin in its run spec,
`plugins: [{plugin: <as listed>, sha256: <hash of its file>}]`: the hash is part of the params
of exactly the jobs that use the plugin, so editing the plugin reruns those jobs and no other,
and every `python -m mscl` command that reads a spec imports the spec's plugins first and
refuses a file whose content no longer matches the hash the workflow planned with.

Standard library only.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from mscl import registry
from mscl.errors import InputError

# Where users look for the format: every refusal names it.
DOCS = "docs/extending.md"


@dataclass(frozen=True)
class Plugin:
    reference: str  # as the config lists it
    path: Path  # the file that was imported
    sha256: str

    def spec_entry(self) -> dict[str, str]:
        """How a run spec records it."""
        return {"plugin": self.reference, "sha256": self.sha256}


_LOADED: dict[str, Plugin] = {}


def is_file_reference(reference: str) -> bool:
    return reference.endswith(".py") or "/" in reference or "\\" in reference


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_plugin(reference: str, where: str = "plugins") -> Plugin:
    """Import one plugin (once per process) and return it. InputError naming `where` (the
    config key or spec that listed it) when it cannot be found or raises on import."""
    if reference in _LOADED:
        return _LOADED[reference]
    if not isinstance(reference, str) or not reference.strip():
        raise InputError(where, f"plugin {reference!r} is not a file path or module name", f"list a .py file or a module name ({DOCS})")
    if is_file_reference(reference):
        module_file = Path(reference)
        if not module_file.is_file():
            raise InputError(
                where, f"plugin file {reference!r} does not exist (relative paths are read from the working directory {Path.cwd()})",
                f"give the path of your plugin's .py file, relative to where snakemake runs, or an absolute one ({DOCS})",
            )  # fmt: skip
        module_name = f"mscl_plugin_{hashlib.sha256(str(module_file.resolve()).encode()).hexdigest()[:12]}_{module_file.stem}"
        spec = importlib.util.spec_from_file_location(module_name, module_file)
        if spec is None or spec.loader is None:
            raise InputError(where, f"plugin file {reference!r} cannot be imported as Python", f"give a .py file ({DOCS})")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        importer = lambda: spec.loader.exec_module(module)  # noqa: E731
    else:
        if importlib.util.find_spec(reference.split(".")[0]) is None:
            raise InputError(
                where, f"plugin module {reference!r} is not importable (and is no .py path)",
                f"install the module in the environment snakemake and the jobs run in, or list the plugin's .py file ({DOCS})",
            )  # fmt: skip
        importer = lambda: importlib.import_module(reference)  # noqa: E731
    try:
        with registry.loading(reference):
            importer()
    except registry.RegistrationError as error:
        raise InputError(where, f"plugin {reference!r} could not register: {error}", f"fix the registration in the plugin ({DOCS})") from None
    except Exception as error:  # a plugin's own bug: show where, not the whole traceback
        frame = traceback.extract_tb(error.__traceback__)[-1]
        raise InputError(
            where, f"plugin {reference!r} raised {type(error).__name__}: {error} (at {frame.filename}:{frame.lineno})",
            f"fix the plugin; it must import without errors ({DOCS})",
        ) from None  # fmt: skip
    if not is_file_reference(reference):
        located = getattr(sys.modules.get(reference), "__file__", None)
        if located is None:
            raise InputError(where, f"plugin module {reference!r} has no file to hash", f"list a module that is a .py file ({DOCS})")
        module_file = Path(located)
    plugin = Plugin(reference, module_file, _file_sha256(module_file))
    _LOADED[reference] = plugin
    return plugin


def load_plugins(references: Iterable[str], where: str = "plugins") -> list[Plugin]:
    """Import every listed plugin, in order."""
    return [load_plugin(reference, where) for reference in references]


def plugins_of_run(plugins: Sequence[Plugin], loss: str, encoder_kind: str) -> list[dict[str, str]]:
    """The spec entries of the plugins that registered a run's loss or encoder kind."""
    used = set(registry.plugin_sources(loss=loss, kind=encoder_kind))
    return [plugin.spec_entry() for plugin in plugins if plugin.reference in used]


def load_spec_plugins(entries: Any, where: str) -> None:
    """Import the plugins a run spec records (`plugins`), checking that each file is still the
    one the workflow planned the job with."""
    if entries is None:
        return
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) and isinstance(e.get("plugin"), str) for e in entries):
        raise InputError(where, f"spec key 'plugins' is {entries!r}", "give a list of {plugin: PATH_OR_MODULE, sha256: HASH} entries", field="plugins")
    for entry in entries:
        plugin = load_plugin(entry["plugin"], where)
        if entry.get("sha256") is not None and entry["sha256"] != plugin.sha256:
            raise InputError(
                where, f"plugin {entry['plugin']!r} changed after this job was planned (sha256 {plugin.sha256[:12]}..., planned {str(entry['sha256'])[:12]}...)",
                "rerun snakemake: it reruns exactly the jobs that use the plugin", field="plugins",
            )  # fmt: skip
