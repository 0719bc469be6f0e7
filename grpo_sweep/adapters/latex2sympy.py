"""latex2sympy2_extended internals (1.11, math-verify's LaTeX parser) the answer check relies on.

- ``conjuncts_in_order``: the relations of a chain (``x = \\frac{24}{2} = 12``) in the order they were written.
  The parser returns an ``And`` of them, whose ``args`` sympy sorts canonically; the parser's own ``And`` keeps the
  written order in ``_unsorted_args``, which decides which side is a bare variable (rewards/mathcheck.py).
  Without it the sorted args are used: the same relations, in another order.
"""

from __future__ import annotations

from typing import Any

__all__ = ["conjuncts_in_order"]


def conjuncts_in_order(conjunction: Any) -> tuple:
    return tuple(getattr(conjunction, "_unsorted_args", conjunction.args))
