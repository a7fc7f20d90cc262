"""The parse tree's node types: what ``scorer.parse`` builds and the comparer reads.

Small frozen dataclasses with named fields, so a reader says ``node.den`` instead of
``node[2]`` and a type checker can follow it. They are hashable (parsed golds and sympy
conversions are cached on them) and compare by type and fields, so ``Abs(x)`` never equals
``Sqrt(x)``. They carry no sympy objects except :class:`SympyValue`, which only the sympy
worker creates, so the cheap comparisons run in the caller.

Three families: expressions (:data:`Ast`), the written forms the parser returns before
:func:`scorer.parse.to_answer` reads them (``...Lit`` and :class:`Paren`, never inside an
answer), and answers (:data:`Answer`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any, ClassVar, TypeAlias, TypeVar

N = TypeVar("N", bound="Node")


class Node:
    """Base of every parse-tree node; fields are listed in ``__match_args__``, and those that
    may hold nodes (directly or in tuples) in ``child_fields``."""

    __slots__ = ()
    __match_args__: tuple[str, ...] = ()
    child_fields: ClassVar[tuple[str, ...]] = ()


_NODE_TYPES = ("Ast", "Answer", "Node")  # annotations of fields that may hold nodes


def _node(cls: type[N]) -> type[N]:
    """A frozen slotted dataclass node, with its ``child_fields`` listed once (walks are hot)."""
    cls = dataclass(frozen=True, slots=True)(cls)
    cls.child_fields = tuple(
        f.name for f in dataclass_fields(cls) if any(t in str(f.type) for t in _NODE_TYPES)
    )
    return cls


# --------------------------------------------------------------------------------------------
# expressions


@_node
class Int(Node):
    value: int


@_node
class Dec(Node):
    """A decimal literal: ``value = mantissa * 10**exp10``, written with ``sig_figs`` figures."""

    mantissa: int
    exp10: int
    sig_figs: int


@_node
class Sym(Node):
    name: str


@_node
class Const(Node):
    name: str  # "pi" | "oo"


@_node
class Dots(Node):
    """``\\ldots`` in a sequence."""


@_node
class Based(Node):
    """A number written in another base, ``101_2``."""

    digits: str
    base: int


@_node
class Add(Node):
    terms: tuple[Ast, ...]


@_node
class Mul(Node):
    factors: tuple[Ast, ...]


@_node
class Neg(Node):
    arg: Ast


@_node
class Div(Node):
    num: Ast
    den: Ast


@_node
class Pow(Node):
    base: Ast
    exp: Ast


@_node
class Fact(Node):
    arg: Ast


@_node
class Abs(Node):
    arg: Ast


@_node
class Sqrt(Node):
    arg: Ast


@_node
class Root(Node):
    arg: Ast
    index: Ast


@_node
class Binom(Node):
    n: Ast
    k: Ast


@_node
class Fn(Node):
    name: str  # one of scorer.parse.FUNCTIONS
    arg: Ast


@_node
class Log(Node):
    base: Ast  # Int(0) for the natural log
    arg: Ast


@_node
class Floor(Node):
    arg: Ast


@_node
class Ceil(Node):
    arg: Ast


@_node
class Pct(Node):
    arg: Ast


@_node
class Deg(Node):
    arg: Ast


@_node
class Pm(Node):
    """``left ± right``; expanded into alternatives before comparison."""

    left: Ast
    right: Ast


@_node
class Matrix(Node):
    rows: tuple[tuple[Ast, ...], ...]


@_node
class Det(Node):
    matrix: Ast


@_node
class BigOp(Node):
    """``\\sum`` or ``\\prod`` of ``body`` for ``var`` from ``lo`` to ``hi``."""

    kind: str  # "sum" | "prod"
    body: Ast
    var: str
    lo: Ast
    hi: Ast


@_node
class SympyValue(Node):
    """A value the sympy backend computed (an interval end, a set element); worker only."""

    value: Any


Ast: TypeAlias = (
    Int | Dec | Sym | Const | Dots | Based | Add | Mul | Neg | Div | Pow | Fact | Abs | Sqrt
    | Root | Binom | Fn | Log | Floor | Ceil | Pct | Deg | Pm | Matrix | Det | BigOp
    | SympyValue
)  # fmt: skip

OO = Const("oo")
NEG_OO = Neg(OO)


# --------------------------------------------------------------------------------------------
# written forms (the parser's structure before it is read as an answer)


@_node
class Paren(Node):
    """``(..)``, ``[..]``, ``(..]``, ``[..)`` around two or more items."""

    opener: str
    closer: str
    items: tuple[Node, ...]
    seps: tuple[str, ...]


@_node
class Braced(Node):
    """``{a, b}``: a bare list."""

    items: tuple[Node, ...]
    seps: tuple[str, ...]


@_node
class SetLit(Node):
    items: tuple[Node, ...]


@_node
class EmptySetLit(Node):
    pass


@_node
class NamedSetLit(Node):
    name: str


@_node
class SystemLit(Node):
    rows: tuple[Node, ...]


@_node
class UnionLit(Node):
    parts: tuple[Node, ...]


@_node
class RMinusLit(Node):
    """``\\mathbb{R} \\setminus \\{a, b\\}``: the items of the removed set."""

    points: tuple[Node, ...]


@_node
class RatioLit(Node):
    parts: tuple[Node, ...]


@_node
class RelLit(Node):
    ops: tuple[str, ...]
    parts: tuple[Node, ...]


WRITTEN: tuple[type[Node], ...] = (
    Paren,
    Braced,
    SetLit,
    EmptySetLit,
    NamedSetLit,
    SystemLit,
    UnionLit,
    RMinusLit,
    RatioLit,
    RelLit,
)


# --------------------------------------------------------------------------------------------
# answers


@_node
class Expr(Node):
    """A number, expression or matrix."""

    node: Ast


@_node
class Rel(Node):
    """``x = 5``, ``a < x <= b``, ``2x+4y-3 = 0``: a chain of ``ops`` between ``parts``."""

    ops: tuple[str, ...]
    parts: tuple[Answer, ...]


@_node
class Coll(Node):
    """``kind``: "set" ``\\{..\\}``, "tuple" ``(..)``, "blist" ``[..]``, "list" (bare
    ``a, b, c`` or ``{a, b}``), "seq" (the boxes of one run, ``\\boxed{2} and \\boxed{3}``:
    ordered)."""

    kind: str
    elems: tuple[Answer, ...]


@_node
class Interval(Node):
    left_open: bool
    lo: Ast
    hi: Ast
    right_open: bool


@_node
class Union(Node):
    parts: tuple[Answer, ...]


@_node
class In(Node):
    """``x \\in S``."""

    var: Ast
    domain: Answer


@_node
class RMinus(Node):
    """The real line without finitely many ``points`` (``R \\ {a, b}``)."""

    points: tuple[Answer, ...]


@_node
class NamedSet(Node):
    name: str  # "R", "N", ...


@_node
class Ratio(Node):
    parts: tuple[Ast, ...]


@_node
class Time(Node):
    """A clock time: ``seconds`` since midnight, and the hour, minute, second as written."""

    seconds: int
    hour: int
    minute: int
    second: int


@_node
class Letter(Node):
    """A choice letter; ``explicit`` when written as one (``(C)``, ``option c``)."""

    letter: str
    explicit: bool


@_node
class Text(Node):
    """Words (their comparison key); ``parse_failed`` when the text was meant as math."""

    words: str
    parse_failed: bool


Answer: TypeAlias = (
    Expr | Rel | Coll | Interval | Union | RMinus | In | NamedSet | Ratio | Time | Letter
    | Text
)  # fmt: skip


# --------------------------------------------------------------------------------------------
# generic walks


def _add_nodes(value: Any, out: list[Node]) -> None:
    if isinstance(value, Node):
        out.append(value)
    elif isinstance(value, tuple):
        for v in value:
            _add_nodes(v, out)


def children(node: Node) -> list[Node]:
    """The nodes directly below ``node`` (inside tuple fields too: terms, matrix rows)."""
    out: list[Node] = []
    for name in node.child_fields:
        _add_nodes(getattr(node, name), out)
    return out


def fields(node: Node) -> list[Any]:
    """The field values of ``node``, in order."""
    return [getattr(node, name) for name in node.__match_args__]


def rebuild(node: Node, fn: Callable[[Node], Node]) -> Node:
    """``node`` with ``fn`` applied to every node directly below it."""

    def apply(value: Any) -> Any:
        if isinstance(value, Node):
            return fn(value)
        if isinstance(value, tuple):
            return tuple(apply(v) for v in value)
        return value

    return type(node)(*(apply(v) for v in fields(node)))
