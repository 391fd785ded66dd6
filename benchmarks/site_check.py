"""Look at the report site as a reader would: headless Chromium at 1280×1400.

    python benchmarks/site_check.py [--reports DIR] [--screenshots DIR] [PAGE.html ...]

For each page (default: the index, the claims page, the first robustness card and the adversarial
leaderboard) it fails on a horizontal scroll (the page wider than the window), a broken link (a
relative href or src that names no file, or no anchor on the page it names) and an empty column (a table
column whose every body cell is blank). With --screenshots it saves each page's first screen as a PNG.
Exit 0 when every page passes, 1 otherwise, 2 when Chromium is missing (`apt-get install -y chromium`).
"""

from __future__ import annotations

import argparse
import html.parser
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

WIDTH, HEIGHT = 1280, 1400
REPO = Path(__file__).resolve().parents[1]

# Appended to a copy of the page: measures it and writes the figures into the DOM for --dump-dom.
MEASURE = """<script>window.addEventListener('load',function(){
var d=document.documentElement,empty=[];
document.querySelectorAll('table').forEach(function(t,ti){var rows=t.tBodies.length?t.tBodies[0].rows:[];
if(!rows.length)return;var n=rows[0].cells.length;for(var i=0;i<n;i++){var blank=true;
for(var r=0;r<rows.length;r++){var c=rows[r].cells[i];if(c&&c.textContent.trim()!==''){blank=false;break}}
if(blank){var h=t.tHead&&t.tHead.rows[0]&&t.tHead.rows[0].cells[i];empty.push('table '+ti+' column '+i+
(h?' ('+h.textContent.trim()+')':''))}}});
var p=document.createElement('pre');p.id='bench-measure';
p.textContent=JSON.stringify({scrollWidth:d.scrollWidth,innerWidth:window.innerWidth,empty:empty});
document.body.appendChild(p)});</script>"""


def chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def _run(browser: str, *args: str) -> str:
    command = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=4000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180).stdout


def measure(browser: str, page: Path) -> dict:
    """scrollWidth, innerWidth and the empty columns of ``page``, rendered beside its own files."""
    probe = page.with_name(f".site-check-{page.name}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    try:
        dom = _run(browser, "--dump-dom", probe.resolve().as_uri())
    finally:
        probe.unlink(missing_ok=True)
    found = re.search(r'<pre id="bench-measure">(.*?)</pre>', dom, flags=re.S)
    if not found:
        raise RuntimeError(f"{page.name}: Chromium returned no measurement")
    return json.loads(html.unescape(found.group(1)))


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.targets, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key):
                self.targets.append(attrs[key])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def broken_links(page: Path) -> list[str]:
    """Relative links of ``page`` that name no file, or an anchor that file lacks."""
    broken = []
    for target in _parse(page).targets:
        url = urlparse(target)
        if url.scheme or target.startswith("//"):
            continue  # the site is self-contained: an external link is not checked here
        path = (page.parent / unquote(url.path)).resolve() if url.path else page
        if not path.exists():
            broken.append(target)
        elif url.fragment and path.suffix == ".html" and url.fragment not in _parse(path).ids:
            broken.append(target)
    return broken


def default_pages(reports: Path) -> list[Path]:
    cards = sorted(reports.glob("card-robustembed-*.html")) or sorted(reports.glob("card-*.html"))
    wanted = [reports / "index.html", reports / "claims.html", *cards[:1], reports / "leaderboard-adversarial.html"]
    return [p for p in wanted if p.is_file()]


def check(pages: list[Path], screenshots: Path | None = None, browser: str | None = None) -> list[str]:
    """Every problem of ``pages``; saves a screenshot of each into ``screenshots`` when given."""
    browser = browser or chromium()
    problems = []
    for page in pages:
        m = measure(browser, page)
        if m["scrollWidth"] > m["innerWidth"]:
            problems.append(f"{page.name}: scrolls sideways ({m['scrollWidth']} px wide in a {m['innerWidth']} px window)")
        problems += [f"{page.name}: broken link {t}" for t in broken_links(page)]
        problems += [f"{page.name}: empty {column}" for column in m["empty"]]
        if screenshots is not None:
            screenshots.mkdir(parents=True, exist_ok=True)
            out = screenshots / f"{page.stem}.png"
            with tempfile.TemporaryDirectory() as tmp:
                shot = Path(tmp) / "shot.png"
                _run(browser, f"--screenshot={shot}", page.resolve().as_uri())
                _small_png(shot, out)
    return problems


def _small_png(source: Path, target: Path) -> None:
    """The screenshot as a palette PNG (a few hundred KB at most), for committing."""
    try:
        from PIL import Image

        Image.open(source).convert("RGB").quantize(colors=128).save(target, optimize=True)
    except ImportError:
        shutil.copy(source, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", type=Path)
    parser.add_argument("--reports", type=Path, default=REPO / "reports" / "generated")
    parser.add_argument("--screenshots", type=Path)
    args = parser.parse_args(argv)
    if chromium() is None:
        print("site_check: Chromium not found. Fix: apt-get install -y chromium", file=sys.stderr)
        return 2
    pages = [p if p.is_absolute() else args.reports / p for p in args.pages] or default_pages(args.reports)
    problems = check(pages, args.screenshots)
    for problem in problems:
        print(problem)
    print(f"{len(pages)} page(s) at {WIDTH}×{HEIGHT}: " + (f"{len(problems)} problem(s)" if problems else "no problem"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
