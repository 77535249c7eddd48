"""The package's shape: no import cycle, standard-library leaves for what the workflow, the
parsers and the code share (mscl.layout, mscl.defaults), and a run layout they all read."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from mscl import cli, defaults, layout

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "mscl"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """The mscl modules `path` imports, at module level or inside functions: `import a.b`,
    `from a.b import c` (a.b.c when c is a module of the package, else a.b)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import; the package imports absolutely"
            found.update(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module for alias in node.names)
    return {name for name in found if name in MODULES}


def import_graph() -> dict[str, set[str]]:
    return {name: imported_modules(path) - {name} for name, path in MODULES.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None (depth-first search, colouring nodes)."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert "mscl.jobserver" in graph["mscl.__main__"] and "mscl.cli" in graph["mscl.data.mimic_splits"]  # the walk sees imports
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_job_server_is_reached_from_one_module_and_the_workflow_once():
    """Its footprint: the entry point (`__main__`: the job's side hands its command over, the
    server's side runs) and the workflow's onstart (common.smk starts it). Training code and the
    report do not know it exists; the cost table reads the usage line through mscl.usage."""
    graph = import_graph()
    assert sorted(name for name, targets in graph.items() if "mscl.jobserver" in targets) == ["mscl.__main__"]
    rules = SRC.parent / "workflow"
    reaching = sorted(path.name for path in [*rules.rglob("*.smk"), SRC.parent / "Snakefile"] if "jobserver" in path.read_text(encoding="utf-8"))
    assert reaching == ["common.smk"]


def test_the_cycle_finder_finds_function_level_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("leaf", ["mscl.layout", "mscl.defaults"])
def test_shared_modules_are_standard_library_leaves(leaf):
    """The workflow imports them from src/ in whatever environment Snakemake runs in, and the
    parsers at --help time: nothing of mscl, nothing outside the standard library."""
    tree = ast.parse(MODULES[leaf].read_text(encoding="utf-8"))
    names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names


def test_no_module_takes_constants_from_the_parsers():
    """`mscl.cli` only builds parsers: what the commands share lives in mscl.layout and
    mscl.defaults, and modules import from cli its functions (parse_args, ...) alone."""
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "mscl.cli":
                assert all(not alias.name.isupper() for alias in node.names), (name, [a.name for a in node.names])
    constants = [
        target.id for node in ast.parse(MODULES["mscl.cli"].read_text(encoding="utf-8")).body if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(target, ast.Name)
    ]  # fmt: skip
    assert constants == ["AddOptions", "_COMMANDS"]


def test_the_parsers_offer_the_shared_names():
    from mscl.bench.losses import LABEL_FORMS
    from mscl.report.figures import FIGURES

    def choices(command: str, dest: str) -> tuple:
        return tuple(next(a for a in cli.build_parser(command)._actions if a.dest == dest).choices)

    assert choices("table", "name") == layout.TABLE_NAMES  # each one built: test_report_names
    assert choices("figure", "name") == layout.FIGURE_NAMES and tuple(FIGURES) == layout.FIGURE_NAMES
    assert choices("make-demo", "kind") == tuple(sorted(layout.DEMO_KINDS))
    assert choices("fetch-mimic-splits", "version") == choices("prepare-mimic", "version") == layout.MIMIC_VERSIONS
    assert choices("bench losses", "forms") == defaults.LABEL_FORM_NAMES == tuple(LABEL_FORMS)


def test_a_run_and_its_jobs_files_share_its_name():
    name = layout.run_name("coco", "resnet8", "any", 64, 1)
    assert name == "coco/resnet8/any/bs64/seed1"
    assert layout.run_dir("results", name) == "results/runs/coco/resnet8/any/bs64/seed1"
    assert layout.job_log("results", "pretrain", name) == "results/logs/pretrain/coco/resnet8/any/bs64/seed1.log"
    assert layout.job_benchmark("out", "probe", name) == "out/benchmarks/probe/coco/resnet8/any/bs64/seed1.tsv"
    assert layout.job_benchmark("out", "probe", name, tuning=True) == "out/benchmarks/tuning/probe/coco/resnet8/any/bs64/seed1.tsv"
    # The workflow passes the patterns themselves: its wildcards come back unchanged.
    assert layout.job_log("r", "probe") == "r/logs/probe/" + layout.RUN_NAME + ".log"
    assert layout.run_name("{dataset}", "{encoder}", "{loss}", "{batch}", "{seed}") == layout.RUN_NAME
    results = Path("w/results")
    log = Path(layout.job_log(str(results), "pretrain", name))
    assert layout.benchmark_of_log(results, log) == Path(layout.job_benchmark(str(results), "pretrain", name))
    assert layout.benchmark_of_log(results, Path(".snakemake/log/x.log")) is None


def test_every_function_is_at_most_80_lines():
    """Small, plainly named functions: none in src/mscl longer than 80 lines (decorators and
    docstring included)."""
    lengths = {
        f"{name}.{node.name}:{node.lineno}": node.end_lineno - min([node.lineno, *(d.lineno for d in node.decorator_list)]) + 1
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assert len(lengths) > 500  # every module was read
    assert {where: n for where, n in lengths.items() if n > 80} == {}
