"""Safe evaluation of the small arithmetic expressions that tasks use for shapes, byte and flop counts.

Tasks are data written by users; `eval` on them would run arbitrary code, so only arithmetic on
numbers and the task's size names is accepted.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCS = {
    "min": min,
    "max": max,
    "ceil": math.ceil,
    "floor": math.floor,
    "log2": math.log2,
    "sqrt": math.sqrt,
    "int": int,
}


class FormulaError(ValueError):
    """An expression that is not plain arithmetic over known names."""


def names_in(expr: str | int | float) -> set[str]:
    """The size names an expression refers to (functions excluded)."""
    if not isinstance(expr, str):
        return set()
    tree = _parse(expr)
    return {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and n.id not in _FUNCS
    }


def _parse(expr: str) -> ast.Expression:
    try:
        return ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"not a valid expression: {expr!r} ({exc.msg})") from None


def evaluate(expr: str | int | float, sizes: Mapping[str, int | float]) -> int | float:
    """Evaluate `expr` with `sizes` bound; numbers pass through unchanged."""
    if isinstance(expr, bool):
        raise FormulaError(f"a boolean is not a formula: {expr!r}")
    if isinstance(expr, (int, float)):
        return expr
    tree = _parse(expr)

    def ev(node: ast.AST) -> int | float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in sizes:
                raise FormulaError(f"unknown name {node.id!r} in {expr!r}; known: {sorted(sizes)}")
            return sizes[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS
            and not node.keywords
        ):
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise FormulaError(f"unsupported syntax in {expr!r}: {ast.dump(node)[:60]}")

    return ev(tree)


def evaluate_int(expr: str | int, sizes: Mapping[str, int | float]) -> int:
    """Evaluate an expression that must give a whole number (a dimension)."""
    value = evaluate(expr, sizes)
    if isinstance(value, float):
        if not value.is_integer():
            raise FormulaError(f"{expr!r} gives {value}, not a whole number")
        value = int(value)
    return value
