"""Plain values as text (stdlib only): the codec between a test script's harness and the
submission it calls (``harness``), which keeps Python's literal types and nothing with behaviour.

A value is written as a Python literal (``encode``) and read back by walking its syntax tree
(``decode``), never by evaluating it: what comes out is built here from exact built-in types
(None, bool, int, float, complex, str, bytes, tuple, list, set, frozenset, dict), so no object
of the writer's can reach the reader (no ``__eq__`` that always answers True, no ``__del__``).
The reader trusts nothing of the text: every node it does not know, a value nested deeper than
``MAX_DEPTH`` or text over ``MAX_BYTES`` is a ``BadValue``. Non-finite floats are written as
``repr`` writes them (``nan``, ``inf``, ``(nan+infj)``) and read as the names they are; an int
past 2**64 is written in hex (Python refuses decimal text of more than 4300 digits).
"""

import ast
import math

MAX_BYTES = 4 * 1024 * 1024  # of one value's text
MAX_DEPTH = 100  # containers within containers (the parser refuses 200 nested brackets)
BIG_INT = 1 << 64
NAMES = {
    "nan": math.nan,
    "inf": math.inf,
    "nanj": complex(0.0, math.nan),
    "infj": complex(0.0, math.inf),
}
SCALARS = (type(None), bool, int, float, complex, str, bytes)


class BadValue(ValueError):
    """A value that cannot cross: a type with behaviour, too deep, too large, or bad text."""


def encode(value):
    """``value`` as literal text; raises ``BadValue`` for anything ``decode`` would refuse."""
    out = []
    _write(value, out, [0], 0)
    return "".join(out)


def _write(value, out, size, depth):
    """Append ``value``'s text to ``out``; ``size``: a one-item list, the length so far."""
    if depth > MAX_DEPTH:
        raise BadValue(f"the value is nested more than {MAX_DEPTH} deep")
    kind = type(value)
    if kind is int and not -BIG_INT < value < BIG_INT:
        text = hex(value)
    elif kind in SCALARS:
        text = repr(value)
    elif kind in (tuple, list, set, frozenset, dict):
        _write_container(value, out, size, depth)
        return
    else:
        raise BadValue(f"a {kind.__name__} is not a plain value")
    size[0] += len(text)
    if size[0] > MAX_BYTES:
        raise BadValue(f"the value is over {MAX_BYTES} bytes")
    out.append(text)


def _write_container(value, out, size, depth):
    kind = type(value)
    if kind in (set, frozenset) and not value:
        out.append(f"{kind.__name__}()")
        return
    opening, closing = {tuple: "()", list: "[]", set: "{}", frozenset: "{}", dict: "{}"}[kind]
    out.append("frozenset(" + opening if kind is frozenset else opening)
    for item in value:
        if kind is dict:
            _write(item, out, size, depth + 1)
            out.append(": ")
            item = value[item]
        _write(item, out, size, depth + 1)
        out.append(", ")
    out.append(closing + ")" if kind is frozenset else closing)


def decode(text):
    """The plain value ``text`` writes; raises ``BadValue`` (the text is never evaluated)."""
    if len(text) > MAX_BYTES:
        raise BadValue(f"the value is over {MAX_BYTES} bytes")
    try:
        tree = ast.parse(text, mode="eval")
    except Exception as exc:  # noqa: BLE001 - SyntaxError, RecursionError, MemoryError...
        raise BadValue(f"not a plain value: {type(exc).__name__}") from None
    try:
        return _read(tree.body, 0)
    except (TypeError, RecursionError) as exc:  # an unhashable key or item
        raise BadValue(f"not a plain value: {exc}") from None


def _read(node, depth):
    if depth > MAX_DEPTH:
        raise BadValue(f"the value is nested more than {MAX_DEPTH} deep")
    kind = type(node)
    if kind is ast.Constant and type(node.value) in SCALARS:
        return node.value
    if kind is ast.Name and node.id in NAMES:
        return NAMES[node.id]
    if kind in (ast.Tuple, ast.List, ast.Set):
        items = [_read(item, depth + 1) for item in node.elts]
        return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[kind](items)
    if kind is ast.Dict and None not in node.keys:
        pairs = zip(node.keys, node.values, strict=True)
        return {_read(k, depth + 1): _read(v, depth + 1) for k, v in pairs}
    if kind is ast.Call:
        return _read_set(node, depth)
    if kind is ast.UnaryOp and type(node.op) in (ast.USub, ast.UAdd):
        return _signed(node, _read(node.operand, depth + 1))
    if kind is ast.BinOp and type(node.op) in (ast.Add, ast.Sub):
        return _complex(node, _read(node.left, depth + 1), _read(node.right, depth + 1))
    raise BadValue(f"not a plain value: {kind.__name__}")


def _read_set(node, depth):
    """``set()``, ``frozenset()`` or ``frozenset({...})``."""
    name = node.func.id if type(node.func) is ast.Name else None
    if name not in ("set", "frozenset") or node.keywords or len(node.args) > 1:
        raise BadValue("not a plain value: a call")
    if not node.args:
        return set() if name == "set" else frozenset()
    if name != "frozenset" or type(node.args[0]) is not ast.Set:
        raise BadValue("not a plain value: a call")
    return frozenset(_read(node.args[0], depth + 1))


def _signed(node, value):
    if type(value) not in (int, float, complex):
        raise BadValue("not a plain value: a sign on a non-number")
    return -value if type(node.op) is ast.USub else value


def _complex(node, left, right):
    """``a+bj`` or ``a-bj``, as ``repr`` writes a complex number: nothing else adds."""
    if type(left) not in (int, float) or type(right) is not complex:
        raise BadValue("not a plain value: arithmetic")
    return left + right if type(node.op) is ast.Add else left - right
