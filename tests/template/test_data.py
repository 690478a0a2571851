"""prepare.py: tokenizer, best-fit packing, data sources, evaluate_bpb."""

import json
import math
import subprocess

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from .template_helpers import load_packing_benchmark, prepare_cmd

packing = load_packing_benchmark()


def test_tokenizer_round_trips_text_and_counts_bytes(modules):
    prepare, _ = modules
    tok = prepare.Tokenizer.from_directory()
    token_bytes = prepare.get_token_bytes()
    samples = ["Ada is a red fox from the forest.", "  spaces\tand\nnewlines\n\n", "numbers 12345 and 3.14",
               "unicode: café, 你好, emoji 🙂", "Never-seen-word Zyxwvut!"]
    for text in samples:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        # bits per byte needs every token's UTF-8 length: they add up to the text's byte length
        assert int(token_bytes[torch.tensor(ids)].sum()) == len(text.encode("utf-8"))
    bos = tok.get_bos_token_id()
    with_bos = tok.encode(samples, prepend=bos)
    assert all(ids[0] == bos for ids in with_bos)
    assert int(token_bytes[bos]) == 0, "special tokens carry no text bytes"


def test_karpathys_byte_count_is_never_below_ours_so_his_bpb_is_never_above(modules):
    """What references/gpu-guide.md says of the two figures: the same nats, his bytes >= ours token
    by token (a token that is not whole UTF-8 decodes to U+FFFD, 3 bytes a broken piece), equal
    exactly for the tokens that are whole characters; so val_bpb_karpathy <= val_bpb."""
    prepare, _ = modules
    tok = prepare.Tokenizer.from_directory()
    ours, his = prepare.get_token_bytes().tolist(), prepare.get_token_bytes(variant="karpathy").tolist()
    split = 0
    for i in range(tok.get_vocab_size()):
        raw = tok.enc.decode_single_token_bytes(i)
        try:
            raw.decode("utf-8")
            whole = True
        except UnicodeDecodeError:
            whole, split = False, split + 1
        assert his[i] >= ours[i] and (his[i] == ours[i]) == whole, (i, raw, ours[i], his[i])
    assert split > 0   # byte-level BPE: the lone bytes 0x80-0xff are tokens of their own
    # A text whose tokens split a character: his count exceeds its true length, ours equals it.
    ids = tok.encode("emoji 🙂 and 你好")
    assert sum(ours[t] for t in ids) == len("emoji 🙂 and 你好".encode("utf-8"))
    assert sum(his[t] for t in ids) >= sum(ours[t] for t in ids)


def _corpus(lengths, bos=1):
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = (np.arange(offsets[-1]) % 250 + 2).astype(np.uint16)
    tokens[offsets[:-1]] = bos
    return tokens, offsets


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 90), min_size=1, max_size=120),
       capacity=st.integers(2, 64), buffer_size=st.integers(1, 40), rows=st.integers(1, 4))
def test_bucketed_packing_equals_a_best_fit_scan(modules, lengths, capacity, buffer_size, rows):
    prepare, _ = modules
    tokens, offsets = _corpus(lengths)
    ours = prepare.packed_rows(tokens, offsets, rows, capacity, buffer_size, chunk=7)
    ref = packing.reference_rows(packing.list_chunks(tokens, offsets, chunk=7), rows, capacity, buffer_size)
    for _ in range(3):
        a, _ = next(ours)
        b, _ = next(ref)
        assert np.array_equal(a, b.numpy())


def test_loader_rows_start_with_bos_and_have_no_padding(modules):
    prepare, _ = modules
    tok = prepare.Tokenizer.from_directory()
    bos = tok.get_bos_token_id()
    tokens, offsets = prepare.load_split("train")
    doc_tokens = set(np.unique(np.asarray(tokens)).tolist())
    loader = prepare.make_dataloader(tok, 8, 64, "train")
    for _ in range(5):
        x, y, epoch = next(loader)
        assert x.shape == y.shape == (8, 64) and x.dtype == torch.long
        assert (x[:, 0] == bos).all(), "every row starts with BOS"
        assert torch.equal(x[:, 1:], y[:, :-1]), "targets are the inputs shifted by one"
        # full rows of real document tokens: no pad id, nothing outside the corpus
        assert set(torch.unique(torch.cat([x, y])).tolist()) <= doc_tokens
        assert epoch == 1
    # every slot is filled: rows * (T+1) tokens per batch, from whole documents or crops
    docs, takes = prepare.BestFitPacker(prepare._doc_chunks(offsets), 65, 1000).pack(8)
    assert sum(takes) == 8 * 65


