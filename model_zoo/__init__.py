"""Model zoo: real Hugging Face model code on the device under test, checked against CPU.

See ``docs/model_zoo.md``. Modules: :mod:`.registry` (tiny model configurations), :mod:`.inputs`,
:mod:`.compare` (comparison rules), :mod:`.dtypes` (dtypes under test), :mod:`.results` (check results),
:mod:`.case` (a check's case and the per-process reference cache), :mod:`.measure` (what each check
measures), :mod:`.generation` (greedy generation, the ``generate`` check), :mod:`.checks`
(forward/backward/train/router/compile and ``run_check`` dispatch),
:mod:`.localize` (divergence localizer), :mod:`.train_fixture` (trained generation fixture),
:mod:`.pretrained` (real weights, optional) and :mod:`.matrix` (text matrix of a run's records).
"""
