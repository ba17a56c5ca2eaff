"""One log line format and one `--log-level` flag for every long-running command.

The worker, the worker-gateway, the device manager and the sandbox's kubelet stand-in all log to stderr in
the same shape (`time LEVEL logger: message`), so one grep reads them all; the flag's choices and help are
the same wherever it is offered.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Final

__all__ = ["FORMAT", "add_log_level_flag", "configure"]

FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS: Final = ("debug", "info", "warning", "error")


def add_log_level_flag(parser: argparse.ArgumentParser) -> None:
    """`--log-level {debug,info,warning,error}`, default info."""
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default="info",
        help="least severe log level printed (default: %(default)s)",
    )


def configure(level: str = "info") -> None:
    """Log records at `level` and above to stderr in FORMAT."""
    logging.basicConfig(level=level.upper(), format=FORMAT, stream=sys.stderr)
