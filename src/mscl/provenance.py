"""What made a result: the locked stack, the distributions installed and imported, the mscl
source files that ran, and the plugins with their own helpers (docs/reproducibility.md).

Every training job (pretrain, the untrained references' initial encoder, probe, cache-prefix,
chance) writes `provenance()` into its versions.json when it ends, so that the record names the
mscl modules the job imported (a pretraining lists no report code), also when the job server
ran it. `python -m mscl stale` (mscl.stale) compares these records with today's files.

The locks are `requirements.lock.txt` (the pipeline) and `requirements-dev.lock.txt` (the tools
only tests and CI need), written by `make lock` with uv from pyproject.toml: one entry per
distribution, `name==version ; marker`, its sha256 hashes and uv's `# via` lines, which name
`mscl (pyproject.toml)` for a requirement of pyproject.toml itself. `lock_problems` is the check
that pyproject.toml's ranges and the locks agree; `python -m mscl.provenance no-emit LOCK` lists
a lock's distributions in the form `make lock` passes to uv, so that the second lock does not
repeat the first.

Standard library and `packaging` only, nothing of mscl: jobs call it as they end, and the
workflow (plugins' helper modules) while it parses.
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

PACKAGE_DIR = Path(__file__).resolve().parent  # src/mscl
SOURCE_ROOT = PACKAGE_DIR.parent  # recorded paths are relative to it: "mscl/losses.py"
# A checkout (editable install) has the locks beside pyproject.toml, two levels above the package.
CHECKOUT = SOURCE_ROOT.parent
LOCK_FILES = ("requirements.lock.txt", "requirements-dev.lock.txt")
# How uv's `# via` names a requirement of pyproject.toml itself.
DIRECT_MARK = "mscl (pyproject.toml)"
OWN_DISTRIBUTION = "mscl"


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def combined_sha256(named_hashes: Mapping[str, str]) -> str:
    """One hash over `name hash` lines in name order: equal maps, equal hashes."""
    return hashlib.sha256("".join(f"{name} {value}\n" for name, value in sorted(named_hashes.items())).encode()).hexdigest()


# ------------------------------------------------------------------------------- the locks


@dataclass(frozen=True)
class LockEntry:
    name: str  # canonical (PEP 503)
    version: str
    marker: str | None  # where it applies ("sys_platform == 'linux'"); None: everywhere
    hashes: tuple[str, ...]
    direct: bool  # a requirement of pyproject.toml itself
    line: int  # where the entry starts, for messages

    def applies(self, environment: Mapping[str, str] | None = None) -> bool:
        return self.marker is None or Marker(self.marker).evaluate(dict(environment) if environment else None)


def read_lock(path: Path) -> list[LockEntry]:
    """The entries of a lock written by uv (`make lock`). A line it cannot read is a ValueError
    naming the file and line (the lock is generated: it was edited by hand). Parsed once per
    process and version of the file (0.04 s for the main lock; the job server parses it before
    it forks)."""
    stat = path.stat()
    return list(_parsed_lock(str(path), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _parsed_lock(path_text: str, mtime_ns: int, size: int) -> tuple[LockEntry, ...]:
    path = Path(path_text)
    entries: list[LockEntry] = []
    current: dict | None = None
    via: list[str] = []

    def close() -> None:
        if current is not None:
            entries.append(LockEntry(**current, direct=DIRECT_MARK in via))

    logical, start = "", 0
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#"):
            if current is not None and not logical:
                # "# via x" or "# via" followed by "#   x" lines
                via.append(stripped.lstrip("#").strip().removeprefix("via").strip())
            continue
        if not stripped:
            continue
        if not logical:
            start = number
            if not raw[:1].isspace():  # a new entry
                close()
                current, via = None, []
        logical += " " + stripped.removesuffix("\\").strip()
        if stripped.endswith("\\"):
            continue
        parts = logical.split()
        requirement_text = " ".join(part for part in parts if not part.startswith("--hash="))
        hashes = tuple(part.removeprefix("--hash=") for part in parts if part.startswith("--hash="))
        logical = ""
        try:
            requirement = Requirement(requirement_text)
        except InvalidRequirement as error:
            raise ValueError(f"{path}:{start}: not a lock entry ({error}); fix: regenerate the lock with `make lock`") from None
        pins = [spec for spec in requirement.specifier if spec.operator == "=="]
        if len(pins) != 1 or len(requirement.specifier) != 1:
            raise ValueError(f"{path}:{start}: {requirement_text!r} is not pinned with =="
                             "; fix: regenerate the lock with `make lock`")  # fmt: skip
        current = {
            "name": canonicalize_name(requirement.name),
            "version": pins[0].version,
            "marker": str(requirement.marker) if requirement.marker else None,
            "hashes": hashes,
            "line": start,
        }
    close()
    return tuple(entries)


def pyproject_requirements(pyproject: Path) -> list[Requirement]:
    """pyproject.toml's dependencies and every optional group's."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    texts = list(project.get("dependencies", []))
    for group in project.get("optional-dependencies", {}).values():
        texts.extend(group)
    return [Requirement(text) for text in texts]


