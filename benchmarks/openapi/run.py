"""What loading a big OpenAPI document costs: GitHub's REST description, one provider at a time.

``python -m benchmarks.openapi.run [--generated] [--smoke] [--out FILE]``

The document is GitHub's description from the npm package ``@octokit/openapi`` (installed
into the npm cache folder of ``benchmarks/openapi/npm_packages.py``), or with
``--generated`` a synthetic 3.0.3 document of the same size; ``--smoke`` uses a small
generated one and few repetitions (what the test suite runs). Every figure comes from a
fresh interpreter, so that "first" means what it says: nothing parsed yet in the process.

- **baseline**: ``json.loads`` of the text, the least any first provider must do;
- **first provider**: a provider that allows one operation, in a fresh process (the text
  hashed, parsed and indexed, that operation read);
- **next provider**: another provider of one operation (a different one each time) from
  the same text in the same process, median and slowest; and from the same text read
  again into another ``bytes`` object, which is hashed again (SHA-256 of the whole text);
- **full document**: one provider that allows every operation the plugin supports, in a
  fresh process: what checking the whole document costs;
- **first call**: the first call of a next provider's tool, with an input its schema
  refuses, so that nothing is sent: the core's engine compiles the input schema then (in a
  worker thread), not when the provider is made.

Times are wall-clock seconds of ``create_openapi_tool_provider``; memory is the peak of
Python's allocations during the step and what stays allocated after it (tracemalloc, in a
run of its own, since tracing slows everything down), and the process's peak RSS.
The target of issue 26: a next provider under 5 % of the first provider's time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[2]
TARGET = 0.05


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generated", action="store_true", help="a synthetic document")
    parser.add_argument("--smoke", action="store_true", help="small and quick")
    parser.add_argument("--next", type=int, default=25, help="next providers to time")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        document, source = _document(args, Path(scratch))
        supported = _child(document, "supported", [])["operations"]
        count = 3 if args.smoke else args.next
        step = max(1, len(supported) // (count + 1))
        sample = supported[::step][: count + 1]
        timed = _child(document, "providers", sample)
        traced = _child(document, "providers", sample, trace=True)
        full = _child(document, "full", supported)
        full_traced = _child(document, "full", supported, trace=True)
    next_times = timed["next"]
    figures: dict[str, Any] = {
        "document": source,
        "bytes": timed["bytes"],
        "operations": timed["operations"],
        "supported_operations": len(supported),
        "baseline_json_loads_s": timed["baseline"],
        "first_provider_s": timed["first"],
        "next_provider_median_s": statistics.median(next_times),
        "next_provider_max_s": max(next_times),
        "next_provider_text_read_again_median_s": statistics.median(timed["next_rehashed"]),
        "full_document_s": full["full"],
        "first_call_input_compile_median_s": statistics.median(timed["first_call"]),
        "first_provider_peak_mib": traced["first_peak"],
        "first_provider_retained_mib": traced["first_retained"],
        "next_provider_peak_mib": max(traced["next_peak"]),
        "next_provider_retained_mib": statistics.median(traced["next_retained"]),
        "full_document_peak_mib": full_traced["full_peak"],
        "full_document_retained_mib": full_traced["full_retained"],
        "first_process_max_rss_mib": timed["max_rss"],
        "full_process_max_rss_mib": full["max_rss"],
    }
    figures["next_over_first"] = figures["next_provider_median_s"] / figures["first_provider_s"]
    figures["next_over_full"] = figures["next_provider_median_s"] / figures["full_document_s"]
    figures["target_met"] = figures["next_over_first"] < TARGET
    _report(figures)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


def _document(args: argparse.Namespace, scratch: Path) -> tuple[Path, str]:
    from benchmarks.openapi.generated_document import generated_document

    if args.smoke or args.generated:
        path = scratch / "generated.json"
        path.write_bytes(generated_document(60, 80) if args.smoke else generated_document())
        return path, "generated (smoke)" if args.smoke else "generated"
    from benchmarks.openapi.npm_packages import GITHUB_DESCRIPTION, github_description

    name, version, inside = GITHUB_DESCRIPTION
    return github_description(), f"{name}@{version}/{inside}"


def _child(document: Path, scenario: str, operations: list[str], *, trace: bool = False) -> Any:
    arguments = [sys.executable, "-m", "benchmarks.openapi.measure", str(document), scenario]
    if trace:
        arguments.append("--trace")
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    completed = subprocess.run(
        arguments,
        input=json.dumps(operations),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        check=False,
        timeout=1800,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{scenario} failed:\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _report(figures: dict[str, Any]) -> None:
    ms = 1000.0
    print(
        f"{figures['document']}: {figures['bytes'] / 2**20:.1f} MiB, "
        f"{figures['operations']} operations ({figures['supported_operations']} supported)"
    )
    print("| step | time (ms) | peak traced (MiB) | retained (MiB) |")
    print("|---|---:|---:|---:|")
    print(f"| baseline: json.loads of the text | {figures['baseline_json_loads_s'] * ms:.1f} | | |")
    print(
        f"| first provider, 1 operation | {figures['first_provider_s'] * ms:.1f} "
        f"| {figures['first_provider_peak_mib']:.1f} "
        f"| {figures['first_provider_retained_mib']:.1f} |"
    )
    print(
        f"| next provider, 1 operation (median; max {figures['next_provider_max_s'] * ms:.1f}) "
        f"| {figures['next_provider_median_s'] * ms:.2f} | {figures['next_provider_peak_mib']:.2f} "
        f"| {figures['next_provider_retained_mib']:.2f} |"
    )
    print(
        "| next provider, 1 operation, the text read again (hashed again; median) "
        f"| {figures['next_provider_text_read_again_median_s'] * ms:.2f} | | |"
    )
    print(
        f"| full document, {figures['supported_operations']} operations in one provider "
        f"| {figures['full_document_s'] * ms:.0f} | {figures['full_document_peak_mib']:.1f} "
        f"| {figures['full_document_retained_mib']:.1f} |"
    )
    print(
        "| first call of a next provider's tool (input schema compiled; nothing sent; median) "
        f"| {figures['first_call_input_compile_median_s'] * ms:.1f} | | |"
    )
    print(
        f"next / first: {figures['next_over_first']:.1%} (target < {TARGET:.0%}: "
        f"{'met' if figures['target_met'] else 'NOT met'}); next / full document: "
        f"{figures['next_over_full']:.2%}; peak RSS {figures['first_process_max_rss_mib']:.0f} "
        f"MiB (providers), {figures['full_process_max_rss_mib']:.0f} MiB (full document)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
