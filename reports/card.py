"""A robustness report card for one model: first its robustness at a glance (attack success per recipe, the
attack-free displacement and STS beside its baselines'), then its training, then every headline number
across suites with its 95% CI, the paired difference from its base model and from SimCSE at the same
profile (bench compare's machinery, marked significant or not), the resources that served and the
settings. One Markdown and one HTML page, from the result files only (``bench report --card MODEL``).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import BenchError
from bench.paths import file_name
from bench.results.averages import off_declared
from bench.scoring.stats import display_decimals, format_number, format_p
from bench.results.stats_cache import StatsCache
from bench.results.store import ResultStore
from bench.results.uncertainty import UNVERIFIED, compare_models, model_cells, row_key, unverified_data
from reports import pivot
from reports.results import CODE_PATH, Catalog, EvidenceIndex, base_build, load_rows, resource_pairs
from reports.pivot import metric_words
from reports.site import page
from reports.specs import CARD_HEADLINES, CARD_SETTINGS

PER_RUN = re.compile(r"^run\d+$")
T_OVER_RUNS = re.compile(r"^t-over-")
RUNS_NOTE = "not shown (t over runs); pooled: Table 3"
NUMERIC_COLUMNS = ("value", "95% CI", "n", "seed")  # right-aligned, never wrapped
WRAPPED_COLUMNS = ("CI method", "settings", "note")
SUITE_ORDER = ("sts", "transfer", "alignment", "perturbation", "adversarial", "advsts", "anli")


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


def baselines(model: str, catalog: Catalog) -> dict[str, str]:
    """role -> model: the base model the method started from, and SimCSE trained from the same base
    at the same profile (model facts from the results' plugins.json; neither for a model that is not
    trained, nor SimCSE for SimCSE itself)."""
    entry = catalog.models.get(model) or {}
    out = {}
    if not entry.get("method"):
        return out
    if entry.get("base"):
        out["base"] = entry["base"]
    if entry["method"] != "simcse":
        def training_seed(m: dict):
            return (m.get("recipe") or {}).get("seed", 0)

        # SimCSE from the same base at the same profile: the one named as this model with the method swapped
        # (the same recipe, seed and kept step: robustembed-…-scale-step250 -> simcse-…-scale-step250) where
        # it has results, else one trained with the same seed where there is one
        twin = "simcse" + model[len(entry["method"]):] if model.startswith(entry["method"]) else ""
        simcse = sorted((name != twin, training_seed(m) != training_seed(entry), name)
                        for name, m in catalog.models.items()
                        if m.get("method") == "simcse" and m.get("base") == entry.get("base")
                        and m.get("profile") == entry.get("profile"))
        if simcse:
            out["SimCSE"] = simcse[0][-1]
    return out


def _headline(suite: str, row: dict) -> bool:
    wanted = CARD_HEADLINES.get(suite)
    if wanted is None:  # a suite the card does not know: every row with an interval, runs folded
        return row.get("ci_low") is not None and not PER_RUN.match(row.get("aggregation") or "")
    return any(row["metric"] == metric and (agg is None or row["aggregation"] == agg)
               and (split is None or row["split"] == split) for metric, agg, split in wanted)


def _diff_text(d) -> str:
    if d is None:
        return "–"
    if d.diff is None or d.diff.low is None:
        return f"{format_number(d.estimate, signed=True)} (no paired evidence)"
    verdict = "significant" if d.significant else "n.s."
    k = display_decimals(d.diff.low, d.diff.high)
    return (f"{format_number(d.estimate, k, signed=True)} ({format_number(d.diff.low, k, signed=True)}, "
            f"{format_number(d.diff.high, k, signed=True)}), p {format_p(d.diff.p)}, {verdict}")


def scorer_text(version: str) -> str:
    """'sts-1.1.1.1.1.1.1.1' (the suite's version, then each task's) as 'sts v1, tasks v1 (all 7)'."""
    m = re.fullmatch(r"(.+?)-(\d+)\.([\d.]+)", str(version))
    if not m:
        return str(version)
    tasks = m.group(3).split(".")
    each = f"v{tasks[0]}" + (f" (all {len(tasks)})" if len(tasks) > 1 else "") if len(set(tasks)) == 1 else \
        "v" + "/".join(tasks)
    return f"{m.group(1)} v{m.group(2)}, task{'s' if len(tasks) > 1 else ''} {each}"


def _settings_text(config: dict) -> str:
    parts = []
    for key in CARD_SETTINGS:
        if key in config and config[key] not in (None, [], {}):
            value = config[key]
            if key == "scorer_version":
                value = scorer_text(value)
            elif isinstance(value, (dict, list)):
                value = json.dumps(value, sort_keys=True)
            parts.append(f"{key.replace('_', ' ')}: {value}")
    return "; ".join(parts)


def card(results_dir: Path, model: str, cache: StatsCache | None = None, rows: list[dict] | None = None,
         evidence: EvidenceIndex | None = None) -> dict[str, str]:
    """{'card-<model>.md': ..., 'card-<model>.html': ...}; paired bootstraps from ``cache`` (default: the
    one beside the results); ``rows`` and ``evidence``: every result row and its evidence, when the caller
    has them already (reports.generate), else read here; with ``evidence``, its store too, so every card
    reads each cell's evidence once."""
    store = evidence.store if evidence is not None else ResultStore(results_dir)
    cache = cache if cache is not None else StatsCache.load(results_dir)
    cells = model_cells(store, model)
    if not cells:
        known = sorted({c["cell"]["model"] for _, c in store.readable_cells()})
        raise BenchError(f"No stored results for model '{model}' under {Path(results_dir) / 'cells'}. Models with "
                         f"results: {', '.join(known) or 'none'}. Run `bench run --model {model} ...` first.")
    catalog = Catalog.load(results_dir)
    others = baselines(model, catalog)
    build = base_build(catalog.models.get(model), catalog.models)
    diffs = {}
    for role, other in others.items():
        found, _ = compare_models(store, other, model, cache=cache, weights_a=build if role == "base" else None)
        diffs[role] = {(d.suite, d.task, d.seed, d.config_hash, tuple(d.key.values())): d for d in found}
    if rows is None:
        rows = load_rows(results_dir)
    base_builds = sorted({r.get("weights_sha256") or "" for r in rows if r["model"] == others.get("base")} - {""})
    if build and "base" in others:  # the base's cells from other machines' builds are another model's
        rows = [r for r in rows if r["model"] != others["base"] or r.get("weights_sha256") == build]
    glance = at_a_glance(model, others, rows, catalog, evidence or EvidenceIndex(results_dir, cache))
    sections = [glance] if glance else []
    sections.append(_identity(model, catalog.models.get(model), others, catalog.group(model), base_builds, build))
    sections += _open_choices(catalog.models.get(model))
    suites = sorted({k[0] for k in cells}, key=lambda s: (SUITE_ORDER.index(s) if s in SUITE_ORDER else 99, s))
    all_rows = []
    for suite in suites:
        sec = _suite_section(store, {k: v for k, v in cells.items() if k[0] == suite}, suite, others, diffs, all_rows)
        if sec.rows:
            sections.append(sec)
    unverified = sorted({item for r in all_rows for item in unverified_data(r)})
    if unverified:
        sections[0].paragraphs.append(f"{UNVERIFIED}: computed on data that failed its sha256 check (run with "
                                      "--allow-unverified-data): " + ", ".join(unverified) + ".")
    sections += _series(results_dir, model)
    sections.append(_resources(all_rows))
    sections.append(_provenance(all_rows, others))
    sections = [_without_empty_columns(sec) for sec in sections]
    name = f"card-{file_name(model, 'model name')}"
    return {f"{name}.md": to_markdown(model, sections), f"{name}.html": to_html(model, sections)}


