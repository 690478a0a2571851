"""The log cache (logcache.py) never changes what is shown: after every kind of change to the
log, and with every kind of bad cache file, `status`'s object equals the one computed from the
whole log, and the warnings are the same."""

import hashlib
import hmac
import json
import os
import random
import shutil

import pytest

from autoresearch.decision import logcache, summary
from autoresearch.store import log, research
from gitrepo import git_repo


def config(**kw):
    return {"type": "config", "metricName": "loss", "bestDirection": "lower", "name": "cache", **kw}


def run(n, status, metric, **kw):
    return {"run": n, "status": status, "metric": metric, "commit": f"{n:07x}", "description": f"idea {n}",
            "scope_hash": kw.pop("code", f"code{n}"), "timestamp": 1.7e12 + n * 1000, "duration_s": 300.0 + n, **kw}


@pytest.fixture
def repo(tmp_path):
    git_repo(tmp_path)
    r = research.Repo(tmp_path)
    rng = random.Random(7)
    lines = [json.dumps(config())]
    for n in range(1, 301):
        status = rng.choice(["keep", "discard", "discard", "crash"])
        lines.append(json.dumps(run(n, status, None if status == "crash" else round(rng.uniform(1, 2), 4))))
    (tmp_path / log.LOG_NAME).write_text("\n".join(lines) + "\n")
    return r


def shown(repo):
    """(status object via the cache, warnings, whether the cache was used)."""
    warnings = []
    v = logcache.view(repo, warn=warnings.append)
    return summary.status_from(repo, v.config, v.summary, v.last_runs, v.total_runs, v.totals), warnings, v.cached


def truth(repo):
    warnings = []
    night = log.load(repo.log, warn=warnings.append)
    return summary.status_object(repo, night), warnings


def check(repo, expect_cached=None):
    got, got_warnings, cached = shown(repo)
    want, want_warnings = truth(repo)
    assert got == want
    assert got_warnings == want_warnings
    if expect_cached is not None:
        assert cached == expect_cached
    return got


