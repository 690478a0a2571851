"""How a crash pasted in another form is read: notebook tracebacks (Jupyter's `Cell In[3], line 5` and
`File path:N, in f(...)`, IPython 7's and Colab's `path in f(args)` with the line on a `-->` arrow), VS Code's
`Exception has occurred: X` widget, rich's boxed frames, an error quoted in a sentence, the run's output
followed by a shutdown tail. Shapes are cut from corpus logs (tests/diagnosis/corpus/, dev30 unless named).
"""

import sys
from pathlib import Path

from gpu_train_debug import corpus, diagnose, evidence, logtext

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paste_forms  # noqa: E402

TEMPLATE = corpus.template_config()


def run(text):
    return diagnose(text, dict(TEMPLATE), {"status": "crash"})


def chain(text):
    return evidence.read(logtext.normalise(text)).chain


PLAIN = ('Traceback (most recent call last):\n'
         '  File "/home/u/proj/train.py", line 10, in <module>\n    trainer = Trainer(model, args)\n'
         '  File "/usr/lib/python3.10/site-packages/transformers/trainer.py", line 429, in __init__\n'
         '    raise ValueError("train_dataset does not implement __len__, max_steps has to be specified")\n'
         'ValueError: train_dataset does not implement __len__, max_steps has to be specified\n')


def test_notebook_frames_are_frames_with_the_line_they_ran():
    # indo-bert-1: IPython 7 names the frame `path in f(args)` and gives the line on the `-->` arrow below it.
    old = ("ValueError                                Traceback (most recent call last)\n"
           "<ipython-input-29-fa849952eb61> in <module>\n     13     eval_dataset=eval_dataset,\n"
           "---> 14     compute_metrics=compute_metrics,\n     15 )\n\n"
           "/env/lib/python3.6/site-packages/transformers/trainer.py in __init__(self, model, args)\n"
           "    428         if train_dataset is not None:\n"
           '--> 429             raise ValueError("train_dataset does not implement __len__")\n    430 \n\n'
           "ValueError: train_dataset does not implement __len__, max_steps has to be specified\n")
    link = chain(old)[-1]
    assert [(f.line, f.function) for f in link.frames] == [(14, "<module>"), (429, "__init__")]
    assert link.raised_in == "transformers"
    # unsloth-2791: Colab links the path: `[/usr/.../training_args.py](https://localhost:8080/#) in __post_init__(self)`.
    colab = ("[/usr/local/lib/python3.11/dist-packages/transformers/training_args.py](https://localhost:8080/#) in __post_init__(self)\n"
             "   1691                         # gpu\n-> 1692                         raise ValueError(error_message)\n\n"
             "ValueError: Your setup doesn't support bf16/gpu.\n")
    assert chain(colab)[-1].frames[-1].file.endswith("transformers/training_args.py")
    # Jupyter 8: `Cell In[3], line 2` is the user's cell; the arrowed source goes right under its frame.
    text = logtext.normalise("Cell In[4], line 2\n      1 models = M(\n----> 2    generator=torch.compile(g)\n      3 )\n")
    assert text.split("\n")[:2] == ['File "<cell In[4]>", line 2, in <module>', "    generator=torch.compile(g)"]


def test_a_jupyter_header_does_not_cut_the_chain_it_opens():
    # Jupyter's `KeyError    Traceback (most recent call last)` header counts only when its own exception
    # line was not printed (train stablecascade-33 is cut before it); a chained traceback keeps its cause.
    chained = paste_forms.jupyter(PLAIN.replace("ValueError: train", "KeyError: train") + "\nDuring handling of the above "
                                  "exception, another exception occurred:\n\n" + PLAIN)
    assert [link.name for link in chain(chained)] == ["KeyError", "ValueError"]
    cut = "ValueError                                Traceback (most recent call last)\nCell In[4], line 2\n----> 2 f()\n"
    assert logtext.last_exception(logtext.normalise(cut)).name == "ValueError"