def _suite_section(store: ResultStore, cells: dict, suite: str, others: dict[str, str], diffs: dict,
                   shown_rows: list[dict]) -> Section:
    """One suite's headline rows, each with its differences from the model's baselines; the rows shown are
    appended to ``shown_rows``."""
    sec = Section(f"{suite}", headers=["task", "attack", "metric", "aggregation", "split", "value", "95% CI",
                                       "CI method", "n", "seed"]
                  + [f"Δ vs {role} ({other}) [95% CI], p" for role, other in others.items()] + ["settings"])
    for key in sorted(cells, key=lambda k: (str(k[1]), k[2] or 0, k[3] or "")):
        cell = store.read(cells[key])
        for r in cell["results"]:
            if not _headline(suite, r):
                continue
            shown_rows.append(r)
            kt = tuple(row_key(r).values())
            line = _value_columns(r)
            line += [_diff_text(diffs[role].get((suite, r["task"], key[2], key[3], kt))) for role in others]
            line.append(_settings_text(cell.get("config", {})))
            sec.rows.append(line)
    return sec


def _value_columns(r: dict) -> list[str]:
    """A result row's task, attack, metric, aggregation, split, value, CI, CI method, n and seed, as shown."""
    shown = r.get("ci_low") is not None and not T_OVER_RUNS.match(r.get("ci_method") or "")
    k = display_decimals(r.get("ci_low"), r.get("ci_high")) if shown else 2
    value = format_number(r["value"], k) + (UNVERIFIED if unverified_data(r) else "")
    off = off_declared(r)  # an average over other tasks than declared says which
    aggregation = f"{r['aggregation']} (over {off})" if off else r["aggregation"]
    return [r["task"], r.get("attack") or "", metric_words(r["metric"]), aggregation, r["split"], value,
            f"{format_number(r.get('ci_low'), k)} – {format_number(r.get('ci_high'), k)}" if shown else "–",
            (r.get("ci_method") or "") if shown else RUNS_NOTE if r.get("ci_low") is not None else "",
            "" if r.get("n") is None else str(r["n"]), str(r.get("seed"))]


