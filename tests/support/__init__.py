"""What several test modules share beyond conftest's fixtures: servers on loopback and harnesses they start. Test
code only: bench/ never imports it (tests/test_architecture.py), and nothing here imports bench/."""
