"""`autoresearch verify`: for the person, in a terminal: validation and the hidden holdout of
every kept run of the segment, and whether the night's gains transfer (holdout.py).

The agent must not run it (the PreToolUse hook refuses it, like reads of the holdout files):
the holdout is a number the agent never saw.
"""

import argparse

from autoresearch import errors, output
from autoresearch.decision import holdout
from autoresearch.store import log, research

EXAMPLES = """examples:
  autoresearch verify          # the table and the verdict, in a terminal
  autoresearch verify --json   # the same as one JSON object
"""


def add_parsers(sub):
    p = sub.add_parser("verify", help="for the person: validation and hidden holdout of every kept run",
                       description=__doc__, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_verify)


def cmd_verify(args):
    repo = research.find()
    night = log.load(repo.log, warn=output.warn)
    seg = night.current
    if seg is None or seg.config is None:
        research.require_config(None)
    result = holdout.check(seg.config, seg.runs, repo.run_dir)
    text = f"segment {seg.index}: {seg.config.name or seg.config.metric_name}\n" + \
        holdout.table(result, seg.config.metric_name)
    output.emit(args, text, dict(result.to_json(), segment=seg.index))
    return errors.EXIT_OK
