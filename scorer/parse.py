"""Normalized answer text -> structured answer, in pure Python (no sympy, no ``eval``).

A small tokenizer and recursive-descent parser turn LaTeX or plain text (``\\frac{1}{2}``,
``2*x+3``, ``x^2``, ``\\sqrt[3]{x}``, ``(1,2]``, ``\\begin{pmatrix}..``) into a tree of the typed
nodes of :mod:`scorer.nodes`: an expression (``Ast``: ``Int``, ``Div``, ``Pow``, ``Matrix``...)
inside an answer (``Answer``: ``Expr``, ``Rel``, ``Coll``, ``Interval``, ``Letter``, ``Text``...).
The nodes are hashable (parsed golds are cached) and carry no sympy objects, so the cheap
comparisons run in the caller; only the sympy worker turns them into sympy objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from typing import Any, cast

from scorer import nodes

MAX_DEPTH = 60  # bracket / argument nesting; deeper input is refused ("too_deep")
MAX_ITEMS = 2_000  # elements in one list / set / matrix
MAX_EXPANSIONS = 16  # ± alternatives per answer


class ParseError(ValueError):
    """The text is not an answer we can read structurally."""


class TooDeep(ParseError):
    """Nesting above :data:`MAX_DEPTH`."""


# --------------------------------------------------------------------------------------------
# tokens


@dataclass
class Tok:
    kind: str  # num | id | word | cmd | ch | rel
    text: str
    space: bool  # whitespace before the token


_TOKEN = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<num>(?:\d+\.\d+|\d+|\.\d+)(?:[eE][-+]?\d+(?![A-Za-z\d]))?)"
    r"|(?P<cmd>\\[A-Za-z]+|\\.)"
    r"|(?P<word>[A-Za-z]+)"
    r"|(?P<rel>\*\*)"
    r"|(?P<ch>.)",
    re.DOTALL,
)

FUNCTIONS = frozenset(
    "sin cos tan cot sec csc arcsin arccos arctan arccot arcsec arccsc sinh cosh tanh coth "
    "sech csch arsinh arcosh artanh ln log lg exp".split()
)
_PLAIN_WORDS = FUNCTIONS | {"sqrt", "pi", "infty", "inf", "oo", "abs"}
GREEK = frozenset(
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron rho "
    "sigma tau upsilon phi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi "
    "Omega".split()
)
_RELOPS = {
    "=": "=",
    "<": "<",
    ">": ">",
    "\\leq": "<=",
    "\\geq": ">=",
    "\\neq": "!=",
    "\\approx": "~",
    "\\in": "in",
    "\\equiv": "=",
}
_MATRIX_ENVS = frozenset("matrix pmatrix bmatrix Bmatrix vmatrix Vmatrix smallmatrix array".split())
_SYSTEM_ENVS = frozenset("cases aligned align align* gathered gather* split eqnarray".split())
_ADD_OPS = ("+", "-", "\\pm", "\\mp")
_MUL_OPS = ("*", "\\cdot", "\\times", "/", "\\div")
_CLOSERS = (")", "]", "}", "\\}", "|", "&", "\\\\", ",", ";")


def tokenize(s: str) -> list[Tok]:
    """Split into tokens; letter runs become one token per letter unless a known word."""
    toks: list[Tok] = []
    space = False
    for m in _TOKEN.finditer(s):
        kind = m.lastgroup or "ch"
        text = m.group(0)
        if kind == "ws":
            space = True
            continue
        if kind == "word":
            if text in _PLAIN_WORDS:
                toks.append(Tok("word", text, space))
            else:
                for i, c in enumerate(text):
                    toks.append(Tok("id", c, space and i == 0))
        elif kind == "rel":
            toks.append(Tok("ch", "^", space))
        else:
            toks.append(Tok(kind, text, space))
        space = False
    return toks


# --------------------------------------------------------------------------------------------
# numbers


def number_node(text: str) -> nodes.Int | nodes.Dec:
    """``"12"`` -> Int(12); ``"1.50"`` -> Dec(150, -2, 3); ``"1.5e3"`` -> a Dec."""
    mant, _, exp_s = text.lower().partition("e")
    exp = int(exp_s) if exp_s else 0
    if "." not in mant:
        if not exp_s:
            return nodes.Int(int(mant))
        digits = mant
        frac = ""
    else:
        digits, frac = mant.split(".")
    m = int((digits or "0") + frac)
    if not frac and exp >= 0 and not exp_s:
        return nodes.Int(m)
    sig_digits = (digits + frac).lstrip("0")
    return nodes.Dec(m, exp - len(frac), len(sig_digits))


# --------------------------------------------------------------------------------------------
# parser


class _Parser:
    def __init__(self, toks: list[Tok], depth: int = 0) -> None:
        self.toks = toks
        self.i = 0
        self.depth = depth
        self.abs_depth = 0

    # -- token helpers
    def peek(self, k: int = 0) -> Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at(self, *texts: str) -> bool:
        t = self.peek()
        return t is not None and t.kind in ("ch", "cmd", "rel") and t.text in texts

    def next(self) -> Tok:
        t = self.peek()
        if t is None:
            raise ParseError("unexpected end")
        self.i += 1
        return t

    def expect(self, text: str) -> None:
        t = self.next()
        if t.text != text:
            raise ParseError(f"expected {text!r}, got {t.text!r}")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TooDeep("nesting too deep")

    def leave(self) -> None:
        self.depth -= 1

    # -- sequences
    def parse_seq(self, stops: tuple[str, ...]) -> tuple[list[nodes.Node], list[str]]:
        """Items separated by ``,`` / ``;`` up to (not including) a stop token."""
        items: list[nodes.Node] = []
        seps: list[str] = []
        while True:
            if self.peek() is None or self.at(*stops):
                if items or seps:
                    raise ParseError("empty item")
                return items, seps
            items.append(self.parse_rel())
            if len(items) > MAX_ITEMS:
                raise ParseError("too many items")
            if self.at(",", ";", "\\lor", SEQ_SEP):
                seps.append(self.next().text)
                if self.peek() is None or self.at(*stops):
                    return items, seps  # trailing separator
                continue
            return items, seps

    def parse_rel(self) -> nodes.Node:
        first = self.parse_ratio()
        ops: list[str] = []
        parts = [first]
        while True:
            t = self.peek()
            if t is None:
                break
            op = None
            if t.kind == "ch" and t.text in "=<>":
                op = t.text
            elif t.kind == "cmd" and t.text in _RELOPS:
                op = _RELOPS[t.text]
            if op is None:
                break
            self.next()
            ops.append(op)
            parts.append(self.parse_ratio())
        if not ops:
            return first
        return nodes.RelLit(tuple(ops), tuple(parts))

    def parse_ratio(self) -> nodes.Node:
        first = self.parse_setexpr()
        parts = [first]
        while self.at(":"):
            self.next()
            parts.append(self.parse_setexpr())
        if len(parts) == 1:
            return first
        return nodes.RatioLit(tuple(parts))

    def parse_setexpr(self) -> nodes.Node:
        first = self.parse_add()
        parts = [first]
        while self.at("\\cup", "\\cap", "\\setminus"):
            op = self.next().text
            if op == "\\setminus" and parts == [nodes.NamedSetLit("R")]:
                points = self.parse_add()  # R \ {a, b}: the reals but finitely many points
                if not isinstance(points, nodes.SetLit) or self.at("\\cup", "\\cap", "\\setminus"):
                    raise ParseError("only R minus a finite set is supported")
                return nodes.RMinusLit(points.items)
            if op != "\\cup":
                raise ParseError("only unions of sets are supported")
            parts.append(self.parse_add())
        if len(parts) == 1:
            return first
        return nodes.UnionLit(tuple(parts))

    def parse_add(self) -> nodes.Node:
        terms = [self.parse_term()]
        while self.at(*_ADD_OPS):
            op = self.next().text
            t = self.parse_term()
            if op == "+":
                terms.append(t)
            elif op == "-":
                terms.append(nodes.Neg(t))
            else:
                left = terms[0] if len(terms) == 1 else nodes.Add(tuple(terms))
                terms = [nodes.Pm(left, t if op == "\\pm" else nodes.Neg(t))]
        return terms[0] if len(terms) == 1 else nodes.Add(tuple(terms))

    def _starts_factor(self) -> bool:
        t = self.peek()
        if t is None:
            return False
        if t.kind in ("num", "id", "word"):
            return True
        if t.kind == "cmd":
            name = t.text[1:]
            return (
                name in FUNCTIONS
                or name in GREEK
                or name
                in (
                    "frac",
                    "sqrt",
                    "binom",
                    "pi",
                    "infty",
                    "begin",
                    "lfloor",
                    "lceil",
                    "sum",
                    "prod",
                    "choose",
                    "exp",
                    "ldots",
                )
                or (name.isalpha() and name not in _NOT_SYMBOLS and name != "mathbb")
            )
        if t.kind == "ch":
            if t.text in ("(", "{"):
                return True
            if t.text == "|":
                return self.abs_depth == 0
        return False

    def parse_term(self) -> nodes.Node:
        cur = self.parse_unary()
        n_factors = 1
        while True:
            if self.at("*", "\\cdot", "\\times"):
                self.next()
                cur = nodes.Mul((cur, self.parse_unary()))
            elif self.at("/", "\\div"):
                self.next()
                cur = nodes.Div(cur, self.parse_unary())
            elif self._starts_factor():
                t = self.peek()
                if t is not None and t.kind == "num" and _ends_in_literal(cur):
                    raise ParseError("two numbers side by side")  # "3 7" is not 21
                if n_factors == 1 and t is not None and t.text == "\\frac" and _is_int_lit(cur):
                    f = self.parse_power()
                    if _is_int_fraction(f):
                        cur = _mixed(cur, f)  # 2\frac12 = 2 + 1/2
                    else:
                        cur = nodes.Mul((cur, f))
                else:
                    cur = nodes.Mul((cur, self.parse_power()))
            else:
                return cur
            n_factors += 1

    def parse_unary(self) -> nodes.Node:
        if self.at("-", "+", "\\pm", "\\mp"):
            op = self.next().text
            self.enter()
            inner = self.parse_unary()
            self.leave()
            if op == "-":
                return nodes.Neg(inner)
            if op == "+":
                return inner
            return nodes.Pm(nodes.Int(0), inner)
        return self.parse_power()

    def parse_power(self) -> nodes.Node:
        self.enter()
        base = self.parse_primary()
        while True:
            if self.at("^"):
                self.next()
                if self.at("\\circ"):
                    self.next()
                    base = nodes.Deg(base)
                    continue
                if self.at("\\prime"):
                    self.next()
                    base = _prime(base)
                    continue
                base = nodes.Pow(base, self.parse_exponent())
            elif self.at("!"):
                self.next()
                base = nodes.Fact(base)
            elif self.at("'"):
                self.next()
                base = _prime(base)
            elif self.at("\\%"):
                self.next()
                base = nodes.Pct(base)
            else:
                break
        self.leave()
        return base

    def parse_exponent(self) -> nodes.Node:
        self.enter()
        if self.at("-"):
            self.next()
            e: nodes.Node = nodes.Neg(self.parse_exponent())
        elif self.at("+"):
            self.next()
            e = self.parse_exponent()
        else:
            e = self.parse_primary()
            if self.at("^"):
                self.next()
                e = nodes.Pow(e, self.parse_exponent())
        self.leave()
        return e

    def parse_arg(self) -> nodes.Node:
        """A LaTeX macro argument: ``{...}`` or one token (``\\frac12`` -> 1, 2)."""
        t = self.peek()
        if t is None:
            raise ParseError("missing argument")
        if t.kind == "ch" and t.text == "{":
            self.next()
            self.enter()
            inner = self.parse_add()
            self.leave()
            self.expect("}")
            return inner
        if t.kind == "num":
            if len(t.text) > 1 and t.text[0].isdigit():
                self.toks[self.i] = Tok("num", t.text[1:], False)
                return nodes.Int(int(t.text[0]))
            self.next()
            return number_node(t.text)
        if t.kind == "id":
            self.next()
            return _symbol(t.text)
        return self.parse_primary()

    def parse_group(self, close: str) -> nodes.Node:
        self.enter()
        inner = self.parse_add()
        self.leave()
        self.expect(close)
        return inner

    def parse_subscript(self) -> str:
        """Subscript text for a symbol name: ``x_1``, ``a_{37}``, ``F_{n-k-1}``."""
        self.expect("_")
        t = self.next()
        if t.text == "{":
            depth = 1
            out = []
            while True:
                u = self.next()
                if u.text == "{":
                    depth += 1
                elif u.text == "}":
                    depth -= 1
                    if depth == 0:
                        break
                out.append(u.text)
                if len(out) > 200:
                    raise ParseError("subscript too long")
            return "".join(out)
        if t.kind == "num":
            if len(t.text) > 1:
                self.i -= 1
                self.toks[self.i] = Tok("num", t.text[1:], False)
                return t.text[0]
            return t.text
        return t.text.lstrip("\\")

    def parse_primary(self) -> nodes.Node:
        t = self.next()
        k, x = t.kind, t.text
        if k == "num":
            node = number_node(x)
            if self.at("_") and isinstance(node, nodes.Int):
                base = self.parse_subscript()
                if not base.isdigit():
                    raise ParseError("bad base")
                return nodes.Based(x, int(base))
            return node
        if k == "id":
            name = x
            if self.at("_"):
                name = f"{x}_{self.parse_subscript()}"
            return nodes.Sym(name)
        if k == "word":
            if x == "pi":
                return nodes.Const("pi")
            if x in ("infty", "inf", "oo"):
                return nodes.OO
            return self.parse_function(x)
        if k == "cmd":
            return self.parse_command(x[1:])
        if k == "ch":
            if x == "(":
                return self.parse_bracket("(")
            if x == "[":
                return self.parse_bracket("[")
            if x == "{":
                self.enter()
                items, seps = self.parse_seq(("}",))
                self.leave()
                self.expect("}")
                if not items:
                    raise ParseError("empty braces")
                if len(items) == 1 and not seps:
                    return items[0]
                return nodes.Braced(tuple(items), tuple(seps))
            if x == "|":
                self.abs_depth += 1
                self.enter()
                inner = self.parse_add()
                self.leave()
                self.abs_depth -= 1
                self.expect("|")
                return nodes.Abs(inner)
        raise ParseError(f"unexpected {x!r}")

    def parse_bracket(self, opener: str) -> nodes.Node:
        self.enter()
        saved_abs = self.abs_depth
        self.abs_depth = 0
        items, seps = self.parse_seq((")", "]"))
        self.abs_depth = saved_abs
        self.leave()
        closer = self.next().text
        if not items:
            raise ParseError("empty brackets")
        if len(items) == 1 and not seps:
            if opener == "(" and closer == ")" or opener == "[" and closer == "]":
                return items[0]
            raise ParseError("half-open bracket around one item")
        return nodes.Paren(opener, closer, tuple(items), tuple(seps))

    def parse_function(self, name: str) -> nodes.Node:
        power = None
        base = None
        if name in ("log", "lg") and self.at("_"):
            self.next()
            base = self.parse_arg()
        if self.at("^"):
            self.next()
            power = self.parse_exponent()
        if name in ("log", "lg") and base is None and self.at("_"):
            self.next()
            base = self.parse_arg()
        arg = self._function_argument()
        if name == "sqrt":
            node: nodes.Node = nodes.Sqrt(arg)
        elif name == "abs":
            node = nodes.Abs(arg)
        elif name in ("log", "lg"):
            natural_or_ten = nodes.Int(10 if name == "lg" else 0)
            node = nodes.Log(base if base is not None else natural_or_ten, arg)
        else:
            node = nodes.Fn(name, arg)
        if power is not None:
            if power == nodes.Neg(nodes.Int(1)) and isinstance(node, nodes.Fn) and name in _INVERSE:
                return nodes.Fn(_INVERSE[name], arg)
            node = nodes.Pow(node, power)
        return node

    def _function_argument(self) -> nodes.Node:
        if self.at("("):
            self.next()
            return self.parse_group(")")
        if self.at("{"):
            return self.parse_arg()
        arg = self.parse_power()
        while True:
            t = self.peek()
            if t is None:
                break
            if t.kind in ("num", "id") or (t.kind == "cmd" and t.text[1:] in GREEK | {"pi"}):
                arg = nodes.Mul((arg, self.parse_power()))
            else:
                break
        return arg

    def parse_command(self, name: str) -> nodes.Node:
        if name == "frac":
            a = self.parse_arg()
            b = self.parse_arg()
            return nodes.Div(a, b)
        if name == "sqrt":
            if self.at("["):
                self.next()
                index = self.parse_group("]")
                return nodes.Root(self.parse_arg(), index)
            return nodes.Sqrt(self.parse_arg())
        if name in ("binom", "choose"):
            return nodes.Binom(self.parse_arg(), self.parse_arg())
        if name == "pi":
            return nodes.Const("pi")
        if name == "infty":
            return nodes.OO
        if name in GREEK:
            return nodes.Sym(f"{name}_{self.parse_subscript()}" if self.at("_") else name)
        if name in FUNCTIONS:
            return self.parse_function(name)
        if name == "ldots":
            return nodes.Dots()
        if name == "emptyset":
            return nodes.EmptySetLit()
        if name == "mathbb":
            inner = self.next()
            letter = inner.text
            if inner.text == "{":
                letter = self.next().text
                self.expect("}")
            return nodes.NamedSetLit(letter)
        if name == "lfloor":
            return nodes.Floor(self.parse_group("\\rfloor"))
        if name == "lceil":
            return nodes.Ceil(self.parse_group("\\rceil"))
        if name == "{":
            builder = self._set_builder()
            if builder is not None:
                return builder
            self.enter()
            items, _ = self.parse_seq(("\\}",))
            self.leave()
            self.expect("\\}")
            return nodes.SetLit(tuple(items))
        if name in ("sum", "prod"):
            return self.parse_bigop(name)
        if name == "begin":
            return self.parse_environment()
        if name.isalpha() and name not in _NOT_SYMBOLS:
            return nodes.Sym("\\" + name)  # unknown macro: an opaque name (\zzz, \ell, \hbar)
        raise ParseError(f"unsupported command \\{name}")

    def _set_builder(self) -> nodes.Node | None:
        """``\\{x \\mid -1 < x < 1\\}``, ``\\{x : ..\\}``, ``\\{x \\in \\mathbb{R} \\mid ..\\}``:
        the solution set of inequalities in ``x`` (one, or several joined by "or"); None when
        the braces do not open a set-builder."""
        t = self.peek()
        if t is None or t.kind != "id":
            return None
        k = 1
        if self.at_offset(1, "\\in"):
            domain = [u.text for u in self.toks[self.i + 2 : self.i + 6]]
            if domain[:4] == ["\\mathbb", "{", "R", "}"]:
                k = 6
            elif domain[:2] == ["\\mathbb", "R"]:
                k = 4
            else:
                return None
        if not self.at_offset(k, "|", ":"):
            return None
        start, depth = self.i, self.depth
        self.i += k + 1
        try:
            self.enter()
            items, seps = self.parse_seq(("\\}",))
            self.leave()
            self.expect("\\}")
        except TooDeep:
            raise
        except ParseError:
            items, seps = [], []
        ok = (
            items
            and all(sep == "\\lor" for sep in seps)
            and all(_inequality_in(x, t.text) for x in items)
        )
        if not ok:  # not a condition on x: read the braces as before (\{a : b\} is a ratio)
            self.i, self.depth = start, depth
            return None
        return nodes.UnionLit(tuple(items)) if len(items) > 1 else items[0]

    def at_offset(self, k: int, *texts: str) -> bool:
        t = self.peek(k)
        return t is not None and t.kind in ("ch", "cmd") and t.text in texts

    def parse_bigop(self, name: str) -> nodes.Node:
        var = lo = hi = None
        for _ in range(2):
            if self.at("_"):
                self.next()
                self.expect("{")
                v = self.next()
                if v.kind != "id":
                    raise ParseError("sum index")
                self.expect("=")
                var = v.text
                lo = self.parse_group("}")
            elif self.at("^"):
                self.next()
                hi = self.parse_arg()
        if var is None or lo is None or hi is None:
            raise ParseError("sum without bounds")
        body = self.parse_term()
        return nodes.BigOp("sum" if name == "sum" else "prod", body, var, lo, hi)

    def _read_braced_word(self) -> str:
        self.expect("{")
        out = []
        while not self.at("}"):
            out.append(self.next().text)
        self.next()
        return "".join(out)

    def parse_environment(self) -> nodes.Node:
        env = self._read_braced_word()
        if env == "array" and self.at("{"):
            self._read_braced_word()
        rows: list[list[list[Tok]]] = [[[]]]
        depth = 0
        while True:
            t = self.next()
            if t.kind == "cmd" and t.text == "\\begin":
                depth += 1
            elif t.kind == "cmd" and t.text == "\\end":
                if depth == 0:
                    if self._read_braced_word() != env:
                        raise ParseError("mismatched environment")
                    break
                depth -= 1
            if depth == 0 and t.text == "&":
                rows[-1].append([])
                continue
            if depth == 0 and t.text == "\\\\":
                rows.append([[]])
                continue
            rows[-1][-1].append(t)
        while rows and all(not cell for cell in rows[-1]):
            rows.pop()
        if not rows:
            raise ParseError("empty environment")
        if env in _SYSTEM_ENVS:
            out = []
            for row in rows:
                toks = [t for cell in row for t in cell]
                out.append(self._sub(toks, relation=True))
            return nodes.SystemLit(tuple(out))
        if env not in _MATRIX_ENVS:
            raise ParseError(f"unsupported environment {env}")
        parsed = tuple(tuple(self._sub(cell, relation=False) for cell in row) for row in rows)
        width = len(parsed[0])
        if any(len(r) != width for r in parsed):
            raise ParseError("ragged matrix")
        if sum(len(r) for r in parsed) > MAX_ITEMS:
            raise ParseError("matrix too large")
        node = nodes.Matrix(parsed)
        return nodes.Det(node) if env in ("vmatrix", "Vmatrix") else node

    def _sub(self, toks: list[Tok], relation: bool) -> nodes.Node:
        p = _Parser(toks, self.depth + 1)
        if p.depth > MAX_DEPTH:
            raise TooDeep("nesting too deep")
        node = p.parse_rel() if relation else p.parse_add()
        if p.peek() is not None:
            raise ParseError(f"unexpected {p.peek().text!r} in cell")  # type: ignore[union-attr]
        return node


_NOT_SYMBOLS = frozenset(
    "end right left rfloor rceil cup cap setminus in notin leq geq neq approx cdot times div "
    "pm mp circ prime to mapsto implies iff text frac sqrt int lim oint partial nabla "
    "lor land seqsep".split()
)


def _inequality_in(node: nodes.Node, var: str) -> bool:
    """A parsed inequality (chain) whose only variable is ``var``."""
    if not isinstance(node, nodes.RelLit) or any(op in ("=", "~", "in") for op in node.ops):
        return False
    if any(contains(part, nodes.WRITTEN) for part in node.parts):
        return False
    return all(free_symbols(part) <= {var} for part in node.parts) and any(
        free_symbols(part) for part in node.parts
    )


_INVERSE = {"sin": "arcsin", "cos": "arccos", "tan": "arctan", "cot": "arccot"}


def _symbol(name: str) -> nodes.Ast:
    return nodes.Sym(name)


def _prime(base: nodes.Node) -> nodes.Ast:
    if not isinstance(base, nodes.Sym):
        raise ParseError("prime on a non-symbol")
    return nodes.Sym(base.name + "'")


def _ends_in_literal(node: nodes.Node) -> bool:
    """A bare number literal, or a product ending in one (``2^6 3^5`` is a product)."""
    if isinstance(node, nodes.Mul):
        node = node.factors[-1]
    return isinstance(node, nodes.Int | nodes.Dec)


def _is_int_lit(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Int) or (
        isinstance(node, nodes.Neg) and isinstance(node.arg, nodes.Int)
    )


def _is_int_fraction(node: nodes.Node) -> bool:
    return (
        isinstance(node, nodes.Div)
        and isinstance(node.num, nodes.Int)
        and isinstance(node.den, nodes.Int)
    )


def _mixed(whole: nodes.Node, frac: nodes.Ast) -> nodes.Ast:
    if isinstance(whole, nodes.Neg):
        return nodes.Neg(nodes.Add((whole.arg, frac)))
    return nodes.Add((whole, frac))


# --------------------------------------------------------------------------------------------
# AST helpers


def free_symbols(node: nodes.Node) -> frozenset[str]:
    """Variable names in an AST (``e``, ``i``, ``I`` are constants; sum indices are bound)."""
    out: set[str] = set()
    _collect_symbols(node, out)
    return frozenset(out)


_CONST_SYMBOLS = frozenset({"e", "i", "I"})


def _collect_symbols(node: nodes.Node, out: set[str]) -> None:
    if isinstance(node, nodes.Sym):
        if node.name not in _CONST_SYMBOLS:
            out.add(node.name)
        return
    if isinstance(node, nodes.BigOp):
        inner: set[str] = set()
        _collect_symbols(node.body, inner)
        inner.discard(node.var)
        out |= inner
        _collect_symbols(node.lo, out)
        _collect_symbols(node.hi, out)
        return
    if isinstance(node, nodes.SympyValue):
        out |= {str(s) for s in node.value.free_symbols}
        return
    for c in nodes.children(node):
        _collect_symbols(c, out)


def contains(node: nodes.Node, kinds: tuple[type[nodes.Node], ...]) -> bool:
    """Whether any node in the tree is one of ``kinds`` (a sympy value is opaque)."""
    if isinstance(node, kinds):
        return True
    if isinstance(node, nodes.SympyValue):
        return False
    for c in nodes.children(node):
        if contains(c, kinds):
            return True
    return False


def is_infinite(node: nodes.Node) -> bool:
    return node == nodes.OO or node == nodes.NEG_OO


# --------------------------------------------------------------------------------------------
# answers

_TIME = re.compile(r"(?i)^(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(a\.?\s*m\.?|p\.?\s*m\.?)?$")
_CHOICE = re.compile(r"^\(\s*([A-Za-z])\s*\)$|^([A-Z])\s*\)$|^(?i:option|choice)\s+([A-Za-z])$")
_TEXT = re.compile(r"^[A-Za-z][A-Za-z'\- ]*[A-Za-z.]$")
_LONG_WORD = re.compile(r"[A-Za-z]{3,}")
_YES_NO = re.compile(r"(?i)^(?:yes|no)(?:[ ,.;:!\-]+[A-Za-z][A-Za-z' ,.;:!\-]*)?$")


def _time_answer(s: str) -> nodes.Answer | None:
    m = _TIME.match(s)
    if not m:
        return None
    h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    ampm = (m.group(4) or "").lower().replace(".", "").replace(" ", "")
    if mi >= 60 or sec >= 60 or h > 24:
        return None
    if ampm:
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if ampm == "pm" else 0)
    return nodes.Time(h * 3600 + mi * 60 + sec, int(m.group(1)), mi, sec)


def _word_answer(s: str) -> nodes.Answer | None:
    m = _CHOICE.match(s)
    if m:
        return nodes.Letter(next(g for g in m.groups() if g), True)
    if len(s) == 1 and s.isalpha():
        return nodes.Letter(s, False)
    if _YES_NO.match(s):
        return nodes.Text(text_key(s), False)
    if _TEXT.match(s):
        words = _LONG_WORD.findall(s)
        if any(w.lower() not in _PLAIN_WORDS for w in words):
            return nodes.Text(text_key(s), False)
    return None


def text_key(s: str) -> str:
    """Case-insensitive comparison key of a text answer."""
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


@lru_cache(maxsize=4096)
def parse_answer(s: str) -> nodes.Answer:
    """Normalized answer string -> Answer. Unparseable text becomes ``Text(key, True)``.

    Raises :class:`TooDeep` for nesting above the cap (reported as ``too_deep``).
    """
    s = s.strip()
    if not s:
        return nodes.Text("", True)
    special = _time_answer(s) or _word_answer(s)
    if special is not None:
        return special
    try:
        p = _Parser(tokenize(s))
        items, seps = p.parse_seq(())
        if p.peek() is not None:
            raise ParseError(f"unexpected {p.peek().text!r}")  # type: ignore[union-attr]
        if not items:
            raise ParseError("empty")
        return _top_answer(items, seps)
    except TooDeep:
        raise
    except (ParseError, RecursionError, ValueError, IndexError) as exc:
        del exc
        return nodes.Text(text_key(s), True)


SEQ_SEP = "\\seqsep"
"""Separator the answer finder writes between the boxes of one run (``\\boxed{2} and
\\boxed{3}``): the parts form an ordered sequence (kind ``seq``), compared in order."""


def _top_answer(items: list[nodes.Node], seps: list[str]) -> nodes.Answer:
    if SEQ_SEP in seps:
        parts: list[nodes.Answer] = []
        start = 0
        for i, sep in enumerate([*seps, SEQ_SEP][: len(items)]):
            if sep == SEQ_SEP:
                parts.append(_top_answer(items[start : i + 1], seps[start:i]))
                start = i + 1
        if start < len(items):
            parts.append(_top_answer(items[start:], seps[start:]))
        return nodes.Coll("seq", tuple(parts))
    if "\\lor" in seps:
        var = _one_variable(items)
        if all(sep == "\\lor" for sep in seps) and var is not None:
            return nodes.Union(tuple(to_answer(x) for x in items))  # x < -1 or x > 1
        seps = ["," if sep == "\\lor" else sep for sep in seps]
    if ";" in seps and "," in seps:
        groups: list[list[nodes.Node]] = [[]]
        for i, item in enumerate(items):
            groups[-1].append(item)
            if i < len(seps) and seps[i] == ";":
                groups.append([])
        elems: list[nodes.Answer] = []
        for g in groups:
            if len(g) == 1:
                elems.extend(expand(to_answer(g[0])))
            elif g:
                elems.extend(expand(nodes.Coll("tuple", tuple(to_answer(x) for x in g))))
        return _collection("list", elems)
    if len(items) == 1:
        alts = expand(to_answer(items[0]))
        return alts[0] if len(alts) == 1 else nodes.Coll("list", tuple(alts))
    elems = [a for item in items for a in expand(to_answer(item))]
    return _collection("list", elems)


def _one_variable(items: list[nodes.Node]) -> str | None:
    """The variable of a list of inequalities that all have the same single variable."""
    names = {
        name
        for x in items
        if isinstance(x, nodes.RelLit)
        for part in x.parts
        for name in free_symbols(part)
    }
    if len(names) != 1:
        return None
    var = next(iter(names))
    return var if all(_inequality_in(x, var) for x in items) else None


def _collection(kind: str, elems: list[nodes.Answer]) -> nodes.Answer:
    if len(elems) == 1 and kind == "list":
        return elems[0]
    return nodes.Coll(kind, tuple(elems))


def to_answer(node: nodes.Node) -> nodes.Answer:
    """Parser node -> Answer (the written forms of :data:`scorer.nodes.WRITTEN` are read)."""
    if isinstance(node, nodes.Paren):
        opener, closer, items = node.opener, node.closer, node.items
        elems = tuple(to_answer(x) for x in items)
        if opener == "(" and closer == ")":
            if len(items) == 2 and (is_infinite(items[0]) or is_infinite(items[1])):
                return nodes.Interval(True, _end(items[0]), _end(items[1]), True)
            return nodes.Coll("tuple", elems)
        if opener == "[" and closer == "]":
            if len(items) == 2 and (is_infinite(items[0]) or is_infinite(items[1])):
                return nodes.Interval(False, _end(items[0]), _end(items[1]), False)
            return nodes.Coll("blist", elems)
        if len(items) != 2:
            raise ParseError("interval needs two endpoints")
        return nodes.Interval(opener == "(", _end(items[0]), _end(items[1]), closer == ")")
    if isinstance(node, nodes.Braced):
        return nodes.Coll("list", tuple(a for x in node.items for a in expand(to_answer(x))))
    if isinstance(node, nodes.SetLit):
        return nodes.Coll("set", tuple(a for x in node.items for a in expand(to_answer(x))))
    if isinstance(node, nodes.EmptySetLit):
        return nodes.Coll("set", ())
    if isinstance(node, nodes.NamedSetLit):
        return nodes.NamedSet(node.name)
    if isinstance(node, nodes.SystemLit):
        return nodes.Coll("list", tuple(to_answer(x) for x in node.rows))
    if isinstance(node, nodes.UnionLit):
        return nodes.Union(tuple(to_answer(x) for x in node.parts))
    if isinstance(node, nodes.RMinusLit):
        return nodes.RMinus(tuple(to_answer(x) for x in node.points))
    if isinstance(node, nodes.RatioLit):
        return nodes.Ratio(tuple(_expr_of(to_answer(x)) for x in node.parts))
    if isinstance(node, nodes.RelLit):
        return _relation(node.ops, node.parts)
    return nodes.Expr(fold_scientific(_ast(node)))


def _ast(node: nodes.Node) -> nodes.Ast:
    """``node`` as an expression: no written structure anywhere inside it."""
    if contains(node, nodes.WRITTEN):
        raise ParseError("structure inside an expression")
    return cast(nodes.Ast, node)


def _end(node: nodes.Node) -> nodes.Ast:
    """An interval end, taken as written (unchecked, as it always was: a written form there
    makes the comparison fail later, never succeed)."""
    return cast(nodes.Ast, node)


def fold_scientific(node: nodes.Ast) -> nodes.Ast:
    """``2.31 \\times 10^{-3}`` -> one decimal literal (keeps its significant figures)."""
    if isinstance(node, nodes.Neg):
        inner = fold_scientific(node.arg)
        return nodes.Neg(inner) if inner is not node.arg else node
    if not isinstance(node, nodes.Mul) or len(node.factors) != 2:
        return node
    mant, power = node.factors
    if not isinstance(mant, nodes.Dec) or not isinstance(power, nodes.Pow):
        return node
    if power.base != nodes.Int(10):
        return node
    k = power.exp
    if isinstance(k, nodes.Int):
        shift = k.value
    elif isinstance(k, nodes.Neg) and isinstance(k.arg, nodes.Int):
        shift = -k.arg.value
    else:
        return node
    if abs(shift) > 10_000:
        return node
    return nodes.Dec(mant.mantissa, mant.exp10 + shift, mant.sig_figs)


def _expr_of(ans: nodes.Answer) -> nodes.Ast:
    if not isinstance(ans, nodes.Expr):
        raise ParseError("expected an expression")
    return ans.node


def _relation(ops: tuple[str, ...], parts: tuple[nodes.Node, ...]) -> nodes.Answer:
    if "~" in ops:
        ops, parts = _resolve_approx(ops, parts)
        if not ops:
            return to_answer(parts[0])
    if "in" in ops:
        if ops != ("in",):
            raise ParseError("membership chain")
        return nodes.In(_expr_of(to_answer(parts[0])), to_answer(parts[1]))
    answers = tuple(to_answer(p) for p in parts)
    if any(op != "=" for op in ops):
        for a in answers:
            _expr_of(a)
        if "=" in ops:
            raise ParseError("mixed equation / inequality chain")
    return nodes.Rel(tuple(ops), answers)


def _resolve_approx(
    ops: tuple[str, ...], parts: tuple[nodes.Node, ...]
) -> tuple[tuple[str, ...], tuple[nodes.Node, ...]]:
    """``x \\approx 11`` -> ``x = 11``; ``1/3 \\approx 0.33`` / ``x = 1/3 \\approx 0.3`` keep
    the exact left part (the approximation is commentary)."""
    k = ops.index("~")
    left_parts, left_ops = parts[: k + 1], ops[:k]
    if len(left_parts) == 1 and is_label(to_answer(left_parts[0])):
        new_ops = tuple("=" if op == "~" else op for op in ops)
        return _resolve_approx(new_ops, parts) if "~" in new_ops else (new_ops, parts)
    return left_ops, left_parts


def expand(ans: nodes.Answer) -> list[nodes.Answer]:
    """Expand ``±`` into the alternatives it stands for (``1 \\pm 2`` -> [3, -1])."""
    if not contains(ans, (nodes.Pm,)):
        return [ans]
    out = _expand(ans)
    if len(out) > MAX_EXPANSIONS:
        raise ParseError("too many ± alternatives")
    uniq: list[nodes.Answer] = []
    for a in out:
        if a not in uniq:
            uniq.append(a)
    return uniq


def _expand(value: Any) -> list[Any]:
    """Every ± choice of ``value`` (a node, a tuple of nodes, or a plain field value)."""
    if isinstance(value, nodes.Pm):
        out: list[Any] = []
        for a in _expand(value.left):
            for b in _expand(value.right):
                out.append(nodes.Add((a, b)) if a != nodes.Int(0) else b)
                out.append(nodes.Add((a, nodes.Neg(b))) if a != nodes.Int(0) else nodes.Neg(b))
        return out
    if isinstance(value, nodes.Node):
        options = [_expand(v) for v in nodes.fields(value)]
        build: Callable[..., Any] = type(value)
    elif isinstance(value, tuple):
        options = [_expand(v) for v in value]
        build = lambda *items: items  # noqa: E731
    else:
        return [value]
    combos = 1
    for o in options:
        combos *= len(o)
        if combos > MAX_EXPANSIONS:
            raise ParseError("too many ± alternatives")
    return [build(*c) for c in product(*options)]


# --------------------------------------------------------------------------------------------
# labels (the "x" in "x = 5")


def is_label(ans: nodes.Answer) -> bool:
    """A name rather than a value: ``x``, ``a_3``, ``f(x)``, ``AB``, ``|AB|``, ``NO/BO``,
    ``A:B``, ``(p, q)``. Numbers appear only in subscripts / function arguments."""
    if isinstance(ans, nodes.Expr):
        return _label_ast(ans.node)
    if isinstance(ans, nodes.Letter):
        return not ans.explicit and ans.letter not in ("i", "I")
    if isinstance(ans, nodes.Ratio):
        return all(_label_ast(p) for p in ans.parts)
    if isinstance(ans, nodes.Coll) and ans.kind == "tuple":
        return all(is_label(e) for e in ans.elems)
    return False


def _label_ast(node: nodes.Ast) -> bool:
    if isinstance(node, nodes.Sym):
        return node.name not in ("i", "I")
    if isinstance(node, nodes.Mul):
        first, rest = node.factors[0], node.factors[1:]
        return _label_ast(first) and all(_label_ast(r) or isinstance(r, nodes.Int) for r in rest)
    if isinstance(node, nodes.Div):
        return _label_ast(node.num) and _label_ast(node.den)
    if isinstance(node, nodes.Abs):
        return _label_ast(node.arg)
    if isinstance(node, nodes.Fn):  # ``\\sin x = \\frac12``: a function's value is named
        return node.name in _TRIG_LABELS and isinstance(node.arg, nodes.Sym)
    return False


_TRIG_LABELS = frozenset("sin cos tan cot sec csc".split())


def canonical(node: nodes.Node) -> nodes.Node:
    """Canonical, order-insensitive form of an AST for cheap structural equality."""
    if isinstance(node, nodes.SympyValue):
        return node
    if isinstance(node, nodes.Add | nodes.Mul):
        flat: list[nodes.Node] = []
        for c in node.terms if isinstance(node, nodes.Add) else node.factors:
            cc = canonical(c)
            if type(cc) is type(node):
                flat.extend(cc.terms if isinstance(cc, nodes.Add) else cc.factors)  # type: ignore[union-attr]
            else:
                flat.append(cc)
        if isinstance(node, nodes.Mul) and contains(node, (nodes.Matrix,)):
            return nodes.Mul(tuple(flat))  # type: ignore[arg-type]  # matrix products do not commute
        return type(node)(tuple(sorted(flat, key=repr)))
    return nodes.rebuild(node, canonical)
