"""Grid overhead: N cheap cells through `bench grid` on a local Ray instance, against the same cells
run one after another in one process (the `bench run` path: one encoder, run_suite per suite and seed).

    BENCH_DATA_DIR=../shared/data python benchmarks/grid_overhead.py [--model minilm] [--seeds 2] [--limit 16]

Cells are cheap on purpose (--limit examples per task), so the ratio shows the grid's fixed costs:
starting Ray, starting workers (each imports torch and loads the model), scheduling. Each side writes
into its own fresh results directory, so both compute every cell. Prints wall times and the ratio
(> 1: the grid is slower). On a shared or loaded machine, run it twice: the figures move.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path


def sequential(plan) -> float:
    from suites import get_suite
    from bench.runner import open_model, run_suite

    start = time.perf_counter()
    for spec in plan.models:
        _, encoder = open_model(spec, plan.paths, device=plan.settings.device, dtype=plan.settings.dtype,
                                batch_size=plan.settings.batch_size)
        for suite_name in plan.protocols:
            for seed in plan.seeds:
                run_suite(get_suite(suite_name), spec, plan.context(suite_name, seed), encoder)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--suites", default="sts,alignment")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--limit", type=int, default=16)
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray instance")
    args = parser.parse_args()

    import ray

    from app.commands.grid import add_arguments, build_plan
    from app.commands.grid_runner import connect, run_grid

    grid_parser = argparse.ArgumentParser()
    add_arguments(grid_parser)
    plan = build_plan(grid_parser.parse_args(["--models", args.model, "--suites", args.suites, "--seeds",
                                              str(args.seeds), "--limit", str(args.limit)]))
    n = len(plan.cells())
    from bench.runner import open_model

    open_model(plan.models[0], plan.paths, device="cpu", dtype=plan.settings.dtype, batch_size=8)  # warm-up: torch imported, weights in the page cache
    with tempfile.TemporaryDirectory() as tmp:
        def fresh(name):
            return replace(plan, paths=replace(plan.paths, results=Path(tmp) / name))

        seq = sequential(fresh("sequential"))
        start = time.perf_counter()
        connect(ray, None, args.num_cpus)
        ray_start = time.perf_counter() - start
        report = run_grid(fresh("grid"))
        grid_s = time.perf_counter() - start
        ray.shutdown()
    if report.exit_code or len(report.ran) != n:
        raise SystemExit(f"the grid did not run all {n} cells: exit {report.exit_code}, ran {len(report.ran)}")
    print(f"{n} cells ({args.model}; {args.suites}; {args.seeds} seed(s); --limit {args.limit}); "
          f"local Ray with {args.num_cpus} CPU(s)")
    print(f"one process, one after another (one model load): {seq:7.1f} s")
    print(f"grid (Ray start {ray_start:.1f} s, workers each load the model): {grid_s:7.1f} s")
    print(f"ratio grid / one process: {grid_s / seq:.2f}   (without Ray start: {(grid_s - ray_start) / seq:.2f})")


if __name__ == "__main__":
    main()