def append(repo, *records, raw=None):
    with open(repo.log, "a", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
        if raw is not None:
            f.write(raw)


def test_every_change_to_the_log_reads_as_the_whole_log_does(repo):
    check(repo, expect_cached=False)
    check(repo, expect_cached=True)                     # unchanged: the view of the last read
    append(repo, run(301, "keep", 0.5))
    assert check(repo, expect_cached=True)["best"]["run"] == 301   # only the new line was read
    append(repo, raw="{not json}\n")
    check(repo, expect_cached=True)                     # a malformed line warns, with its number
    append(repo, run(302, "discard", 0.6, code="code301", repeat_of=301))
    check(repo, expect_cached=True)                     # a re-measurement moves the best's value
    append(repo, config(name="second"), run(303, "keep", 3.0))
    assert check(repo)["segment"] == 1                  # a new segment in the tail
    append(repo, raw=json.dumps(run(304, "keep", 2.0)))  # a last line without a newline counts
    assert check(repo)["best"]["run"] == 304
    append(repo, raw="\n")
    check(repo)
    append(repo, raw='{"run": 305, "status": "ke')      # torn: skipped with a warning
    check(repo)
    # a later keep of code that earlier discards re-measured makes them noise samples after the fact
    append(repo, raw="\n")
    append(repo, run(306, "discard", 2.5, code="codeX", repeat_of=303), run(307, "keep", 1.9, code="codeX"))
    check(repo)


def test_a_log_cut_rewritten_or_replaced_is_read_again(repo):
    check(repo)
    data = open(repo.log, "rb").read()
    with open(repo.log, "wb") as f:               # cut: fewer lines than the cache covers
        f.write(data[: len(data) // 2].rsplit(b"\n", 1)[0] + b"\n")
    check(repo, expect_cached=False)
    lines = open(repo.log, "rb").read().split(b"\n")
    lines[-2] = lines[-2].replace(b'"discard"', b'"keep"  ').replace(b'"crash"', b'"keep" ')
    with open(repo.log, "wb") as f:               # same length, last line changed
        f.write(b"\n".join(lines))
    check(repo, expect_cached=False)
    lines[3] = lines[3].replace(b'"idea', b'"IDEA')
    with open(repo.log, "wb") as f:               # an earlier line changed, same size: the chain's job;
        f.write(b"\n".join(lines))                # the cache's key (size, last line) cannot see it
    shutil.copy(repo.log, repo.log + ".new")
    os.replace(repo.log + ".new", repo.log)      # replaced by another file (new inode): read again
    check(repo, expect_cached=False)


def forge(repo, name, mutate):
    path = os.path.join(repo.root, ".autoresearch", "cache", name)
    with open(path, "rb") as f:
        mac, _, payload = f.read().partition(b"\n")
    data = json.loads(payload)
    mutate(data)
    payload = json.dumps(data).encode()
    with open(path, "wb") as f:
        f.write(mac + b"\n" + payload)     # the old MAC: forged without the key
    return path


@pytest.mark.parametrize("name", ["log-view.json", "log-state.json"])
def test_a_forged_or_corrupted_cache_never_changes_what_is_shown(repo, name):
    append(repo, run(301, "discard", 1.9))
    honest = check(repo)
    check(repo)    # both files now exist
    if name == "log-state.json":
        os.unlink(os.path.join(repo.root, ".autoresearch", "cache", "log-view.json"))

    def fake_best(data):
        if "summary" in data:
            data["summary"]["best_value"] = 0.0001
            data["summary"]["counts"]["keep"] = 999
        else:
            data["tally"]["groups"] = {k: [0.0001] for k in data["tally"]["groups"]}
    forge(repo, name, fake_best)
    assert check(repo)["best"]["metric"] != 0.0001
    folder = os.path.join(repo.root, ".autoresearch", "cache")
    path = os.path.join(folder, name)

    def only_this_file():   # the view of an unchanged log would answer first
        if name == "log-state.json" and os.path.exists(os.path.join(folder, "log-view.json")):
            os.unlink(os.path.join(folder, "log-view.json"))
    for junk in (b"", b"\n", b"garbage", os.urandom(4000), b"0" * 64 + b"\n{}"):
        only_this_file()
        with open(path, "wb") as f:
            f.write(junk)
        check(repo)
    # signed with the right key but inconsistent inside: still refused, never a crash
    key = open(os.path.join(repo.root, ".git", "autoresearch", logcache.KEY_NAME), "rb").read()
    shutil.rmtree(folder)
    check(repo)
    with open(path, "rb") as f:
        _, _, payload = f.read().partition(b"\n")
    data = json.loads(payload)
    for broken in ({"identity": data["identity"]}, dict(data, offset=-5), dict(data, offset="x"),
                   dict(data, tally=None, summary=None, last_runs=[{"run": "x"}])):
        body = json.dumps(broken).encode()
        only_this_file()
        with open(path, "wb") as f:
            f.write(hmac.new(key, body, hashlib.sha256).hexdigest().encode() + b"\n" + body)
        check(repo)
    assert check(repo)["counts"]["keep"] == honest["counts"]["keep"]


def test_a_cache_from_another_repo_is_not_taken(repo, tmp_path):
    check(repo)
    other = tmp_path / "other"
    shutil.copytree(repo.root, other)     # the same log, the same key: a copy of the whole repo
    append(research.Repo(other), run(301, "keep", 0.1))
    os.replace(os.path.join(other, ".autoresearch", "cache", "log-view.json"),
               os.path.join(repo.root, ".autoresearch", "cache", "log-view.json"))
    check(research.Repo(other))
    assert check(repo)["best"]["metric"] != 0.1   # the other repo's view is not this repo's


def test_on_a_hash_chained_log_only_the_engines_continuation_is_read_from_the_cache(repo):
    """With a chain tip in the git directory (chain.py), a new tail is taken from the cache only
    when each record links to the one before and the tip names its last line; anything else
    (a line appended by the benchmark, even with the right `prev`) makes the whole log be read,
    where the chain is checked."""
    tip_dir = os.path.join(repo.root, ".git", "autoresearch")
    lines, prev = [], "0" * 32
    for raw in open(repo.log, "rb").read().splitlines():
        record = json.loads(raw)
        record["prev"] = prev
        line = json.dumps(record, separators=(",", ":")).encode()
        prev = hashlib.sha256(line).hexdigest()[:32]
        lines.append(line)

    def write_tip(before, last):
        os.makedirs(tip_dir, exist_ok=True)
        with open(os.path.join(tip_dir, "tip.json"), "w") as f:
            json.dump({"hash": last, "before": before, "size": os.path.getsize(repo.log)}, f)
    with open(repo.log, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    write_tip(hashlib.sha256(lines[-2]).hexdigest()[:32], prev)
    check(repo, expect_cached=False)
    check(repo, expect_cached=True)
    record = dict(run(301, "keep", 0.5), prev=prev)     # the engine's next record
    line = json.dumps(record, separators=(",", ":")).encode()
    with open(repo.log, "ab") as f:
        f.write(line + b"\n")
    before, prev = prev, hashlib.sha256(line).hexdigest()[:32]
    write_tip(before, prev)
    check(repo, expect_cached=True)
    forged = json.dumps(dict(run(302, "keep", 0.0001), prev=prev), separators=(",", ":")).encode()
    with open(repo.log, "ab") as f:                     # the benchmark's: the tip does not name it
        f.write(forged + b"\n")
    check(repo, expect_cached=False)
