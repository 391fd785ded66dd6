"""The README's and the manual's commands stay in step with the CLI: every `bench SUB --flag` written in
a code block, an inline code span or the README's commands table exists in that subcommand's parser,
and every subcommand has a row in the README's commands table. Only the parsers are built (no torch import)."""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import pytest

from app.cli import COMMANDS, build_parser
from tests.conftest import committed_cells

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
COMMAND = re.compile(r"(?:^|[\s`(])bench (?P<sub>[a-z]+)(?P<rest>[^`]*)")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser([name])
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def code_blocks(text: str) -> list[str]:
    """The lines of every fenced code block; a backslash-continued line is joined with the next."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)
    return [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]


def inline_commands(text: str) -> list[str]:
    """Inline code spans that start with `bench `."""
    return re.findall(r"`(bench [^`\n]*)`", text)


def commands_table(text: str) -> list[str]:
    """The first cell of each row of the README's commands table (`| \\`bench ...\\` | ... |`)."""
    return [row.split("` |")[0] for row in text.splitlines() if row.startswith("| `bench ")]


def written_commands(lines: list[str]) -> list[tuple[str, list[str]]]:
    """(subcommand, flags) of each `bench SUB ...` in these lines; shell comments and the next command
    of a `&&`, `;` or pipe chain are cut off. A table's escaped `\\|` is an alternative, not a pipe."""
    found = []
    for line in lines:
        for piece in re.split(r"&&|;|(?<!\\)\|", line.split(" #")[0]):
            for m in COMMAND.finditer(piece):
                found.append((m.group("sub"), FLAG.findall(m.group("rest"))))
    return found


def test_every_subcommand_has_a_row_in_the_readme_table():
    rows = {sub for sub, _ in written_commands(commands_table(README.read_text(encoding="utf-8")))}
    assert set(COMMANDS) <= rows, f"add a README commands-table row for: {sorted(set(COMMANDS) - rows)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_written_flags_exist_in_the_cli(page):
    text = page.read_text(encoding="utf-8")
    lines = code_blocks(text) + inline_commands(text)
    commands = written_commands(lines)
    if page == README:
        assert commands, "the README shows no bench command"
    unknown = []
    for sub, flags in commands:
        if sub not in COMMANDS:
            unknown.append(f"bench {sub} (no such subcommand)")
            continue
        known = subparser(sub)._option_string_actions
        unknown += [f"bench {sub} {flag}" for flag in flags if flag not in known]
    assert not unknown, f"{page.name} shows flags the CLI does not have: {sorted(set(unknown))}"


