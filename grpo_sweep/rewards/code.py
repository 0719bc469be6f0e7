"""Code reward: run the completion's Python against the row's test cases, in a sandbox; score the fraction passed.

The program is the last fenced code block (```python … ```), else the last `<answer>`. Test cases come from a
dataset column (default ``tests``), one row's value being any of:

- a list of Python snippets run after the program, each passing when it raises nothing (MBPP's ``test_list``);
- a list of ``{"input": ..., "output": ...}`` or ``{"inputs": [...], "outputs": [...]}`` (APPS / CodeContests
  stdin/stdout programs: stripped stdout must equal the output);
- a JSON string of either, or one snippet string.

Execution happens only in ``sandbox.execute`` (see there for what is contained). A row without tests scores
``None`` (TRL skips it); a completion without code scores 0.

What earns reward, and what the reward guarantees (tests/test_code_reward_adversarial.py tries to break each):

- A test passes only on plain values judged outside the sandbox. A stdin/stdout test sends the program its
  input only; its stdout comes back and is compared (stripped) here. An assert snippet of imports and
  ``assert`` statements over calls into the program (``assert f(1, 2) == 3``, ``assert not f(x)``,
  ``assert math.isclose(f(x), 2.5)``, ``assert set(f(x)) == {1, 2}``, ...) sends only the calls; their results
  come back as builtin data and the rest of the assert is evaluated here, with the real builtins and ``math``,
  with ordinary Python semantics (``4 == 4.0``, ``1 == True``, a tuple is not a list).
- So the expected values never enter the sandbox: no frame walk, ``gc`` scan, ``/proc/self`` read or forged
  report line can find them, and a forged report can only claim values, which is what returning them does.
  Objects with a rigged ``__eq__``/``__ne__``/``__bool__`` (or a builtin subclass overriding them) fail: a
  subclass of a builtin arrives as the builtin, anything else fails its test. Shadowing or patching the
  builtins or ``math`` the assert uses changes nothing here. Exiting early (``sys.exit``, ``os._exit``),
  looping, forking, or a value too large (over 256 KB encoded) fails the test(s) concerned.

What it does not guarantee:

- Hard-coding the answers of tests the prompt shows (MBPP prompts list them) earns full reward: only tests the
  model never sees can tell. That is a property of the test set; hold some tests out.
- Snippets of any other shape (loops, helper definitions, methods called on a result, ``*``/``%``/``**`` on a
  result, names the snippet imports besides ``math``) run as scripts after the program and pass when they
  raise nothing; that result comes from inside the sandbox, and a program that attacks the harness can forge
  it. ``sandbox.Execution.self_reported`` counts such tests and a warning is logged the first time.
- A value that is not builtin data (a ``Fraction``, a ``deque``, a numpy array, a custom class) fails its
  test even where the dataset's reference would compare equal.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

from ._text import texts
from .answer import extract_answer
from .registry import Needs, reward
from .sandbox import Limits, check_isolation, execute

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
MAX_CODE_CHARS = 20_000


def extract_code(text: str, answer_tag: str = "answer") -> str | None:
    """The last fenced code block, else the last `<answer>` content; None when there is neither."""
    blocks = _FENCE.findall(text)
    code = blocks[-1] if blocks else extract_answer(text, answer_tag)
    return code if code and code.strip() else None


def parse_tests(value) -> list | None:
    """A row's test cases as a list of snippets / {"input", "output"} dicts; None when there are none."""
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped:
            return None
        try:
            value = json.loads(stripped) if stripped[0] in "[{" else stripped
        except json.JSONDecodeError:
            value = stripped
        if isinstance(value, str):
            return [value]
    if isinstance(value, dict) and "inputs" in value and "outputs" in value:
        value = [{"input": i, "output": o} for i, o in zip(value["inputs"], value["outputs"])]
    if not isinstance(value, (list, tuple)) or not value:
        return None
    tests = []
    for case in value:
        if isinstance(case, str):
            tests.append(case)
        elif isinstance(case, dict) and "input" in case and "output" in case:
            tests.append({"input": str(case["input"]), "output": str(case["output"])})
        else:
            return None
    return tests


@reward("code", Needs(column_params={"tests_column": "tests"}, sandbox=True))
def code(
    completions,
    tests_column: str = "tests",
    answer_tag: str = "answer",
    isolation: str = "namespaces",
    timeout_s: float = 5.0,
    per_test_s: float = 2.0,
    memory_mb: int = 512,
    max_procs: int = 16,
    workers: int = 2,
    **kwargs,
) -> list[float | None]:
    """Fraction of the row's tests that the completion's program passes, run in a sandbox."""
    if tests_column not in kwargs:
        raise ValueError(f"code reward: the data has no {tests_column!r} column (set params.tests_column)")
    check_isolation(isolation)  # refuse to run generated code without the isolation asked for
    limits = Limits(
        timeout_s=timeout_s, per_test_s=per_test_s, cpu_s=timeout_s, memory_mb=memory_mb, max_procs=max_procs
    )

    def score(text: str, raw_tests) -> float | None:
        tests = parse_tests(raw_tests)
        if tests is None:
            return None
        program = extract_code(text, answer_tag)
        if program is None or len(program) > MAX_CODE_CHARS:
            return 0.0
        return execute(program, tests, limits, isolation).score

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(score, texts(completions), kwargs[tests_column]))