def test_evaluate_bpb_matches_a_hand_computation(modules, monkeypatch):
    prepare, train = modules
    tok = prepare.Tokenizer.from_directory()
    vocab = tok.get_vocab_size()
    token_bytes = prepare.get_token_bytes().tolist()

    class FixedModel(torch.nn.Module):
        """Loss of each target = (target id mod 5) / 10 nats, whatever the context."""
        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):   # the harness passes inputs only; it has the targets
            return torch.zeros(*x.shape, vocab) + 0 * self.p   # uniform: ln(vocab) nats per token

    monkeypatch.setattr(prepare, "MAX_SEQ_LEN", 16)
    got, _, tokens = train.harness.evaluate_split(FixedModel(), 2, "val", 3 * 2 * 16, probe=False)
    assert tokens == 3 * 2 * 16

    loader = prepare.make_dataloader(tok, 2, 16, "val")
    nats = nbytes = 0
    for _ in range(3):
        _, y, _ = next(loader)
        for t in y.reshape(-1).tolist():
            if token_bytes[t] > 0:
                nats += math.log(vocab)
            nbytes += token_bytes[t]
    assert got == pytest.approx(nats / (math.log(2) * nbytes), rel=1e-6)  # float32 sums
    assert vocab > 256
    # prepare.evaluate_bpb (karpathy/autoresearch's call) is the same measurement on EVAL_TOKENS.
    monkeypatch.setattr(prepare, "EVAL_TOKENS", 3 * 2 * 16)
    model = FixedModel().train()
    assert prepare.evaluate_bpb(model, tok, 2) == pytest.approx(got, rel=1e-9)
    assert model.training   # left as it was found


def _run_prepare(repo, env, *args, cache):
    return subprocess.run(prepare_cmd(repo, *args), env=dict(env, AUTORESEARCH_CACHE=str(cache)),
                          capture_output=True, text=True, timeout=120)


