"""Model zoo: real Hugging Face model code on the device under test, checked against CPU.

See ``docs/model_zoo.md``. Modules: :mod:`.registry` (tiny model configurations), :mod:`.inputs`,
:mod:`.compare` (comparison rules), :mod:`.checks` (forward/backward/train/generate/router/compile),
:mod:`.localize` (divergence localizer), :mod:`.train_fixture` (trained generation fixture),
:mod:`.pretrained` (real weights, optional) and :mod:`.matrix` (text matrix of a run's records).
"""