def at_a_glance(model: str, others: dict[str, str], rows: list[dict], catalog: Catalog,
                evidence: EvidenceIndex) -> Section | None:
    """The card's opening: each headline measure of the leaderboard (STS, attack success per recipe, the
    attack-free displacement, ...) for this model beside its baselines, with the 95% CIs the leaderboard
    shows, and the difference from each baseline; None when the model has none of those measures."""
    names = [model, *others.values()]
    columns, lines = pivot.build([r for r in rows if r["model"] in names], catalog, evidence)
    by_model = {ln.model: ln for ln in lines}
    if model not in by_model:
        return None
    shown = {role: other for role, other in others.items() if other in by_model}
    sec = Section("Robustness at a glance", headers=["measure", "this model [95% CI]"]
                  + [f"{role}: {other}" for role, other in shown.items()]
                  + [f"Δ vs {role}" for role in shown])
    sec.paragraphs.append(GLANCE_NOTE)
    order = sorted(range(len(columns)), key=lambda i: GLANCE_ORDER.index(columns[i].suite)
                   if columns[i].suite in GLANCE_ORDER else len(GLANCE_ORDER))
    for i in order:
        mine = by_model[model].cells[i]
        if mine.mean is None:
            continue
        theirs = [by_model[other].cells[i] for other in shown.values()]
        k = display_decimals(mine.ci.low, mine.ci.high) if mine.ci.present else 2
        arrow = " (lower: more robust)" if columns[i].better == "lower" else ""
        sec.rows.append([pivot.column_label(columns[i], catalog) + arrow, pivot.stat_text(mine),
                         *[pivot.stat_text(s) for s in theirs],
                         *["–" if s.mean is None else format_number(mine.mean - s.mean, k, signed=True) for s in theirs]])
    return sec if sec.rows else None


GLANCE_ORDER = ("adversarial", "advsts", "perturbation", "sts", "transfer")  # robustness first, then quality
GLANCE_NOTE = ("The leaderboard's headline measures: attack success on MR with frozen victims and one (unified) "
               "set of constraints for every recipe, AdvSTS, the attack-free displacement, then STS and transfer. "
               "Brackets: 95% CI as the leaderboard gives it (over attack runs, a bootstrap of the pooled attacked "
               "examples). Δ: the difference of the two values; each cell's paired test is in the suites' tables "
               "below.")


def _without_empty_columns(sec: Section) -> Section:
    """The section without the columns no row fills (e.g. 'attack' in a suite without attacks)."""
    if not sec.rows or not any(sec.headers):
        return sec
    kept = [i for i in range(len(sec.headers)) if any(str(row[i]).strip() for row in sec.rows)]
    return Section(sec.title, sec.paragraphs, [sec.headers[i] for i in kept], [[row[i] for i in kept] for row in sec.rows])


STEP_COSTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "train_step-minilm-b64.json"


