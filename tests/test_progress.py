"""Long commands never go quiet: in a file or pipe, a plain line (no control characters) when work
starts, at least every 30 s while it runs (even while one item takes long), and when it ends, each
with done/total and the time left."""

from __future__ import annotations

import io
import re

from bench.progress import PlainProgress, duration, progress, track


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_a_pipe_gets_plain_lines_with_an_estimate_every_30_s():
    out, clock = io.StringIO(), FakeClock()
    with PlainProgress(out, clock=clock, heartbeat=False) as bar:
        for _ in track(bar, range(10), 10, "attack mr textfooler"):
            clock.now += 12  # 12 s an example: a line every third example at most
        text = out.getvalue()
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text), "control characters in a plain log"
    got = lines(out)
    assert got[0].endswith("attack mr textfooler: 0/10 (0%), 0s elapsed, time left: estimating")
    middle = got[1:-1]
    assert middle and all("left" in line and re.search(r"\d+/10", line) for line in middle)
    assert "attack mr textfooler: 3/10 (30%), 36s elapsed, ~1m24s left" in got[1]  # 36 s for 3: 84 s for 7
    assert got[-1].endswith("attack mr textfooler: done, 10/10 in 2m00s")
    # never more than 30 s of fake time between two lines: 120 s of work, at least 4 lines in between
    assert len(middle) >= 3


def test_the_heartbeat_speaks_while_one_item_takes_long():
    """No advance for minutes (a model loading, a victim training): tick() still prints the line."""
    out, clock = io.StringIO(), FakeClock()
    bar = PlainProgress(out, clock=clock, heartbeat=False)
    task = bar.add_task("sts tasks", total=7)
    bar.advance(task)
    clock.now += 29
    bar.tick()
    assert len(lines(out)) == 1  # under 30 s: quiet
    clock.now += 2
    bar.tick()
    assert len(lines(out)) == 2 and "sts tasks: 1/7 (14%), 31s elapsed, ~3m06s left" in lines(out)[1]


def test_the_heartbeat_thread_prints_without_any_call():
    import time

    out = io.StringIO()
    with PlainProgress(out, every=0.05) as bar:
        bar.add_task("train", total=100)
        time.sleep(0.4)
    assert len(lines(out)) >= 3


def test_a_pipe_is_plain_and_a_terminal_is_live():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert isinstance(progress(io.StringIO()), PlainProgress)
    assert not isinstance(progress(Tty()), PlainProgress)


def test_durations_read_short():
    assert [duration(s) for s in (5, 65, 3725)] == ["5s", "1m05s", "1h02m"]


def test_progress_can_hand_its_lines_to_a_function():
    """bench.evaluate(log=f): the same plain lines, each handed to f (no stream), never a live bar."""
    from bench.progress import progress_to

    got: list[str] = []
    bar = progress_to(got.append)
    assert isinstance(bar, PlainProgress)
    with bar:
        for _ in track(bar, range(2), 2, "sts tasks"):
            pass
    assert [line.split("] ", 1)[1] for line in got][0] == "sts tasks: 0/2 (0%), 0s elapsed, time left: estimating"
    assert got[-1].split("] ", 1)[1].startswith("sts tasks: done, 2/2 in")
    assert isinstance(progress_to(None, io.StringIO()), PlainProgress)
