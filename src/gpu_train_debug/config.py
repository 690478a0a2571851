"""Read the hyperparameters of `train.py` / `prepare.py` without running them.

Only module-level assignments to UPPER_CASE names are read. A value is kept when it is a
literal or simple arithmetic over literals and names read before it (`2**19`,
`40 * 524288`, `DEPTH * 64`); anything else (a function call, an import) is skipped. The
file is parsed with `ast`, never executed, so a broken or hostile train.py cannot run here.
"""

import ast
import operator

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}


class _Skip(Exception):
    pass


def _value(node, known):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in known:
            return known[node.id]
        raise _Skip
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_value(e, known) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_value(k, known): _value(v, known) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand, known))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _value(node.left, known), _value(node.right, known)
        if isinstance(node.op, ast.Pow) and isinstance(right, (int, float)) and abs(right) > 64:
            raise _Skip  # refuse to build huge numbers from a hostile file
        try:
            return _BINOPS[type(node.op)](left, right)
        except Exception:
            raise _Skip
    raise _Skip


def read_constants_text(source):
    """Return {NAME: value} for the module-level UPPER_CASE constants in `source`.

    A file that does not parse gives {} (the diagnoser then works from the log alone).
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    known = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id.isupper():
                try:
                    known[target.id] = _value(value, known)
                except (_Skip, RecursionError):
                    known.pop(target.id, None)
    return known


def read_constants(path):
    """Constants of the Python file at `path`; {} when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return read_constants_text(handle.read())
    except OSError:
        return {}
