"""bench export --format mteb --model M [--results-dir D] [--out DIR]: a model's cells in mteb's results layout.

``DIR`` (``--out``) is an mteb results cache: per weights identity (the cells' ``weights_sha256``, mteb's
"revision"), under ``DIR/results/<model>/<revision>/`` (a "/" in the model name becomes "__", as in mteb):
- one ``<mteb task>.json`` per STS task mteb has with the same test set (``MTEB_STS``: the same pair count),
  in mteb's TaskResult schema: ``scores.test[0]`` holds ``main_score`` (= ``cosine_spearman``),
  ``cosine_spearman``, ``cosine_pearson``, ``spearman`` and ``pearson`` as fractions (bench stores x100),
  ``hf_subset`` "default", ``languages`` ["eng-Latn"], plus bench's own ``bench_*`` keys (95% CI, n, cell);
  ``mteb_version`` is null (mteb did not compute them) and ``dataset_revision`` is mteb's for the task;
- ``model_meta.json`` (name and revision, as mteb's loader reads them);
- ``bench/robustness.json``: every other row of the model's cells (the robustness suites, transfer, SICK-R, cells
  run with --limit), in bench's own documented format (``FORMAT``; docs/results.md). It sits in a subdirectory,
  where mteb's loader (``<model>/<revision>/*.json``) does not look.

mteb's ``ResultCache(cache_path=DIR).load_results(...)`` reads ``DIR/results/<model>/<revision>/``; the default
``DIR`` is ``<results dir>/export/mteb``. Every path written lies inside ``DIR``; the files written are listed
in ``DIR/.bench-export-manifest.json``: a file there that bench did not write is moved aside
(``<name>.user-<n>``) before it would be overwritten, and a task file an earlier export wrote that this one
does not (its cell has since become unreadable) is removed, so mteb never loads a stale score. SentEval's transfer tasks (MR, CR, SUBJ, ...) have no mteb task
with the same protocol, and SICK-R differs (mteb scores all 9,927 SICK pairs, bench SentEval's 4,927-pair test
split): their rows go to ``robustness.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.errors import BenchError

FORMAT = "bench.robustness/1"
# bench STS task -> (mteb task name, mteb's dataset revision, mteb's test pair count)
MTEB_STS = {
    "sts12": ("STS12", "a0d554a64d88156834ff5ae9920b964011b16384", 3108),
    "sts13": ("STS13", "7e90230a92c190f1bf69ae9002b8cea547a64cca", 1500),
    "sts14": ("STS14", "6031580fec1f6af667f0bd2da0a551cf4f0b2375", 3750),
    "sts15": ("STS15", "ae752c7c21bf194d8b67fd573edf7ae58183cbe3", 3000),
    "sts16": ("STS16", "4d8694f8f0e0100860b497b999b3dbed754a0513", 1186),
    "stsb": ("STSBenchmark", "b0fddb56ed78048fa8b90373c8a3cfc37b684831", 1379),
}
ROW_FIELDS = ("suite", "task", "split", "metric", "aggregation", "attack", "value", "ci_low", "ci_high", "ci_method",
              "n", "seed", "profile", "dtype", "config_hash", "created_at")


MANIFEST = ".bench-export-manifest.json"


def add_arguments(parser):
    parser.add_argument("--format", choices=["mteb"], default="mteb", help="mteb: mteb's results layout and schema")
    parser.add_argument("--model", required=True, help="the model name its cells carry (`bench ls` / the leaderboard)")
    parser.add_argument("--results-dir", type=Path, help="results directory (default: $BENCH_RESULTS_DIR, else "
                                                         "$BENCH_HOME/results)")
    parser.add_argument("--out", type=Path, help="the mteb results cache to write (files go to <out>/results/<model>/"
                                                 "<revision>/; default: <results dir>/export/mteb)")


def main(args) -> int:
    from bench.paths import Paths
    from bench.results.store import check_writable

    paths = Paths.from_env().with_results(args.results_dir)
    out = (args.out or paths.results / "export" / "mteb").expanduser().absolute()
    check_writable(out, "export directory", "--out")  # a file, read-only or full: exit 2 before any work
    written = export_mteb(paths.results, args.model, out)
    for revision, files in written.items():
        tasks = len(files) - 2
        why = "" if tasks else (" (no STS cell of sts12-16 or stsb scored on mteb's whole test set: cells run with "
                                "--limit, or none of those tasks run; their rows are in bench/robustness.json)")
        print(f"{args.model} @ {revision[:12]}: {tasks} mteb task file(s){why}, model_meta.json, "
              f"bench/robustness.json in {files[-1].parent.parent}")
    print(f"Load with mteb: {mteb_hint(out, args.model)}")
    return 0


def mteb_hint(out: Path, model: str) -> str:
    """The Python line that loads the export with mteb's own reader."""
    return (f"mteb.ResultCache(cache_path={str(out)!r}).load_results(models=[{model!r}], "
            f"include_remote=False)")


