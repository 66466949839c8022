"""LaTeX to readable plain text: a terminal cannot typeset, but `\\frac{1}{2}` should still read as 1/2."""

from __future__ import annotations

import re

SYMBOLS = {
    "times": "×",
    "cdot": "·",
    "div": "÷",
    "pm": "±",
    "mp": "∓",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "neq": "≠",
    "ne": "≠",
    "approx": "≈",
    "equiv": "≡",
    "infty": "∞",
    "pi": "π",
    "theta": "θ",
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "Delta": "Δ",
    "lambda": "λ",
    "mu": "μ",
    "sigma": "σ",
    "Sigma": "Σ",
    "phi": "φ",
    "omega": "ω",
    "sum": "Σ",
    "prod": "∏",
    "int": "∫",
    "to": "→",
    "rightarrow": "→",
    "Rightarrow": "⇒",
    "implies": "⇒",
    "iff": "⇔",
    "in": "∈",
    "cup": "∪",
    "cap": "∩",
    "circ": "°",
    "degree": "°",
    "ldots": "…",
    "cdots": "⋯",
    "dots": "…",
    "quad": " ",
    "qquad": " ",
    "%": "%",
    "$": "$",
    "{": "{",
    "}": "}",
    ",": " ",
    ";": " ",
    ":": " ",
    "!": "",
    " ": " ",
    "\\": "\n",
}
UNWRAP = {
    "text",
    "mathrm",
    "textbf",
    "mathbf",
    "boxed",
    "operatorname",
    "mathit",
    "textit",
    "mbox",
    "mathbb",
    "mathcal",
    "mathsf",
    "dot",
    "bar",
    "hat",
    "vec",
    "tilde",
    "overline",
    "underline",
}
DROP = {"left", "right", "big", "Big", "bigg", "Bigg", "displaystyle", "limits"}
SUPER = str.maketrans("0123456789+-=()n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿ")
SUB = str.maketrans("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎")
DELIMITERS = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$")
# $...$ only when it reads as math (pandoc's rule), so "$3 each and $5" keeps its dollars
INLINE = re.compile(r"(?<![\\$])\$(?=\S)([^$]+?)(?<=\S)(?<!\\)\$(?![\d$])")
SPACES = re.compile(r"(?<=\S)[ \t]{2,}")  # the spacing commands leave runs; indentation stays
COMMAND = re.compile(r"\\([A-Za-z]+|.)")


def latex_to_text(s: str) -> str:
    """Strip math delimiters and turn common commands into Unicode; unknown commands keep their name."""
    return SPACES.sub(" ", _convert(INLINE.sub(r"\1", DELIMITERS.sub("", s))))


def _group(s: str, i: int) -> tuple[str, int]:
    """The argument starting at s[i] (a {...} group or one character) and the index after it."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return "", i
    if s[i] != "{":
        return s[i], i + 1
    depth = 0
    for j in range(i, len(s)):
        depth += {"{": 1, "}": -1}.get(s[j], 0)
        if depth == 0:
            return s[i + 1 : j], j + 1
    return s[i + 1 :], len(s)


def _wrap(x: str) -> str:
    return x if len(x) <= 1 or x.isalnum() else f"({x})"


def _script(arg: str, table: dict[int, int], mark: str) -> str:
    plain = _convert(arg)
    mapped = plain.translate(table)
    if all(ord(c) in table.values() for c in mapped):
        return mapped
    return mark + (plain if len(plain) == 1 else f"({plain})")


def _convert(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c in "^_":
            arg, i = _group(s, i + 1)
            out.append(_script(arg, SUPER if c == "^" else SUB, c))
            continue
        if c in "{}":
            i += 1
            continue
        m = COMMAND.match(s, i) if c == "\\" else None
        if m is None:
            out.append(c)
            i += 1
            continue
        name, i = m.group(1), m.end()
        if name in ("frac", "dfrac", "tfrac"):
            num, i = _group(s, i)
            den, i = _group(s, i)
            out.append(f"{_wrap(_convert(num))}/{_wrap(_convert(den))}")
        elif name == "sqrt":
            arg, i = _group(s, i)
            out.append(f"√{_wrap(_convert(arg))}")
        elif name in UNWRAP:
            arg, i = _group(s, i)
            out.append(_convert(arg))
        elif name in DROP:
            continue
        else:
            out.append(SYMBOLS.get(name, name))
    return "".join(out)
