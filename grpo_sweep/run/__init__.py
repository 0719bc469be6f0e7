"""One training run: its context, config checks, training, evaluation and the files it writes."""
