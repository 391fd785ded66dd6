"""bench resources build|status: the attacks' offline stand-ins (see attacks/resources.py)."""

from __future__ import annotations

import time

from rich.table import Table

from app.commands import output_console, positive_int

# part -> (builder "module:function", what it builds). Each builder takes (paths, force, log, options).
PARTS = {
    "nltk": ("attacks.nltk_data:build_for", "WordNet 3.0 + stopwords for NLTK (seconds)"),
    "counterfit": ("attacks.counterfit:build_for", "GloVe 6B 50d counter-fitted + nearest neighbours (~12 min measured on a busy 2-core CPU)"),
    "mlm": ("attacks.mlm:build_for", "all-MiniLM-L6-v2 trained further as a masked LM, every layer, on wiki + "
                                     "IMDB/MR/SST-2 train text (--mlm-steps optimiser steps, then evaluation; about "
                                     "20 min with two threads, 53 min on one; resumes); also the registry model "
                                     "minilm-mlm"),
}

MINUTES = {"nltk": 0.1, "counterfit": 12, "mlm": 35}  # each part's build as measured here (the notes above)


def add_arguments(parser):
    parser.add_argument("action", choices=["build", "status"])
    parser.add_argument("--only", action="append", choices=list(PARTS), metavar="PART",
                        help=f"build only these parts ({', '.join(PARTS)}); default: all")
    parser.add_argument("--force", action="store_true", help="rebuild parts that are already built")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--mlm-steps", type=positive_int, default=None, metavar="N",
                        help="length of the masked-LM training in optimiser steps, the schedule over steps, so the "
                             "same build on any machine (default 2843; an interrupted build resumes)")
    length.add_argument("--mlm-minutes", type=float, default=None, metavar="M",
                        help="instead of --mlm-steps: a wall-time budget, the schedule over elapsed time (depends "
                             "on the machine's speed, so not reproducible)")
    parser.add_argument("--mlm-resume", action="store_true",
                        help="continue training the built masked LM for --mlm-steps (or --mlm-minutes) more")
    parser.add_argument("--offline", action="store_true", help="status: do not probe the network for real resources")
    from app.commands import add_dtype_argument

    add_dtype_argument(parser)  # passed to the masked LM's training and evaluation (options["dtype"])


def _figures(report: dict) -> str:
    keys = [k for k in report if isinstance(report[k], (int, float)) and not isinstance(report[k], bool)]
    return ", ".join(f"{k}={report[k]:.4g}" if isinstance(report[k], float) else f"{k}={report[k]}" for k in keys)


def status_rows(resources) -> list[tuple[str, str, str, str]]:
    """(role, served by, kind, figures or problem) per role."""
    return [(row["role"], row["served"], "real" if row["real"] else ("stand-in" if row["served"] else "MISSING"),
             row["problem"] or _figures(row["report"])) for row in resources.status()]


def status_table(resources) -> Table:
    table = Table(title=f"Attack resources ({resources.layout.root})")
    for col in ("role", "served by", "kind", "figures / problem"):
        table.add_column(col)
    for row in status_rows(resources):
        table.add_row(*row)
    return table


def main(args) -> int:
    import importlib
    import os

    from attacks.resources import OFFLINE_ENV, Resources
    from bench.paths import Paths

    console = output_console()  # piped: whole values, no '…'
    paths = Paths.from_env()
    if args.offline:
        os.environ[OFFLINE_ENV] = "1"
    if args.action == "build":
        from bench.models.encoder import resolve_dtype

        resolve_dtype("cpu", args.dtype)  # the stand-ins build on CPU: fp16 fails here (exit 2)
        from bench.progress import progress

        parts = args.only or list(PARTS)
        with progress() as bar:  # each part, and within them the long loops, at least every 30 s
            options = {"mlm_steps": args.mlm_steps, "mlm_minutes": args.mlm_minutes, "mlm_resume": args.mlm_resume,
                       "dtype": args.dtype, "progress": bar}
            # the overall line counts each part by its measured minutes, so its time left weighs the masked LM
            # as the masked LM's own line does, not as one part of three
            overall = bar.add_task("resources build (parts weighted by their measured minutes)",
                                   total=sum(MINUTES[p] for p in parts))
            for part in parts:
                target, what = PARTS[part]
                module, _, func = target.partition(":")
                console.print(f"[bold]{part}[/bold]: {what}")
                start = time.perf_counter()
                outcome = getattr(importlib.import_module(module), func)(paths, args.force, console.print, options)
                console.print(f"  {part}: {outcome} ({time.perf_counter() - start:.1f}s)")
                bar.advance(overall, MINUTES[part])
            bar.remove_task(overall)
    resources = Resources(paths, read_only=True)  # status looks and never builds
    if console.is_terminal:
        console.print(status_table(resources))
    else:  # piped: one plain line per role, tab-separated, whole values
        print("\t".join(("role", "served by", "kind", "figures / problem")))
        for row in status_rows(resources):
            print("\t".join(row))
    return 0
