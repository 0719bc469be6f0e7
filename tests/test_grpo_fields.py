"""trainer.args is checked against TRL's GRPOConfig on the login node, from a snapshot that must match TRL."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_sweep.config import grpo_fields
from grpo_sweep.config.grpo_fields import OPTIMIZER_FIELDS, TRAINER_FIELDS, UNSLOTH_FIELDS, check_args

from .conftest import ROOT
from .test_search import DESIGN_ARGS


def test_the_snapshot_is_the_installed_trls_grpo_config():
    """Fails on a TRL upgrade that adds, drops or retypes a field: rerun `python -m grpo_sweep.config.grpo_fields
    --write` and read the diff."""
    assert grpo_fields.snapshot() == grpo_fields.from_trl()
    assert grpo_fields.SNAPSHOT.read_text() == grpo_fields.dumps(grpo_fields.from_trl())


def test_the_fields_grpo_sweep_maps_are_grpo_config_fields():
    from trl import GRPOConfig

    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert set(TRAINER_FIELDS) <= fields and set(OPTIMIZER_FIELDS) <= fields
    assert not set(UNSLOTH_FIELDS) & fields


def test_unsloths_extra_fields_are_the_ones_its_config_adds():
    """Unsloth writes its GRPOConfig as source text (unsloth/models/rl.py); its extra __init__ arguments are these."""
    import importlib.util

    spec = importlib.util.find_spec("unsloth")
    if spec is None:
        pytest.skip("unsloth is not importable here (CI installs its CPU fallback on PYTHONPATH)")
    source = (Path(spec.origin).parent / "models" / "rl.py").read_text()
    init = source[
        source.index("def __init__({RLConfig_arguments},") : source.index(
            "**kwargs,", source.index("def __init__({RLConfig_arguments},")
        )
    ]
    extra = {line.split("=")[0].strip() for line in init.splitlines()[1:] if "=" in line}
    assert extra | {"max_seq_length"} == set(UNSLOTH_FIELDS)  # max_seq_length comes in through a template slot


@pytest.mark.parametrize(
    "args, backend, message",
    [
        (
            {"scale_reward": "batch"},
            "trl",
            "trainer.args.scale_reward: TRL 1.14.2's GRPOConfig has no such field; did you mean "
            "trainer.args.scale_rewards?",
        ),
        ({"num_generation": 4}, "trl", "did you mean trainer.num_generations?"),
        ({"epsilon": "high"}, "trl", "trainer.args.epsilon='high': GRPOConfig's epsilon takes float, not str"),
        (
            {"log_completions": 1},
            "trl",
            "trainer.args.log_completions=1: GRPOConfig's log_completions takes bool, not int",
        ),
        (
            {"max_steps": 10},
            "trl",
            "trainer.args.max_steps is set by grpo-sweep from its own config: set trainer.max_steps",
        ),
        ({"learning_rate": 1e-4}, "trl", "set optimizer.learning_rate"),
        ({"output_dir": "/tmp/x"}, "trl", "trainer.args.output_dir is set by grpo-sweep"),
        (
            {"unsloth_num_chunks": 4},
            "trl",
            "trainer.args.unsloth_num_chunks: TRL 1.14.2's GRPOConfig has no such field",
        ),
    ],
)
def test_bad_args_are_named_in_one_line(args, backend, message):
    with pytest.raises(ValueError) as info:
        check_args(args, backend)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_good_args_pass():
    check_args(
        {
            "epsilon": 0.2,
            "epsilon_high": 1,
            "scale_rewards": "batch",
            "log_completions": True,
            "report_to": ["none"],
            "model_init_kwargs": {"a": 1},
            "vllm_server_base_url": None,
            "top_k": 0,
        },
        "trl",
    )
    check_args({"scale_rewards": False, "unsloth_num_chunks": 4, "vllm_sampling_params": object()}, "unsloth")


def test_checking_args_imports_no_trl():
    code = (
        "import sys; from grpo_sweep.config.grpo_fields import check_args; check_args({'epsilon': 0.3}, 'trl');"
        "print(sorted(m for m in ('trl', 'torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_searched_field_grpo_config_lacks_is_refused_before_any_worker(tmp_path):
    refused = subprocess.run(
        [
            sys.executable,
            str(ROOT / "launch.py"),
            *DESIGN_ARGS,
            "hydra.sweeper.study_name=refused",
            "++hydra.sweeper.params={trainer.args.scale_reward: {type: categorical, choices: [group, batch]}}",
            f"output_root={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "grpo-sweep: hydra.sweeper.params.trainer.args.scale_reward: TRL 1.14.2's GRPOConfig has no such field; "
        "did you mean hydra.sweeper.params.trainer.args.scale_rewards?; no worker was started"
    )


def test_every_domain_is_of_a_numeric_grpo_config_field_and_holds_its_default():
    """The domains name GRPOConfig's own numeric fields, and TRL's defaults lie in them (a domain that refused a
    default would refuse what TRL itself trains with)."""
    from trl import GRPOConfig

    fields = grpo_fields.snapshot()["fields"]
    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    for name, domain in grpo_fields.DOMAINS.items():
        assert {"int", "float"} & set(fields[name]), name
        default = defaults[name]
        if isinstance(default, (int, float)) and not isinstance(default, bool) and name != "max_steps":  # TRL: -1
            assert domain.holds(default), (name, default)


@pytest.mark.parametrize(
    "args, message",
    [
        ({"repetition_penalty": 0.0}, "trainer.args.repetition_penalty=0.0: must be > 0"),
        ({"min_p": 1.5}, "trainer.args.min_p=1.5: must be in [0, 1]"),
        ({"epsilon": float("nan")}, "trainer.args.epsilon=nan: must be a finite number"),
        ({"vllm_server_port": 70000}, "trainer.args.vllm_server_port=70000: must be in [1, 65535]"),
    ],
)
def test_values_outside_a_fields_domain_are_named_in_one_line(args, message):
    with pytest.raises(ValueError) as info:
        check_args(args, "trl")
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
