"""The README's and the manual's commands stay in step with the CLI: every `bench SUB --flag` written in
a code block, an inline code span or the README's commands table exists in that subcommand's parser,
and every subcommand has a row in the README's commands table. Only the parsers are built (no torch import)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from bench.cli import COMMANDS, build_parser

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

