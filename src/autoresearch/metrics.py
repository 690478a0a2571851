"""METRIC lines: how a benchmark reports numbers to the engine.

A line `METRIC name=value` anywhere in the output reports one metric. The name matches
`[A-Za-z_][A-Za-z0-9_.]*`; the value must be a finite decimal number (`1`, `-0.5`, `3e-4`,
`.5`). Anything else on a METRIC line (NaN, inf, hex, `1_000`, units) is ignored with a
warning, so a broken value can never become a result; so is a line that starts with `METRIC `
but does not follow the grammar (`METRIC x = 1`). If a name repeats, the last value wins.
"""

import math
import re

LINE = re.compile(r"^METRIC\s+([A-Za-z_][A-Za-z0-9_.]*)=(\S+)\s*$")
ATTEMPT = re.compile(r"^METRIC(?:\s|$)")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
# Plain decimal notation only: Python's float() would also take "nan", "inf" and "1_0".
NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")


def valid_name(name):
    return bool(NAME.fullmatch(name))


def parse_value(text):
    """Return the finite float that `text` spells, or None."""
    if not NUMBER.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse(text):
    """Return (metrics, warnings): {name: float} from METRIC lines, and one warning per bad line."""
    metrics = {}
    warnings = []
    for raw in _lines(text):
        if not raw.startswith("METRIC"):
            continue
        match = LINE.match(raw)
        if not match:
            # `METRIC x = 1` or `METRIC 1x=2` was meant as a metric: say why it was not taken,
            # as for a bad value. (`METRICS:` and other words that merely start so are not.)
            if ATTEMPT.match(raw):
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
