"""What a user runs on a sweep directory, and the end of a ``-m`` sweep: ``status``, ``report``, ``next_seeds`` and the
end-of-sweep callback (sweep_end.py). Each asks the strategy that ran the sweep (search/) to read it."""
