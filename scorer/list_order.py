"""When a bare answer list (``4, 10, -2``) is compared in order (issue #29 item 3).

A bare list is ambiguous: "enter all the solutions" means a set (``3, 5, 7`` = ``3, 7, 5``),
while a list whose order carries meaning is a sequence (MATH's own grader tests: ``0.1, 4, 2``
is not ``4, .1, 2``, and ``10, 4, -2`` is not ``4, 10, -2``). Nothing in the gold tells the two
apart: the labelled sets hold increasing and decreasing golds of both kinds. A reward must
not pay a permuted answer to a question that asked for an order (a policy paid for it learns
that which value goes where does not matter), so the rule, as one explicit step, is:

1. the question asks for an order ("in increasing order", "ordered pair"...): in order;
2. the question asks for a set of values ("find all", "enter all the solutions", "the
   roots"): any order;
3. otherwise, and always when no question is given: a gold list of plain values is compared
   in order, and so is every answer list against it: a bare list, a run of boxes, and a set
   (``\\{4, 10, -2\\}`` is no way around the order). A list of labelled items (``x = 2, y =
   1``) matches label by label; a list of choice letters (``A, C``), of tuples (the pairs of
   "find all pairs") or of the values of a ``\\pm`` (``\\pm 3``) is a set.

The cost is recall: without the question a correct solution set listed in another order than
the gold's is not paid (MARIO_EVAL's ``1, 3, 2`` for ``1, 2, 3``); passing the question
(``verify(..., question=...)``) pays it.
"""

from __future__ import annotations

import re

from scorer.nodes import Answer, Coll, Expr, In, Sym
from scorer.question import Demands

# the kinds of answer list that are compared in order against such a gold
ORDERED_ANSWER_KINDS = frozenset({"list", "seq", "set"})


def gold_list_of_values(gold: Answer) -> bool:
    """A bare gold list of two or more plain values (numbers or expressions; not labelled
    items, and not choice letters: ``A, C`` names options, a set)."""
    if not (isinstance(gold, Coll) and gold.kind == "list" and len(gold.elems) > 1):
        return False
    if not all(isinstance(item, Expr) for item in gold.elems):
        return False
    return not all(_choice_letter(item) for item in gold.elems)


def _choice_letter(item: Answer) -> bool:
    node = item.node if isinstance(item, Expr) else None
    return isinstance(node, Sym) and len(node.name) == 1 and node.name.isupper()


_PLUS_MINUS = re.compile(r"\\(?:pm|mp)(?![A-Za-z])")
_SET_TEXT = re.compile(r"\\\{(?P<items>.*)\\\}", re.DOTALL)


def as_sequence(norm: str, answer: Answer) -> str:
    """The normalized answer ``norm`` (parsed: ``answer``) written as a tuple, so that it is
    compared item by item in order: ``4, 10, -2`` and ``\\{4, 10, -2\\}`` -> ``(4, 10, -2)``.
    ``x \\in \\{4, 10, -2\\}`` is its set. An answer written with ``\\pm`` is its two values in
    no order (``\\pm 2`` = ``-2, 2``), and any other answer is returned as it is."""
    if _PLUS_MINUS.search(norm):
        return norm
    if isinstance(answer, In) and "\\in" in norm:
        return as_sequence(norm.split("\\in", 1)[1], answer.domain)
    if not isinstance(answer, Coll) or answer.kind not in ORDERED_ANSWER_KINDS:
        return norm
    if answer.kind == "set":
        m = _SET_TEXT.fullmatch(norm.strip())
        return f"({m['items']})" if m is not None else norm
    return f"({norm})"


def compare_in_order(gold: Answer, want: Demands | None, gold_text: str = "") -> bool:
    """Whether an answer list is compared with the bare gold list ``gold`` in order (the
    module's rule); ``want`` is what the question asks (``None``: no question). A gold
    written with ``\\pm`` (``gold_text``) is its two values in no order: a set."""
    if not gold_list_of_values(gold) or _PLUS_MINUS.search(gold_text):
        return False
    if want is not None and want.ordered:
        return True
    return want is None or not want.all_values
