"""Start, watch and stop the sandbox's processes by PID.

Every component runs detached in its own session (so Ctrl-C in a terminal reaches only us), logs to a file
in the run directory, and is remembered by PID in the sandbox state so that `sandbox down` from another
shell, a test fixture's teardown or a signal handler can stop exactly what was started and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_PORT = 10000
_handed_out: set[int] = set()
# The Popen of each component this process started and has not yet seen exit. Kept so that it is reaped
# through Popen (which then knows its exit status) instead of being dropped while the child runs, which
# Python reports as a ResourceWarning ("subprocess N is still running").
_children: dict[int, subprocess.Popen[bytes]] = {}


def _ephemeral_start() -> int:
    """Where the kernel starts picking ports for outgoing connections (32768 when it cannot tell)."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, below the kernel's ephemeral range.

    A port from the ephemeral range (what binding port 0 gives) can be handed to an outgoing connection
    between this check and the component's own bind, which then fails with "address already in use";
    ports below the range are never handed out that way. Picked at random, never twice in one process,
    so that two sandboxes starting at once rarely reach for the same one.
    """
    high = max(_ephemeral_start() - 1, _LOWEST_PORT + 1000)
    while True:
        port = random.randint(_LOWEST_PORT, high)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port


@dataclass(frozen=True)
class Started:
    """A running component: its name, PID, start time (to tell it from a later process with the same PID)
    and log file."""

    name: str
    pid: int
    log: Path
    started_at: int | None = None


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22), or None if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


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
    _children[proc.pid] = proc
    return Started(name, proc.pid, log, start_time(proc.pid))


def alive(pid: int, started_at: int | None = None) -> bool:
    """True while pid runs, is not a zombie and, when started_at is given, is still the process we started."""
    if started_at is not None and start_time(pid) != started_at:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if (ours := _children.get(pid)) is not None:
        if ours.poll() is not None:
            del _children[pid]
            return False
    else:
        with contextlib.suppress(ChildProcessError):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _signal(pid: int, sig: signal.Signals) -> None:
    """Signal the process group our session leader heads (its children too), else the process alone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _wait_gone(pid: int, started_at: int | None, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid, started_at):
            return True
        time.sleep(0.05)
    return not alive(pid, started_at)


def stop(pid: int, grace: float = 10.0, started_at: int | None = None) -> bool:
    """SIGTERM pid's group, wait up to grace seconds, then SIGKILL. Returns True if it had to be killed.

    With started_at, a PID now used by some other process is left alone.
    """
    if not alive(pid, started_at):
        return False
    _signal(pid, signal.SIGTERM)
    if _wait_gone(pid, started_at, grace):
        return False
    _signal(pid, signal.SIGKILL)
    _wait_gone(pid, started_at, 10.0)
    return True


def tail(log: Path, lines: int = 20) -> str:
    """The last lines of a component's log, for error messages."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
