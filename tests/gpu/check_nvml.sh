#!/usr/bin/env bash
# Real NVIDIA detection against the simulated backend's H200: see tests/gpu/README.md.
# Interpreter: $PYTHON if set, else the repository's .venv, else python3 (with this tree's src/ on the path);
# the report goes to stdout and, when $OUT is set, to $OUT/nvml-report.txt. Exit 1: detection failed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
    if [[ -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; else python="python3"; fi
fi
export PYTHONPATH="$root/src:$root${PYTHONPATH:+:$PYTHONPATH}"
cd "$root"
[[ -n "${OUT:-}" ]] && mkdir -p "$OUT"
if ! missing="$("$python" -c 'import gpustack_operator.device_manager.command' 2>&1)"; then
    {
        echo "check_nvml: $python cannot import the device manager:"
        echo "$missing" | tail -n 1
        echo "check_nvml: run 'make setup' (or set PYTHON to an interpreter with the packages of setup.cfg)"
    } | tee ${OUT:+"$OUT/nvml-report.txt"} >&2
    exit 2
fi
exec "$python" tests/gpu/check_nvml.py
