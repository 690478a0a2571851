"""Environment classes read from dev28's misses (rule round r4 of issue 21): one short synthetic line
each, in the shape of the real message (the corpus id it came from is named), and the near misses that
must not be read the same way."""

import pytest

from gpu_train_debug import diagnose

CASES = [
    # A DataLoader worker killed by the OOM killer, retyped without the space (yolop-133-dataloader-killed-signal-docker).
    ("RuntimeError:Dataloader worker (pid 6479) is killed by signal:killed", "OOM", "HOST_OOM_KILLED"),
    ("RuntimeError: DataLoader worker (pid 1620) is killed by signal: Killed.", "OOM", "HOST_OOM_KILLED"),
    # TensorFlow ignores a GPU below the capability its build needs (kiosk-console-87-tf-k80-below-minimum-capability).
    ("2018-11-20 19:30:26.065771: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1442] Ignoring visible gpu device "
     "(device: 0, name: Tesla K80, pci bus id: 0000:00:1e.0, compute capability: 3.7) with Cuda compute capability 3.7. "
     "The minimum required Cuda capability is 5.2.", "GPU_UNSUPPORTED", "GPU_TOO_OLD"),
    # A module without an attribute told in prose, capitalised (synthetic-grid-1-tf-no-get-default-graph).
    ("Attribute error when training\nModule 'tensorflow' has no attribute 'get_default_graph'",
     "MISSING_DEPENDENCY", "PACKAGE_VERSION"),
    # An environment of the pre-0.26 Gym API under gym>=0.26/gymnasium/sb3 2.x (super-ml-pets-66-env-no-render-mode-sb3).
    ("AttributeError: 'SuperAutoPetsEnv' object has no attribute 'render_mode'", "MISSING_DEPENDENCY", "PACKAGE_VERSION"),
    ("AttributeError: 'CartPoleWrapper' object has no attribute 'render_mode'", "MISSING_DEPENDENCY", "PACKAGE_VERSION"),
    # A config read with json.load in the project's code, the standard library of a Windows install typed in lower
    # case (pytorch-segmentation-149-config-json-invalid-escape).
    ('Traceback (most recent call last):\n  File "train.py", line 55, in <module>\n    config = json.load(open(args.config))\n'
     '  File "C:\\Users\\me\\python37\\lib\\json\\__init__.py", line 296, in load\n    parse_constant=parse_constant)\n'
     '  File "C:\\Users\\me\\python37\\lib\\json\\decoder.py", line 353, in raw_decode\n    obj, end = self.scan_once(s, idx)\n'
     'json.decoder.JSONDecodeError: Invalid \\escape: line 18 column 28 (char 338)', "CONFIG_INVALID", "CONFIG_VALUE"),
]


@pytest.mark.parametrize("text,family,code", CASES)
def test_dev28_environment_classes(text, family, code):
    result = diagnose(text)
    assert (result["family"], result["codes"][0]) == (family, code), result["explanation"]


NOT_THESE = [
    # A GPU that TensorFlow uses is no statement about its capability.
    ("I tensorflow/core/common_runtime/gpu/gpu_device.cc:1392] Found device 0 with properties: name: Tesla V100 "
     "major: 7 minor: 0", "GPU_TOO_OLD"),
    # render_mode missing on an object that is the project's own is still read only as the Gym API; another
    # attribute of an env is no release question.
    ("AttributeError: 'SuperAutoPetsEnv' object has no attribute 'action_mask'", "PACKAGE_VERSION"),
    # A worker killed by another signal than SIGKILL is not the OOM killer.
    ("RuntimeError: DataLoader worker (pid 77) is killed by signal: Terminated.", "HOST_OOM_KILLED"),
]


@pytest.mark.parametrize("text,code", NOT_THESE)
def test_near_misses_are_not_read_as_the_class(text, code):
    assert code not in diagnose(text)["codes"]


def test_project_dataset_assert_names_no_code_error():
    # A bare assert in the project's dataset module checks the data it read as often as the code
    # (stylegan2-ada-14-tfrecord-shapes-assert): no family, not a code error.
    text = ('Traceback (most recent call last):\n  File "train.py", line 108, in setup_training_options\n'
            '    dataset_obj = dataset.load_dataset(**args.train_dataset_args)\n'
            '  File "/content/stylegan2-ada/training/dataset.py", line 99, in _init_\n'
            '    assert all(shape[0] == max_shape[0] for shape in tfr_shapes)\nAssertionError')
    assert diagnose(text)["codes"] != ["CODE_ERROR"]
    # The same bare assert in a model's own forward stays the code's (ttt-video-dit-22-seq-len-multiple-mini-batch).
    text = text.replace("/content/stylegan2-ada/training/dataset.py", "/user/ttt/models/ssm/ttt_layer.py").replace("_init_", "forward")
    assert diagnose(text)["codes"] == ["CODE_ERROR"]