def test_rich_boxed_frames_are_frames_and_the_box_is_a_traceback():
    # open-assistant-3231 (accelerate's rich box); a path too long for the box wraps onto the next box line.
    box = ("╭──────────── Traceback (most recent call last) ────────────╮\n"
           "│ /root/miniconda3/lib/python3.10/site-packages/accelerate/commands/launch.p │\n"
           "│ y:567 in simple_launcher                                                   │\n"
           "│                                                                            │\n"
           "│    566 │   if process.returncode != 0:                                     │\n"
           "│ ❱  567 │   │   raise subprocess.CalledProcessError(returncode=1, cmd=cmd)  │\n"
           "╰────────────────────────────────────────────────────────────────────────────╯\n"
           "CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status 1.\n")
    text = logtext.normalise(box)
    assert text.split("\n")[0] == logtext.TRACEBACK + ":"
    frame = chain(box)[-1].frames[-1]
    assert (frame.file, frame.line, frame.library) == (
        "/root/miniconda3/lib/python3.10/site-packages/accelerate/commands/launch.py", 567, "accelerate")
    assert "raise subprocess.CalledProcessError(returncode=1, cmd=cmd)" in text.split("\n")[3]


def test_vscode_widget_is_an_exception_whose_frames_are_only_the_users():
    # annotatedtransformer-3: the widget's frames are justMyCode, so a library's refusal is not the script's bug.
    widget = ("Exception has occurred: ValueError\nOriginal column names {'1', '0'} not in the dataset. Current columns in "
              "the dataset: ['text']\n  File \"/home/u/proj/train.py\", line 1951, in <module>\n"
              "    train_dataset = train_dataset.rename_columns({'0': 'english', '1': 'chinese'})\n")
    assert chain(widget)[-1].text().startswith("ValueError: Original column names")
    assert chain(widget)[-1].frames == []
    assert run(widget)["codes"] == ["DATASET_KEY"]
    # mcenet-4: the widget without frames.
    assert run("Exception has occurred: FileNotFoundError\n[Errno 2] No such file or directory: '../data/HC/merged'\n"
               )["family"] == "DATA"


def test_what_a_run_prints_after_its_failure_does_not_decide():
    # An `Exception ignored in` traceback (a destructor at shutdown) and wandb's summary after the error.
    base = run(PLAIN)
    tailed = run(paste_forms.shutdown_tail(PLAIN))
    assert (tailed["family"], tailed["codes"]) == (base["family"], base["codes"])
    assert "Exception ignored" not in logtext.normalise(paste_forms.shutdown_tail(PLAIN))
    # openrlhf-305: Ray lists what might have killed a worker; none of it is evidence.
    ray = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
           "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
           "Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. "
           "(1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called.\n")
    assert run(ray)["family"] == "UNKNOWN"


def test_quotes_and_code_marks_around_what_the_run_said():
    # kingdra-2: an inline-code span opened before a timestamp and closed after the shell's report.
    killed = "`2020-11-24 20:18:25.069 - 24s - loss: 5.9945\n\n2020-11-24 20:22:28.106 /bin/bash: line 27: 318 Killed sh start.sh`\n"
    assert logtext.normalise(killed).split("\n")[2] == "/bin/bash: line 27: 318 Killed sh start.sh"
    assert run(killed)["codes"] == ["HOST_OOM_KILLED"]
    # An exception quoted inside a sentence: its message ends at the closing quote, and the settings rules read it.
    said = "When I run train.py I get `ValueError: max_steps has to be specified` after a few seconds, any idea?"
    assert run(said)["codes"] == ["CONFIG_VALUE"]


