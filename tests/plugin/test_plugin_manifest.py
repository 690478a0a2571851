"""The plugin as Claude Code sees it: strict validation, what it provides, marketplace install.

All offline and without a login: `claude plugin validate`, `plugin marketplace add` and
`plugin install` read files only. A throwaway HOME keeps the user's own settings out.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, require_tool

CLAUDE = os.environ.get("CLAUDE_BIN", str(ROOT / ".tools" / "node_modules" / ".bin" / "claude"))
HOOK_EVENTS = {"Stop", "SessionStart", "PreToolUse"}
SKILLS = {"autoresearch:autoresearch", "autoresearch:autoresearch-ml"}


@pytest.fixture
def claude(tmp_path):
    binary = require_tool(CLAUDE, "run `make tools` (scripts/install-test-tools.sh) or set CLAUDE_BIN")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ANTHROPIC"))}
    env.update({"HOME": str(home), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"})

    def run(*args, cwd=None):
        return subprocess.run([binary, *args], cwd=cwd or tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)

    run.home = home
    return run


def validate(claude, target):
    proc = claude("plugin", "validate", "--strict", "--json", str(target))
    return proc.returncode, json.loads(proc.stdout)


def findings(report):
    """Every error and warning message of a validation report (manifest and components)."""
    parts = [p for p in [report.get("manifest"), *(report.get("contents") or [])] if p]
    return [f"{item.get('path', '')}: {item['message']}" for part in parts
            for item in part.get("errors", []) + part.get("warnings", [])]


def plugin_copy(dest):
    """The files a `git clone` of this checkout would hold (tracked and new, not ignored)."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def test_plugin_manifest_passes_strict_validation_and_provides_the_hooks_and_skills(claude):
    rc, report = validate(claude, ROOT / ".claude-plugin" / "plugin.json")
    assert rc == 0 and report["success"] and report["strict"], report["manifest"]
    assert report["manifest"]["type"] == "plugin" and findings(report) == []
    hooks = report["provides"]["hooks"]
    assert {h["event"] for h in hooks} == HOOK_EVENTS
    for h in hooks:  # exec form: no shell, no quoting of the plugin path; isolated Python (-I)
        assert h["command"] == "python3" and h["args"][0] == "-I" and h["args"][1].startswith("${CLAUDE_PLUGIN_ROOT}/hooks/")
        assert (ROOT / h["args"][1].replace("${CLAUDE_PLUGIN_ROOT}/", "")).is_file()
    assert SKILLS <= set(report["provides"]["skills"])
    assert report["provides"]["bin"] == ["autoresearch"]


def test_marketplace_passes_strict_validation(claude):
    rc, report = validate(claude, ROOT)
    assert rc == 0 and report["success"], report["manifest"]
    assert report["manifest"]["type"] == "marketplace" and findings(report) == []
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert [p["source"] for p in market["plugins"]] == ["./"]


def test_every_skill_passes_strict_validation(claude):
    rc, report = validate(claude, ROOT / "skills")
    assert rc == 0 and report["success"] and findings(report) == [], report


@pytest.mark.parametrize("breakage,expected", [("skill frontmatter", "YAML frontmatter failed to parse"),
                                               ("unquoted shell placeholder", "without quotes"),
                                               ("keywords type", "keywords")])
def test_strict_validation_catches_a_broken_copy(claude, tmp_path, breakage, expected):
    """The checks above can fail: the same validator rejects small, realistic mistakes."""
    copy = plugin_copy(tmp_path / "plugin")
    if breakage == "skill frontmatter":
        skill = copy / "skills" / "autoresearch" / "SKILL.md"
        skill.write_text(skill.read_text().replace('name: "autoresearch"', 'name: "autoresearch', 1))
    elif breakage == "unquoted shell placeholder":
        hooks = json.loads((copy / "hooks" / "hooks.json").read_text())
        hooks["hooks"]["Stop"][0]["hooks"][0] = {"type": "command",
                                                 "command": "python3 ${CLAUDE_PLUGIN_ROOT}/hooks/stop.py"}
        (copy / "hooks" / "hooks.json").write_text(json.dumps(hooks))
    else:
        manifest = json.loads((copy / ".claude-plugin" / "plugin.json").read_text())
        manifest["keywords"] = "research"
        (copy / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    rc, report = validate(claude, copy / ".claude-plugin" / "plugin.json")
    assert rc == 1 and not report["success"]
    assert any(expected in message for message in findings(report)), findings(report)


def test_install_through_the_marketplace_gives_a_working_engine_and_hooks(claude, tmp_path):
    source = plugin_copy(tmp_path / "checkout")
    assert claude("plugin", "marketplace", "add", str(source)).returncode == 0
    proc = claude("plugin", "install", "autoresearch@autoresearch")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = json.loads(claude("plugin", "list", "--json").stdout)
    entry = next(p for p in listed if p["id"] == "autoresearch@autoresearch")
    installed = entry["installPath"]
    assert entry["enabled"] and installed.startswith(str(claude.home))

    # The installed copy runs on its own: the engine through bin/, a hook through python3.
    version = subprocess.run([os.path.join(installed, "bin", "autoresearch"), "--version"],
                             capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("autoresearch ")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "autoresearch.jsonl").write_text("")
    payload = {"session_id": "s", "cwd": str(repo), "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": "echo '{}' >> autoresearch.jsonl"}}
    hook = subprocess.run([sys.executable, os.path.join(installed, "hooks", "pre_tool_use.py")],
                          input=json.dumps(payload), capture_output=True, text=True, timeout=60)
    assert json.loads(hook.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.mark.parametrize("skill", ["autoresearch", "autoresearch-ml"])
def test_skill_links_point_to_files_in_the_plugin(skill):
    text = (ROOT / "skills" / skill / "SKILL.md").read_text()
    links = re.findall(r"\]\(\$\{CLAUDE_PLUGIN_ROOT\}/([^)]+)\)", text)
    assert links, "the skill links its detail in references/"
    assert [link for link in links if not (ROOT / link).is_file()] == []


def test_the_plugin_directory_checks_find_nothing_and_the_icon_is_ours(claude, tmp_path):
    """The plugin directory's checks (run by `validate` on the plugin folder) warned ICON_MISSING;
    the icon the manifest names is a square PNG in the size they ask (512 to 2048 px, under
    2 MB), and it is exactly what scripts/draw_icon.py draws."""
    rc, report = validate(claude, ROOT)
    assert rc == 0 and report["directory"]["findings"] == [], report["directory"]
    manifest = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    icon = ROOT / manifest["icon"]
    data = icon.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) < 2 * 1024 * 1024
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width == height and 512 <= width <= 2048
    drawn = tmp_path / "icon.png"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "draw_icon.py"), str(drawn)], check=True,
                   capture_output=True)
    assert drawn.read_bytes() == data
