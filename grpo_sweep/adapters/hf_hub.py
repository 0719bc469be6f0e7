"""huggingface_hub (and datasets): offline mode switched on in a process that has already imported them.

Both read ``HF_HUB_OFFLINE`` once, at import (``huggingface_hub.constants.HF_HUB_OFFLINE``, which
``huggingface_hub.is_offline_mode()`` returns and transformers asks; ``datasets.config.HF_HUB_OFFLINE``). A process
that finds the hub out of reach after importing them would otherwise retry each file of each ``from_pretrained``
five times with back-off (two minutes for a small model) before taking the cached copy.
"""

from __future__ import annotations

import sys


def go_offline() -> None:
    """Read the HF cache only, from now on, in this process."""
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = True
    config = sys.modules.get("datasets.config")
    if config is not None:
        config.HF_HUB_OFFLINE = True