def step_cost_text(method: str, path: Path = STEP_COSTS) -> str | None:
    """A method's measured training step time against SimCSE's (benchmarks/train_step.py, same run), or None."""
    try:
        figures = json.loads(path.read_text(encoding="utf-8"))
        ratio = float(figures["methods"][method]["ratio_to_simcse"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (f"{ratio:.2f}× SimCSE's step (MiniLM, batch {figures.get('batch_size')}, fp32; measured on "
            f"{figures.get('cpu', '')}, {figures.get('date', '')})")


def _identity(model: str, entry: dict | None, others: dict[str, str], family: str = "",
              base_builds: list[str] = (), build: str | None = None) -> Section:
    sec = Section("Model")
    if not entry:
        sec.paragraphs.append(f"No facts about '{model}' in the results' plugins.json (results only).")
    else:
        training = entry.get("training") or {}
        backbone = entry.get("backbone") or ""
        if CODE_PATH.fullmatch(backbone):  # a local base that bench builds itself (`bench resources build`)
            backbone = "local, built by bench resources build"
        facts = [("backbone", backbone), ("family", family or entry.get("family")), ("pooler", entry.get("pooler")),
                 ("method", entry.get("method") or "none (pretrained)"), ("base", entry.get("base") or "–"),
                 ("training profile", entry.get("profile") or "–"),
                 ("recipe", ", ".join(f"{k}={v}" for k, v in sorted((entry.get("recipe") or {}).items()))
                  or "method defaults"),
                 ("training steps", training.get("steps")),
                 ("passes over the training data", _passes(training)),
                 ("weights kept", _selected_text(training)),
                 ("base build (weights sha256)", (training.get("base_weights_sha256") or "")[:12]),
                 ("base build as its own cells name it", (training.get("base_encoder_sha256") or "")[:12]),
                 ("trained on", training.get("cpu")),
                 ("training wall time (s)", None if training.get("wall_s") is None else round(float(training["wall_s"]))),
                 ("training step cost", step_cost_text(entry.get("method") or "")),
                 ("description", entry.get("description"))]
        sec.headers, sec.rows = ["", ""], [[k, str(v)] for k, v in facts if v not in (None, "")]
    if others:
        sec.paragraphs.append("Differences are this model − " + " and this model − ".join(
            f"{role} ({other})" for role, other in others.items())
            + " on the cells both have (same suite, task, seed and configuration): paired bootstrap over the same "
              "pairs/examples (1,000 resamples, seed 0), McNemar mid-p for per-example binary outcomes; "
              "'significant' when the 95% CI of the difference excludes 0 and p < 0.05; '–' where the other model "
              "has no such cell.")
        if "base" in others and build:
            sec.paragraphs.append(f"The base's cells are those of the build this model was trained from (weights "
                                  f"{build[:12]}…): a base built on another machine is other weights, so where the "
                                  f"base has no cell of this build the difference reads '–'.")
        elif "base" in others and len(base_builds) > 1:
            sec.paragraphs.append(f"The base has cells from {len(base_builds)} builds ("
                                  + ", ".join(f"{w[:12]}…" for w in base_builds) + "); this model's training card "
                                  "predates the record of which it was trained from, so the difference from the base "
                                  "reads the base's newest cells, which may be another machine's build.")
    else:
        sec.paragraphs.append("Not a trained method model: no base or SimCSE comparison.")
    sec.paragraphs.append("Values ×100 for correlations and rates (queries and alignment/uniformity as measured). "
                          "95% CIs as recorded in each row (CI method): bootstrap over pairs/examples, Wilson for "
                          "proportions, bootstrap of the tasks' resamples for averages. A t-interval over a few "
                          "attack runs is not shown: the pooled interval over the runs' examples is in Table 3 and "
                          "the leaderboards.")
    return sec


def _passes(training: dict) -> str | None:
    passes = training.get("epochs_seen")
    return None if passes is None else f"{float(passes):.2f}"


def _selected_text(training: dict) -> str | None:
    """Which step's weights the model is, and the STS-B dev score that chose them (the trainer's dev curve)."""
    best, before = training.get("best") or {}, training.get("stsb_dev_before")
    if best.get("step") is None:
        return None
    dev = best.get("stsb_dev_spearman")
    score = "" if dev is None else f" (STS-B dev Spearman {float(dev):.2f}" + (
        f"; {float(before):.2f} before training)" if before is not None else ")")
    return f"step {best['step']} of {training.get('steps', '?')}{score}"


CONDITION = re.compile(r"(?:\w+=)+[\w.+-]+")  # a choice that is a special case, e.g. "K=T=0": K and T both 0


def applies(choice: str, recipe: dict) -> bool:
    """A choice named as a condition ("K=T=0") applies only to a model whose recipe sets exactly that;
    other choices always apply."""
    if not CONDITION.fullmatch(choice):
        return True
    *names, value = choice.split("=")
    return all(str(recipe.get(name)) == value for name in names)


def _open_choices(entry: dict | None) -> list[Section]:
    """The choices the method's paper leaves open that apply to this model, as the trainer recorded them."""
    choices = ((entry or {}).get("training") or {}).get("open_choices") or {}
    recipe = (entry or {}).get("recipe") or {}
    rows = [[k, str(v)] for k, v in sorted(choices.items()) if applies(k, recipe)]
    if not rows:
        return []
    return [Section("Choices the paper leaves open", paragraphs=[
        "As the trainer recorded them when it trained this model."], headers=["choice", "taken here"], rows=rows)]


def _series(results_dir: Path, model: str) -> list[Section]:
    """The model's step in each training-length series it belongs to (reports/scale.py)."""
    from reports.scale import card_lines
    from reports.specs import SERIES

    out = []
    for spec in SERIES:
        found = card_lines(results_dir, spec, model)
        if found is not None:
            out.append(Section(f"Series: {spec.title}", [found[0]], ["measure", "value", "95% CI", "p", "note"],
                               found[1]))
    return out


def _resources(rows: list[dict]) -> Section:
    sec = Section("Resources that served")
    served = sorted(resource_pairs(rows, "served"))
    sec.paragraphs.append(", ".join(served) if served else "No attack resources recorded (no attack suite rows).")
    return sec


def _provenance(rows: list[dict], others: dict) -> Section:
    sec = Section("Provenance")

    def distinct(key):
        return sorted({str(r.get(key)) for r in rows if r.get(key) not in (None, "")})

    for key in ("profile", "weights_sha256", "device", "dtype", "git_commit", "bench_version", "package_versions"):
        values = distinct(key)
        if values:
            sec.paragraphs.append(f"{key}: " + "; ".join(values))
    return sec


def _md_text(x: str) -> str:
    """Markdown text that starts no HTML tag (a model named ``<script>`` is shown, never run); "p < 0.05" stays."""
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", x)


def _md_escape(x: str) -> str:
    return _md_text(x).replace("|", "\\|").replace("\n", " ")


def to_markdown(model: str, sections: list[Section]) -> str:
    out = [f"# Robustness card: {_md_escape(model)}", "",
           "Generated by `bench report --card` from the result files; do not edit.", ""]
    for sec in sections:
        out += [f"## {_md_text(sec.title)}", ""]
        for p in sec.paragraphs:
            out += [_md_text(p), ""]
        if sec.rows:
            out.append("| " + " | ".join(_md_escape(h) for h in sec.headers) + " |")
            out.append("|" + "|".join([" --- "] * len(sec.headers)) + "|")
            out += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in sec.rows]
            out.append("")
    return "\n".join(out)


def to_html(model: str, sections: list[Section]) -> str:
    esc = html.escape
    body = [f"<h1>Robustness card: {esc(model)}</h1>",
            "<p class=\"note\">Generated by <code>bench report --card</code> from the result files; do not edit.</p>"]
    for sec in sections:
        body.append(f"<h2>{esc(sec.title)}</h2>")
        body += [f"<p class=\"note\">{esc(p)}</p>" for p in sec.paragraphs]
        if sec.rows:
            kinds = [_column_class(h) for h in sec.headers]
            head = ("<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in sec.headers) + "</tr></thead>"
                    if any(sec.headers) else "")
            body.append(f"<table class=\"card\">{head}<tbody>")
            body += ["<tr>" + "".join(f"<td{kind}>{esc(c)}</td>" for c, kind in zip(row, kinds)) + "</tr>"
                     for row in sec.rows]
            body.append("</tbody></table>")
    return page(f"Robustness card: {model}", body)


def _column_class(header: str) -> str:
    """Numbers stay whole and right-aligned; long free text (settings, methods, differences) may break
    anywhere, so that a card fits the window."""
    if header in NUMERIC_COLUMNS:
        return " class=\"n\""
    return " class=\"w\"" if header in WRAPPED_COLUMNS or header.startswith("Δ") else ""