def lock_problems(pyproject: Path, locks: Sequence[Path]) -> list[str]:
    """Where pyproject.toml and the locks disagree, one sentence each (empty: they agree):
    a requirement no lock pins, a pin outside its requirement's range, a lock's direct
    requirement that pyproject.toml no longer lists, an entry without hashes, a distribution
    pinned by two locks."""
    problems = []
    pinned: dict[str, list[tuple[Path, LockEntry]]] = {}
    for lock in locks:
        for entry in read_lock(lock):
            pinned.setdefault(entry.name, []).append((lock, entry))
            if not entry.hashes:
                problems.append(f"{lock.name}:{entry.line}: {entry.name}=={entry.version} has no --hash")
    required = {}
    for requirement in pyproject_requirements(pyproject):
        name = canonicalize_name(requirement.name)
        required[name] = requirement
        if name not in pinned:
            problems.append(f"pyproject.toml requires {requirement}, which no lock pins")
            continue
        for lock, entry in pinned[name]:
            if not requirement.specifier.contains(entry.version, prereleases=True):
                problems.append(f"{lock.name}:{entry.line}: {entry.name}=={entry.version} is outside pyproject.toml's {requirement}")
    for name, places in sorted(pinned.items()):
        files = sorted({lock.name for lock, _ in places})
        if len(files) > 1:
            problems.append(f"{name} is pinned by {' and '.join(files)} (the dev lock must not repeat the main lock)")
        if name not in required and any(entry.direct for _, entry in places):
            problems.append(f"{files[0]} has {name} as a requirement of pyproject.toml, which no longer lists it")
    return problems


def checkout_locks(root: Path = CHECKOUT) -> list[Path]:
    """The locks of the checkout mscl runs from; none for an installed wheel."""
    return [root / name for name in LOCK_FILES if (root / name).is_file()]


# --------------------------------------------------------------------- what is installed


@functools.cache
def installed_distributions() -> dict[str, str]:
    """Every distribution this interpreter can import from, canonical name -> version, the first
    on sys.path winning as it does for imports; mscl itself left out. Read once per process
    (the job server reads it before it forks its workers: 0.08 s; docs/job-server.md)."""
    found: dict[str, str] = {}
    for distribution in importlib.metadata.distributions():
        name = distribution.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), distribution.version)
    found.pop(OWN_DISTRIBUTION, None)
    return dict(sorted(found.items()))


@functools.cache
def _module_owners() -> Mapping[str, list[str]]:
    """Top-level module name -> the distributions that provide it, read once per process
    (0.15 s: it reads every distribution's file list; the job server reads it before forking)."""
    return importlib.metadata.packages_distributions()


def warm_caches() -> None:
    """Read what every job's record needs of the installed set and the locks now (the job
    server, once, before it forks)."""
    installed_distributions()
    _module_owners()
    for lock in checkout_locks():
        read_lock(lock)


