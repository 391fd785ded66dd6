"""The data layer: which files each dataset has, their counts and sha256, where to fetch them.

The data root is ``$BENCH_DATA_DIR`` in SentEval's ``downstream/`` layout (see
``bench/data/data_files.tsv`` for every file with its reference byte count, line count and sha256).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import tarfile
import urllib.request
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from bench.errors import BenchError, lookup
from bench.io import atomic_write_text, file_sha256

SIMCSE_SENTEVAL_TAR = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar"
SIMCSE_WIKI1M = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/wiki1m_for_simcse.txt"
GITHUB_RAW = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class FileSpec:
    path: str  # relative to the data root
    bytes: int
    lines: int
    sha256: str


@dataclass(frozen=True)
class Source:
    """Where online users get a dataset. ``url`` is an archive (tar/zip) or one file.

    Archive members under ``strip`` are extracted into ``into`` (relative to the data root).
    """

    url: str
    into: str
    strip: str = ""
    note: str = ""


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    root: str  # directory (or file) under the data root
    description: str
    sources: tuple[Source, ...] = ()
    optional: bool = False  # absent offline; features fall back (e.g. wiki1m -> wiki sample)
    convert: str = ""  # "module:function(data_root)" for sources that need re-packaging
    files: tuple[FileSpec, ...] = field(default=(), compare=False)


DATA_FILES_COLUMNS = ("path", "bytes", "newlines", "sha256")
SHIPPED_DATA_FILES = Path(__file__).with_name("data_files.tsv")  # a user's table: beside their plugins.toml


@lru_cache(maxsize=1)
def _reference_files() -> tuple[FileSpec, ...]:
    return read_data_files(resources.files("bench.data").joinpath("data_files.tsv").read_text())


def read_data_files(text: str) -> tuple[FileSpec, ...]:
    rows = csv.DictReader(io.StringIO(text), delimiter="\t")
    return tuple(FileSpec(r["path"], int(r["bytes"]), int(r["newlines"]), r["sha256"]) for r in rows)


def _senteval(name: str, sub: str, description: str) -> DatasetSpec:
    return DatasetSpec(name, f"senteval/downstream/{sub}", description,
                       (Source(SIMCSE_SENTEVAL_TAR, into="senteval", note="SimCSE's senteval.tar (SentEval data)"),))


def _github_files(repo_path: str, into: str, names: list[str]) -> tuple[Source, ...]:
    return tuple(Source(f"{GITHUB_RAW}/{repo_path}/{n}", into=f"{into}/{n}") for n in names)


_DATASETS = [
    _senteval("sts12", "STS/STS12-en-test", "SemEval STS 2012 test (5 subsets, 3108 pairs)"),
    _senteval("sts13", "STS/STS13-en-test", "SemEval STS 2013 test without SMT (1500 pairs)"),
    _senteval("sts14", "STS/STS14-en-test", "SemEval STS 2014 test (3750 pairs)"),
    _senteval("sts15", "STS/STS15-en-test", "SemEval STS 2015 test (3000 scored pairs)"),
    _senteval("sts16", "STS/STS16-en-test", "SemEval STS 2016 test (1186 scored pairs)"),
    _senteval("stsb", "STS/STSBenchmark", "STS Benchmark 5749/1500/1379"),
    _senteval("sick", "SICK", "SICK 4500/500/4927 (relatedness and entailment)"),
    _senteval("mr", "MR", "Movie review polarity, 10662 sentences"),
    _senteval("cr", "CR", "Customer reviews, 3775 sentences"),
    _senteval("subj", "SUBJ", "Subjectivity, 10000 sentences"),
    _senteval("mpqa", "MPQA", "MPQA opinion polarity, 10606 phrases"),
    _senteval("sst2", "SST/binary", "SST-2: GLUE phrase train 67349, sentence dev 872 / test 1821"),
    _senteval("sst5", "SST/fine", "SST-5 8544/1101/2210"),
    _senteval("trec", "TREC", "TREC question types 5452/500"),
    _senteval("mrpc", "MRPC", "MRPC 4076/1725 pairs (SentEval copy)"),
    _senteval("snli", "SNLI", "SNLI dev/test in SentEval format (train absent offline)"),
    DatasetSpec("anli", "anli", "Adversarial NLI v1.0 R1-R3 dev/test",
                (Source("https://dl.fbaipublicfiles.com/anli/anli_v1.0.zip", into="anli", strip="anli_v1.0/"),)),
    # ANLI paper-profile training sources (suites/anli.py); absent offline.
    DatasetSpec("snli-1.0", "snli_1.0", "SNLI 1.0 train/dev/test jsonl (550k train pairs)",
                (Source("https://nlp.stanford.edu/projects/snli/snli_1.0.zip", into="snli_1.0", strip="snli_1.0/"),),
                optional=True),
    DatasetSpec("mnli", "multinli_1.0", "MultiNLI 1.0 train/dev jsonl (393k train pairs)",
                (Source("https://cims.nyu.edu/~sbowman/multinli/multinli_1.0.zip", into="multinli_1.0",
                        strip="multinli_1.0/"),), optional=True),
    DatasetSpec("fever-nli", "nli_fever", "FEVER-NLI (Nie et al. 2019) train/dev/test fitems jsonl",
                (Source("https://www.dropbox.com/s/hylbuaovqwo2zav/nli_fever.zip?dl=1", into="nli_fever",
                        strip="nli_fever/", note="link from facebookresearch/anli's data instructions"),),
                optional=True),
    DatasetSpec("imdb", "imdb", "IMDB (aclImdb v1) 25000/25000 as jsonl {id,label,rating,text}",
                (Source("https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz", into="imdb/raw"),),
                convert="bench.data.datasets:convert_aclimdb"),
    DatasetSpec("textfooler", "textfooler_attack_sets", "TextFooler's 1000-example attack sets",
                _github_files("jind11/TextFooler/master/data", "textfooler_attack_sets",
                              ["mr", "imdb", "yelp", "snli", "mnli", "mnli_matched", "mnli_mismatched", "ag"])),
    DatasetSpec("counter-fitting", "counter-fitting", "Mrksic et al. 2016 constraints, vocabulary, SimLex-999",
                _github_files("nmrksic/counter-fitting/master/linguistic_constraints", "counter-fitting",
                              ["ppdb_synonyms.txt", "ppdb_antonyms.txt", "wordnet_antonyms.txt",
                               "vocabulary.txt", "SimLex-999.txt"])),
    DatasetSpec("glue-mrpc", "glue_mrpc", "MRPC in GLUE format (train 3668 / dev 408 / test 1725)",
                (Source("https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_train.txt",
                        into="glue_mrpc/msr_paraphrase_train.txt",
                        note="train/dev .tsv come from GLUE's download_glue_data.py"),)),
    DatasetSpec("cola", "cola", "CoLA v1.0, the version GLUE uses: train 8,551 / in-domain dev 527 / out-of-domain dev 516",
                _github_files("nyu-mll/CoLA-baselines/256387150bdde9e0838a25280da2b77a7741edaa/"
                              "acceptability_corpus/public/raw", "cola",
                              ["in_domain_train.tsv", "in_domain_dev.tsv", "out_of_domain_dev.tsv"])),
    DatasetSpec("wiki-sample", "wiki/wiki1m_for_simcse.head11914.txt",
                "First 11,914 lines of SimCSE's wiki1m (the offline training text)"),
    DatasetSpec("wiki1m", "wiki/wiki1m_for_simcse.txt", "SimCSE's 1M Wikipedia sentences (about 120 MB)",
                (Source(SIMCSE_WIKI1M, into="wiki/wiki1m_for_simcse.txt"),), optional=True),
    DatasetSpec("sst2-sentences", "extras/SST2-sentence-level", "SST-2 sentence-level 6920/872/1821"),
]


def _with_files(spec: DatasetSpec, table: tuple[FileSpec, ...] = ()) -> DatasetSpec:
    files = tuple(f for f in (*_reference_files(), *table) if f.path == spec.root or f.path.startswith(spec.root + "/"))
    return DatasetSpec(**{**spec.__dict__, "files": files})


DATASETS: dict[str, DatasetSpec] = {d.name: _with_files(d) for d in _DATASETS}
BUILTIN_DATASETS = frozenset(DATASETS)


def get_dataset(name: str) -> DatasetSpec:
    return lookup("dataset", DATASETS, name)


def register_dataset(name: str, spec, data_files: Path, where: str) -> DatasetSpec:
    """A plug-in dataset, its files' reference sizes and sha256 read from ``data_files`` (a user's table, written
    by ``bench data add``) as well as the shipped one. Registering the same spec again is a no-op."""
    if not isinstance(spec, DatasetSpec) or spec.name != name:
        raise BenchError(f"{where}: not a DatasetSpec named '{name}'. Fix: point it at "
                         f"bench.data.datasets.DatasetSpec({name!r}, root=..., description=...).")
    if name in DATASETS and replace_files(DATASETS[name], ()) != replace_files(spec, ()):
        raise BenchError(f"{where}: a dataset '{name}' is already registered. Fix: give yours another name.")
    table = read_data_files(data_files.read_text(encoding="utf-8")) if data_files.is_file() else ()
    DATASETS[name] = _with_files(spec, table)
    return DATASETS[name]


def replace_files(spec: DatasetSpec, files: tuple[FileSpec, ...]) -> DatasetSpec:
    return DatasetSpec(**{**spec.__dict__, "files": files})


def how_to_get(spec: DatasetSpec) -> str:
    if not spec.sources:
        return (f"It has no download source: copy its files into `{spec.root}` under BENCH_DATA_DIR from where you "
                f"got them (the benchmark bundle for a built-in one), or point BENCH_DATA_DIR at a directory that "
                f"has them (docs/data.md).")
    return (f"Get it with `bench data fetch {spec.name}`, or point BENCH_DATA_DIR at a directory that has "
            f"`{spec.root}` (the SentEval downstream layout; see docs/data.md).")


# The trainer selects checkpoints on STS-B dev (bench/train.py): a task scored there is not held out.
CHECKPOINT_SELECTION_SET = ("stsb", "dev")


def selection_set_overlap(dataset: str, splits) -> str:
    """"STS-B dev" when ``dataset`` (or a dataset with the same files) is scored on its dev split, else ""."""
    name, split = CHECKPOINT_SELECTION_SET
    same_files = dataset in DATASETS and DATASETS[dataset].root == DATASETS[name].root
    return "STS-B dev" if same_files and split in splits else ""


# --- a data file's reference entry (``bench data add``), so nobody works out bytes, lines and sha256 by hand ---

def file_entry(data_root: Path, path: Path) -> FileSpec:
    """The reference entry of one data file: its path relative to the data root, bytes, lines and sha256."""
    path = Path(path).resolve()
    if not path.is_file() or not path.is_relative_to(data_root.resolve()):
        raise BenchError(f"{path}: not a file under the data root {data_root}. Fix: put it under BENCH_DATA_DIR "
                         f"(where runs read it) and give that path.")
    digest, size, lines = hashlib.sha256(), 0, 0
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
            size, lines = size + len(block), lines + block.count(b"\n")
    return FileSpec(str(path.relative_to(data_root.resolve())), size, lines, digest.hexdigest())


def add_data_files(table: Path, entries: list[FileSpec]) -> None:
    """Add ``entries`` to a data-files table (a file's row already there is updated in place)."""
    rows = {f.path: f for f in (read_data_files(table.read_text(encoding="utf-8")) if table.is_file() else ())}
    rows.update({f.path: f for f in entries})
    lines = ["\t".join(DATA_FILES_COLUMNS)] + ["\t".join(map(str, (f.path, f.bytes, f.lines, f.sha256)))
                                              for f in rows.values()]
    table.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(table, "\n".join(lines) + "\n")


def file_problem(data_root: Path, f: FileSpec, deep: bool = False) -> str | None:
    """None if the file is present and intact, else what is wrong with it."""
    path = data_root / f.path
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size != f.bytes:
        return f"has {size} bytes, expected {f.bytes} (truncated or corrupt)"
    if deep:
        digest, lines = hashlib.sha256(), 0
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
                lines += block.count(b"\n")
        if lines != f.lines:
            return f"has {lines} lines, expected {f.lines}"
        if digest.hexdigest() != f.sha256:
            return f"sha256 {digest.hexdigest()[:12]}… differs from the reference {f.sha256[:12]}…"
    return None


def problems(data_root: Path, name: str, deep: bool = False) -> list[tuple[str, str]]:
    spec = get_dataset(name)
    if not spec.files:  # optional datasets with no reference hash: presence only
        return [] if (data_root / spec.root).exists() else [(spec.root, "missing")]
    return [(f.path, p) for f in spec.files if (p := file_problem(data_root, f, deep))]


def require(data_root: Path, name: str) -> Path:
    """The dataset's directory, after a cheap presence and size check; BenchError naming the fix.

    The content check (sha256) is ``check_content``, which ``bench run`` applies to every task's data
    when it builds the cell configuration, before any work."""
    spec = get_dataset(name)
    bad = problems(data_root, name, deep=False)
    if bad:
        path, what = bad[0]
        more = f" (and {len(bad) - 1} more files)" if len(bad) > 1 else ""
        raise BenchError(f"Data file {data_root / path} {what}{more}. {how_to_get(spec)}")
    return data_root / spec.root


# --- content check (sha256 against bench/data/data_files.tsv, cached by file identity) ----------

HASH_CACHE = "data-sha256.json"  # under $BENCH_HOME/cache: path -> [size, mtime_ns, ctime_ns, sha256]
_HASH_CACHES: dict[str, dict[str, list]] = {}  # the same per cache file, in this process


@dataclass(frozen=True)
class DataCheck:
    """What ``check_content`` found: a fingerprint of the files as they are (it enters the cell
    configuration) and, when allowed, the files that differ from the reference."""

    dataset: str
    fingerprint: str
    unverified: tuple[str, ...] = ()  # "path: what differs" (only with allow_unverified)


def _identity(path: Path) -> list:
    st = path.stat()
    # ctime too: `touch -r` can restore an edited file's mtime, but not its ctime.
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _sha256_file(path: Path) -> str:
    return file_sha256(path)  # a seam of its own: tests count the files actually read


def sha256_files(paths: list[Path], cache_dir: Path | None = None) -> dict[Path, str]:
    """sha256 of each file, reusing an earlier hash while the file's (size, mtime, ctime) is unchanged:
    a re-run re-reads no data. The cache is ``cache_dir/data-sha256.json`` (kept in memory too)."""
    cache_file = Path(cache_dir) / HASH_CACHE if cache_dir else None
    memo = _HASH_CACHES.get(str(cache_file))
    if memo is None:
        memo = _HASH_CACHES[str(cache_file)] = {}
        try:
            loaded = json.loads(cache_file.read_text(encoding="utf-8")) if cache_file else {}
            memo.update({k: v for k, v in loaded.items() if isinstance(v, list) and len(v) == 4})
        except (OSError, ValueError, AttributeError):
            pass  # no cache yet, or an unreadable one: hash again
    out, changed = {}, False
    for path in paths:
        key = str(Path(path).resolve())
        ident = _identity(path)
        hit = memo.get(key)
        if hit is None or hit[:3] != ident:
            memo[key] = [*ident, _sha256_file(path)]
            changed = True
        out[path] = memo[key][3]
    if changed and cache_file is not None:
        try:
            atomic_write_text(cache_file, json.dumps(memo, sort_keys=True))
        except OSError:
            pass  # a read-only home only costs re-hashing next time
    return out


def check_content(data_root: Path, name: str, cache_dir: Path | None = None,
                  allow_unverified: bool = False) -> DataCheck:
    """Every file of dataset ``name`` against its sha256 in ``bench/data/data_files.tsv``.

    A mismatch (a one-byte edit keeps the size, so sizes alone miss it) raises a BenchError naming the
    file and the fix, unless ``allow_unverified``: then the files are used as they are and listed in
    ``unverified``. The fingerprint hashes the files as found, so results computed on other data never
    share a cell with results on the reference data."""
    spec = get_dataset(name)
    files = [(f.path, f) for f in spec.files]
    if not files:  # no reference (optional datasets): whatever is present, unverified by construction
        root = data_root / spec.root
        present = sorted(p for p in (root.rglob("*") if root.is_dir() else [root]) if p.is_file())
        files = [(str(p.relative_to(data_root)), None) for p in present]
        if not files:
            if not allow_unverified:
                require(data_root, name)
            return DataCheck(name, "absent", (f"{spec.root}: missing",))
    if not allow_unverified:
        require(data_root, name)  # missing or wrong-sized files: the cheap message, before any hashing
    present = [data_root / rel for rel, _ in files if (data_root / rel).is_file()]
    hashes = sha256_files(present, cache_dir)
    found, unverified = {}, []
    for rel, ref in files:
        path = data_root / rel
        if not path.is_file():
            found[rel] = "missing"
            unverified.append(f"{rel}: missing")
            continue
        found[rel] = hashes[path]
        if ref is None:
            unverified.append(f"{rel}: no reference sha256")
        elif hashes[path] != ref.sha256:
            size = path.stat().st_size
            what = (f"has {size} bytes, expected {ref.bytes}" if size != ref.bytes else
                    f"has the reference size but other bytes (sha256 {hashes[path][:12]}…, reference "
                    f"{ref.sha256[:12]}…)")
            if not allow_unverified:
                raise BenchError(
                    f"Data file {path} {what}: it was edited or corrupted, and would give wrong numbers. Fix: "
                    f"restore it ({how_to_get(spec)} `bench data verify {name}` checks every file), or pass "
                    f"--allow-unverified-data to evaluate on these files on purpose (rows record it).")
            unverified.append(f"{rel}: {what}")
    fingerprint = hashlib.sha256(json.dumps(sorted(found.items())).encode()).hexdigest()[:16]
    return DataCheck(name, fingerprint, tuple(unverified))


def available(data_root: Path, name: str) -> bool:
    return not problems(data_root, name, deep=False)


# --- fetching (for online users; tested against a loopback HTTP server) ---------------------

def _download(url: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(dest.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, tmp.open("wb") as out:
            shutil.copyfileobj(resp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BenchError(f"Could not download {url} ({exc}). Check the network, or place the files "
                         f"by hand under BENCH_DATA_DIR.") from exc
    tmp.replace(dest)


def _safe_member(name: str, strip: str) -> str | None:
    if strip and not name.startswith(strip):
        return None
    rel = name[len(strip):]
    if not rel or rel.startswith("/") or ".." in Path(rel).parts:
        return None
    return rel


def _extract(archive: Path, target: Path, strip: str) -> None:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                rel = _safe_member(info.filename, strip)
                if rel and not info.is_dir():
                    out = target / rel
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(zf.read(info))
        return
    with tarfile.open(archive) as tf:
        for member in tf.getmembers():
            rel = _safe_member(member.name, strip)
            if rel and member.isfile():
                out = target / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                with tf.extractfile(member) as src, out.open("wb") as dst:
                    shutil.copyfileobj(src, dst)


def _is_archive(path: Path) -> bool:
    return zipfile.is_zipfile(path) or tarfile.is_tarfile(path)


def fetch(data_root: Path, name: str, cache_dir: Path) -> list[tuple[str, str]]:
    """Download and unpack a dataset, then verify it. Returns remaining problems."""
    spec = get_dataset(name)
    if not spec.sources:
        raise BenchError(f"Dataset '{name}' has no public download; {how_to_get(spec)}")
    for src in spec.sources:
        cached = cache_dir / "downloads" / hashlib.sha256(src.url.encode()).hexdigest()[:16]
        if not cached.exists():
            _download(src.url, cached)
        if _is_archive(cached):
            _extract(cached, data_root / src.into, src.strip)
        else:
            dest = data_root / src.into
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(cached, dest)
    if spec.convert:
        module, _, func = spec.convert.partition(":")
        getattr(__import__(module, fromlist=[func]), func)(data_root)
    return problems(data_root, name, deep=True)


def convert_aclimdb(data_root: Path) -> None:
    """aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt -> imdb/{train,test}.jsonl (our layout)."""
    raw = data_root / "imdb" / "raw" / "aclImdb"
    for split in ("train", "test"):
        rows = []
        for label, polarity in ((1, "pos"), (0, "neg")):
            for path in sorted((raw / split / polarity).glob("*.txt"), key=lambda p: int(p.stem.split("_")[0])):
                idx, rating = path.stem.split("_")
                rows.append({"id": f"{polarity}_{idx}", "label": label, "rating": int(rating),
                             "text": path.read_text(encoding="utf-8")})
        atomic_write_text(data_root / "imdb" / f"{split}.jsonl",
                          "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


# --- readers ------------------------------------------------------------------------------

@dataclass
class PairSet:
    """Scored sentence pairs, grouped in subsets (STS12-16 have several; STS-B and SICK one)."""

    subsets: dict[str, tuple[list[str], list[str], list[float]]]

    def all_pairs(self) -> tuple[list[str], list[str], list[float]]:
        a, b, y = [], [], []
        for s1, s2, gold in self.subsets.values():
            a += s1
            b += s2
            y += gold
        return a, b, y

    def limit(self, n: int | None) -> "PairSet":
        if not n:
            return self
        out, left = {}, n
        for name, (s1, s2, gold) in self.subsets.items():
            if left <= 0:
                break
            out[name] = (s1[:left], s2[:left], gold[:left])
            left -= len(out[name][0])
        return PairSet(out)


def _norm(text: str) -> str:
    # SentEval splits on whitespace and the batcher joins with one space.
    return " ".join(text.split())


def malformed(path: Path, lineno: int, line: str, expected: str) -> BenchError:
    """The error for a line a reader cannot parse: file, line number, what was expected, the fix."""
    return BenchError(f"{path}:{lineno}: malformed line {line[:100]!r}; expected {expected}. Fix: restore the file "
                      f"(benchmark data: `bench data verify` names the damaged files and `bench data fetch` restores "
                      f"them), or correct line {lineno}.")


def _score(text: str) -> float:
    value = float(text)
    if value != value:  # NaN would poison every correlation silently
        raise ValueError(text)
    return value


def read_semeval_sts(directory: Path, subsets: tuple[str, ...]) -> PairSet:
    """STS12-16: STS.input.<subset>.txt (first two columns) + STS.gs.<subset>.txt; unscored pairs dropped."""
    out = {}
    for subset in subsets:
        input_path, gold_path = directory / f"STS.input.{subset}.txt", directory / f"STS.gs.{subset}.txt"
        lines = input_path.read_text(encoding="utf-8").splitlines()
        gold = gold_path.read_text(encoding="utf-8").splitlines()
        if len(lines) != len(gold):
            raise BenchError(f"{input_path} has {len(lines)} lines but its gold file "
                             f"has {len(gold)}; the data are corrupt. Re-fetch with `bench data fetch`.")
        s1, s2, scores = [], [], []
        for lineno, (line, g) in enumerate(zip(lines, gold), 1):
            if not g.strip():
                continue
            cols = line.split("\t")
            if len(cols) < 2:
                raise malformed(input_path, lineno, line, "two tab-separated sentences")
            try:
                scores.append(_score(g))
            except ValueError:
                raise malformed(gold_path, lineno, g, "one similarity score (a number) or an empty line") from None
            s1.append(_norm(cols[0]))
            s2.append(_norm(cols[1]))
        out[subset] = (s1, s2, scores)
    return PairSet(out)


def read_stsb(directory: Path, split: str) -> PairSet:
    """STS-B csv (tab separated): genre, file, year, id, score, s1, s2[, notes]."""
    s1, s2, gold = [], [], []
    path = directory / f"sts-{split}.csv"
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        cols = line.split("\t")
        try:
            if len(cols) < 7:
                raise ValueError(line)
            gold.append(_score(cols[4]))
        except ValueError:
            raise malformed(path, lineno, line, "7+ tab-separated fields: genre, file, year, id, score (a number), "
                                                "sentence1, sentence2") from None
        s1.append(_norm(cols[5]))
        s2.append(_norm(cols[6]))
    return PairSet({split: (s1, s2, gold)})


SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


def read_sick(directory: Path, split: str) -> PairSet:
    """SICK with a header row: pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment."""
    path = directory / SICK_FILES[split]
    s1, s2, gold = [], [], []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines()[1:], 2):
        if not line.strip():
            continue
        cols = line.split("\t")
        try:
            if len(cols) < 4:
                raise ValueError(line)
            gold.append(_score(cols[3]))
        except ValueError:
            raise malformed(path, lineno, line, "4+ tab-separated fields: pair_ID, sentence_A, sentence_B, "
                                                "relatedness_score (a number)") from None
        s1.append(_norm(cols[1]))
        s2.append(_norm(cols[2]))
    return PairSet({split: (s1, s2, gold)})
