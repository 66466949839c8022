"""The set-up: opening the two models and an engine from user settings (opening.py), which PRM runs
(prm_choice.py), what `--policy auto` runs here (auto_policy.py) and the GPU defaults (gpu.py)."""