def test_a_lookup_that_fails_in_a_notebook_cell_is_not_by_itself_a_code_error():
    # dev22 aktwelve-tutorials-4: `coco_json['categories']` in a cell that reads an annotation file.
    cell = ("KeyError                                  Traceback (most recent call last)\n"
            "<ipython-input-6-5aee722e418a> in load_data(self, annotation_json, images_dir)\n"
            "---> 18         for category in coco_json['categories']:\n\nKeyError: 'categories'\n")
    # Not a code error; the key is the field its statement read from a JSON record (r5's rule): the data's.
    assert run(cell)["codes"] == ["DATASET_KEY"]
    assert run(cell.replace("KeyError", "NameError").replace("'categories'", "name 'x' is not defined"))["codes"] == ["CODE_ERROR"]


def test_a_launchers_report_in_a_notebook_defers_to_the_childs_error():
    # dev8 kohya-3268 pasted from Jupyter: the report's own header is not the child's error.
    text = ("ValueError: adafactor:2e-06 does not require `num_warmup_steps`. Set None or 0.\n" + "-" * 75 + "\n"
            "subprocess.CalledProcessError             Traceback (most recent call last)\n"
            "File ~\\venv\\Lib\\site-packages\\accelerate\\commands\\launch.py:785, in simple_launcher(...)\n"
            "--> 785 raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n\n"
            "subprocess.CalledProcessError: Command '['python.exe', 'sdxl_train_network.py']' returned non-zero exit status 1.\n")
    assert run(text)["codes"] == ["CONFIG_VALUE"]


def test_class_entries_for_the_ways_dev30_said_it():
    cases = {
        # genshin-auto-fish-165: a torch built without CUDA has no torch._C._cuda_* bindings.
        "AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'": "NO_CUDA_DEVICE",
        # simple-faster-rcnn-206: Python Fire refusing the notebook kernel's arguments; optparse's words.
        "ERROR: Cannot find key: -f\nUsage: ipykernel_launcher.py <group|command>\n": "USAGE_ERROR",
        "ERROR: Could not consume arg: --epochs\nUsage: finetune.py <flags>\n": "USAGE_ERROR",
        "Usage: ipykernel_launcher.py [options]\n\nipykernel_launcher.py: error: no such option: -f\n": "USAGE_ERROR",
        # paddle-diou-yolov3-1: the loss told NaN in Chinese.
        "在训练不到一个epoch时候loss变为nan，减小学习率也不行": "LOSS_DIVERGED",
        # zsh's report of a child SIGKILL ended.
        "zsh: killed     python train.py --batch 64": "HOST_OOM_KILLED",
    }
    for text, code in cases.items():
        assert run(text)["codes"] == [code], text
    # Near misses: another torch attribute stays a torch too old; a loss that is not NaN names nothing.
    assert run("AttributeError: module 'torch' has no attribute 'compile'")["codes"] == ["TORCH_TOO_OLD"]
    assert run("loss变为0.35，训练正常")["family"] == "UNKNOWN"


def test_paste_forms_keep_the_diagnosis():
    # The generality check over the non-blind corpus (tests/diagnosis/paste_forms.py): notebook, rich,
    # Windows, translated, quoted, markdown and shutdown-tail forms change no diagnosis the plain log gets
    # right; VS Code's justMyCode frames and a bare error line lose what only the frames said.
    result = paste_forms.check()
    for form in ("jupyter", "old_ipython", "rich", "windows", "foreign", "shutdown_tail", "markdown"):
        assert result[form][1] == 0, (form, result[form][2][:5])
    assert result["in_sentence"][1] <= result["one_line"][1]
    # 68 at dev30's round; 78 with dev28 and dev29 merged (their one-line and VS Code forms lose the frames
    # that decided them: a Windows config read, a model's remote code, a Keras setting); with dev31 and dev32
    # 85: dev31 adds five (a KeyError read in the project's own code, an `assert os.path.exists(...)` on a data
    # path: the bare lines carry neither) and dev32 two (hcgf-15's JSONDecodeError is data only by its
    # data_loader.py frames), in the one-line, quoted and VS Code forms.
    assert sum(changed for _, changed, _ in result.values()) <= 85
