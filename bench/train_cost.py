"""What training a registered model will cost on this device, said before it starts: the steps its
profile runs on the data at hand, times a step time scaled from measured ones. An estimate, and it
says so; it is printed by ``bench run`` before a missing model is trained on demand, and a paper-profile
model on a machine without a GPU is refused unless the user opts in.

Step times: SimCSE on all-MiniLM-L6-v2 at batch 64, max_len 32, fp32 took 2.47 s a step on 2 CPU
threads (quiet Intel Xeon; ``python benchmarks/train_step.py --batch-size 64 --repeats 2``). A method
declares its step time relative to SimCSE's (``Method.step_cost``, from the same benchmark). Another
backbone scales by its non-embedding size (layers × hidden², the matrix products of short sequences):
BERT-base is 8× MiniLM. With fewer threads than the reference's two a step takes proportionally longer
(one thread: twice as long); with more, the estimate stays at two threads' speed, since no speed-up beyond
two threads was measured. On CUDA the reference is SimCSE's authors' report of unsupervised SimCSE on
BERT-base: one epoch of wiki1m (15,625 steps of 64) in under an hour on one RTX 3090.

A machine that has trained the method before knows better: when earlier cards in $BENCH_HOME/models
record runs of the same method, backbone and batch on this CPU model with this many threads, the estimate
is the median of their seconds a step (wall time over steps, dev evaluations included) instead. Their
conditions are theirs (another job beside them or not), so it stays an estimate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError

CPU_SIMCSE_MINILM_S_PER_STEP = 2.47  # batch 64, max_len 32, fp32, 2 threads (measured, see above)
CPU_REFERENCE_THREADS = 2
CUDA_SIMCSE_BERT_BASE_S_PER_STEP = 3600 / 15_625  # under an hour for 15,625 steps, RTX 3090 (authors' report)
MINILM_SIZE = 6 * 384 ** 2  # layers x hidden^2 of all-MiniLM-L6-v2
BERT_BASE_SIZE = 12 * 768 ** 2
WIKI1M_SENTENCES = 1_000_000  # SimCSE's wiki1m_for_simcse.txt
ALLOW_FLAG = "--allow-cpu-paper-profile"


@dataclass(frozen=True)
class TrainingPlan:
    """What ``bench run`` will train before it evaluates, and how long that should take here."""

    name: str
    method: str
    base: str
    profile: str
    steps: int
    batch_size: int
    data: str  # what the steps run over, e.g. "2 epochs of wiki1m (1,000,000 sentences)"
    device: str
    seconds: float | None  # None: no reference for this device
    basis: str  # how the estimate was made

    @property
    def train_command(self) -> str:
        return f"bench train --method {self.method} --backbone {self.base} --profile {self.profile}"

    def estimate(self) -> str:
        if self.seconds is None:
            return f"no time estimate for {self.device} (no measured step time for it)"
        return f"about {duration(self.seconds)} on {self.device} (an estimate: {self.basis})"

    def describe(self) -> str:
        return (f"Model '{self.name}' has no checkpoint yet, so it is trained first: {self.method} from "
                f"{self.base}, {self.profile} profile, {self.steps:,} steps of batch {self.batch_size} "
                f"({self.data}); {self.estimate()}.")


def duration(seconds: float) -> str:
    for unit, size in (("days", 86_400), ("hours", 3_600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.0f} {unit}"
    return f"{max(seconds, 1):.0f} s"


def backbone_size(backbone: str) -> tuple[int, str]:
    """(layers × hidden², where it came from) of a directory or Hub id, from its config.json; BERT-base's
    size when the config cannot be read here."""
    config = Path(backbone) / "config.json"
    if not config.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(backbone, "config.json")
            config = Path(cached) if isinstance(cached, str) else None
        except Exception:  # noqa: BLE001  not a Hub id either
            config = None
    try:
        values = json.loads(config.read_text(encoding="utf-8"))
        return int(values["num_hidden_layers"]) * int(values["hidden_size"]) ** 2, "its config"
    except (AttributeError, OSError, ValueError, KeyError, TypeError):
        return BERT_BASE_SIZE, "BERT-base's size assumed"


def training_sentences(method_cls, method_cfg, data_root: Path) -> tuple[int, str, str]:
    """(examples one epoch runs over, the data's name, what is counted) for the default training data."""
    from bench.data.datasets import available, get_dataset

    if method_cls.unlabeled_sentences:
        if available(data_root, "wiki1m"):
            return WIKI1M_SENTENCES, "wiki1m", "sentences"
        sample = get_dataset("wiki-sample")
        return sum(f.lines for f in sample.files), "the wiki sample", "sentences"
    names = method_cls.training_datasets(method_cfg)
    lines = sum(f.lines for name in names for f in get_dataset(name).files)  # about one example a line
    return lines, " + ".join(names) or "its own data", "lines"


def cpu_threads() -> int:
    """The threads torch's CPU kernels use here (OMP_NUM_THREADS, else the cores)."""
    import torch

    return torch.get_num_threads()


def measured_here(models_dir: Path | None, method: str, backbone: str, batch_size: int) -> tuple[float, str] | None:
    """(median seconds a step, how) of the earlier CPU runs of ``method`` on ``backbone`` at ``batch_size``
    whose cards were written on this CPU model with this many threads; None when there are none."""
    from statistics import median

    from bench.results.store import cpu_model

    cpu, threads, rates = cpu_model(), cpu_threads(), []
    for path in sorted(Path(models_dir).glob("*/bench_card.json")) if models_dir else ():
        try:
            card = json.loads(path.read_text(encoding="utf-8"))
            same = (card["method"], card["backbone"], card["train_config"]["batch_size"], card["device"],
                    card["cpu"], card.get("threads")) == (method, backbone, batch_size, "cpu", cpu, threads)
            if same and card["steps"] > 0:
                rates.append(float(card["wall_s"]) / card["steps"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a card this reader cannot use is no evidence
    if not rates:
        return None
    runs = f"{len(rates)} earlier run{'s' if len(rates) > 1 else ''}"
    return median(rates), (f"the median step of {runs} of {method} on this backbone and batch here ({cpu}, "
                           f"{threads} thread{'s' if threads > 1 else ''}), dev evaluations included")


def step_seconds(method_cls, batch_size: int, backbone: str, device: str,
                 models_dir: Path | None = None) -> tuple[float | None, str]:
    """A step's estimated seconds on ``device`` and how it was estimated: this machine's own earlier runs of
    the method when its cards have them (CPU), else a measured reference scaled."""
    kind = device.split(":")[0]
    if kind == "cpu" and (mine := measured_here(models_dir, method_cls.name, backbone, batch_size)):
        return mine
    size, size_source = backbone_size(backbone)
    relative = f"{method_cls.name} {method_cls.step_cost:g}x SimCSE a step"
    if kind == "cpu":
        threads = cpu_threads()
        slower = CPU_REFERENCE_THREADS / min(threads, CPU_REFERENCE_THREADS)
        seconds = CPU_SIMCSE_MINILM_S_PER_STEP * method_cls.step_cost * (size / MINILM_SIZE) * batch_size / 64
        return seconds * slower, (
            f"SimCSE's measured {CPU_SIMCSE_MINILM_S_PER_STEP} s a step for MiniLM at batch 64 on "
            f"{CPU_REFERENCE_THREADS} CPU threads, {relative}, scaled to this backbone ({size_source}), batch and "
            f"{threads} thread{'s' if threads > 1 else ''}")
    if kind == "cuda":
        seconds = CUDA_SIMCSE_BERT_BASE_S_PER_STEP * method_cls.step_cost * (size / BERT_BASE_SIZE) * batch_size / 64
        return seconds, (f"SimCSE on BERT-base in under an hour for 15,625 steps on one RTX 3090 (its authors' "
                         f"report), {relative}, scaled to this backbone ({size_source}) and batch")
    return None, ""


@dataclass(frozen=True)
class Steps:
    """The optimiser steps a registered run takes on the data at hand (as the trainer counts them)."""

    total: int
    per_epoch: int
    batch_size: int
    examples: int  # sentences (or data lines) one epoch runs over
    data_name: str
    unit: str  # "sentences" or "lines"
    kept: tuple[int, ...]  # steps whose weights are also written as models (keep_steps)


def planned_steps(run, data_root: Path) -> Steps:
    from bench.methods import get_method
    from bench.train import make_train_config, split_overrides

    method_cls = get_method(run.method)
    train_values, method_values = split_overrides(method_cls, dict(run.recipe))
    cfg = make_train_config(method_cls, run.profile or "smoke", train_values)
    examples, data_name, unit = training_sentences(method_cls, method_cls.Config.from_dict(method_values), data_root)
    per_epoch = max(1, examples // cfg.batch_size)
    total = per_epoch * cfg.epochs if not cfg.max_steps else min(per_epoch * cfg.epochs, cfg.max_steps)
    return Steps(total, per_epoch, cfg.batch_size, examples, data_name, unit, tuple(cfg.kept_steps()))


def count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def job_estimate(job, device: str) -> str:
    """``bench train``'s line before it starts: the steps of this job on its data, and their estimated time."""
    from bench.methods import get_method

    method_cls = get_method(job.method)
    cfg = job.train
    if job.data_path is not None:
        examples, name, unit = count_lines(job.data_path), Path(job.data_path).name, "lines"
    else:
        examples, name, unit = training_sentences(method_cls, method_cls.Config.from_dict(job.method_config),
                                                  job.data_root)
    per_epoch = max(1, examples // cfg.batch_size)
    total = per_epoch * cfg.epochs if not cfg.max_steps else min(per_epoch * cfg.epochs, cfg.max_steps)
    steps = Steps(total, per_epoch, cfg.batch_size, examples, name, unit, tuple(cfg.kept_steps()))
    seconds, basis = step_seconds(method_cls, cfg.batch_size, job.backbone, device)
    estimate = (f"no time estimate for {device}" if seconds is None else
                f"about {duration(seconds * total)} on {device} (an estimate: {basis})")
    return f"Training '{job.name}': {total:,} steps of batch {cfg.batch_size} ({data_phrase(steps)}); {estimate}."


def plan(spec, paths, device: str) -> TrainingPlan:
    """The training ``bench run`` would start for ``spec`` (a trained model without its checkpoint)."""
    from bench.models.encoder import resolve_backbone
    from bench.methods import get_method
    from bench.models.registry import known_models

    known = known_models(paths)
    run = known.get(spec.snapshot_of, spec) if spec.snapshot_of else spec  # a snapshot comes from its run
    method_cls = get_method(run.method)
    steps = planned_steps(run, paths.data)
    base = known.get(run.base or "")
    # a base that cannot be had (e.g. minilm-mlm before `bench resources build`) says so here, exit 2
    backbone = resolve_backbone(base) if base is not None else (run.base or "")
    seconds_per_step, basis = step_seconds(method_cls, steps.batch_size, backbone, device, paths.models)
    return TrainingPlan(name=run.name, method=run.method, base=run.base or "", profile=run.profile or "smoke",
                        steps=steps.total, batch_size=steps.batch_size,
                        data=data_phrase(steps),
                        device=device, seconds=None if seconds_per_step is None else seconds_per_step * steps.total,
                        basis=basis)


def data_phrase(steps: Steps) -> str:
    """What the steps run over: "2 epochs of wiki1m, 1,000,000 sentences", or a share of the data."""
    size = f"{steps.data_name}, {steps.examples:,} {steps.unit}"
    if steps.total % steps.per_epoch == 0:
        epochs = steps.total // steps.per_epoch
        return f"{epochs} epoch{'s' if epochs > 1 else ''} of {size}"
    passes = steps.total / steps.per_epoch
    share = f"{passes:.1f} passes over" if passes >= 0.1 else f"{steps.total * steps.batch_size:,} examples of"
    return f"{share} {size}"


def check_cpu_paper_profile(training: TrainingPlan, allowed: bool) -> None:
    """A paper-profile model is days of training without a GPU: refuse unless the user opted in."""
    if training.profile != "paper" or training.device.split(":")[0] == "cuda" or allowed:
        return
    raise BenchError(
        f"Model '{training.name}' is a paper-profile model without a checkpoint, and this machine has no GPU "
        f"(device {training.device}): training it here ({training.steps:,} steps of batch {training.batch_size}, "
        f"{training.data}) "
        f"would take {training.estimate()}. Fix: train it on a GPU machine with `{training.train_command}` "
        f"and copy $BENCH_HOME/models/{training.name} here; or pass {ALLOW_FLAG} to train it on this "
        f"{training.device} anyway.")


def announce_training(spec, paths, device: str, allow_cpu_paper_profile: bool, log=print) -> None:
    """A trained model without its checkpoint is trained first: say what and how long it should take on
    ``device``, and refuse a paper-profile run without a GPU unless the user opted in."""
    if not spec.is_trained or (spec.checkpoint_dir(paths.models) / "config.json").exists():
        return
    training = plan(spec, paths, device)
    check_cpu_paper_profile(training, allow_cpu_paper_profile)
    log(training.describe())
