"""How the engine starts a Python process of its own: isolated, with its own source first.

`python3 -I` ignores every PYTHON* variable (PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, ...) and
the user's site folder (a `usercustomize.py` or a `.pth` file there), and puts neither the
working folder nor a script's folder on `sys.path`. The engine's `src/` is then put first by a
one-line bootstrap, so an `autoresearch/` folder in the research repo, a PYTHONPATH the agent
exported, or a file planted in the user's site folder cannot stand in for the engine.

`bin/autoresearch` starts the engine with the same bootstrap (its copy is in bash; a test
checks that the two agree); the hooks are started as `python3 -I hooks/NAME.py` and put
`hooks/` and `src/` on `sys.path` themselves.
"""

import os
import sys

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# argv: [-c, SRC, engine arguments...]: SRC goes first on sys.path, then argv is what the
# engine would get from `python -m autoresearch` (argparse reads sys.argv[1:]).
BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from autoresearch.cli import main; sys.exit(main())"
# argv: [-c, SRC, module, arguments...]: runs `module` as __main__ (like `python -m module`).
BOOT_MODULE = ("import sys, runpy; sys.path.insert(0, sys.argv.pop(1)); "
               "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


def engine_argv(*args, python=None):
    """The argv of `autoresearch ARGS` as a fresh, isolated process of this engine."""
    return [python or sys.executable, "-I", "-c", BOOT, SRC, *args]


def module_argv(module, *args, python=None):
    """The argv of `python -m MODULE ARGS` (a module of this engine), isolated the same way."""
    return [python or sys.executable, "-I", "-c", BOOT_MODULE, SRC, module, *args]
