"""Argument parsing for the `gpustack-operator` command; subcommands live with the code they run.

A subcommand's module is imported only when that subcommand runs: `device-manager serve` runs on every GPU
node and must not carry the worker's controllers or the sandbox, and `worker` needs no gRPC. The top-level
parser therefore lists every subcommand from the table below (name, aliases, one-line help) and asks the
chosen one's module to register its full parser.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from gpustack_operator import __version__


@dataclass(frozen=True)
class Subcommand:
    name: str
    aliases: tuple[str, ...]
    summary: str
    module: str
    """Its module's `register(subparsers)` adds the full parser and sets `func`."""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


SUBCOMMANDS = (
    Subcommand(
        "worker",
        ("w",),
        "the control-plane process: prepare the cluster, run the controllers under leader election",
        "gpustack_operator.worker.command",
    ),
    Subcommand(
        "device-manager",
        ("dm",),
        "the per-node agent: accelerator detection, reporting and the kubelet device plugin",
        "gpustack_operator.device_manager.command",
    ),
    Subcommand(
        "worker-gateway",
        (),
        "one API over the InstanceTypes and Instances of many clusters (for the GPUStack server)",
        "gpustack_operator.gateway.command",
    ),
    Subcommand(
        "sandbox",
        (),
        "a local Kubernetes control plane with Kueue and fake GPU nodes (for development and tests)",
        "gpustack_operator.sandbox.command",
    ),
)


def chosen_subcommand(argv: Sequence[str]) -> Subcommand | None:
    """The subcommand argv names (its first word that is not an option), if it names one."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return next((sub for sub in SUBCOMMANDS if first in sub.names), None)


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only subcommands named in `load` (None: all) import their modules and full flags."""
    parser = argparse.ArgumentParser(
        prog="gpustack-operator",
        description=(
            "GPUStack operator: turns the GPUs of a cluster into fair, exact, Kueue-based capacity."
        ),
    )
    parser.add_argument("--version", action="version", version=f"gpustack-operator {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for sub in SUBCOMMANDS:
        if load is None or sub.name in load:
            importlib.import_module(sub.module).register(commands)
        else:
            commands.add_parser(sub.name, aliases=list(sub.aliases), help=sub.summary)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    chosen = chosen_subcommand(words)
    parser = build_parser(load=[chosen.name] if chosen else [])
    args = parser.parse_args(words)
    if args.command is None:
        parser.print_help()
        return 0
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
