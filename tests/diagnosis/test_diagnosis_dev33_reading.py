"""Classes behind dev33's first-measurement misses (rule round r9), pinned with short lines in the shape of the
real messages (the corpus id each shape came from is named)."""

from gpu_train_debug import corpus, diagnose, logtext

TEMPLATE = corpus.template_config()


def run(text):
    return diagnose(text, dict(TEMPLATE), {"status": "crash"})


def test_a_terminal_hard_wrap_at_the_window_width_is_joined_again():
    # vlm-r1-257: every line cut at the terminal's column, mid-word (`ProcessGroupNCCL'` / `s watchdog got stuck`).
    width = 72
    message = ("[rank6]:[E429 13:55:49.384 ProcessGroupNCCL.cpp:1743] [PG ID 0 Rank 6] ProcessGroupNCCL's watchdog "
               "got stuck for 480 seconds without making progress in monitoring enqueued collectives. This typically "
               "indicates a NCCL/CUDA API hang blocking the watchdog.")
    wrapped = "\n".join(message[i:i + width] for i in range(0, len(message), width))
    assert max(len(line) for line in wrapped.split("\n")) == width
    text = logtext.normalise(wrapped)
    assert "ProcessGroupNCCL's watchdog got stuck for 480 seconds" in text
    assert run(wrapped)["family"] == "DISTRIBUTED"


def test_lines_of_one_width_that_start_new_records_or_draw_rules_stay_apart():
    # A rank's new record (`[rank1]:`), a traceback and a ruler line are never glued to the line above.
    rule = "=" * 80
    body = "\n".join(["[rank0]: " + "x" * 71, "[rank1]: " + "y" * 71, "Traceback (most recent call last):",
                      rule, "z" * 80, "  File \"train.py\", line 3, in <module>"])
    assert logtext.unwrap_terminal_width(body) == body
    short = "\n".join(["a" * 40] * 5)
    assert logtext.unwrap_terminal_width(short) == short
    # Progress bars padded to one width end a record; they are not cut inside a word.
    bars = "\n".join(f"Epoch {i}: 100%|##########| 50/50 [00:0{i}<00:00, 9.{i}it/s, loss=0.{i}2]".ljust(80) for i in range(5))
    text = bars + "\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert logtext.unwrap_terminal_width(text) == text
    # Records of one fixed format (nccl-290's `host:pid:tid [2] NCCL INFO ...`) and a rank's argparse lines
    # (cpt-65: `...: --local_rank=2` then `usage: train.py`) are not wraps, whatever their lengths.
    ring = "\n".join(f"gpu2-ru7:2144:255{i} [{i}] NCCL INFO Ring 00 : {i}[3d000] -> 3[3e000] via direct shared memory"
                      for i in range(5))
    assert logtext.unwrap_terminal_width(ring) == ring
    argv = "\n".join(f"train.py: error: unrecognized arguments: --local_rank={i}".rjust(70, "x") + "\nusage: train.py [-h]"
                      for i in range(4))
    assert logtext.unwrap_terminal_width(argv) == argv
    # Under a quote-reply's `> ` markers the wrapped pieces are joined without the markers.
    quoted = "\n".join("> " + line for line in ("x" * 60 + "ab", "cd" + "y" * 60, "zz" * 31, "ef" + "w" * 20))
    assert logtext.unwrap_terminal_width(quoted).split("\n")[0].startswith("> " + "x" * 60 + "abcd" + "y" * 60)


def test_progress_lines_of_one_width_stay_apart_quoted_or_not():
    # A training log's step lines all end at one column, and the step number changes the first characters
    # every ten steps (`step 00999` then `step 01000`): the next record of the same format, not a wrapped
    # word, also when every line carries a quote-reply's `> ` marker.
    steps = [f"step {i:05d} | loss: {9 - i / 1000:.6f} | dt: 312ms | tok/sec: 1,680,112 | remaining: {300 - i % 100:03d}s"
             for i in range(960, 1060)]
    for text in ("\n".join(steps), "\n".join("> " + line for line in steps)):
        assert logtext.unwrap_terminal_width(text).count("\n") == len(steps) - 1


def test_inline_triple_backticks_in_a_sentence_are_marks_not_words():
    # nanogpt-383: "the loss starts returning ```NaN values```" (markdown's code marks used inline).
    said = ("All goes well until around ```60,000 iterations```, where the loss starts returning ```NaN values```  "
            "despite gradient scaling working well with float16.")
    assert "```" not in logtext.normalise(said)
    assert run(said)["family"] == "NAN_LOSS"
    # A fence alone on its line is not an inline mark.
    assert not logtext.INLINE_FENCE.search("```\nKilled\n```\n")


def test_pad_sequence_handed_no_padding_value_is_a_tokenizer_without_a_pad_token():
    # mgm-6, moe-llava-69: a collator pads with tokenizer.pad_token_id, which is None for Qwen's tokenizer.
    out = run("TypeError: pad_sequence(): argument 'padding_value' (position 3) must be float, not NoneType\n")
    assert (out["family"], out["codes"]) == ("TOKENIZER", ["TOKENIZER_NO_PAD_TOKEN"])


def test_a_keyerror_on_a_data_items_field_is_the_data_even_in_the_projects_own_code():
    # ttrl-20: verl's reward manager (vendored, not under site-packages) reads the data item's field.
    text = ('Traceback (most recent call last):\n'
            '  File "/workspace/TTRL/verl/verl/workers/reward_manager/ttrl.py", line 203, in _compute_eval_reward\n'
            '    ground_truth = data_item.non_tensor_batch["reward_model"]["ground_truth"]\n'
            "KeyError: 'reward_model'\n")
    out = run(text)
    assert (out["family"], out["codes"]) == ("DATA", ["DATASET_KEY"])
    # The same KeyError on a settings dict read in the project's code stays the code's own.
    code = text.replace('data_item.non_tensor_batch["reward_model"]["ground_truth"]', 'self.cfg["reward_model"]')
    assert run(code)["family"] != "DATA"
