"""The unit an answer states, so two answers whose units contradict are never equal.

Normalization drops units (``10 \\text{ cm}`` is 10) so that a gold without a unit matches an
answer with one. When *both* sides name a unit this module knows and the units differ
(``37 \\text{ cm}`` against ``37 \\text{ m}``), the answers differ: dropping both would pay
for the wrong unit. Unknown words (``apples``) never decide anything.
"""

from __future__ import annotations

import re

_SYNONYMS: dict[str, tuple[str, ...]] = {
    "mm": ("mm", "millimeter", "millimetre"),
    "cm": ("cm", "centimeter", "centimetre"),
    "m": ("m", "meter", "metre"),
    "km": ("km", "kilometer", "kilometre"),
    "in": ("inch", "inche"),
    "ft": ("ft", "foot", "feet"),
    "yd": ("yd", "yard"),
    "mi": ("mi", "mile"),
    "mg": ("mg", "milligram"),
    "g": ("g", "gram"),
    "kg": ("kg", "kilogram"),
    "lb": ("lb", "pound"),
    "oz": ("oz", "ounce"),
    "s": ("s", "sec", "second"),
    "min": ("min", "minute"),
    "h": ("h", "hr", "hour"),
    "day": ("day",),
    "week": ("week",),
    "month": ("month",),
    "year": ("year", "yr"),
    "ml": ("ml", "milliliter", "millilitre"),
    "l": ("l", "liter", "litre"),
    "gal": ("gal", "gallon"),
    "dollar": ("dollar",),
    "cent": ("cent",),
    "euro": ("euro",),
    "km/h": ("km/h", "kmh", "kph", "km/hr"),
    "mph": ("mph", "mi/h"),
    "m/s": ("m/s",),
}
_CANONICAL = {word: unit for unit, words in _SYNONYMS.items() for word in words}
_POWER = {"square": "^2", "sq": "^2", "cubic": "^3", "cu": "^3"}

# A number, then the unit: optionally in a text command, optionally squared or cubed.
_UNIT_AFTER_NUMBER = re.compile(
    r"\d\s*(?:\\[,;!: ]|~|\s)*(?:\\(?:text|mathrm|mbox|textrm|rm)\s*\{(?:\s|~|\\[,;!: ])*)?"
    r"(?P<unit>(?:(?:square|sq|cubic|cu)\s+)?[A-Za-z]+(?:\s*/\s*[A-Za-z]+)?)\s*\}?"
    r"(?:\s*\^\s*\{?(?P<pow>[23])\}?)?\s*[.]?\s*$"
)


def unit_of(answer: str) -> str | None:
    """The canonical unit ``answer`` ends with after a number (``cm``, ``ft^2``, ``km/h``),
    or ``None`` when it names none this module knows."""
    if len(answer) > 200:
        return None
    m = _UNIT_AFTER_NUMBER.search(answer.strip())
    if m is None:
        return None
    words = m["unit"].split()
    power = _POWER.get(words[0].lower(), "") if len(words) > 1 else ""
    word = words[-1]
    if m["pow"]:
        power = "^" + m["pow"]
    key = word if word in ("L", "mL") else word.lower()
    unit = _CANONICAL.get(key) or _CANONICAL.get(key[:-1] if key.endswith("s") else "")
    if unit is None:
        return None
    return unit + power


def units_contradict(pred: str, gold: str) -> bool:
    """Both answers name a known unit after their number, and the units differ."""
    a, b = unit_of(pred), unit_of(gold)
    return a is not None and b is not None and a != b
