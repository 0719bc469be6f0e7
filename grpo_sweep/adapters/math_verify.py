"""math-verify internals (0.9, its grader module) the answer check relies on.

- ``only_symbols``: whether an expression is nothing but symbols (``x``, ``x*y``), math-verify's own test of a bare
  variable, which decides whether an equation's left side (``x = 12``) is a name for the value or a value itself
  (rewards/mathcheck.py). math-verify exports ``parse`` and ``verify`` only; the test lives in ``math_verify.grader``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["only_symbols"]


def only_symbols(expr: Any) -> bool:
    from math_verify.grader import is_expr_of_only_symbols

    return bool(is_expr_of_only_symbols(expr))