def export_mteb(results_dir: Path, model: str, out: Path) -> dict[str, list[Path]]:
    """Write the model's cells under ``out`` (see the module doc); {revision: files written}."""
    from bench.results.store import ResultStore

    store = ResultStore(results_dir)
    by_revision: dict[str, list[tuple[Path, dict]]] = {}
    for path, payload in store.readable_cells():
        if payload.get("cell", {}).get("model") == model:
            by_revision.setdefault(payload["cell"]["weights_sha256"], []).append((path, payload))
    if not by_revision:
        models = sorted({p.get("cell", {}).get("model", "") for _, p in store.readable_cells()} - {""})
        raise BenchError(f"No result cells of model '{model}' in {results_dir}. Models there: "
                         f"{', '.join(models) or 'none'}. Fix: check --model and --results-dir.")
    files = {revision: _revision_files(model, revision, cells, results_dir)
             for revision, cells in sorted(by_revision.items())}
    folder = model_folder(model)
    write_owned(out, {rel: text for revision in files.values() for rel, text in revision.items()},
                          stale=lambda rel: rel.startswith(f"results/{folder}/"))
    return {revision: [out / rel for rel in names] for revision, names in files.items()}


def model_folder(model: str) -> str:
    """mteb's folder of a model name ("/" -> "__"), refused (exit 2) when it could not name one directory."""
    from bench.paths import file_name

    return file_name(model.replace("/", "__"), "model name")


def _revision_files(model: str, revision: str, cells, results_dir: Path) -> dict[str, str]:
    """{path relative to the cache: text} of one revision: the mteb task files, model_meta.json, robustness.json
    (in that order)."""
    folder = f"results/{model_folder(model)}/{revision}"
    chosen = _mteb_cells(cells)
    files = {f"{folder}/{MTEB_STS[task][0]}.json": json.dumps(task_result(task, path, payload, results_dir), indent=2)
             + "\n" for task, (path, payload) in chosen.items()}
    files[f"{folder}/model_meta.json"] = json.dumps(model_meta(model, revision, cells), indent=2) + "\n"
    exported = {str(p) for p, _ in chosen.values()}
    rest = [(p, c) for p, c in cells if str(p) not in exported]
    robustness = {"format": FORMAT, "model": model, "revision": revision,
                  "model_source": next((r.get("model_source", "") for _, c in cells for r in c["results"]), ""),
                  "mteb_files": [MTEB_STS[task][0] + ".json" for task in chosen],
                  "rows": [_row(r, p, results_dir) for p, c in rest for r in c["results"]]}
    files[f"{folder}/bench/robustness.json"] = json.dumps(robustness, indent=1) + "\n"
    return files


