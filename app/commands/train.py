"""bench train --method M --backbone B [--profile smoke|study|paper]: train a sentence encoder (bench/train.py).

The checkpoint lands in $BENCH_HOME/models/<name>; <name> is the registered model with the same
(method, base, profile) when there is one, else <method>-<backbone>-<profile>, or --name. A name that
is not built in is declared in $BENCH_HOME/models.toml, so `bench run --model <name>` finds it at once.
Re-running the same command resumes an interrupted run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from app.commands import (add_unverified_data_flag, local_device, nonnegative_int, positive_float,
                            positive_int)
from bench.errors import BenchError

LAUNCHERS = ("none", "accelerate")


def add_arguments(parser):
    parser.add_argument("--method", required=True, help="training method (bench/methods): simcse, robustembed, ...")
    parser.add_argument("--backbone", required=True,
                        help="registry model to start from (e.g. minilm, bert-base-cls), a local directory or a HF id")
    from bench.plugins import PROFILES

    parser.add_argument("--profile", choices=PROFILES, default="smoke",
                        help="smoke: offline CPU check (10 steps of 16); study: 250 steps of 64 with a dev "
                             "curve, sized for 2 CPU cores; paper: the paper's settings")
    parser.add_argument("--data", help="'wiki' (default: wiki1m when present, else the 11.9k wiki sample) or a text "
                                       "file with one sentence per line; sup-simcse: SimCSE's nli_for_simcse.csv "
                                       "(default: triples from the offline SNLI/ANLI splits)")
    parser.add_argument("--steps", type=positive_int, help="stop after N optimiser steps (N >= 1)")
    parser.add_argument("--seed", type=nonnegative_int, default=0)
    parser.add_argument("--device", type=local_device, default="auto", help="auto|cpu|cuda|cuda:N|mps")
    from app.commands import add_dtype_argument

    add_dtype_argument(parser)
    parser.add_argument("--batch-size", type=positive_int)
    parser.add_argument("--lr", type=positive_float)
    parser.add_argument("--eval-every", type=nonnegative_int, help="STS-B dev every N steps (0: never)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any method hyper-parameter or trainer setting, repeatable "
                             "(e.g. --set norm=2 --set epsilon=0.05 --set reg_weight=1/64)")
    parser.add_argument("--name", help="save under this model name instead of the registered one")
    add_unverified_data_flag(parser)
    parser.add_argument("--restart", action="store_true", help="discard an unfinished or finished run and start over")
    parser.add_argument("--launcher", choices=LAUNCHERS, default="none",
                        help="accelerate: re-run this command under `accelerate launch` (multi-GPU DDP)")
    parser.add_argument("--num-processes", type=nonnegative_int, default=0,
                        help="with --launcher accelerate: processes (default: visible GPUs)")


def settings_from_args(args) -> dict:
    settings = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BenchError(f"--set {item!r}: expected KEY=VALUE, e.g. --set epsilon=0.01")
        settings[key.strip().replace("-", "_")] = value.strip()
    flags = {"max_steps": args.steps, "seed": args.seed, "batch_size": args.batch_size, "lr": args.lr,
             "eval_every": args.eval_every}
    settings.update({k: v for k, v in flags.items() if v is not None})
    return settings


def relaunch_with_accelerate(args, argv: list[str]) -> int:
    """Run the same command once per process under `accelerate launch` (DDP; see docs/training.md)."""
    import torch

    processes = args.num_processes or torch.cuda.device_count()
    if processes < 1:
        raise BenchError("--launcher accelerate needs GPUs (none visible) or --num-processes N (CPU/gloo)")
    rest = []
    skip = False
    for i, token in enumerate(argv):  # drop the launcher options from the forwarded command
        if skip:
            skip = False
            continue
        if token in ("--launcher", "--num-processes"):
            skip = True
            continue
        if token.startswith(("--launcher=", "--num-processes=")):
            continue
        rest.append(token)
    # Several processes go through torch.distributed.run (NCCL on GPUs; on a CPU-only machine the
    # trainer's Accelerator(cpu=True) joins them over gloo, which is how the DDP path can be tried here).
    mode = ["--multi_gpu"] if processes > 1 else ([] if torch.cuda.is_available() else ["--cpu"])
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(processes), *mode,
           "-m", "app.cli", *rest]
    print("Launching:", " ".join(cmd))
    return subprocess.call(cmd, env={**os.environ, "BENCH_LAUNCHED": "1"})


def main(args) -> int:
    from bench.models.encoder import pick_device, resolve_dtype
    from bench.paths import Paths
    from bench.train import build_job, run_training

    if args.launcher == "accelerate" and not os.environ.get("BENCH_LAUNCHED"):
        return relaunch_with_accelerate(args, sys.argv[1:])
    start = time.perf_counter()
    paths = Paths.from_env()
    from bench.models.models_file import NAME_PATTERN
    from bench.models.registry import MODELS

    if args.name is not None and not NAME_PATTERN.match(args.name):
        raise BenchError(f"--name {args.name!r}: use letters, digits and . _ + - (it names a directory and a "
                         f"models.toml entry).")
    if args.name in MODELS and (MODELS[args.name].method, MODELS[args.name].base) != (args.method, args.backbone):
        raise BenchError(f"--name {args.name} is a built-in model ({MODELS[args.name].method} from "
                         f"{MODELS[args.name].base}); choose another name for this run.")

    from bench.results.store import check_writable

    check_writable(paths.home, "BENCH_HOME directory (checkpoints, resume state)", "BENCH_HOME")
    resolve_dtype(pick_device(args.device), args.dtype)  # fp16 off CUDA fails here (exit 2), before any data loads
    job = build_job(args.method, args.backbone, args.profile, paths, data=args.data,
                    settings=settings_from_args(args), name=args.name, device=args.device,
                    allow_unverified_data=args.allow_unverified_data, dtype=args.dtype)
    if os.environ.get("RANK", "0") == "0":  # under accelerate launch, the main process says it once
        from bench.train_cost import job_estimate

        print(job_estimate(job, pick_device(args.device)))
    card = run_training(job, paths.home, restart=args.restart)
    if os.environ.get("RANK", "0") != "0":  # under accelerate launch, only the main process reports
        return 0
    best = card.get("best") or {}
    print(f"Model '{job.name}': {paths.models / job.name} · steps {card.get('steps')} · STS-B dev before "
          f"{card.get('stsb_dev_before')} · best {best.get('stsb_dev_spearman')} at step {best.get('step')}")
    where = register_trained(job, paths)
    if where is not None:
        print(f"Registered '{job.name}' in {where}.")
    print(f"Evaluate it with: bench run --suite sts --model {job.name}")
    print(f"Wall time: {time.perf_counter() - start:.1f}s")
    return 0


def register_trained(job, paths):
    """Declare the trained model in $BENCH_HOME/models.toml (method, base, profile, the --set recipe and
    its pooler), so `bench run --model NAME` finds it at once and can re-train it with the same recipe.
    Built-in models are declared already; returns the file written, or None."""
    from bench.models.models_file import write_entry
    from bench.models.registry import MODELS

    if job.name in MODELS:
        return None
    recipe = {k: v for k, v in job.overrides.items()}
    fields = {"method": job.method, "base": job.base, "profile": job.profile, "pooler": job.pooler,
              "max_len": job.eval_max_len, "recipe": recipe}
    return write_entry(paths.home / "models.toml", job.name, fields, comment="written by bench train")
