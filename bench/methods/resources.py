"""The resources the trainer offers methods through ``TrainContext.resources`` (bench/train.py builds one).

It finds them where the attacks' builders put them (``bench.data.resources_layout``, shared kernel code), and
imports nothing of ``attacks/``.
"""

from __future__ import annotations

from pathlib import Path

from bench.errors import BenchError


class MethodResources:
    """``TrainContext.resources``: what a method may ask for, found where ``bench resources build`` puts it,
    so no method hard-codes a path or builds its own copy."""

    WORDNET_FILES = tuple(f"data.{pos}" for pos in ("noun", "verb", "adj", "adv"))

    def __init__(self, home: Path):
        self.home = Path(home)
        self._served: dict[str, str] = {}

    def wordnet_dir(self) -> Path:
        """WordNet 3.0's data files: the copy ``bench resources build`` keeps under $BENCH_HOME/resources,
        else the system WordNet that copy is built from (``BENCH_SYSTEM_WORDNET``, default Debian's)."""
        from bench.data import resources_layout

        built = resources_layout.Layout(self.home / "resources").nltk / "corpora" / "wordnet"
        candidates = (("bench-resources", built), ("system", resources_layout.SYSTEM_WORDNET))
        for source, directory in candidates:
            if all((Path(directory) / f).is_file() for f in self.WORDNET_FILES):
                self._served["wordnet"] = f"wordnet-3.0 ({source}: {directory})"
                return Path(directory)
        raise BenchError(f"No WordNet 3.0 data files ({', '.join(self.WORDNET_FILES)}) under "
                         f"{' or '.join(str(d) for _, d in candidates)}. "
                         f"Fix: `apt-get install {resources_layout.APT_PACKAGES}` then `bench resources build --only "
                         f"nltk`, or set BENCH_SYSTEM_WORDNET to a WordNet 3.0 dict directory, or pass "
                         f"--set wordnet_dir=DIR.")

    def served(self) -> dict[str, str]:
        return dict(self._served)