def outside_locks(installed: Mapping[str, str], locks: Sequence[Path]) -> dict[str, str]:
    """The installed distributions no lock pins at their version for this platform."""
    allowed = {(entry.name, entry.version) for lock in locks for entry in read_lock(lock) if entry.applies()}
    return {name: version for name, version in installed.items() if (name, version) not in allowed}


def missing_from_environment(installed: Mapping[str, str], locks: Sequence[Path]) -> dict[str, str]:
    """The distributions a lock pins for this platform that are not installed at that version:
    name -> 'locked (installed: version or none)'."""
    missing = {}
    for lock in locks:
        for entry in read_lock(lock):
            if entry.applies() and installed.get(entry.name) != entry.version:
                missing[entry.name] = f"{entry.version} (installed: {installed.get(entry.name, 'none')})"
    return missing


def environment_record(locks: Sequence[Path] | None = None) -> dict[str, object]:
    """The stack a job ran on: each lock's sha256, one hash over every installed distribution's
    name and version, and those no lock pins at their version, by name."""
    locks = checkout_locks() if locks is None else list(locks)
    installed = installed_distributions()
    return {
        "locks": {lock.name: file_sha256(lock) for lock in locks},
        "installed_sha256": combined_sha256(installed),
        "installed_count": len(installed),
        "outside_locks": outside_locks(installed, locks) if locks else None,
    }


def distributions_of(top_level_names: Iterable[str]) -> dict[str, str]:
    """The installed distributions that provide these top-level module names, name -> version
    (standard-library and unknown names are skipped)."""
    providers = _module_owners()
    found = {}
    for module in top_level_names:
        if module in sys.stdlib_module_names:
            continue
        for distribution in providers.get(module, ()):
            name = canonicalize_name(distribution)
            if name != OWN_DISTRIBUTION and name in installed_distributions():
                found[name] = installed_distributions()[name]
    return dict(sorted(found.items()))


def imported_distributions() -> dict[str, str]:
    """The distributions whose modules this process imported (torch, transformers, ...)."""
    return distributions_of({name.partition(".")[0] for name in list(sys.modules)})


# ------------------------------------------------------------------------ the code that ran


@functools.cache
def source_commit() -> str | None:
    """The git commit of the mscl source that runs, "+dirty" when tracked files differ from it;
    None outside a git checkout (an installed wheel) or without git. Results name the code that
    made them (the claim check's runs.csv holds one commit for all rows)."""
    source = PACKAGE_DIR

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return commit + ("+dirty" if dirty else "")


def module_files(modules: Mapping[str, object], inside: Path) -> list[Path]:
    """The source files of `modules` that lie under the folder `inside` (which is resolved)."""
    prefix = str(inside) + "/"
    files = set()
    for module in list(modules.values()):
        located = getattr(module, "__file__", None)
        if not located or not located.endswith(".py"):
            continue
        # Cheap tests first: sys.modules holds thousands of installed modules (torch's).
        if located.startswith(prefix):
            files.add(Path(located))
        elif not located.startswith((sys.prefix, sys.base_prefix)) and Path(located).resolve().is_relative_to(inside):
            files.add(Path(located).resolve())
    return sorted(files)


# ---- which mscl modules a served job imported
#
# A job in its own process has imported exactly the modules its code named: sys.modules. A job
# served by the job server (mscl.jobserver) starts as a fork of a server that preloaded the
# training modules of every command, so there sys.modules says nothing about this job. The
# server therefore notes, while it preloads, which mscl modules each module's import statements
# named (`track_imports`: builtins.__import__ wrapped, the documented hook), and each worker
# notes what its own statements name from the fork on (`start_job`). The job's modules are then
# the closure, over the preload's edges, of: the server's own modules (every job process has
# them: mscl.__main__ imports them), the modules running when the record is taken (the command's
# own), those the job's statements named, and those it loaded itself. That is what a job in its
# own process would have imported, at no cost per job but a set lookup per import statement.
_ORIGINAL_IMPORT = builtins.__import__
_EDGES: dict[str, set[str]] = {}  # importer -> the mscl modules its statements named (preload)
_JOB_IMPORTS: set[str] | None = None  # in a served job: what its statements named since the fork
_SERVER_MODULES: frozenset[str] = frozenset()  # mscl modules loaded before the preload
_AT_FORK: frozenset[str] = frozenset()  # mscl modules loaded when the job's worker was forked


