"""`python -m grpo_sweep.sweeps.next_seeds <sweep_dir>`: the runs a sweep's comparisons still need, as commands.
The seeds strategy's (search/seeds/next_seeds.py), here where a user runs the other commands on a sweep directory."""

import sys

from ..search.seeds.next_seeds import main

if __name__ == "__main__":
    sys.exit(main())
