"""Real NVIDIA detection on a machine with a GPU, beside what the simulated backend claims for an H200.

Run through `tests/gpu/check_nvml.sh` (it picks the interpreter). Not a test: nothing here is collected by
pytest (`testpaths` is tests/unit and tests/integration) and CI has no GPU. Steps, each shown in the report:

1. `nvidia-smi --query-gpu=...` when it is on the PATH (what the driver's own tool says; informational).
2. `device-manager detect --backend nvml --labels`: the groups, labels and `.sliced.*` capacities the
   device manager would publish. A failure (or no card: then the same with `--no-pci-check`, for NVML's
   own complaint) ends the check with exit status 1 and says why ("NVML not found" without the library).
3. The same from `--backend simulated` on `tests/gpu/inventory.yaml` (an H200 as the sandbox would fake it),
   and a side-by-side of every group field, label and capacity, differences marked `<<`.
4. `device-manager monitor --backend nvml --period 2 --count 3`: health, VRAM, utilisation and temperature
   three times (the readings the health tracker of `serve` acts on); exit status 1 if it fails.
5. What real detection costs in memory (`tests/bench/binding_costs.py` with the machine's own NVML): the
   figure the benchmark's stand-in library cannot give.

The report goes to stdout and, when `$OUT` is set, to `$OUT/nvml-report.txt`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
INVENTORY = HERE / "inventory.yaml"
NODE = "h200-0"
CLI = [sys.executable, "-m", "gpustack_operator.cli", "device-manager"]
GROUP_FIELDS = ("name", "memory", "cores", "computeCapability", "family", "driverVersion", "runtimeVersion")
NVIDIA_SMI_FIELDS = "name,uuid,pci.bus_id,memory.total,driver_version,compute_cap,mig.mode.current"

lines: list[str] = []


def say(text: str = "") -> None:
    print(text, flush=True)
    lines.append(text)


def run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    shown = ["gpustack-operator", *argv[3:]] if argv[: len(CLI) - 1] == CLI[:-1] else argv
    say(f"$ {' '.join(shown)}")
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    say(f"  (exit {done.returncode}, {time.monotonic() - started:.2f} s)")
    return done


def indented(text: str) -> None:
    for line in text.rstrip().splitlines():
        say(f"  {line}")


def nvidia_smi() -> None:
    say("== 1. nvidia-smi")
    if shutil.which("nvidia-smi") is None:
        say("  nvidia-smi is not on the PATH")
        return
    done = run(["nvidia-smi", f"--query-gpu={NVIDIA_SMI_FIELDS}", "--format=csv"])
    indented(done.stdout + done.stderr)


def detect(*flags: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    done = run([*CLI, "detect", *flags, "--labels"])
    shown = yaml.safe_load(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}
    return done, shown or {}


def fail(reason: str, detail: str) -> int:
    say(f"FAILED: {reason}")
    indented(detail)
    return 1


def real_detection() -> tuple[int, dict[str, Any], list[str]]:
    """(status, what detect showed, the backend flags that found the cards)."""
    say("\n== 2. device-manager detect --backend nvml")
    flags = ["--backend", "nvml"]
    done, shown = detect(*flags)
    if done.returncode != 0:
        return fail(_why(done.stderr), done.stderr), {}, flags
    if not shown.get("groups"):
        say("  no NVIDIA card on the PCI bus; asking NVML anyway (--no-pci-check)")
        flags.append("--no-pci-check")
        again, shown = detect(*flags)
        if again.returncode != 0:
            return fail(_why(again.stderr), again.stderr), {}, flags
        if not shown.get("groups"):
            return fail("NVML answers but reports no card", again.stdout), {}, flags
        say("  NVML sees cards the PCI scan does not (is sysfs hidden from this container?)")
    indented(yaml.safe_dump(shown, sort_keys=False))
    return 0, shown, flags


def _why(stderr: str) -> str:
    if "cannot be loaded from" in stderr:
        return "NVML not found (no libnvidia-ml.so.1 on the loader's path)"
    return "detect failed"


def row(what: str, real: Any, claimed: Any) -> None:
    mark = "" if str(real) == str(claimed) else "  <<"
    say(f"  {what:<68} {real!s:<30} {claimed!s:<30}{mark}")


def compare(real: dict[str, Any]) -> int:
    say(f"\n== 3. NVML against the simulated backend's H200 ({INVENTORY.relative_to(HERE.parent.parent)})")
    done, claimed = detect("--backend", "simulated", "--inventory", str(INVENTORY), "--node-name", NODE)
    if done.returncode != 0:
        return fail("the simulated backend failed", done.stderr)
    say(f"  {'':<68} {'NVML (this machine)':<30} {'simulated H200':<30}")
    groups, claims = real.get("groups") or [], claimed.get("groups") or []
    differences = 0
    for index in range(max(len(groups), len(claims))):
        group = groups[index] if index < len(groups) else {}
        claim = claims[index] if index < len(claims) else {}
        say(f"  group {index}: {group.get('id', '-')} / {claim.get('id', '-')}")
        cards, claimed_cards = group.get("accelerators") or [], claim.get("accelerators") or []
        pairs = [(f, group.get(f, ""), claim.get(f, "")) for f in GROUP_FIELDS]
        pairs.append(("cards", len(cards), len(claimed_cards)))
        pairs.append(("sliceable", _slices(group), _slices(claim)))
        pairs += [(f"card {c.get('index')} unhealthy", _unhealthy(c), False) for c in cards]
        for what, mine, theirs in pairs:
            row(what, mine, theirs)
            differences += str(mine) != str(theirs)
    for section in ("labels", "capacities"):
        mine, theirs = real.get(section) or {}, claimed.get(section) or {}
        say(f"  {section}:")
        for key in sorted(set(mine) | set(theirs)):
            row(key, mine.get(key, "-"), theirs.get(key, "-"))
            differences += mine.get(key, "-") != theirs.get(key, "-")
    say(f"  {differences} difference(s) marked << (driver and CUDA versions: the simulation claims none)")
    return 0


def _slices(group: dict[str, Any]) -> str:
    sliced = (group.get("acceleratorsFeature") or {}).get("logicalSliced")
    return f"{sliced.get('maxSize')} slices" if sliced else "no"


def _unhealthy(card: dict[str, Any]) -> bool:
    return bool((card.get("status") or {}).get("unhealthy"))


def monitor(flags: list[str]) -> int:
    say("\n== 4. device-manager monitor --backend nvml, three readings 2 s apart")
    done = run([*CLI, "monitor", *flags, "--period", "2", "--count", "3"])
    indented(done.stdout + done.stderr)
    if done.returncode != 0:
        return fail("monitor failed", "")
    if "UNHEALTHY" in done.stdout:
        say("  a card reads UNHEALTHY (volatile uncorrected ECC errors): see the lines above")
    return 0


def memory() -> None:
    say("\n== 5. memory: device-manager modules, then the real NVML opened and the cards detected")
    sys.path.insert(0, str(HERE.parent.parent))
    from tests.bench import binding_costs

    try:
        steps = binding_costs.measure("nvidia", Path("/sys"), library="this machine's NVML")
    except subprocess.CalledProcessError as exc:
        say(f"  not measured: {exc.stderr.strip().splitlines()[-1] if exc.stderr else exc}")
        return
    previous = None
    for name, rss, anonymous in steps:
        added = "" if previous is None else f"  ({rss - previous:+.2f} MB)"
        say(f"  {name:<50} VmRSS {rss:6.1f} MB, anonymous {anonymous:5.1f} MB{added}")
        previous = rss


def main() -> int:
    say(f"gpustack-operator NVML check, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {os.uname().nodename}")
    say(f"python {sys.version.split()[0]} at {sys.executable}")
    status = 1
    try:
        nvidia_smi()
        status, real, flags = real_detection()
        if status == 0:
            status = compare(real) or monitor(flags)
            memory()
    finally:
        say(f"\nresult: {'ok' if status == 0 else 'FAILED'}")
        out = os.environ.get("OUT")
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / "nvml-report.txt").write_text("\n".join(lines) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
