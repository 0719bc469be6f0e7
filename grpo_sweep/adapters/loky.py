"""loky (vendored in joblib) details the pool relies on: the error a dead worker raises, the reusable executor,
and the exit codes loky writes into that error's text (no attribute holds them)."""

from __future__ import annotations

import re

from joblib.externals.loky import get_reusable_executor
from joblib.externals.loky.process_executor import BrokenProcessPool

__all__ = ["BrokenProcessPool", "get_reusable_executor", "worker_exit_codes"]

_EXIT_CODES = re.compile(r"exit codes of the workers are \{(.*?)\}")


def worker_exit_codes(error: BaseException) -> str | None:
    """``EXIT(137)``-style codes of the workers that died, as loky words them; None when it does not say."""
    found = _EXIT_CODES.search(str(error))
    return found.group(1) if found else None
