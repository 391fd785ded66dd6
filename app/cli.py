"""The ``bench`` command line. Subcommands live in ``app/commands/<name>.py`` and are
imported only when used; nothing here imports torch.

Exit codes: 0 success, 2 bad usage or input (the message names the fix), 1 failure during work (one line naming
what failed and the likely fix; ``--debug`` or ``BENCH_DEBUG=1`` also prints the stack).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
import traceback
import warnings

from bench.errors import BenchError, BenchWarning
from bench.plugins import Registry

# name -> module, with a one-line help. Adding a command is one module plus one line here.
COMMANDS = Registry("command", helps={
    "ls": "list models, suites, tasks, methods, recipes or datasets",
    "run": "evaluate a model on a suite",
    "data": "check, verify or fetch benchmark data",
    "grid": "run models x suites x tasks x seeds on Ray (local or a cluster), skipping finished cells",
    "resources": "build or check the attacks' offline resources (WordNet, counter-fitted vectors, MLM)",
    "compare": "paired differences B - A (95% CI, p-value) over the result cells two models share",
    "divergence": "how far apart two models from one base are: weight distance ratio, attack outcome agreement",
    "report": "regenerate paper tables, figures and leaderboards from result files",
    "train": "train a sentence encoder with a method (simcse, robustembed, ...)",
    "publish": "copy chosen result cells into the published leaderboard (the checkout's results/)",
    "export": "write a model's result cells in mteb's results format (plus bench's robustness JSON)",
})
for _name in COMMANDS.helps:
    COMMANDS.register(_name, f"app.commands.{_name}")


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench", description="Robustness benchmarking for sentence encoders.",
                                     epilog="--plugins FILE (any command): the plug-in file to use instead of "
                                            "$BENCH_HOME/plugins.toml (docs/extending.md).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name in COMMANDS:
        help_text = COMMANDS.helps.get(name, "")
        # argparse %-formats help strings ("95% CI" would crash `bench --help`), not descriptions
        cmd = sub.add_parser(name, help=help_text.replace("%", "%%"), description=help_text)
        if name == wanted:  # import only the command being run
            COMMANDS.load(name).add_arguments(cmd)
            cmd.set_defaults(module=COMMANDS[name])
    return parser


def _warning_printer(previous):
    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, BenchWarning):  # ours name the file and the fix: no source line needed
            print(f"bench: warning: {message}", file=sys.stderr)
        else:
            previous(message, category, filename, lineno, file, line)
    return show


def _tolerant_output() -> None:
    """An ASCII-only (or other narrow) stdout/stderr prints '?'-style escapes for what it cannot show, never
    fails on a '·' in a table title."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a text stream we may reconfigure: leave it
            pass


# errno -> (what went wrong, the likely fix), for the one-line message of an OS error during work
OS_FIXES = {
    errno.ENOSPC: ("the disk is full", "free space there, or point BENCH_HOME / BENCH_RESULTS_DIR at another disk"),
    errno.EDQUOT: ("the disk quota is exceeded", "free space there, or point BENCH_HOME / BENCH_RESULTS_DIR elsewhere"),
    errno.EROFS: ("the file system is read-only", "point BENCH_HOME / BENCH_RESULTS_DIR at a writable directory"),
    errno.EACCES: ("permission denied", "make it writable for you, or point BENCH_HOME / BENCH_RESULTS_DIR elsewhere"),
    errno.EPERM: ("operation not permitted", "make it writable for you, or point BENCH_HOME / BENCH_RESULTS_DIR "
                                             "elsewhere"),
    errno.ENAMETOOLONG: ("a file name is too long", "use a shorter name (model names become directory names)"),
    errno.ENOTDIR: ("a path runs through a file", "move that file away, or choose another path"),
    errno.EISDIR: ("a directory stands where a file should be", "move that directory away, or choose another path"),
}


def failure_message(exc: BaseException) -> str:
    """One line for a failure during work: what failed and the likely fix (``--debug`` shows the stack)."""
    debug = "Run with --debug (or BENCH_DEBUG=1) to see where."
    if isinstance(exc, OSError) and exc.errno in OS_FIXES:
        what, fix = OS_FIXES[exc.errno]
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{what}{where}. Fix: {fix}. Finished cells are saved. {debug}"
    if isinstance(exc, UnicodeError):
        return (f"a text could not be encoded or decoded ({exc}). Fix: for output, set PYTHONIOENCODING=utf-8 (or a "
                f"UTF-8 locale, LANG=C.UTF-8); for input, give UTF-8 files. {debug}")
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}{f' ({exc.filename})' if exc.filename else ''}. {debug}"
    return (f"unexpected {type(exc).__name__}: {str(exc)[:300] or 'no message'}. This is a fault in bench: "
            f"{debug} and report it with that output.")


def plugins_flag(argv: list[str]) -> tuple[str | None, list[str]]:
    """``--plugins FILE`` (or ``--plugins=FILE``), taken out of argv: plug-ins register before any flag is built,
    since a plug-in suite's options and tasks are flags and choices of the commands."""
    for i, arg in enumerate(argv):
        if arg == "--plugins" and i + 1 < len(argv):
            return argv[i + 1], argv[:i] + argv[i + 2:]
        if arg.startswith("--plugins="):
            return arg.split("=", 1)[1], argv[:i] + argv[i + 1:]
    return None, argv


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv or os.environ.get("BENCH_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    plugins, argv = plugins_flag(argv)
    _tolerant_output()
    try:  # building a command's flags reads the suites and protocols.toml: a broken file is bad input (exit 2)
        from app.commands.plugins import load_plugins

        load_plugins(plugins)
        parser = build_parser(argv)
        args = parser.parse_args(argv)
    except BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # argparse: --help (0) or a bad flag value (2, message printed): one exit path
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if not getattr(args, "module", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", BenchWarning)  # each one names a different file: show every one
            warnings.showwarning = _warning_printer(warnings.showwarning)
            return int(importlib.import_module(args.module).main(args) or 0)
    except BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `bench ls | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except KeyboardInterrupt:
        print("bench: interrupted. Finished cells are saved; re-run the same command to continue.",
              file=sys.stderr)
        return 130
    except Exception as exc:  # a failure during work: one line naming it and the fix; the stack on --debug
        if debug:
            traceback.print_exc()
        print(f"bench: failed: {failure_message(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
