"""Plugins: Python files or modules that register losses and encoder kinds (`mscl.registry`).

The config lists them under `plugins:`: a path to a `.py` file, relative to the working
directory (where Snakemake runs), or the name of an importable module. The workflow imports
them while it parses, so that their names are valid everywhere the config names a loss or an
encoder kind. A plugin file's folder is first on `sys.path` while it loads (then last, for
imports inside its functions), as a script's folder is, so it imports helper modules of its
own folder with no PYTHONPATH. A run that uses what a plugin registered carries the plugin in
its run spec, `plugins: [{plugin: <as listed>, sha256: <hash of its file>, local_modules:
{<helper path>: <hash>}}]` (`local_modules` only when it imports some: found statically, every
import statement of the plugin and its helpers, mscl.provenance.local_imports): the hashes are
part of the params of exactly the jobs that use the plugin, so editing the plugin or one of its
helpers reruns those jobs and no other, and every `python -m mscl` command that reads a spec
imports the spec's plugins first and refuses a file whose content no longer matches the hash
the workflow planned with.

Standard library only (and mscl.provenance, which adds `packaging`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from mscl import registry
from mscl.errors import InputError
from mscl.provenance import file_sha256, local_imports

# Where users look for the format: every refusal names it.
DOCS = "docs/extending.md"


@dataclass(frozen=True)
class Plugin:
    reference: str  # as the config lists it
    path: Path  # the file that was imported
    sha256: str
    folder: Path  # its own modules live here (a file's folder; a module's package folder)
    local_modules: dict[str, str]  # each helper of `folder` it imports, relative path -> sha256

    def spec_entry(self) -> dict[str, Any]:
        """How a run spec records it."""
        entry: dict[str, Any] = {"plugin": self.reference, "sha256": self.sha256}
        if self.local_modules:
            entry["local_modules"] = self.local_modules
        return entry


_LOADED: dict[str, Plugin] = {}


def is_file_reference(reference: str) -> bool:
    return reference.endswith(".py") or "/" in reference or "\\" in reference


def _local_modules(path: Path, folder: Path) -> dict[str, str]:
    helpers, _ = local_imports(path, folder)
    return {helper.relative_to(folder).as_posix(): file_sha256(helper) for helper in helpers}


@contextmanager
def _first_on_path(folder: Path) -> Iterator[None]:
    """`folder` first on sys.path while the plugin loads; afterwards last (a helper imported
    inside one of its functions still resolves, and nothing installed is shadowed)."""
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        sys.path.remove(entry)
        if entry not in sys.path:
            sys.path.append(entry)


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
        folder = module_file.resolve().parent
    else:
        if importlib.util.find_spec(reference.split(".")[0]) is None:
            raise InputError(
                where, f"plugin module {reference!r} is not importable (and is no .py path)",
                f"install the module in the environment snakemake and the jobs run in, or list the plugin's .py file ({DOCS})",
            )  # fmt: skip
        importer = lambda: importlib.import_module(reference)  # noqa: E731
        folder = None
    try:
        with registry.loading(reference), (_first_on_path(folder) if folder else nullcontext()):
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
        folder = module_file.resolve().parent
    plugin = Plugin(reference, module_file, file_sha256(module_file), folder, _local_modules(module_file, folder))
    _LOADED[reference] = plugin
    return plugin


def loaded_plugins() -> list[tuple[str, Path, Path]]:
    """(reference, file, folder) of every plugin this process imported (mscl.provenance)."""
    return [(plugin.reference, plugin.path, plugin.folder) for plugin in _LOADED.values()]


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
        changed = [f"its helper {name!r}" for name, sha256 in (entry.get("local_modules") or {}).items() if plugin.local_modules.get(name) != sha256]
        if entry.get("sha256") is not None and entry["sha256"] != plugin.sha256:
            changed.insert(0, f"its file (sha256 {plugin.sha256[:12]}..., planned {str(entry['sha256'])[:12]}...)")
        if changed:
            raise InputError(
                where, f"plugin {entry['plugin']!r} changed after this job was planned: {', '.join(changed)}",
                "rerun snakemake: it reruns exactly the jobs that use the plugin", field="plugins",
            )  # fmt: skip
