"""When a bare answer list (``4, 10, -2``) is compared in order (issue #29 item 3).

A bare list is ambiguous: "enter all the solutions" means a set (``3, 5, 7`` = ``3, 7, 5``),
while a list whose order carries meaning is a sequence (MATH's own grader tests: ``0.1, 4, 2``
is not ``4, .1, 2``). What the labelled sets show (docs/scorer.md, *Against Math-Verify*):
golds labelled order-free are written in increasing order (``1, 2, 3``; ``3, 5, 7``) or in
decreasing order (``7, -2, -5``; ``224, -176``): the order in which the solutions were found
or sorted; a gold written in neither order is one whose order was chosen. The rule, as one
explicit step:

1. the question asks for an order ("in increasing order", "ordered pair"...): in order;
2. the question asks for all the values ("find all", "enter all the solutions"): any order;
3. otherwise the gold decides: a gold whose items are all exact numbers, written neither in
   increasing nor in decreasing order, is compared in order; any other bare list is a set.

The one labelled row this gets wrong: MATH's ``10, 4, -2`` asserted unequal to ``4, 10, -2``,
a decreasing gold like ``224, -176``, which a held-out benchmark asserts equal to
``-176, 224``; without the question nothing tells them apart.
"""

from __future__ import annotations

from fractions import Fraction

from scorer.exact import NotRational, TooBig, exact_value
from scorer.nodes import Answer, Coll, Expr
from scorer.question import Demands


def gold_list_order_matters(gold: Answer) -> bool:
    """A bare gold list of exact numbers written neither in increasing nor decreasing order."""
    if not (isinstance(gold, Coll) and gold.kind == "list" and len(gold.elems) > 1):
        return False
    values: list[Fraction] = []
    for item in gold.elems:
        if not isinstance(item, Expr):
            return False
        try:
            values.append(exact_value(item.node))
        except (NotRational, TooBig, ZeroDivisionError, OverflowError, ValueError):
            return False
    return values != sorted(values) and values != sorted(values, reverse=True)


def compare_in_order(gold: Answer, want: Demands | None) -> bool:
    """Whether a bare answer list is compared with ``gold`` in order (the module's rule)."""
    if want is not None and want.ordered:
        return True
    if want is not None and want.all_values:
        return False
    return gold_list_order_matters(gold)