def test_the_checker_sees_a_wrong_flag():
    """The parsing above finds a flag that is not in the parser (so the tests above can fail)."""
    commands = written_commands(["bench run --suite sts --modle minilm  # typo", "x && bench ls models --json"])
    assert commands == [("run", ["--suite", "--modle"]), ("ls", ["--json"])]
    assert "--modle" not in subparser("run")._option_string_actions
    assert "--json" in subparser("ls")._option_string_actions


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchors for a page's headings (lower case, punctuation dropped, spaces as hyphens)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_between_pages_resolve(page):
    """Every relative link of the README and the manual names an existing file (and heading)."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page.resolve()
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in heading_anchors(path.read_text(encoding="utf-8")):
            broken.append(target)
    assert not broken, f"{page.name}: links that lead nowhere: {broken}"



# ------------------------------------------------ the README's command blocks, run as pasted -----

SKIP, SLOW = "skip", "slow"
# What each command of the README's blocks does here, offline, on the committed data: its exit code, or
# SLOW (an hour or more of real work: run by the slow test only) or SKIP (the environment the tests run in
# is already installed; the test suite does not run itself). A command missing here fails the test, so a
# new README command gets its expectation when it is written.
EXPECTED = {  # command: (fast, slow)
    ".ci/install": (SKIP, SKIP),
    "python -m pytest -q": (SKIP, SKIP),
    "bench run --suite sts --model minilm": (SLOW, 0),
    "bench run --suite sts --model hf:sentence-transformers/all-MiniLM-L6-v2": (2, 2),  # offline, not cached
    "bench run --suite sts --model ./my-encoder --pooler avg": (2, 2),  # no such directory
    "bench resources build": (SLOW, 0),
    "bench run --suite adversarial --model minilm --task mr --limit 50": (2, 0),  # fast: resources not built
    "bench compare minilm simcse-minilm-study --suite sts --results-dir results": (0, 0),
    "bench report --format html": (0, 0),
}
FAST_EXIT_S = 30  # a documented exit 2 comes at once (seconds even on a busy 2-core machine), not after a model loads or trains


def readme_commands(text: str) -> list[str]:
    """Every command of the README's bash blocks, in order: comments cut, `&&` chains split, `export`
    lines kept (they set the environment of the commands after them)."""
    out = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            out += [part.strip() for part in line.split("&&") if part.strip()]
    return out


def run_readme(tmp_path: Path, mode: int, cwd: Path = REPO) -> list[tuple[str, int, float]]:
    """Run the README's commands in order from ``cwd`` (the checkout), in a fresh BENCH_HOME, offline; returns
    (command, exit code, seconds) of each one run. ``mode``: 0 fast, 1 slow."""
    import subprocess
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    env.update(BENCH_HOME=str(tmp_path / "home"), BENCH_OFFLINE="1", HF_HUB_OFFLINE="1")
    exports, ran = [], []
    for command in readme_commands(README.read_text(encoding="utf-8")):
        if command.startswith("export "):
            exports.append(command)
            continue
        assert command in EXPECTED, f"README command without an expectation in EXPECTED: {command!r}"
        expected = EXPECTED[command][mode]
        if expected in (SKIP, SLOW):
            continue
        start = time.perf_counter()
        done = subprocess.run(["bash", "-c", "; ".join([*exports, command])], cwd=cwd, env=env,
                              capture_output=True, text=True)
        seconds = time.perf_counter() - start
        assert done.returncode == expected, f"{command}: exit {done.returncode}, expected {expected}\n{done.stderr[-2000:]}"
        if expected == 2:
            assert "bench: error:" in done.stderr and "Fix" in done.stderr or "bench resources build" in done.stderr, \
                done.stderr
            assert seconds < FAST_EXIT_S, f"{command}: its exit 2 took {seconds:.1f}s\n{done.stderr[-500:]}"
        ran.append((command, done.returncode, seconds))
    return ran


def data_root() -> Path:
    return REPO.parent / "shared" / "data"


def test_the_readme_commands_list_every_command():
    commands = [c for c in readme_commands(README.read_text(encoding="utf-8")) if not c.startswith("export ")]
    assert commands and set(commands) <= set(EXPECTED), sorted(set(commands) - set(EXPECTED))
    assert any(c.startswith("export BENCH_DATA_DIR=") for c in readme_commands(README.read_text(encoding="utf-8"))), \
        "the set-up sets the data root once, for every command after it"


def write_sts_results(root: Path, models: tuple[str, ...]) -> Path:
    """STS-B cells of ``models``, each with its per-pair evidence (as `bench run --suite sts` stores them), and
    the suites' and models' metadata beside them: what `bench compare` and `bench report` read."""
    import hashlib

    import numpy as np

    from bench.models.registry import MODELS
    from bench.results import metadata
    from bench.results.store import CellKey, Result, ResultStore, config_hash
    from bench.results.uncertainty import apply_uncertainty
    from bench.scoring.stats import Evidence, Sample
    from suites import all_suites

    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 50)
    config = {"suite": "sts", "task": "stsb", "split": "test", "limit": None, "profile": "smoke"}
    for spread, model in enumerate(models, start=1):  # each model a noisier predictor than the one before
        pairs = Sample(list(range(gold.size)), {"pred": gold + rng.normal(0, spread, gold.size), "gold": gold})
        evidence = Evidence("spearman", pairs, ("pred", "gold"))
        key = CellKey(model, hashlib.sha256(model.encode()).hexdigest(), "sts", "stsb", 0, config_hash(config))
        row = Result(model=model, suite="sts", task="stsb", split="test", metric="spearman", aggregation="all",
                     value=evidence.point(), n=gold.size, seed=0, weights_sha256=key.weights_sha256,
                     config_hash=key.config_hash, config=json.dumps(config), evidence=evidence)
        ResultStore(root).write(key, [row], config, evidence=apply_uncertainty([row]))
    metadata.export(root, suites=all_suites(), models=[MODELS[m] for m in models])
    return root


@pytest.mark.skipif(not data_root().is_dir(), reason="the committed data root ../shared/data is absent")
def test_the_readme_commands_run_as_pasted_fast(tmp_path):
    """In order, offline: the documented exits 2 come at once and name the fix, the rest exit 0. The
    setup's hour-long STS run and the resource build are the slow test's; STS-B cells written here stand in
    for what that run writes (for the report) and for the checkout's results/ (for the comparison)."""
    import shutil

    checkout = tmp_path / "checkout"  # the commands' working directory: `--results-dir results` reads its results/
    write_sts_results(checkout / "results", ("minilm", "simcse-minilm-study"))
    shutil.copytree(checkout / "results", tmp_path / "home" / "results")
    ran = run_readme(tmp_path, 0, cwd=checkout)
    assert [c for c, _, _ in ran][-1] == "bench report --format html"
    assert (tmp_path / "home" / "reports" / "index.html").is_file()


@pytest.mark.slow
@pytest.mark.skipif(not data_root().is_dir(), reason="the committed data root ../shared/data is absent")
@pytest.mark.skipif(os.environ.get("BENCH_README_FULL") != "1",
                    reason="1.5-2 hours (the resource build): set BENCH_README_FULL=1 to run it")
