"""Stopping sandbox processes by PID: exactly what we started, children included, nothing else."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from gpustack_operator.sandbox import process
from tests.helpers import eventually


async def _child_pid(parent: int) -> int:
    def first_child() -> int | None:
        children = Path(f"/proc/{parent}/task/{parent}/children")
        text = children.read_text().split() if children.exists() else []
        return int(text[0]) if text else None

    return await eventually(first_child, timeout=10, what=f"a child of pid {parent}")


async def test_stop_ends_the_component_and_the_children_it_spawned(tmp_path: Path) -> None:
    started = process.spawn("shell", ["sh", "-c", "sleep 60 & wait"], tmp_path)
    child = await _child_pid(started.pid)
    assert process.alive(started.pid, started.started_at)
    killed = process.stop(started.pid, grace=5.0, started_at=started.started_at)
    assert not killed, "SIGTERM to the process group was enough"
    assert not process.alive(started.pid)
    # The signal reached the whole group; the child's exit is only a scheduling delay away.
    await eventually(lambda: not process.alive(child), timeout=10, what="the component's child ends with it")


def test_a_reused_pid_is_neither_reported_alive_nor_signalled(tmp_path: Path) -> None:
    started = process.spawn("sleeper", ["sleep", "60"], tmp_path)
    assert started.started_at is not None
    someone_else = started.started_at + 1  # what a state file from before a reboot would hold
    try:
        assert not process.alive(started.pid, someone_else)
        assert process.stop(started.pid, grace=0.1, started_at=someone_else) is False
        assert process.alive(started.pid, started.started_at), "an unrelated process was signalled"
    finally:
        process.stop(started.pid, grace=5.0, started_at=started.started_at)
    assert not process.alive(started.pid)


def test_start_time_of_a_missing_pid_is_none() -> None:
    assert process.start_time(os.getpid()) is not None
    assert process.start_time(2**22 + 12345) is None


def test_free_ports_are_distinct_bindable_and_below_the_kernels_outgoing_range() -> None:
    ports = [process.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(10000 <= port < process._ephemeral_start() for port in ports)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", ports[0]))
