"""The tiny model built locally: the random build (``tiny``) and its optional warm start (``warm``)."""
from __future__ import annotations

from pathlib import Path

from .tiny import TinySpec, ensure_tiny_model


def ensure_model(spec: TinySpec, system_prompt: str = "", held_out: tuple[str, ...] = ()) -> Path:
    """The cached model directory for ``spec``: the random build, or with ``spec.warm_start.steps`` > 0 that model
    after its warm start (``models/warm.py``: chat turns with ``system_prompt``, never one of the ``held_out``
    questions); each built once, safely when runs race."""
    base = ensure_tiny_model(spec)
    if not spec.warm_start.steps:
        return base
    from .warm import WarmTask, ensure_warm_model

    return ensure_warm_model(base, spec, WarmTask(system_prompt, tuple(held_out)))