@pytest.mark.skipif(not committed_cells(), reason="results/ holds no committed cells for the README's comparison")
def test_the_readme_commands_run_as_pasted(tmp_path):
    """Everything, as a new user meets it: the STS run (~9 min), the resource build (1-1.5 CPU-hours),
    the attack, the comparison and the report."""
    ran = run_readme(tmp_path, 1)
    assert any(c.startswith("bench resources build") for c, _, _ in ran)


# ------------------------------------------------ quoted numbers cannot drift from the results -----

@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_quoted_numbers_match_the_results(page):
    """Every number the page quotes between <!-- q: ... --> markers is its results row, at its precision."""
    from reports import quoted

    text = page.read_text(encoding="utf-8")
    if not committed_cells() and any(not m.group("file").startswith("reports/") for m in quoted.QUOTE.finditer(text)):
        pytest.skip(f"{page.name} quotes the committed leaderboards, and results/ holds no committed cells")
    problems = quoted.check(text, REPO / "results", page.name)
    assert not problems, "\n".join(problems) + "\nFix: `python -m reports.quoted --fill`, then read the sentence again."


def test_the_quote_check_sees_a_drifted_number(tmp_path):
    from reports import quoted

    (tmp_path / "leaderboard-sts.csv").write_text("model,task,metric,value,ci_low,ci_high\n"
                                                  "m,avg,spearman,57.9542,56.8497,59.0387\n"
                                                  "n,avg,spearman,1.0,,\n", encoding="utf-8")
    good = "base <!-- q: leaderboard-sts model=m task=avg -->57.95 [56.85, 59.04]<!-- /q -->."
    assert quoted.check(good, tmp_path) == []
    drifted = good.replace("57.95", "58.47")
    assert "the results say 57.95 / 56.85 / 59.04" in quoted.check(drifted, tmp_path)[0]
    assert "2 rows" in quoted.check("<!-- q: leaderboard-sts task=avg -->1.0<!-- /q -->", tmp_path)[0]
    assert quoted.fill(drifted, tmp_path) == good


def _ledger(tmp_path, text: str) -> Path:
    """A results directory whose generated claims.csv holds ``text``."""
    generated = tmp_path / "reports" / "generated"
    generated.mkdir(parents=True)
    (generated / "claims.csv").write_text(text, encoding="utf-8")
    return tmp_path / "results"


def test_a_ledger_row_is_quoted_by_its_difference(tmp_path):
    from reports import quoted

    results = _ledger(tmp_path, "claim_id,seed,delta,ci_low,ci_high\nc,pooled,-0.351,-1.894,1.323\nc,2,-0.4,-2.0,1.3\n")
    good = "<!-- q: reports/claims claim_id=c seed=pooled -->−0.35 [−1.89, +1.32]<!-- /q -->"
    assert quoted.check(good, results) == []
    assert "the results say −0.35" in quoted.check(good.replace("−0.35", "−0.40"), results)[0]


def test_a_count_of_rows_is_quoted(tmp_path):
    """``rows=count`` quotes how many rows match: a verdict count in prose cannot drift from the ledger."""
    from reports import quoted

    results = _ledger(tmp_path, "claim_id,primary,verdict\na,True,inconclusive\nb,True,inconclusive\n"
                                "b,False,inconclusive\nc,True,replicated\n")
    good = "<!-- q: reports/claims primary=True verdict=inconclusive rows=count -->2<!-- /q --> inconclusive"
    assert quoted.check(good, results) == []
    assert "the results say 2" in quoted.check(good.replace("-->2<", "-->3<"), results)[0]
    assert quoted.fill(good.replace("-->2<", "-->3<"), results) == good


def test_one_column_of_a_row_is_quoted(tmp_path):
    """``show=p`` quotes a ledger row's p alone, so a p in prose cannot drift either."""
    from reports import quoted

    results = _ledger(tmp_path, "claim_id,seed,delta,ci_low,ci_high,p\nc,pooled,-2.4,-4.3,-0.6,0.0290\n")
    good = "<!-- q: reports/claims claim_id=c seed=pooled show=p -->0.029<!-- /q -->"
    assert quoted.check(good, results) == []
    assert "the results say 0.029" in quoted.check(good.replace("0.029", "0.048"), results)[0]
    assert "no mde in that row" in quoted.check(good.replace("show=p", "show=mde"), results)[0]


def test_a_column_of_words_is_quoted_whole(tmp_path):
    """``show=verdict`` quotes a ledger row's verdict as it stands, so a verdict in prose cannot drift."""
    from reports import quoted

    results = _ledger(tmp_path, "claim_id,seed,delta,verdict\nc,pooled,-2.4,too few seeds\n")
    good = "<!-- q: reports/claims claim_id=c seed=pooled show=verdict -->too few seeds<!-- /q -->"
    assert quoted.check(good, results) == []
    stale = good.replace("-->too few seeds<", "-->replicated<")
    assert "the results say 'too few seeds'" in quoted.check(stale, results)[0]
    assert quoted.fill(stale, results) == good
