"""METRIC lines: how a benchmark reports numbers to the engine.

A token `METRIC name=value` at the end of a line reports one metric, whether it starts the line
or follows other text on it: a tool that printed without a final newline (triton's "leaked ..."
lines at exit) glues the next line onto its text, `...refleaks.htmlMETRIC val_bpb=0.18`, and that
still counts. The name matches `[A-Za-z_][A-Za-z0-9_.]*`; the value must be an ASCII decimal
number that is a finite float (`1`, `-0.5`, `3e-4`, `.5`, `2e306`). Anything else (NaN, inf, hex,
`1_000`, units, fullwidth digits, `1e999`) is ignored with a warning, so a broken value can never
become a result; so is a token off the grammar (`METRIC x = 1`). `METRIC` must be followed by
whitespace: `METRICS:` or `METRIC(train.py)` are not tokens. If a name repeats, the last value wins.
"""

import math
import re

LINE = re.compile(r"METRIC\s+([A-Za-z_][A-Za-z0-9_.]*)=(\S+)\s*$", re.ASCII)
TOKEN = re.compile(r"METRIC(?=\s|$)")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*", re.ASCII)
# Plain ASCII decimal notation only: Python's float() would also take "nan", "inf", "1_0" and "１".
NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


def valid_name(name):
    return bool(NAME.fullmatch(name))


def parse_value(text):
    """Return the finite float that `text` spells, or None."""
    if not NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse(text):
    """Return (metrics, warnings): {name: float} from METRIC lines, and one warning per bad line."""
    metrics = {}
    warnings = []
    for raw in _lines(text):
        if "METRIC" not in raw:
            continue
        tokens = list(TOKEN.finditer(raw))
        if not tokens:
            continue   # `METRICS:` and other words that merely contain it
        raw = raw[tokens[-1].start():]   # the last token on the line; text before it is another tool's
        match = LINE.match(raw)
        if not match:
            # `METRIC x = 1` or `METRIC 1x=2` was meant as a metric: say why it was not taken.
            warnings.append(f"ignored {_shown(raw)!r}: not `METRIC name=value` "
                            "(name [A-Za-z_][A-Za-z0-9_.]*, no spaces around =)")
            continue
        name, value_text = match.groups()
        value = parse_value(value_text)
        if value is None:
            warnings.append(f"ignored METRIC {name}={value_text[:40]}: not a finite number")
            continue
        metrics[name] = value
    return metrics, warnings


def _shown(line):
    line = line.strip()
    return line if len(line) <= 60 else line[:59] + "…"


def _lines(text):
    # A terminal shows what follows the last carriage return; progress bars use \r.
    for line in text.split("\n"):
        if "\r" in line:
            line = line.rstrip("\r").rsplit("\r", 1)[-1]
        yield line