def _mscl_names(module: str, fromlist: Sequence[str]) -> set[str]:
    """`module`, its parent packages and the submodules among `fromlist`, if mscl's."""
    if module != OWN_DISTRIBUTION and not module.startswith(OWN_DISTRIBUTION + "."):
        return set()
    parts = module.split(".")
    names = {".".join(parts[: index + 1]) for index in range(len(parts))}
    return names | {f"{module}.{item}" for item in fromlist or () if f"{module}.{item}" in sys.modules}


def _tracking_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 - __import__'s own signature
    imported = _ORIGINAL_IMPORT(name, globals, locals, fromlist, level)
    if level and globals:  # a relative import: resolve it against the importer's package
        name = importlib.util.resolve_name("." * level + name, globals.get("__package__") or "")
    named = _mscl_names(name, fromlist)
    if named:
        if _JOB_IMPORTS is not None:
            _JOB_IMPORTS.update(named)
        else:
            _EDGES.setdefault((globals or {}).get("__name__", ""), set()).update(named)
    return imported


def track_imports() -> None:
    """Note, from now on, the mscl modules every import statement names, by importer (the job
    server, before it preloads)."""
    global _SERVER_MODULES
    _SERVER_MODULES = frozenset(_loaded_mscl_modules())
    builtins.__import__ = _tracking_import


def start_job() -> None:
    """In a served job's worker, just forked: note what this job's statements import."""
    global _JOB_IMPORTS, _AT_FORK
    _JOB_IMPORTS, _AT_FORK = set(), frozenset(_loaded_mscl_modules())


def _loaded_mscl_modules() -> set[str]:
    return {name for name in list(sys.modules) if _mscl_names(name, ())}


def job_modules() -> dict[str, object]:
    """The modules this job imported (see above): sys.modules, or for a served job the closure."""
    if _JOB_IMPORTS is None:
        return dict(sys.modules)
    running = set()
    frame = sys._getframe()
    while frame is not None:
        running.add(frame.f_globals.get("__name__", ""))
        frame = frame.f_back
    todo = [*_SERVER_MODULES, *running, *_JOB_IMPORTS, *(_loaded_mscl_modules() - _AT_FORK)]
    reached: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(_EDGES.get(name, ()))
    return {name: sys.modules[name] for name in reached if name in sys.modules}


def code_record(modules: Mapping[str, object] | None = None) -> dict[str, object]:
    """The mscl source files among `modules` (default: the modules this job imported,
    `job_modules`), each with its sha256, and one hash over all of them."""
    files = module_files(job_modules() if modules is None else modules, PACKAGE_DIR)
    hashes = {path.relative_to(SOURCE_ROOT).as_posix(): file_sha256(path) for path in files}
    return {"sha256": combined_sha256(hashes), "files": hashes}


