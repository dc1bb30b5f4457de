"""Shell completion: click's scripts for the shell the command runs under."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FLEETGATE = Path(sys.executable).with_name("fleetgate")


def test_shell_completion_is_offered(tmp_path: Path) -> None:
    # --show-completion prints the script for the shell it is run from (found by walking the
    # parent processes), as a user types it: so run it from bash (the "; true" keeps bash from
    # exec'ing the command in its place, which would leave no shell to find).
    out = subprocess.run(
        ["bash", "-c", f"{FLEETGATE} --show-completion; true"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=300,
    )
    assert "_FLEETGATE_COMPLETE=bash_complete" in out.stdout, out.stderr
