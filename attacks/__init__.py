"""TextAttack recipes and the resources they run on (see attacks/resources.py).

Nothing here imports textattack at import time: only Resources.textattack() does, after prepare()."""
