"""Build the frozen perturbation set that the ``perturbation`` suite reads (suites/perturbation.py).

Every successful perturbation in the given attack logs (any victim, any recipe), paired with its
original, deduplicated on the (original, perturbed) text pair, with its edit count (the fewest words
changed any log records for it), the recipes that found it, and a control: the original with the
same number of words swapped for words drawn from the originals' pool of words.

Output: JSON lines, first a header (format, version, seed, source logs), then one line per original
sentence, ordered by id (sha256 of the text); its perturbations ordered by id too. The order and the
controls depend on nothing but the texts and the seed, so the same logs give the same bytes.

    python -m attacks.perturbation_set                       # every log under results/attack_logs
    python -m attacks.perturbation_set --from suites/data/perturbations-v1.jsonl --check
                                                             # re-derive from the header's logs, compare
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

from attacks.log import read_log
from bench.errors import BenchError
from bench.paths import REPO_ROOT

FORMAT = "bench-perturbations/1"
CONTROL_SEED = 0
WORD = re.compile(r"^[a-z]+$")  # the words a control may replace or draw (not punctuation, not clitics)


def text_id(*texts: str) -> str:
    return hashlib.sha256("\t".join(texts).encode("utf-8")).hexdigest()[:16]


def successful_pairs(log_paths) -> dict[tuple[str, str], dict]:
    """(original, perturbed) -> {"edits": fewest words changed, "recipes": set} over every log."""
    found: dict[tuple[str, str], dict] = {}
    for path in log_paths:
        header, records = read_log(path)
        for rec in records:
            if rec["result_type"] != "successful":
                continue
            key = (rec["original"]["text"], rec["perturbed"]["text"])
            entry = found.setdefault(key, {"edits": rec["words_changed"], "recipes": set()})
            entry["edits"] = min(entry["edits"], rec["words_changed"])
            entry["recipes"].add(header["recipe"])
    return found


def word_pool(originals) -> list[str]:
    """Every word token of the originals (with repeats, so common words are drawn more often), sorted."""
    return sorted(w for text in originals for w in text.split() if WORD.match(w))


def control(original: str, edits: int, pool: list[str], pair_id: str, seed: int = CONTROL_SEED) -> str:
    """``original`` with ``edits`` of its words (at random positions) replaced by other words of the pool.
    The generator is seeded by the pair's id, so a pair's control does not depend on the rest of the set."""
    rng = np.random.default_rng([seed, int(pair_id, 16)])
    tokens = original.split()
    positions = [i for i, w in enumerate(tokens) if WORD.match(w)]
    for i in rng.choice(positions, size=min(edits, len(positions)), replace=False) if positions else []:
        word = tokens[i]
        while word == tokens[i]:
            word = pool[int(rng.integers(len(pool)))]
        tokens[i] = word
    return " ".join(tokens)


def build_lines(log_paths, version: int, seed: int = CONTROL_SEED) -> list[dict]:
    pairs = successful_pairs(log_paths)
    pool = word_pool({o for o, _ in pairs})
    by_original: dict[str, list] = {}
    for (original, perturbed), entry in pairs.items():
        pid = text_id(original, perturbed)
        by_original.setdefault(original, []).append(
            {"id": pid, "text": perturbed, "edits": entry["edits"], "recipes": sorted(entry["recipes"]),
             "control": control(original, entry["edits"], pool, pid, seed)})
    header = {"format": FORMAT, "version": version, "control_seed": seed, "originals": len(by_original),
              "pairs": len(pairs), "logs": sorted(_relative(p) for p in log_paths),
              "built_by": "python -m attacks.perturbation_set"}
    body = sorted(({"id": text_id(o), "original": o, "perturbations": sorted(ps, key=lambda p: p["id"])}
                   for o, ps in by_original.items()), key=lambda line: line["id"])
    return [{"header": header}, *body]


def _relative(path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def serialise(lines: list[dict]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n" for line in lines).encode("utf-8")


def write_atomic(path: Path, blob: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(blob)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def header_of(frozen: Path) -> dict:
    try:
        return json.loads(frozen.read_text(encoding="utf-8").split("\n", 1)[0])["header"]
    except (OSError, ValueError, KeyError) as exc:
        raise BenchError(f"{frozen} is not a perturbation set ({exc})") from None


def logs_of(header: dict) -> list[Path]:
    """The logs a frozen set's header names (to re-derive it)."""
    return [REPO_ROOT / p if not Path(p).is_absolute() else Path(p) for p in header["logs"]]


def check_against_cells(logs, results: Path) -> None:
    """BadLog (exit 2) when a log no longer begins with the bytes a stored cell computed from it recorded
    (checked on the bytes, before anything parses them). A log no cell records (an attack still running, or
    a cell written before cells recorded their logs) is read as it is."""
    from bench.results.store import BadLog, ResultStore, log_problem

    vouched = ResultStore(Path(results)).recorded_logs()
    for path in logs:
        cell_path, record = vouched.get(str(Path(path).resolve()), (None, None))
        problem = record and log_problem(Path(path), record)
        if problem:
            raise BadLog(cell_path, Path(path), problem)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attacks.perturbation_set", description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", type=Path, default=REPO_ROOT / "results" / "attack_logs",
                        help="a directory searched for *.jsonl attack logs (default: results/attack_logs)")
    parser.add_argument("--from", dest="source", type=Path, help="re-derive from the logs this set's header names")
    parser.add_argument("--version", type=int, default=1, help="the set's version (a new set is a new file)")
    parser.add_argument("--out", type=Path, help="default: suites/data/perturbations-v<version>.jsonl")
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    parser.add_argument("--missing", action="store_true",
                        help="print the logs the set names that are not on disk (one a line) and stop")
    parser.add_argument("--results-dir", type=Path, default=REPO_ROOT / "results",
                        help="the results whose cells vouch for the logs (default: results)")
    args = parser.parse_args(argv)
    try:
        header = header_of(args.source) if args.source else {"version": args.version}
        logs = logs_of(header) if args.source else sorted(args.logs.rglob("*.jsonl"))
        missing = [p for p in logs if not p.exists()]
        if args.missing:
            print("\n".join(_relative(p) for p in missing))
            return 0
        if not logs or missing:
            where = ("restore them from the repository's history (docs/suites.md, Perturbation, names the "
                     "commit and the command)" if args.source else "run the adversarial suite, or pass --logs DIR")
            raise BenchError(f"no attack logs to read ({len(missing)} named but missing, e.g. "
                             f"{_relative(missing[0]) if missing else '-'}): {where}")
        check_against_cells(logs, args.results_dir)
        version = header["version"]
        out = args.out or args.source or REPO_ROOT / "suites" / "data" / f"perturbations-v{version}.jsonl"
        blob = serialise(build_lines(logs, version, header.get("control_seed", CONTROL_SEED)))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    digest = hashlib.sha256(blob).hexdigest()
    if args.check:
        same = out.exists() and out.read_bytes() == blob
        print(f"{out}: {'identical' if same else 'DIFFERS'} (re-derived sha256 {digest})")
        return 0 if same else 1
    write_atomic(out, blob)
    print(f"wrote {out} ({len(blob)} bytes, sha256 {digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
