"""How long `diagnose` takes on a 10,000-line training log, against reading that log.

    python benchmarks/diagnose_speed.py [--lines 10000] [--repeats 30]

The reference, measured in the same run on the same file, is what any tool must do anyway:
read the log and split it into lines. The result is the median of each and their ratio
(the issue's bar: diagnose under 50 ms for 10,000 lines).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
from autoresearch.pipeline.diagnosis import read_log  # noqa: E402
from gpu_train_debug import diagnose  # noqa: E402

CONFIG = {"DEPTH": 8, "ASPECT_RATIO": 64, "HEAD_DIM": 128, "TOTAL_BATCH_SIZE": 2 ** 19, "DEVICE_BATCH_SIZE": 128,
          "MAX_SEQ_LEN": 2048, "VOCAB_SIZE": 8192, "MATRIX_LR": 0.04, "GRAD_CHECKPOINTING": False}
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB "
       "of which 1.06 GiB is free. Including non-PyTorch memory, this process has 22.48 GiB memory in use. Of the "
       "allocated memory 21.90 GiB is allocated by PyTorch, and 120.31 MiB is reserved by PyTorch but unallocated.")


def make_log(lines):
    body = [f"step {i:05d} ({100 * i / lines:.1f}%) | loss: {9 - 6 * i / lines:.6f} | lrm: 1.00 | dt: 312ms | "
            f"tok/sec: 1,680,112 | mfu: 39.8% | epoch: 1 | remaining: {300 - 300 * i / lines:.0f}s"
            for i in range(lines - 4)]
    body += ["Traceback (most recent call last):", '  File "train.py", line 612, in <module>',
             "    loss = model(x, y)", OOM]
    return "\n".join(body) + "\n"


def median_ms(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "output.log")
        with open(path, "w") as handle:
            handle.write(make_log(args.lines))
        text = read_log(path)
        assert diagnose(text, CONFIG, {})["family"] == "OOM"
        reference = median_ms(lambda: open(path, encoding="utf-8").read().splitlines(), args.repeats)
        diag = median_ms(lambda: diagnose(text, CONFIG, {"status": "crash"}), args.repeats)
        end_to_end = median_ms(lambda: diagnose(read_log(path), CONFIG, {"status": "crash"}), args.repeats)
        # The same log as posted in a thread: quoted, coloured, CRLF, no config (a generic benchmark).
        messy = "".join(f"> \x1b[32m{line}\x1b[0m\r\n" for line in text.splitlines())
        assert diagnose(messy, {}, {})["family"] == "OOM"
        messy_ms = median_ms(lambda: diagnose(messy, {}, {"status": "crash"}), args.repeats)
    result = {"lines": args.lines, "bytes": len(text.encode()),
              "reference_read_split_ms": round(reference, 3), "diagnose_ms": round(diag, 3),
              "read_and_diagnose_ms": round(end_to_end, 3), "messy_generic_diagnose_ms": round(messy_ms, 3),
              "ratio_to_reference": round(diag / reference, 2)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
