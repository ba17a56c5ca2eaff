#!/usr/bin/env python3
"""Regenerate the Python of the kubelet gRPC APIs we speak, or check (``--check``) that it is current.

Usage: ``python scripts/gen_deviceplugin.py [--check]``. The vendored protos are the device plugin API
(``src/gpustack_operator/device_manager/plugin/api/api.proto``) and the PodResources API
(``src/gpustack_operator/device_manager/podresources/api/api.proto``); grpcio-tools compiles each with
``-I src`` so the generated modules import each other by their package path and each descriptor is
registered under a unique file name (two bare ``api.proto`` files in one process collide). The generated
``api_pb2.py`` and ``api_pb2_grpc.py`` are committed next to each proto with their type stubs, so mypy checks
the code that builds messages and calls the services: ``api_pb2.pyi`` from grpcio-tools (``--pyi_out``) and
``api_pb2_grpc.pyi`` from mypy-protobuf's ``protoc-gen-mypy_grpc`` plugin (grpcio-tools writes no stubs for
services; both are dev dependencies). ``--check`` exits 1 with a diff when any of them is stale, and a unit
test runs the same comparison.
"""

from __future__ import annotations

import argparse
import difflib
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PROTOS = (
    Path("gpustack_operator/device_manager/plugin/api/api.proto"),
    Path("gpustack_operator/device_manager/podresources/api/api.proto"),
)
OUTPUTS = ("api_pb2.py", "api_pb2_grpc.py", "api_pb2.pyi", "api_pb2_grpc.pyi")
GRPC_STUB_PLUGIN = "protoc-gen-mypy_grpc"


def grpc_stub_plugin() -> str:
    """mypy-protobuf's service-stub plugin, beside this interpreter (a venv) or on PATH."""
    beside = Path(sys.executable).parent / GRPC_STUB_PLUGIN
    found = str(beside) if beside.is_file() else shutil.which(GRPC_STUB_PLUGIN)
    if found is None:
        raise RuntimeError(f"{GRPC_STUB_PLUGIN} not found: install the dev extra (mypy-protobuf)")
    return found


def generate(out_dir: Path) -> dict[Path, str]:
    """Compile every proto into out_dir; returns path (relative to src) -> generated text."""
    from grpc_tools import protoc  # dev dependency: only the generator needs it

    generated: dict[Path, str] = {}
    for proto in PROTOS:
        args = [
            "grpc_tools.protoc",
            f"-I{SRC}",
            f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            f"--pyi_out={out_dir}",
            f"--plugin={GRPC_STUB_PLUGIN}={grpc_stub_plugin()}",
            f"--mypy_grpc_out={out_dir}",
            str(SRC / proto),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {proto}")
        for name in OUTPUTS:
            generated[proto.parent / name] = (out_dir / proto.parent / name).read_text(encoding="utf-8")
    return generated


def stale(committed_root: Path = SRC) -> dict[str, str]:
    """Each committed file that differs from a fresh generation: path -> unified diff."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
    diffs: dict[str, str] = {}
    for relative, text in fresh.items():
        path = committed_root / relative
        name = str(relative)
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
    for relative in generate(SRC):
        print(f"regenerated {relative}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
