#!/usr/bin/env python3
"""Prints the BENCHMARKS.md analysis table from criterion's results of `cargo bench --bench analysis`.

Usage: python3 benches/summarize_analysis.py [CRITERION_DIR]   (default: $CARGO_TARGET_DIR/criterion or target/criterion)

For each shape: the median time of `share` and `diff`, the time per ring point, and the ratio of each
shape's time to the smallest shape's next to the ratio of their point counts (equal ratios: linear).
"""

import json
import os
import sys

SHAPES = [("100x1", 16000), ("400x1", 63998), ("1000x1", 159994), ("253x10", 404780)]


def median(root, group, name):
    with open(os.path.join(root, group, name, "new", "estimates.json")) as f:
        return json.load(f)["median"]["point_estimate"]  # nanoseconds


def main():
    default = os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "criterion")
    root = sys.argv[1] if len(sys.argv) > 1 else default
    print("| shape | points | share ms | share ns/point | diff ms | diff ns/point | points ratio | share ratio | diff ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = None
    for shape, points in SHAPES:
        share = median(root, f"analysis_{shape}", "share")
        diff = median(root, f"analysis_{shape}", "diff")
        if base is None:
            base = (points, share, diff)
        print(
            f"| {shape} | {points:,} | {share / 1e6:.2f} | {share / points:.1f} | {diff / 1e6:.2f} | {diff / points:.1f}"
            f" | {points / base[0]:.1f} | {share / base[1]:.1f} | {diff / base[2]:.1f} |"
        )


if __name__ == "__main__":
    main()
