"""Start, watch and stop the sandbox's processes by PID.

Every component runs detached in its own session (so Ctrl-C in a terminal reaches only us), logs to a file
in the run directory, and is remembered by PID in the sandbox state so that `sandbox down` from another
shell, a test fixture's teardown or a signal handler can stop exactly what was started and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Started:
    """A running component: its name, PID and log file."""

    name: str
    pid: int
    log: Path


def spawn(
    name: str, argv: Sequence[str], log_dir: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Started:
    log = log_dir / f"{name}.log"
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            list(argv),
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    return Started(name, proc.pid, log)


def alive(pid: int) -> bool:
    """True while pid runs and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def stop(pid: int, grace: float = 10.0) -> bool:
    """SIGTERM pid, wait up to grace seconds, then SIGKILL. Returns True if it had to be killed."""
    if not alive(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not alive(pid):
            return False
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    while alive(pid):
        time.sleep(0.05)
    return True


def tail(log: Path, lines: int = 20) -> str:
    """The last lines of a component's log, for error messages."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
