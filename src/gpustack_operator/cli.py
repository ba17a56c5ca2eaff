"""Argument parsing for the `gpustack-operator` command; subcommands live with the code they run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpustack_operator import __version__
from gpustack_operator.device_manager import command as device_manager_command
from gpustack_operator.sandbox import command as sandbox_command
from gpustack_operator.worker import command as worker_command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpustack-operator",
        description=(
            "GPUStack operator: turns the GPUs of a cluster into fair, exact, Kueue-based capacity."
        ),
    )
    parser.add_argument("--version", action="version", version=f"gpustack-operator {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    worker_command.register(commands)
    device_manager_command.register(commands)
    sandbox_command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
