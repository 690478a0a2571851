"""Classes read from dev31's misses and the earlier sets' host-OOM misses (rule round r7 of issue 21):
one short synthetic line each, in the shape of the real message (the corpus id it came from is named),
and the near misses that must not be read the same way."""

import pytest

from gpu_train_debug import diagnose

CASES = [
    # The OOM killer named in prose (hardnet-19-killed-by-oom-killer).
    ("When I run the train code , I get a error : killed by OOM killer", "OOM", "HOST_OOM_KILLED"),
    ("the job was killed by the Linux OOM-killer after epoch 3", "OOM", "HOST_OOM_KILLED"),
    # A terminal that showed nothing but the word (crossloc3d-2-pickle-load-killed-prose).
    ('After a long time the terminal shows "killed", which means that it fails to load the dataset.',
     "OOM", "HOST_OOM_KILLED"),
    ("it loads the pickle for a while and then just prints Killed.", "OOM", "HOST_OOM_KILLED"),
    # torch's OOM retyped from a screenshot with an article (unet-lits-6-retyped-oom-one-line).
    ("RuntimeError: CUDA out of the memory. Tried to allocate 360.00 MiB", "OOM", "OOM_TRAIN_ACTIVATIONS"),
    # datasets 4 refuses a dataset built by a loading script, quoted in a numbered list
    # (fairseq-5631-dataset-scripts-no-longer-supported).
    ("5. See error:  ... RuntimeError: Dataset scripts are no longer supported, but found librispeech_asr.py",
     "MISSING_DEPENDENCY", "PACKAGE_VERSION"),
    ("RuntimeError: Dataset scripts are no longer supported, but found common_voice_11_0.py",
     "MISSING_DEPENDENCY", "PACKAGE_VERSION"),
    # LLaMA-Factory dropped every record converting the data (llamafactory-9493-cannot-find-valid-samples).
    ("[rank0]: RuntimeError: Cannot find valid samples, check `data/README.md` for the data format.", "DATA", "DATA_FORMAT"),
    # A sequence-classification model without a pad token id (medicalgpt-417-no-padding-token-batch).
    ('    raise ValueError("Cannot handle batch sizes > 1 if no padding token is defined.")\n'
     "ValueError: Cannot handle batch sizes > 1 if no padding token is defined.", "TOKENIZER", "TOKENIZER_NO_PAD_TOKEN"),
]


@pytest.mark.parametrize("text,family,code", CASES)
def test_dev31_classes(text, family, code):
    result = diagnose(text)
    assert (result["family"], result["codes"][0]) == (family, code), result["explanation"]


NOT_THESE = [
    # A run killed by the user is not the OOM killer; an OOM killer that is only configured did nothing.
    ("the OOM killer is configured to spare sshd", "HOST_OOM_KILLED"),
    ("I killed the run with Ctrl-C after it printed the first loss", "HOST_OOM_KILLED"),
    # The word inside a longer sentence is no report of what the terminal showed.
    ("the log says killed processes are restarted by the supervisor", "HOST_OOM_KILLED"),
    # Ray's list of possible causes names the OOM killer without saying it acted.
    ("There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory "
     "usage. (2) ray stop --force is called.", "HOST_OOM_KILLED"),
    # Running out of the memory of another thing than the GPU is no CUDA OOM.
    ("the sampler ran out of the memory budget we gave it", "OOM_TRAIN_ACTIVATIONS"),
    # A dataset that is not a script, or another RuntimeError of datasets, names no datasets release.
    ("RuntimeError: Dataset generation failed: found no files for split train", "PACKAGE_VERSION"),
    # A pad token missing from the tokenizer is the collator's message, not the model config's one.
    ("ValueError: Cannot handle batch sizes > 1 if no attention mask is given.", "TOKENIZER_NO_PAD_TOKEN"),
]


@pytest.mark.parametrize("text,code", NOT_THESE)
def test_near_misses_are_not_read_as_the_class(text, code):
    assert code not in diagnose(text)["codes"]
