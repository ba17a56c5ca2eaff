#!/usr/bin/env python3
"""Regenerate the Python of the kubelet device plugin API, or check (``--check``) that it is current.

Usage: ``python scripts/gen_deviceplugin.py [--check]``. The vendored proto lives at
``src/gpustack_operator/device_manager/plugin/api/api.proto``; grpcio-tools compiles it with ``-I src`` so
the generated modules import each other by their package path and the descriptor is registered under a
unique file name (two bare ``api.proto`` files in one process collide). The generated ``api_pb2.py`` and
``api_pb2_grpc.py`` are committed; ``--check`` exits 1 with a diff when they are stale, and a unit test runs
the same comparison. No ``.pyi`` is generated: protobuf ships no type information, so typed code reaches the
messages through ``plugin/api/__init__.py`` instead.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PROTO = Path("gpustack_operator/device_manager/plugin/api/api.proto")
OUTPUTS = ("api_pb2.py", "api_pb2_grpc.py")


def generate(out_dir: Path) -> dict[str, str]:
    """Compile the proto into out_dir; returns file name -> generated text."""
    from grpc_tools import protoc  # dev dependency: only the generator needs it

    args = [
        "grpc_tools.protoc",
        f"-I{SRC}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        str(SRC / PROTO),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO}")
    generated = out_dir / PROTO.parent
    return {name: (generated / name).read_text(encoding="utf-8") for name in OUTPUTS}


def stale(committed_dir: Path = SRC / PROTO.parent) -> dict[str, str]:
    """Each committed file that differs from a fresh generation: name -> unified diff."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
    diffs: dict[str, str] = {}
    for name, text in fresh.items():
        path = committed_dir / name
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            diffs[name] = "".join(
                difflib.unified_diff(
                    current.splitlines(keepends=True), text.splitlines(keepends=True), str(path), "generated"
                )
            )
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed code is stale")
    args = parser.parse_args(argv)
    if args.check:
        diffs = stale()
        for name, diff in diffs.items():
            print(f"{name} is stale; run scripts/gen_deviceplugin.py\n{diff}", file=sys.stderr)
        return 1 if diffs else 0
    generate(SRC)
    print(f"regenerated {', '.join(OUTPUTS)} from {PROTO}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
