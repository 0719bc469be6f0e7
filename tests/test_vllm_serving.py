"""A run in vLLM server mode (grpo_sweep/run/vllm_serving.py, run/train.py): the server's GPUs and sizes from the
config, and a real run that starts it before the trainer, hands its address over, and stops it after training or
on a failure, against the stand-in server (tests/vllm_standin.py).

vLLM and a GPU are not here, so two of grpo-sweep's own functions are substituted: ``backends.trl_backend.check_device``
(which refuses trainer.use_vllm on a machine without a GPU or vllm) and ``run.train.grpo_trainer_class`` (a
GRPOTrainer that records what it was handed, then generates with transformers, as TRL's VLLMClient needs vllm);
``backends.vllm_server.trl_serve_command`` builds the stand-in's command instead of ``trl vllm-serve``'s.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import pytest

from grpo_sweep.adapters import trl as trl_adapter
from grpo_sweep.backends import vllm_server
from grpo_sweep.backends.vllm_server import ServerError, ServerSpec
from grpo_sweep.run import vllm_serving
from grpo_sweep.run.context import RunContext
from grpo_sweep.run.validate import ConfigError, validate
from grpo_sweep.run.vllm_serving import run_server, server_spec

from .conftest import FAST, compose
from .test_vllm_server import STANDIN, alive, port_free

SERVER = ["trainer.use_vllm=true", "trainer.vllm_mode=server"]


def healthy(host: str, port: int) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{host}:{port}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


# --- the spec -------------------------------------------------------------------------------------------------


def test_spec_takes_the_last_visible_gpus_and_the_configs_sizes(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    cfg = compose(
        [
            *SERVER,
            "trainer.vllm_server.gpus=2",
            "trainer.vllm_server.tensor_parallel_size=2",
            "trainer.vllm_server.gpu_memory_utilization=0.7",
            "trainer.vllm_server.max_model_len=1024",
            "trainer.vllm_server.startup_timeout_s=90",
            "trainer.vllm_server.extra_args=[--enforce_eager,true]",
        ]
    )
    spec = server_spec(cfg, "/models/base", training_processes=2)
    assert spec == ServerSpec(
        model="/models/base",
        tensor_parallel_size=2,
        data_parallel_size=1,
        gpus=("6", "7"),
        gpu_memory_utilization=0.7,
        max_model_len=1024,
        # Hydra reads true as a bool, the str list keeps "True": TRL's parser takes either
        extra_args=("--enforce_eager", "True"),
        startup_timeout_s=90.0,
    )
    # UUIDs pass through as CUDA_VISIBLE_DEVICES names them
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b,GPU-c")
    cfg = compose([*SERVER, "trainer.vllm_server.data_parallel_size=1"])
    assert server_spec(cfg, "m", training_processes=2).gpus == ("GPU-c",)


def test_without_cuda_visible_devices_the_spec_counts_the_devices(monkeypatch):
    import torch

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    cfg = compose(
        [
            *SERVER,
            "trainer.vllm_server.gpus=2",
            "trainer.vllm_server.data_parallel_size=2",
            "model.trust_remote_code=true",
        ]
    )
    spec = server_spec(cfg, "m", training_processes=6)
    assert spec.gpus == ("6", "7") and (spec.tensor_parallel_size, spec.data_parallel_size) == (1, 2)
    assert spec.extra_args == ("--trust_remote_code", "true")


def test_a_node_with_too_few_gpus_for_ranks_and_server_fails_in_one_line(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,-1,3")  # CUDA stops at the -1: two GPUs
    cfg = compose([*SERVER, "trainer.vllm_server.gpus=2", "trainer.vllm_server.tensor_parallel_size=2"])
    with pytest.raises(ServerError) as info:
        server_spec(cfg, "m", training_processes=1)
    assert str(info.value) == (
        "trainer.vllm_server.gpus=2 and 1 training process(es) need 3 GPUs on this node and 2 "
        "are visible (CUDA_VISIBLE_DEVICES=0,1,-1,3)"
    )


def test_only_rank_0_of_a_server_run_starts_a_server(tmp_path, monkeypatch):
    def no_server(*args, **kwargs):
        raise AssertionError("a server was started")

    monkeypatch.setattr(vllm_serving, "serving", no_server)
    with run_server(compose(SERVER), RunContext(tmp_path, rank=1, world_size=2), "m") as fields:
        assert fields == {}
    with run_server(compose(["trainer.use_vllm=true"]), RunContext(tmp_path), "m") as fields:  # colocate
        assert fields == {}


# --- the gate ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["trainer.vllm_server.gpus=0"], "trainer.vllm_server.gpus=0: must be >= 1"),
        (["trainer.vllm_server.tensor_parallel_size=0"], "trainer.vllm_server.tensor_parallel_size=0: must be >= 1"),
        (
            ["trainer.vllm_server.gpus=2"],
            "trainer.vllm_server.gpus=2 but tensor_parallel_size x data_parallel_size = 1 x 1",
        ),
        (
            ["trainer.vllm_server.gpu_memory_utilization=1.5"],
            "trainer.vllm_server.gpu_memory_utilization=1.5: a fraction",
        ),
        (["trainer.vllm_server.startup_timeout_s=0"], "trainer.vllm_server.startup_timeout_s=0: must be > 0"),
        (
            ["distributed=ddp", "distributed.nproc_per_node=2", "trainer.vllm_server.startup_timeout_s=1800"],
            "trainer.vllm_server.startup_timeout_s=1800 with distributed.timeout_s=1800: the other ranks wait for "
            "rank 0",
        ),
        (
            [
                "trainer.vllm_server.max_model_len=100",
                "trainer.max_prompt_length=64",
                "trainer.max_completion_length=64",
            ],
            "trainer.vllm_server.max_model_len=100 is shorter than trainer.max_prompt_length + "
            "trainer.max_completion_length = 128",
        ),
        (
            ["trainer.vllm_server.extra_args=['--port=9000']"],
            "trainer.vllm_server.extra_args has --port=9000, which the run sets itself; remove it",
        ),
        (
            ["trainer.vllm_server.extra_args=[--max-model-len,64]"],
            "trainer.vllm_server.extra_args has --max-model-len, which the run sets itself "
            "(trainer.vllm_server.max_model_len)",
        ),
        (
            ["+trainer.args.vllm_server_port=8000"],
            "trainer.args.vllm_server_port=8000 with trainer.vllm_mode=server: the run starts its own server",
        ),
        (["backend=unsloth"], "trainer.use_vllm=true with backend=unsloth"),
    ],
)
def test_server_settings_that_cannot_work_are_refused_before_submission(overrides, message):
    with pytest.raises(ConfigError) as info:
        validate(compose([*SERVER, *overrides]))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_same_settings_without_server_mode_are_not_the_servers_business():
    validate(compose(["trainer.vllm_server.gpus=0", "trainer.vllm_server.extra_args=['--port=9000']"]))


# --- a run ------------------------------------------------------------------------------------------------------


@pytest.fixture
def server_run(tmp_path, monkeypatch):
    """A server-mode run on this CPU machine: what each seam saw, in ``seen``."""
    from trl import GRPOTrainer

    from grpo_sweep.backends import trl_backend as hf
    from grpo_sweep.run import train as train_module

    seen: dict = {"specs": []}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(hf, "check_device", lambda cfg, cuda: None)

    def standin(mode):
        def command(spec, port):
            seen["specs"].append(spec)
            return [
                sys.executable,
                str(STANDIN),
                mode,
                "--host",
                spec.host,
                "--port",
                str(port),
                "--pid-file",
                str(tmp_path / "worker.pid"),
            ]

        return command

    class RecordingTrainer(GRPOTrainer):
        def __init__(self, *, args, **kwargs):
            seen["args"] = {
                k: getattr(args, k)
                for k in ("use_vllm", "vllm_mode", "vllm_server_host", "vllm_server_port", "vllm_group_port")
            }
            seen["healthy_at_init"] = healthy(args.vllm_server_host, args.vllm_server_port)
            args.use_vllm = False  # TRL's VLLMClient needs vllm: generate with transformers instead
            super().__init__(args=args, **kwargs)

        def train(self, *args, **kwargs):
            seen["healthy_in_train"] = healthy(seen["args"]["vllm_server_host"], seen["args"]["vllm_server_port"])
            if seen.get("fail"):
                raise RuntimeError("a rank ran out of memory")
            return super().train(*args, **kwargs)

    monkeypatch.setattr(train_module, "grpo_trainer_class", lambda name: RecordingTrainer)
    # the run's evaluations go through its server (decoding.evaluation_engine): TRL's client, stood in for by the
    # trainer's own model generating the token ids it is sent, with the settings it is sent
    seen["engine"] = []

    class ServerClient:
        mode = "server"

        def __init__(self, trainer):
            self.trainer, self.vllm_client = trainer, self

        def sync_weights(self):
            seen["engine"].append("sync")

        def generate(self, prompts, generation_kwargs=None, **params):
            from grpo_sweep.backends.decoding import Decoding, hf_generation_config, only_token_ids

            seen["engine"].append(healthy(seen["args"]["vllm_server_host"], seen["args"]["vllm_server_port"]))
            model, tokenizer = self.trainer.model, self.trainer.processing_class
            decoding = Decoding(
                max_new_tokens=params["max_tokens"],
                **{k: params[k] for k in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")},
            )
            batch = tokenizer.pad({"input_ids": prompts}, return_tensors="pt")
            with only_token_ids(model) as token_ids:
                out = model.generate(
                    **batch,
                    generation_config=hf_generation_config(
                        decoding, {**token_ids, "pad_token_id": tokenizer.pad_token_id}
                    ),
                )
            return {"completion_ids": out[:, batch["input_ids"].shape[1] :].tolist()}

    monkeypatch.setattr(trl_adapter, "trainer_vllm", lambda trainer: ServerClient(trainer))
    original = train_module.final_evaluations

    def final_evaluations(*args, **kwargs):
        seen["healthy_at_final_eval"] = healthy(seen["args"]["vllm_server_host"], seen["args"]["vllm_server_port"])
        return original(*args, **kwargs)

    monkeypatch.setattr(train_module, "final_evaluations", final_evaluations)

    def run(mode="ok", fail=False):
        seen["fail"] = fail
        monkeypatch.setattr(vllm_server, "trl_serve_command", standin(mode))
        cfg = compose([*FAST, *SERVER, "trainer.max_steps=2", "trainer.save_steps=2", "trainer.eval.every_steps=0"])
        return train_module.train(cfg, tmp_path / "run")

    return run, seen, tmp_path


def test_a_server_run_starts_the_server_before_the_trainer_and_evaluates_through_it_before_it_stops(server_run):
    run, seen, tmp_path = server_run
    summary = run()
    assert summary["status"] == "completed" and summary["steps"] == 2
    (spec,) = seen["specs"]
    assert spec.gpus == ("1",) and Path(spec.model).is_dir()  # the last GPU; the tiny model's local build
    args = seen["args"]
    assert args["use_vllm"] and args["vllm_mode"] == "server" and args["vllm_server_host"] == "127.0.0.1"
    assert args["vllm_server_port"] != args["vllm_group_port"]
    assert seen["healthy_at_init"] and seen["healthy_in_train"]
    # up through the final evaluation, which generates through it (step 0's validation too); weights synced first
    assert seen["healthy_at_final_eval"]
    assert seen["engine"][0] == "sync" and seen["engine"].count("sync") >= 4 and all(seen["engine"])
    decoding = json.loads((tmp_path / "run" / "outcomes" / "decoding.json").read_text())
    assert decoding["engine"] == "vllm" and decoding["greedy"]["repetition_penalty"] == 1.0
    assert not alive(int((tmp_path / "worker.pid").read_text()))  # with every process of its group
    assert port_free(args["vllm_server_port"])
    log = (tmp_path / "run" / vllm_server.LOG_NAME).read_text()
    assert "(CUDA_VISIBLE_DEVICES=1)" in log and "ready" in log
    saved = json.loads((tmp_path / "run" / "grpo_config.json").read_text())
    assert (saved["vllm_server_port"], saved["vllm_group_port"]) == (args["vllm_server_port"], args["vllm_group_port"])


def test_a_server_run_whose_training_fails_stops_the_server(server_run):
    run, seen, tmp_path = server_run
    with pytest.raises(RuntimeError, match="a rank ran out of memory"):
        run(fail=True)
    assert seen["healthy_in_train"]
    assert not healthy(seen["args"]["vllm_server_host"], seen["args"]["vllm_server_port"])
    assert not alive(int((tmp_path / "worker.pid").read_text()))
    assert port_free(seen["args"]["vllm_server_port"])


def test_a_server_that_exits_at_start_fails_the_run_in_one_line_in_summary_json(server_run, monkeypatch):
    """Through the task (app.run_task), as launch.py runs it: the gate on this machine, with two GPUs said to be
    here (grpo-sweep's own gpu_available / gpu_count), then training, whose server exits."""
    from grpo_sweep import app
    from grpo_sweep.run import validate as validation

    run, seen, tmp_path = server_run
    run_dir = tmp_path / "task"
    monkeypatch.setattr(app, "from_hydra", lambda: RunContext(run_dir, ["trainer.vllm_mode=server"]))
    monkeypatch.setattr(validation, "gpu_available", lambda: True)
    monkeypatch.setattr(validation, "gpu_count", lambda: 2)
    monkeypatch.setattr(
        vllm_server,
        "trl_serve_command",
        lambda spec, port: [sys.executable, str(STANDIN), "exit", "--host", spec.host, "--port", str(port)],
    )
    with pytest.raises(ServerError):
        app.run_task(compose([*FAST, *SERVER]))
    assert "args" not in seen  # no trainer was built
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed"
    error = summary["error"]
    assert (
        error.startswith("ServerError: vLLM server exited with code 3 before http://127.0.0.1:") and "\n" not in error
    )
    assert error.endswith("(CUDA_VISIBLE_DEVICES=1) | CUDA out of memory (stand-in)")
    assert str(run_dir / vllm_server.LOG_NAME) in error