def write_owned(out: Path, files: dict[str, str], stale=lambda rel: False) -> list[Path]:
    """Write ``files`` (paths relative to ``out``, each checked to stay inside it) atomically, recording them in
    ``out/MANIFEST``. A file there the manifest does not list (a user's) is moved aside to ``<name>.user-<n>``
    first, with a warning; a listed file ``stale`` selects that this write does not make is removed."""
    import warnings

    from bench.io import atomic_write_text
    from bench.errors import BenchWarning
    from bench.paths import inside

    try:
        owned = set(json.loads((out / MANIFEST).read_text(encoding="utf-8"))["written"])
    except (OSError, ValueError, KeyError, TypeError):
        owned = set()
    written = []
    for rel, text in files.items():
        target = inside(out, *rel.split("/"), what="export file")
        if rel not in owned and (target.exists() or target.is_symlink()):
            aside = next(target.with_name(f"{target.name}.user-{n}") for n in range(1, 10_000)
                         if not target.with_name(f"{target.name}.user-{n}").exists())
            target.rename(aside)
            warnings.warn(f"{target} was not written by `bench export`: kept as {aside}.", BenchWarning, stacklevel=2)
        atomic_write_text(target, text)
        written.append(target)
    for rel in sorted(r for r in owned - set(files) if stale(r)):
        inside(out, *rel.split("/"), what="export file").unlink(missing_ok=True)
    kept = sorted((owned - {r for r in owned if stale(r)}) | set(files))
    atomic_write_text(out / MANIFEST, json.dumps({"written": kept}, indent=0) + "\n")
    return written


def _mteb_cells(cells) -> dict[str, tuple[Path, dict]]:
    """Per STS task mteb has: the newest cell scored on mteb's whole test set (n equal to mteb's count)."""
    chosen: dict[str, tuple[Path, dict]] = {}
    for path, payload in cells:
        cell = payload["cell"]
        if cell["suite"] != "sts" or cell["task"] not in MTEB_STS:
            continue
        main = _main_row(payload, "spearman")
        if main is None or main.get("value") is None or main.get("n") != MTEB_STS[cell["task"]][2]:
            continue
        if cell["task"] not in chosen or payload.get("written_at", "") > chosen[cell["task"]][1].get("written_at", ""):
            chosen[cell["task"]] = (path, payload)
    return chosen


def _main_row(payload: dict, metric: str) -> dict | None:
    return next((r for r in payload["results"] if (r["metric"], r["aggregation"]) == (metric, "all")), None)


def task_result(task: str, path: Path, payload: dict, results_dir: Path) -> dict:
    """mteb's TaskResult for one STS cell (correlations as fractions; bench's CI and provenance beside them)."""
    name, dataset_revision, _ = MTEB_STS[task]
    spearman, pearson = _main_row(payload, "spearman"), _main_row(payload, "pearson")
    scores = {"main_score": spearman["value"] / 100, "cosine_spearman": spearman["value"] / 100,
              "spearman": spearman["value"] / 100, "hf_subset": "default", "languages": ["eng-Latn"],
              "bench_n": spearman["n"], "bench_cell": str(path.relative_to(results_dir)),
              "bench_ci95_cosine_spearman": _fraction_ci(spearman), "bench_ci_method": spearman.get("ci_method", "")}
    if pearson is not None and pearson.get("value") is not None:
        scores.update(cosine_pearson=pearson["value"] / 100, pearson=pearson["value"] / 100,
                      bench_ci95_cosine_pearson=_fraction_ci(pearson))
    return {"dataset_revision": dataset_revision, "task_name": name, "mteb_version": None,
            "scores": {"test": [scores]}, "evaluation_time": spearman.get("wall_s"), "kg_co2_emissions": None}


def _fraction_ci(row: dict) -> list | None:
    if row.get("ci_low") is None or row.get("ci_high") is None:
        return None
    return [row["ci_low"] / 100, row["ci_high"] / 100]


def model_meta(model: str, revision: str, cells) -> dict:
    """What mteb's loader reads from model_meta.json (name, revision), and what bench knows of the model."""
    first = cells[0][1]["results"][0] if cells[0][1]["results"] else {}
    return {"name": model, "revision": revision, "languages": ["eng-Latn"], "similarity_fn_name": "cosine",
            "framework": ["bench"], "modalities": ["text"], "reference": None, "release_date": None,
            "bench_model_source": first.get("model_source", ""), "bench_pooler": first.get("pooler", "")}


def _row(row: dict, path: Path, results_dir: Path) -> dict:
    out = {k: row.get(k) for k in ROW_FIELDS}
    try:
        out["config"] = json.loads(row.get("config") or "{}")
    except ValueError:
        out["config"] = row.get("config")
    out["cell"] = str(path.relative_to(results_dir))
    return out
