"""Can a Hugging Face Hub model be had here? One answer per process, from ``HF_HUB_OFFLINE`` (or
``BENCH_OFFLINE``) when set, else from one short connection attempt to the Hub, so that a model that
is neither cached nor downloadable fails at once with one message naming the fix, instead of after the
hub client's retries.

``BENCH_HUB_ADDRESS=HOST:PORT`` points the connection check elsewhere (a test's loopback port, a
mirror); ``BENCH_HUB_TIMEOUT`` sets its time limit in seconds (default 2).
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

from bench.errors import BenchError

HUB_ADDRESS = ("huggingface.co", 443)
ADDRESS_ENV, TIMEOUT_ENV = "BENCH_HUB_ADDRESS", "BENCH_HUB_TIMEOUT"
OFFLINE_ENVS = ("HF_HUB_OFFLINE", "BENCH_OFFLINE")
TRUE_VALUES = {"1", "on", "yes", "true"}  # what huggingface_hub reads as true
HUB_ID = re.compile(r"[\w.-]+(/[\w.-]+)?")

_probed: dict[tuple[str, int], str | None] = {}


def address() -> tuple[str, int]:
    text = os.environ.get(ADDRESS_ENV, "").strip()
    if not text:
        return HUB_ADDRESS
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise BenchError(f"{ADDRESS_ENV}={text!r}: give HOST:PORT, e.g. huggingface.co:443.")
    return host.strip("[]"), int(port)


def _timeout() -> float:
    try:
        return max(0.1, float(os.environ.get(TIMEOUT_ENV, "2")))
    except ValueError:
        raise BenchError(f"{TIMEOUT_ENV}={os.environ[TIMEOUT_ENV]!r}: give a number of seconds.") from None


def offline_reason() -> str | None:
    """Why the Hub cannot be used from this process (a phrase), or None when it can."""
    for name in OFFLINE_ENVS:
        if os.environ.get(name, "").strip().lower() in TRUE_VALUES:
            return f"{name} is set"
    constants = sys.modules.get("huggingface_hub.constants")  # the hub client read it at import
    if constants is not None and getattr(constants, "HF_HUB_OFFLINE", False):
        return "HF_HUB_OFFLINE is set"
    host, port = address()
    return connection_problem(host, port, _timeout())


def connection_problem(host: str, port: int = 443, timeout: float = 2.0) -> str | None:
    """Why one TCP connect to host:port fails ("host:port: why"), or None when it succeeds; tried once
    per address and process (the Hub check here, the attacks' real resources in attacks.resources)."""
    if (host, port) not in _probed:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                _probed[host, port] = None
        except OSError as exc:
            why = f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else (
                exc.strerror or str(exc) or type(exc).__name__)
            _probed[host, port] = f"{host}:{port}: {why}"
    return _probed[host, port]


def go_offline() -> None:
    """Make the hub client and transformers use the local cache only (no connection attempts, no retries)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
    transformers_hub = sys.modules.get("transformers.utils.hub")
    if transformers_hub is not None and hasattr(transformers_hub, "_is_offline_mode"):
        transformers_hub._is_offline_mode = True


def is_hub_id(text: str) -> bool:
    """``ORG/NAME`` or ``NAME`` that is not a local path or a ``module:attr`` provider."""
    return bool(text) and HUB_ID.fullmatch(text) is not None and not Path(text).expanduser().exists()


def is_cached(repo: str, revision: str | None = None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo, "config.json", revision=revision or None), str)


def unreachable_message(repo: str, reason: str, owner: str = "") -> str:
    if owner and owner not in (repo, f"hf:{repo}"):
        needs = f"Model '{owner}' needs the Hugging Face model '{repo}', which is"
    else:
        needs = f"The Hugging Face model '{repo}' is"
    unset = f" (or this command without {reason.split()[0]})" if reason.split()[0] in OFFLINE_ENVS else ""
    return (f"{needs} not in the local Hugging Face cache ($HF_HOME, default ~/.cache/huggingface) and the Hub "
            f"cannot be reached ({reason}). Fix: with internet access, run `huggingface-cli download {repo}` once"
            f"{unset} so it is cached; or use a local model directory (--model DIR, or backbone = \"DIR\" in "
            f"$BENCH_HOME/models.toml). Offline, the default model 'minilm' works.")


def require(repo: str, revision: str | None = None, owner: str = "") -> None:
    """Return when ``repo`` can be loaded here (cached, or the Hub answers); else raise BenchError naming
    the fix. A cached model with the Hub unreachable is then loaded in offline mode, without retries."""
    cached = is_cached(repo, revision)
    reason = offline_reason()
    if reason is None:
        return
    if not cached:
        raise BenchError(unreachable_message(repo, reason, owner))
    go_offline()


def needed_models(spec, models_dir: Path | None, known: dict) -> list[tuple[str, str | None]]:
    """The Hub models (id, revision) that using ``spec`` here would download: none for a local directory,
    a provider (``module:attr``) or a trained model whose checkpoint exists; a missing trained model
    needs what its base needs (it is trained from it)."""
    if spec.is_trained:
        if models_dir is not None and (spec.checkpoint_dir(models_dir) / "config.json").exists():
            return []
        run = known.get(spec.snapshot_of) if spec.snapshot_of else None
        if run is not None and run is not spec:  # a snapshot is made by training its run
            return needed_models(run, models_dir, known)
        base = known.get(spec.base or "")
        if base is not None:
            return needed_models(base, models_dir, known)
        return [(spec.base, None)] if spec.base and is_hub_id(spec.base) else []
    if spec.loader or ":" in spec.backbone or not is_hub_id(spec.backbone):
        return []
    return [(spec.backbone, spec.revision or None)]


def require_model(spec, models_dir: Path | None, known: dict) -> None:
    """``require`` for every Hub model that using ``spec`` needs (before any slow work starts)."""
    for repo, revision in needed_models(spec, models_dir, known):
        require(repo, revision, owner=spec.name)
