#!/usr/bin/env python3
"""Prints the BENCHMARKS.md tables from criterion's results of `cargo bench --bench ring`.

Usage: python3 benches/summarize.py [CRITERION_DIR]   (default: $CARGO_TARGET_DIR/criterion or target/criterion)

Uses criterion's median estimate of each benchmark (robust to the odd slow sample on a shared machine) and
the fastest sample ("best", the least disturbed by other processes). Lookup times are per key (an iteration
looks up 4096 keys).
"""

import json
import os
import sys

SHAPES = ["3x1", "100x1", "9x100", "1000x1", "253x10"]
KEYS = 4096


def load(root, group, name):
    base = os.path.join(root, group, name, "new")
    with open(os.path.join(base, "estimates.json")) as f:
        median = json.load(f)["median"]["point_estimate"]
    with open(os.path.join(base, "sample.json")) as f:
        sample = json.load(f)
    best = min(t / n for t, n in zip(sample["times"], sample["iters"]))
    return median, best


def main():
    default = os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "criterion")
    root = sys.argv[1] if len(sys.argv) > 1 else default

    rows = []
    for shape in SHAPES:
        lookup = {n: load(root, f"lookup_{shape}", n) for n in ("ours", "pingora", "crc32-floor", "crc32-prepared")}
        build = {n: load(root, f"build_{shape}", n) for n in ("ours", "pingora")}
        rows.append((shape, lookup, build))

    print("Ratios (median; in brackets: fastest sample)\n")
    print("| shape | lookup ours / pingora | lookup ours / crc32 floor | build ours / pingora |")
    print("|---|---:|---:|---:|")
    for shape, lookup, build in rows:
        def ratio(a, b):
            return f"{a[0] / b[0]:.2f} ({a[1] / b[1]:.2f})"

        print(
            f"| {shape} | {ratio(lookup['ours'], lookup['pingora'])} | {ratio(lookup['ours'], lookup['crc32-floor'])}"
            f" | {ratio(build['ours'], build['pingora'])} |"
        )

    print("\nAbsolute (median)\n")
    print(
        "| shape | lookup ours ns/key | lookup pingora ns/key | crc32fast::hash ns/key | prepared Hasher ns/key"
        " | build ours µs | build pingora µs |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for shape, lookup, build in rows:
        ns = {n: v[0] / KEYS for n, v in lookup.items()}
        print(
            f"| {shape} | {ns['ours']:.1f} | {ns['pingora']:.1f} | {ns['crc32-floor']:.1f} | {ns['crc32-prepared']:.1f}"
            f" | {build['ours'][0] / 1e3:.1f} | {build['pingora'][0] / 1e3:.1f} |"
        )


if __name__ == "__main__":
    main()