def test_offline_download_fails_in_one_line_and_keeps_prepared_data(research_repo, tmp_path):
    repo, env = research_repo
    cache = tmp_path / "cache"
    ok = _run_prepare(repo, env, "--source", "synthetic", "--profile", "smoke", cache=cache)
    assert ok.returncode == 0, ok.stderr
    before = (cache / "prepared" / "manifest.json").read_text()
    for source in ("climbmix", "tinystories"):
        done = subprocess.run(prepare_cmd(repo, "--source", source),
                              env=dict(env, AUTORESEARCH_CACHE=str(cache), HF_ENDPOINT="http://127.0.0.1:9"),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("prepare.py: cannot reach Hugging Face")
        assert "--source synthetic" in lines[0] and "--source PATH" in lines[0]
    assert (cache / "prepared" / "manifest.json").read_text() == before


def test_the_holdout_is_disjoint_from_train_and_val_by_documents(research_repo, tmp_path):
    """Every document of a --source file is unique text: no holdout document is in train or val."""
    repo, env = research_repo
    src = tmp_path / "corpus.txt"
    src.write_text("\n\n".join(f"document number {i} says {i * 7919 % 1000} things." for i in range(1000)))
    done = _run_prepare(repo, env, "--source", str(src), "--profile", "smoke", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    import numpy as np
    import pickle
    d = tmp_path / "cache" / "prepared"
    enc = pickle.loads((d / "tokenizer.pkl").read_bytes())
    manifest = json.loads((d / "manifest.json").read_text())

    def docs(split):
        tokens = np.fromfile(d / f"{split}.bin", dtype=manifest["splits"][split]["dtype"])
        offsets = np.load(d / f"{split}.idx.npy")
        return {enc.decode(tokens[a + 1:b].tolist()) for a, b in zip(offsets[:-1], offsets[1:])}

    train, val, holdout = docs("train"), docs("val"), docs("holdout")
    assert len(holdout) == 19 and len(val) == 50 and len(train) == 1000 - 50 - 19
    assert not (holdout & train) and not (holdout & val) and not (train & val)


def test_long_documents_from_a_source_are_split(modules):
    prepare = modules[0]
    book = "\n".join(f"line {i} of a long book with no blank lines at all" for i in range(5000))
    pieces = list(prepare.split_long([book, "short"]))
    assert len(pieces) > 3 and all(len(p) <= prepare.LONG_DOC_CHARS for p in pieces)
    assert "".join(p + "\n" for p in pieces[:-1]).split() == book.split() and pieces[-1] == "short"


def test_climbmix_path_uses_downloaded_shards_with_the_last_pinned_as_val(research_repo, tmp_path):
    """The real climbmix code path up to the network: shards already in the cache are used, offline."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    repo, env = research_repo
    cache = tmp_path / "cache"
    (cache / "climbmix").mkdir(parents=True)
    pq.write_table(pa.table({"text": [f"train document {i} about apples" for i in range(300)]}),
                   cache / "climbmix" / "shard_00000.parquet")
    pq.write_table(pa.table({"text": [f"held out text {i}" for i in range(20)]}),
                   cache / "climbmix" / "shard_06542.parquet")
    pq.write_table(pa.table({"text": [f"hidden text {i}" for i in range(10)]}),
                   cache / "climbmix" / "shard_06541.parquet")   # the holdout shard
    done = subprocess.run(prepare_cmd(repo, "--source", "climbmix", "--num-shards", "1", "--profile", "smoke"),
                          env=dict(env, AUTORESEARCH_CACHE=str(cache), HF_ENDPOINT="http://127.0.0.1:9"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((cache / "prepared" / "manifest.json").read_text())
    assert manifest["source"] == "climbmix" and manifest["synthetic"] is False
    assert manifest["splits"]["train"]["docs"] == 300 and manifest["splits"]["val"]["docs"] == 20
    assert manifest["splits"]["holdout"]["docs"] == 10
    again = subprocess.run(prepare_cmd(repo, "--source", "climbmix", "--num-shards", "1", "--profile", "smoke"),
                           env=dict(env, AUTORESEARCH_CACHE=str(cache)), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "already prepared" in again.stdout


def test_local_sources_and_bad_input(research_repo, tmp_path):
    repo, env = research_repo
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("\n\n".join(f"Paragraph {i} of the first file." for i in range(50)))
    (folder / "b.jsonl").write_text("\n".join(json.dumps({"text": f"json doc {i}"}) for i in range(30)))
    (folder / "z.txt").write_text("validation one.<|endoftext|>validation two.")
    cache = tmp_path / "cache"
    done = _run_prepare(repo, env, "--source", str(folder), "--profile", "smoke", cache=cache)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((cache / "prepared" / "manifest.json").read_text())
    # every 50th training document is the hidden holdout
    assert manifest["splits"]["train"]["docs"] == 79 and manifest["splits"]["val"]["docs"] == 2
    assert manifest["splits"]["holdout"]["docs"] == 1
    assert manifest["val_file"] == "z.txt"
    before = (cache / "prepared" / "manifest.json").read_text()

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"body": "no text field"}\n')
    for source, expected in ((bad, "bad.jsonl:2: each JSONL line needs a \"text\" field"),
                             (tmp_path / "missing", "no such file or folder")):
        done = _run_prepare(repo, env, "--source", str(source), cache=cache)
        assert done.returncode == 1
        assert len(done.stderr.strip().splitlines()) == 1 and expected in done.stderr
    assert (cache / "prepared" / "manifest.json").read_text() == before, "a failed prepare keeps the old data"
    assert not list(cache.glob("prepared.tmp-*")), "no half-written scratch folder is left"


def test_synthetic_data_is_deterministic_labelled_and_fingerprinted(modules, research_repo, tmp_path, monkeypatch):
    prepare, _ = modules
    assert prepare.synthetic_docs(50, seed=3) == prepare.synthetic_docs(50, seed=3)
    assert prepare.synthetic_docs(50, seed=3) != prepare.synthetic_docs(50, seed=4)
    assert prepare.MANIFEST["synthetic"] is True and prepare.settings()["synthetic"] is True
    # a second preparation from scratch gives the same tokens, hence the same fingerprint
    repo, env = research_repo
    done = _run_prepare(repo, env, "--source", "synthetic", "--profile", "smoke", cache=tmp_path / "again")
    assert done.returncode == 0 and "SYNTHETIC" in done.stdout
    again = json.loads((tmp_path / "again" / "prepared" / "manifest.json").read_text())
    assert again["data_sha"] == prepare.MANIFEST["data_sha"]
    # any setting that changes what val_bpb means changes the fingerprint
    before = prepare.settings_fingerprint()
    monkeypatch.setattr(prepare, "TIME_BUDGET", prepare.TIME_BUDGET + 1)
    assert prepare.settings_fingerprint() != before
