"""grpo-sweep entry point: `python launch.py [overrides]`, `python launch.py -m <grid>`.

Kept thin and light: composing, validating and submitting must not import torch/trl (login nodes).
"""

import sys

import hydra
from omegaconf import DictConfig

from grpo_sweep.adapters.hydra import one_line_errors
from grpo_sweep.configstore import register_configs
from grpo_sweep.run.context import launch_import_path, use_import_path
from grpo_sweep.run.redact import install_log_redaction

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    from grpo_sweep.app import run_task

    return run_task(cfg)


if __name__ == "__main__":
    # the user's own modules (a reward's fn) import from the launch directory, in this process and every process
    # the launch starts
    use_import_path(launch_import_path())
    # every line on the terminal masked from the first (run/redact.py), Hydra's own included: a parse error echoes
    # the override as typed, a URL's password with it
    install_log_redaction()
    try:
        with one_line_errors("grpo-sweep: "):  # a typo'd key, a wrong type, an unknown option: one line
            main()
    except KeyboardInterrupt:  # the user's Ctrl-C before a run started (one that trains says more: app.interrupted)
        from grpo_sweep.app import INTERRUPTED

        print("grpo-sweep: interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED)
    # (a sweep goes on past a failed run and prints the table; its end, sweeps/sweep_end.py, then exits 1)
