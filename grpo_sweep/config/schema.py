"""The configuration schema: dataclasses registered in Hydra's ConfigStore.

Every YAML file under ``conf/`` is merged onto these, so a typo'd key or a wrongly typed value fails at
compose time. Field names that exist in TRL's ``GRPOConfig`` keep TRL's names and meaning. The schema holds types
and what each key means; the values are conf/'s only (a field is ``MISSING``, or None where unset is a value), so
no default sits in two places. (``models.tiny.TinySpec``, the tiny model's build spec, has defaults of its own:
``TinySpec()`` is the random tiny model for code that builds one without a config; a run's spec comes from its
composed ``model.tiny``.)
No heavy imports here: a login node composes and validates configs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING


@dataclass
class WarmStartConfig:
    """A short causal-LM pre-training of the tiny model before GRPO, so that GRPO has something to elicit, as real
    GRPO starts from a pre-trained, instruction-tuned model (grpo_sweep/models/warm.py). It sees arithmetic facts
    in plain text (`6 * 3 = 18.`) and worked examples in the chat format from a sloppy teacher; never a held-out
    question."""

    # 0: off (the random model as built); N: that many pre-training steps
    steps: int = MISSING
    learning_rate: float = MISSING
    # the last decay_steps steps take the rate down to 0 (cosine; transformers' warmup-stable-decay schedule), so the
    # model settles instead of stopping wherever the constant rate left it; 0: constant throughout
    decay_steps: int = MISSING
    batch_size: int = MISSING
    # the facts: every `a op b` with a, b in 1..max_operand and op in + - *
    max_operand: int = MISSING
    # share of "restate" lines among the facts lines (`Take 6 * 3. 6 * 3 = 18.`); the rest hold 1 to 4 facts
    restate_fraction: float = MISSING
    # share of steps on worked examples (chat turns) rather than facts lines
    chat_fraction: float = MISSING
    # share of worked examples in which the teacher adds the two numbers whatever the question asks: the habit
    # the model picks up and GRPO can unlearn, with the facts it knows
    teacher_slip: float = MISSING
    seed: int = MISSING


@dataclass
class TinyModelConfig:
    """A random-initialised Llama built locally (no download), with a byte-level BPE tokenizer."""

    hidden_size: int = MISSING
    num_hidden_layers: int = MISSING
    num_attention_heads: int = MISSING
    intermediate_size: int = MISSING
    # the random init's std; conf/'s is 10x Llama's default, so a LoRA adapter can move a random model's outputs
    initializer_range: float = MISSING
    bpe_merges: int = MISSING
    seed: int = MISSING
    # a cached pre-training of the random model (facts + a sloppy teacher's worked examples); steps=0: off
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    # use the warm-started model shipped with the package (bit-identical on every machine) when this spec is the one
    # it was built from; false: build it here (a build on another CPU type is another model: float rounding)
    prebuilt: bool = MISSING


@dataclass
class ModelConfig:
    name_or_path: str = MISSING
    # auto | float32 | bfloat16 | float16
    dtype: str = MISSING
    max_seq_length: int = MISSING
    # bitsandbytes 4-bit base weights (QLoRA); GPU only
    load_in_4bit: bool = MISSING
    trust_remote_code: bool = MISSING
    # When set, the model is built locally from this spec and cached (name_or_path is then only a label).
    tiny: TinyModelConfig | None = None


@dataclass
class LoraConfig:
    """The values are conf/lora/'s (default.yaml, which the other options build on): one source."""

    enabled: bool = MISSING
    r: int = MISSING
    alpha: int = MISSING
    dropout: float = MISSING
    # a list of module names, or "all-linear"
    target_modules: Any = MISSING
    bias: str = MISSING


@dataclass
class OptimizerConfig:
    """Mapped 1:1 onto GRPOConfig (transformers TrainingArguments) fields of the same name. The values are
    conf/optimizer/'s (adamw_torch.yaml, which the other options build on): one source."""

    optim: str = MISSING
    learning_rate: float = MISSING
    adam_beta1: float = MISSING
    adam_beta2: float = MISSING
    weight_decay: float = MISSING
    # an int is a step count, a float in [0, 1) a ratio of max_steps (transformers 5 dropped warmup_ratio)
    warmup_steps: float = MISSING
    lr_scheduler_type: str = MISSING
    max_grad_norm: float = MISSING


@dataclass
class ArithmeticConfig:
    # three disjoint sets of distinct expressions: the first n_test generated are the test set, the next n_val
    # the validation set, the rest train (so test stays the same when n_val or n_train changes)
    n_train: int = MISSING
    n_val: int = MISSING
    n_test: int = MISSING
    min_operands: int = MISSING
    max_operands: int = MISSING
    max_operand: int = MISSING
    seed: int = MISSING