def imported_names(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """Every import statement of a Python file, also those inside functions: (level, module,
    names imported from it), level > 0 for a relative import."""
    found = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((0, alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or "", tuple(alias.name for alias in node.names)))
    return found


def _module_file(folder: Path, dotted: str) -> list[Path]:
    """The files under `folder` that importing `dotted` runs (each package's __init__.py on the
    way, then the module), or [] when `dotted` is not there."""
    parts = [part for part in dotted.split(".") if part]
    files, here = [], folder
    for index, part in enumerate(parts):
        package, module = here / part, here / f"{part}.py"
        if (package / "__init__.py").is_file():
            files.append(package / "__init__.py")
            here = package
        elif module.is_file() and index == len(parts) - 1:
            return [*files, module]
        elif package.is_dir():  # a namespace package
            here = package
        else:
            return []
    return files


def local_imports(path: Path, folder: Path) -> tuple[list[Path], set[str]]:
    """What a plugin file imports, statically (every import statement, also inside functions):
    the files under `folder` it reaches, directly or through each other, and the top-level
    names of everything else it imports."""
    folder, seen, outside = folder.resolve(), set(), set()
    todo = [path.resolve()]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for level, module, names in imported_names(current):
            if level:
                base = current.parent
                for _ in range(level - 1):
                    base = base.parent
                prefix = ".".join(base.relative_to(folder).parts) if base.is_relative_to(folder) else None
                if prefix is None:
                    continue
                dotted = ".".join(part for part in (prefix, module) if part)
            else:
                dotted = module
            reached = _module_file(folder, dotted) if dotted else []
            # `from package import name`: name may be a submodule
            reached += [file for name in names for file in _module_file(folder, f"{dotted}.{name}") if dotted or level]
            if reached:
                todo.extend(file.resolve() for file in reached)
            elif not level:
                outside.add(dotted.partition(".")[0])
    seen.discard(path.resolve())
    return sorted(seen), outside


def plugin_record(reference: str, path: Path, folder: Path) -> dict[str, object]:
    """A plugin as versions.json records it: its file's hash, the hash of each module of its own
    folder it imports, and the version of each installed distribution it imports."""
    helpers, outside = local_imports(path, folder)
    return {
        "plugin": reference,
        "path": str(path.resolve()),
        "sha256": file_sha256(path),
        "local_modules": {helper.relative_to(folder.resolve()).as_posix(): file_sha256(helper) for helper in helpers},
        "distributions": distributions_of(outside),
    }


def provenance(plugins: Iterable[tuple[str, Path, Path]] = ()) -> dict[str, object]:
    """What versions.json records of the software when a job ends; `plugins`: (reference, file,
    folder) of each plugin the job loaded (mscl.plugins.loaded_plugins)."""
    return {
        # How to run it again: the command (the workflow's rule ran it through `mscl launch`) and
        # the folder it ran in, which its relative paths are relative to.
        "command": shlex.join(["python", "-m", "mscl", *sys.argv[1:]]),
        "working_directory": os.getcwd(),
        "python": sys.version.split()[0],
        "mscl_commit": source_commit(),
        "code": code_record(),
        "environment": environment_record(),
        "imported_distributions": imported_distributions(),
        "plugins": [plugin_record(reference, path, folder) for reference, path, folder in plugins],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m mscl.provenance no-emit LOCK`: `--no-emit-package NAME` for each distribution of
    LOCK (make lock); `python -m mscl.provenance check [ROOT]`: pyproject.toml against the locks
    and the locks against this environment, exit 1 on a difference."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "no-emit":
        print(" ".join(f"--no-emit-package {entry.name}" for entry in read_lock(Path(args[1]))))
        return 0
    if args[:1] == ["check"] and len(args) <= 2:
        root = Path(args[1]) if len(args) == 2 else CHECKOUT
        locks = checkout_locks(root)
        if not locks:
            print(f"no lock in {root}", file=sys.stderr)
            return 2
        installed = installed_distributions()
        problems = lock_problems(root / "pyproject.toml", locks)
        problems += [f"installed but in no lock: {name}=={version}" for name, version in outside_locks(installed, locks).items()]
        problems += [f"locked but not installed: {name}=={detail}" for name, detail in missing_from_environment(installed, locks).items()]
        for problem in problems:
            print(problem)
        print(f"{len(problems)} problem(s): {len(installed)} distributions installed, locks {', '.join(lock.name for lock in locks)}")
        return 1 if problems else 0
    print("usage: python -m mscl.provenance no-emit LOCK | check [CHECKOUT]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
