"""The project stands alone: its code and docs state the contracts they implement (in
references/), and cite no section of a design document kept outside the repository."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"\bDESIGN(?:\.md)?\b(?:\s+(?:section\s+)?\d|\s*§)")


def test_no_file_cites_design_sections():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    found = []
    for name in files:
        path = ROOT / name
        if not name or not path.is_file() or path.suffix not in (".py", ".md", ".sh", ".js", ".json", ".html", ".toml"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if CITATION.search(line) and name != "tests/engine/test_engine_standalone.py":
                found.append(f"{name}:{number}: {line.strip()[:100]}")
    assert found == []