@dataclass
class DataConfig:
    """Three disjoint splits: train (GRPO), validation (periodic evaluation, the best step, the search's objective)
    and test (evaluated before and once after training; it chooses nothing). A split the data does not give is
    carved from the train rows, seeded by ``seed``: first test, then validation (grpo_sweep/data/)."""

    # arithmetic (built-in generator) | hub (datasets.load_dataset) | file (local files or directories)
    source: str = MISSING
    # hub dataset id; for file: a .jsonl/.json/.csv/.parquet file, a directory of such shards (one format), or a
    # directory written by datasets' save_to_disk (a Dataset, or a DatasetDict whose splits are used by name)
    path: str | None = None
    # hub subset, e.g. "main" for openai/gsm8k
    subset: str | None = None
    # split names: of the hub dataset, or of a saved DatasetDict. null validation/test: for a DatasetDict its
    # `validation` (or valid/val/dev) / `test` split if it has one; otherwise carved from train
    train_split: str = MISSING
    validation_split: str | None = None
    test_split: str | None = None
    # file data: a separate validation / test file or directory (same kinds as path)
    validation_path: str | None = None
    test_path: str | None = None
    # the size of a carved split: a fraction of the train rows in (0, 1), or a number of rows (as test_size of
    # datasets' train_test_split)
    validation_size: Any = MISSING
    test_size: Any = MISSING
    # column holding the question text (or a ready list of chat messages)
    prompt_column: str = MISSING
    ground_truth_column: str | None = MISSING
    # keep only the text after this marker in the ground truth (GSM8K: "####")
    ground_truth_after: str | None = None
    system_prompt: str = MISSING
    # keep only the first N rows of a split (null: all); validation and test keep their seeded order
    max_train_samples: int | None = None
    max_val_samples: int | None = None
    max_test_samples: int | None = None
    seed: int = MISSING
    # the built-in generator's settings, read by data=arithmetic only
    arithmetic: ArithmeticConfig = field(default_factory=ArithmeticConfig)


@dataclass
class EvalConfig:
    """Validation (chooses) and test (measures) evaluations: see grpo_sweep/run/evaluate.py."""

    # the reward whose split mean is `val_accuracy` / `test_accuracy` (its params are taken from the mix when it is
    # there)
    accuracy_reward: str = MISSING
    # greedy validation (accuracy, lenient accuracy, every reward) every N training steps, at step 0
    # (`val_accuracy_before`) and after training; rows `val/...` in metrics.jsonl; the best step's adapter is kept in
    # best/. 0: only before and after training
    every_steps: int = MISSING
    # the weights the run reports, and tests: best (the best validation step's; ties go to the later step) | final
    report: str = MISSING
    # samples per test prompt for test_pass_at_k / test_maj_at_k (0: off)
    k: int = MISSING
    # sampling temperature of those k samples (the accuracies are always greedy)
    temperature: float = MISSING
    # default: trainer.max_completion_length
    max_new_tokens: int | None = None
    batch_size: int = MISSING
    # how many held-out prompts go to samples.jsonl
    num_samples: int = MISSING


@dataclass
class VllmServerConfig:
    """``trl vllm-serve`` for a run with trainer.use_vllm=true, trainer.vllm_mode=server: started by the run, on the
    last ``gpus`` GPUs of rank 0's node (the training processes take the first ones), stopped when training ends."""

    gpus: int = MISSING
    # tensor_parallel_size x data_parallel_size = gpus
    tensor_parallel_size: int = MISSING
    data_parallel_size: int = MISSING
    gpu_memory_utilization: float = MISSING
    max_model_len: int | None = None
    # a 7B+ model's load and CUDA graph capture take minutes
    startup_timeout_s: float = MISSING
    # more `trl vllm-serve` flags, e.g. ["--enforce_eager", "true"]
    extra_args: list[str] = MISSING


