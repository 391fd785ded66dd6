"""Look at the report site as a reader would: headless Chromium on a wide screen (1400×900) and a phone
(390×844).

    python benchmarks/site_check.py [--reports DIR] [--screenshots DIR] [PAGE.html ...]

For each page (default: the index, the claims page, the first robustness card, the adversarial
leaderboard and RobustEmbed's Table 3) it fails, at each size, on a horizontal scroll (the page wider
than the window; a wide table scrolls inside its own box instead), a row of the index's claims whose text
runs over its next column, a broken link (a relative href or src
that names no file, or no anchor on the page it names) and an empty column (a table column whose every
body cell is blank). With --screenshots it saves each page's first screen at each size as a PNG
(``<page>.png`` wide, ``<page>-390.png`` on the phone) and, beside them, ``screenshots.json``: the claims
ledger's verdict counts they show, which a test compares with the committed ledger so that they cannot go
stale unnoticed. Exit 0 when every page passes, 1 otherwise, 2 when Chromium is missing
(`apt-get install -y chromium`).
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

SIZES = ((1400, 900), (390, 844))  # a wide screen's first screen, and a phone's
SIDECAR = "screenshots.json"
REPO = Path(__file__).resolve().parents[1]

# Appended to a copy of the page: measures it and sends the figures to the frame around it (FRAME), which
# writes them into its DOM for --dump-dom. The page runs in an iframe of the size asked for, so that its
# media queries and layout see that width even below the smallest window headless Chromium opens (500 px).
MEASURE = """<script>window.addEventListener('load',function(){
var d=document.documentElement,empty=[];
document.querySelectorAll('table').forEach(function(t,ti){var rows=t.tBodies.length?t.tBodies[0].rows:[];
if(!rows.length)return;var n=rows[0].cells.length;for(var i=0;i<n;i++){var blank=true;
for(var r=0;r<rows.length;r++){var c=rows[r].cells[i];if(c&&c.textContent.trim()!==''){blank=false;break}}
if(blank){var h=t.tHead&&t.tHead.rows[0]&&t.tHead.rows[0].cells[i];empty.push('table '+ti+' column '+i+
(h?' ('+h.textContent.trim()+')':''))}}});
var overlap=[];document.querySelectorAll('div.fr').forEach(function(row){var c=row.children;
for(var i=0;i+1<c.length;i++){var b=c[i+1].getBoundingClientRect(),parts=[c[i]].concat([].slice.call(c[i].querySelectorAll('*')));
parts.forEach(function(e){var a=e.getBoundingClientRect();if(a.width&&a.right>b.left+1&&a.top<b.bottom&&b.top<a.bottom)
overlap.push(c[i].textContent.trim().slice(0,60))})}});
parent.postMessage(JSON.stringify({scrollWidth:d.scrollWidth,innerWidth:window.innerWidth,empty:empty,
overlap:overlap}),'*')});
</script>"""
FRAME = """<!DOCTYPE html><html><head><style>body{{margin:0}}iframe{{border:0;display:block}}</style></head><body>
<iframe src="{src}" style="width:{width}px;height:{height}px"></iframe>
<script>window.addEventListener('message',function(e){{var p=document.createElement('pre');p.id='bench-measure';
p.textContent=e.data;document.body.appendChild(p)}});</script></body></html>"""


def chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def _run(browser: str, *args: str, size: tuple[int, int] = SIZES[0]) -> str:
    command = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--window-size={size[0]},{size[1]}", "--virtual-time-budget=4000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180).stdout


def measure(browser: str, page: Path, size: tuple[int, int] = SIZES[0]) -> dict:
    """scrollWidth, innerWidth and the empty columns of ``page`` in a window of ``size``. The measured copy
    and its frame sit in a temporary directory (never beside the reports), the copy reading the page's own
    files through a <base> that names the page's directory."""
    base = f"<base href=\"{page.parent.resolve().as_uri()}/\">"
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"<head>", "<head>" + base, text, count=1) if "<head>" in text else base + text
    with tempfile.TemporaryDirectory() as tmp:
        probe, frame = Path(tmp) / f"probe-{page.name}", Path(tmp) / f"frame-{page.name}"
        probe.write_text(text.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
        frame.write_text(FRAME.format(src=html.escape(probe.name), width=size[0], height=size[1]), encoding="utf-8")
        dom = _run(browser, "--dump-dom", frame.resolve().as_uri(), size=(max(size[0], 500) + 40, size[1] + 40))
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
    def shortest(found):  # the plainest name: the base model's, not a seed's or a checkpoint's
        return sorted(found, key=lambda p: (len(p.name), p.name))

    cards = shortest(reports.glob("card-robustembed-*.html")) or shortest(reports.glob("card-*.html"))
    wanted = [reports / "index.html", reports / "claims.html", *cards[:1], reports / "leaderboard-adversarial.html",
              reports / "robustembed-table3.html"]
    return [p for p in wanted if p.is_file()]


def check(pages: list[Path], screenshots: Path | None = None, browser: str | None = None,
          sizes: tuple[tuple[int, int], ...] = SIZES) -> list[str]:
    """Every problem of ``pages`` at each of ``sizes``; saves each page's first screen at each size into
    ``screenshots`` when given."""
    browser = browser or chromium()
    problems = []
    for page in pages:
        problems += [f"{page.name}: broken link {t}" for t in broken_links(page)]
        for size in sizes:
            m = measure(browser, page, size)
            if m["scrollWidth"] > m["innerWidth"]:
                problems.append(f"{page.name}: scrolls sideways at {size[0]}×{size[1]} ({m['scrollWidth']} px wide "
                                f"in a {m['innerWidth']} px window)")
            problems += [f"{page.name}: empty {column}" for column in m["empty"] if size == sizes[0]]
            problems += [f"{page.name}: {text!r} runs over the next column at {size[0]}×{size[1]}"
                         for text in dict.fromkeys(m.get("overlap", []))]
            if screenshots is not None:
                shoot(browser, page, screenshots / shot_name(page, size, sizes), size)
    return problems


def shot_name(page: Path, size: tuple[int, int], sizes=SIZES) -> str:
    return f"{page.stem}.png" if size == sizes[0] else f"{page.stem}-{size[0]}.png"


def shoot(browser: str, page: Path, out: Path, size: tuple[int, int]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        shot = Path(tmp) / "shot.png"
        _run(browser, f"--screenshot={shot}", page.resolve().as_uri(), size=size)
        _small_png(shot, out)


def ledger_counts(reports: Path) -> dict:
    """The claims ledger's verdict counts in ``reports`` (claims.json), {} without a ledger."""
    try:
        return json.loads((reports / "claims.json").read_text(encoding="utf-8"))["counts"]
    except (OSError, ValueError, KeyError):
        return {}


def write_sidecar(screenshots: Path, reports: Path, pages: list[Path]) -> None:
    """What the screenshots show: the ledger's counts when they were taken, and which pages at which sizes."""
    data = {"claims_counts": ledger_counts(reports), "pages": [p.name for p in pages],
            "sizes": [list(s) for s in SIZES], "made_by": "python benchmarks/site_check.py --screenshots docs/screenshots"}
    (screenshots / SIDECAR).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


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
    if args.screenshots is not None:
        write_sidecar(args.screenshots, args.reports, pages)
    for problem in problems:
        print(problem)
    print(f"{len(pages)} page(s) at " + " and ".join(f"{w}×{h}" for w, h in SIZES) + ": "
          + (f"{len(problems)} problem(s)" if problems else "no problem"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
