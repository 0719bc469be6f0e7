"""Print a benchmark's numbers and keep them in bench/results/<name>.json."""
from __future__ import annotations

import json
from pathlib import Path


def record(name: str, result: dict) -> Path:
    width = max(map(len, result)) + 2
    for key, value in result.items():
        print(f"{key:<{width}} {value}")
    out = Path(__file__).parent / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return out
