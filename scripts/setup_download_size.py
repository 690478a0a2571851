"""How much `make setup` downloads: what pip would install for the Makefile's set-up (torch at the
pinned version, then this project with its ml, report, test and pool extras), resolved from PyPI
without installing anything, and the size of each file PyPI serves for it.

    python3 scripts/setup_download_size.py          # needs the network (PyPI); installs nothing

It prints the total, the CUDA share (torch from PyPI on Linux x86_64 brings NVIDIA's libraries
and triton) and the largest files. The figures in the README come from this command.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUDA_PREFIXES = ("nvidia-", "cuda-", "triton")


def pinned_torch():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as handle:
        return re.search(r"^TORCH_VERSION \?= (\S+)", handle.read(), re.M).group(1)


def resolve():
    """[(name, version, url)] of what pip would download, from its installation report."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        # --isolated: PyPI alone, whatever pip.conf or PIP_* say (a local wheel folder would hide the download)
        subprocess.run([sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed",
                        "--quiet", "--report", report, f"torch=={pinned_torch()}", "-e", f"{ROOT}[ml,report,test,pool]"],
                       check=True)
        with open(report, encoding="utf-8") as handle:
            items = json.load(handle)["install"]
    return [(i["metadata"]["name"], i["metadata"]["version"], i["download_info"]["url"]) for i in items
            if i["download_info"]["url"].startswith("https://")]


def size(url):
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as answer:
        return int(answer.headers.get("Content-Length") or 0)


def main():
    files = sorted(((size(url), name, version) for name, version, url in resolve()), reverse=True)
    total = sum(s for s, _, _ in files)
    cuda = sum(s for s, name, _ in files if name.lower().startswith(CUDA_PREFIXES))
    print(f"make setup downloads {total / 1e9:.2f} GB in {len(files)} files "
          f"({cuda / 1e9:.2f} GB of it NVIDIA CUDA libraries and triton, which torch from PyPI brings on Linux x86_64)")
    for s, name, version in files[:10]:
        print(f"  {s / 1e6:8.1f} MB  {name} {version}")


if __name__ == "__main__":
    main()