@dataclass
class TrainerConfig:
    """GRPOConfig knobs, under GRPOConfig's own names; `args` passes any other GRPOConfig field through."""

    num_generations: int = MISSING
    per_device_train_batch_size: int = MISSING
    gradient_accumulation_steps: int = MISSING
    steps_per_generation: int | None = None
    # TRL 1.14 dropped this field; grpo-sweep enforces it by filtering over-long prompts out of the data.
    max_prompt_length: int | None = MISSING
    max_completion_length: int = MISSING
    max_steps: int = MISSING
    # stop after this step with a checkpoint of it and its validation, status "paused" (no test): the same run
    # continues from there (population-based training's rounds, hparams_search=pbt). null: train to max_steps
    pause_at_step: int | None = None
    # the config changing at given steps, each phase {from_step: N, set: {dotted.key: value}} going on from the last
    # one's checkpoint (run/phases.py): a PBT's best member replays its rounds this way
    phases: list[Any] = MISSING
    # checkpoint cadence: a preempted, timed-out or killed run resumes from its last checkpoint
    save_steps: int = MISSING
    beta: float = MISSING
    loss_type: str = MISSING
    temperature: float = MISSING
    top_p: float = MISSING
    logging_steps: int = MISSING
    seed: int = MISSING
    # random tiny models never emit EOS: masking truncated completions would zero their loss
    mask_truncated_completions: bool = MISSING
    gradient_checkpointing: bool = MISSING
    # null: bf16 when a CUDA GPU supports it, else fp32
    bf16: bool | None = None
    use_vllm: bool = MISSING
    vllm_mode: str = MISSING
    # a colocated vLLM engine's share of the GPU (vllm_mode=colocate): with runs_per_gpu=K, each run's share
    vllm_gpu_memory_utilization: float = MISSING
    vllm_server: VllmServerConfig = field(default_factory=VllmServerConfig)
    disable_tqdm: bool = MISSING
    # CPU threads for torch (null: torch's default, one per core). A tiny model gains nothing from more
    # than one, and several runs sharing cores with OpenMP spin-waits slow down up to 30x.
    torch_threads: int | None = None
    args: dict[str, Any] = MISSING
    eval: EvalConfig = field(default_factory=EvalConfig)


@dataclass
class BackendConfig:
    # trl (transformers + PEFT) | unsloth (FastLanguageModel; see grpo_sweep/backends/unsloth_backend.py)
    name: str = MISSING
    # unsloth: generate with a vLLM engine in the training process (GPU only; needs vllm)
    fast_inference: bool = MISSING
    # unsloth + fast_inference: the share of GPU memory vLLM reserves
    gpu_memory_utilization: float = MISSING
    # unsloth: "unsloth" (offloaded checkpointing) | true | false
    use_gradient_checkpointing: Any = MISSING
    random_state: int = MISSING


@dataclass
class DistributedConfig:
    """How many processes train one run, and how they split the model (``distributed=`` options)."""

    # none (one process) | ddp | zero2 (DeepSpeed ZeRO stage 2)
    strategy: str = MISSING
    # processes of the run on each node; null: on SLURM hydra.launcher.tasks_per_node, elsewhere the GPUs visible
    nproc_per_node: int | None = MISSING
    # the DeepSpeed config (GRPOConfig.deepspeed) of zero2
    deepspeed: dict[str, Any] | None = None
    # seconds a rank waits for the others at a collective (GRPOConfig.ddp_timeout): rank 0 evaluates alone
    timeout_s: int = MISSING


@dataclass
class LoggerConfig:
    # none: metrics.jsonl and summary.json only (always written) | wandb: also a W&B run per training run
    name: str = MISSING
    project: str = MISSING
    entity: str | None = None
    # extra tags; the run's overrides are always added
    tags: list[str] = MISSING
    # null: the sweep (every run of one -m invocation shares it); a single run gets its own
    group: str | None = None
    # null: "trial" for the trials of an Optuna study (hparams_search=...), else "train"
    job_type: str | None = None
    # null: the overrides, e.g. "reward_mix=format,lora.r=16"
    run_name: str | None = None
    notes: str | None = None
    # auto: online when W&B credentials are found, else offline | online | offline | disabled
    mode: str = MISSING
    # seconds to wait for the W&B server before falling back to offline
    init_timeout: float = MISSING
    # log a completions table (prompt, completion, per-reward scores) every N steps; 0: never
    log_completions_steps: int = MISSING


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    # name -> {weight, fn (built-in name or import path; default: the name), params}. Typed Any, not a dataclass:
    # OmegaConf cannot add a dataclass-typed entry from the command line (`+reward_mix.length.weight=0.1`); check_mix
    # validates terms.
    reward_mix: dict[str, Any] = MISSING
    # a reward that raises: `raise` stops the run naming reward, sample and completion; `skip` scores that
    # sample None for that reward and counts it (reward_failures/<name> in metrics, summary.json)
    reward_errors: str = MISSING
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    data: DataConfig = field(default_factory=DataConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    task_name: str = MISSING
    # summary.json key the task returns to sweepers (dotted paths reach nested keys)
    optimized_metric: str = MISSING
    # where run directories go (Hydra's run dir is taken from here)
    output_root: str = MISSING
