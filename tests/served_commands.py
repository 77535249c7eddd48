"""Preloaded by test job servers (tests/test_jobserver.py): the server's `pretrain` command
becomes `main` below, so a worker's exit path can be checked without training anything.

`--data` names what the job does: `sleep` (until signalled), `exit<N>` (return N), `raise`
(an uncaught exception) or `environment` (write the server's environment, as this module saw
it when the server imported it, to `--out`/server_environment.json); every job registers an
atexit handler that writes `--out`/atexit.txt.
The job processes parse `pretrain`'s real arguments, so the command line stays valid.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from pathlib import Path

# The server runs as `python -m mscl`: its dispatcher is the `__main__` module, whose `run` its
# workers call (mscl.__main__ hands it to mscl.jobserver.main).
sys.modules["__main__"].COMMANDS["pretrain"] = (__name__, "test stand-in for pretrain")
SERVER_ENVIRONMENT = dict(os.environ)


def main(argv: list[str]) -> int:
    options = dict(zip(argv[::2], argv[1::2]))
    action, out = options["--data"], Path(options["--out"])
    out.mkdir(parents=True, exist_ok=True)
    atexit.register(lambda: (out / "atexit.txt").write_text("ran"))
    print(f"served command: {action}", file=sys.stderr, flush=True)
    if action == "sleep":
        time.sleep(300)
    if action == "environment":
        (out / "server_environment.json").write_text(json.dumps(SERVER_ENVIRONMENT))
        return 0
    if action == "raise":
        raise RuntimeError("raised by the served command")
    return int(action.removeprefix("exit"))
