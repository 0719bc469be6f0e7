"""Issue 52, secrets: every way a secret rides in a URL (its password, a query or fragment parameter named like a
secret, either %-encoded) is masked by the one masker (run/redact.py) in every file and on every terminal line,
Hydra's own parse errors included, and refused at the gate where it is typed into a config, the Optuna storage
included. Ordinary query strings pass untouched."""

from __future__ import annotations

import pytest

from grpo_sweep.run.redact import credential_in, redact
from grpo_sweep.search.optuna.storage import check_no_password, shown

from .hostile import Failed, Refused, args, gate_refusal, judge, run_case, slow

PW = "secretpw"  # one of test_hostile_input.TYPED_SECRETS: check() fails any case that prints it


@pytest.mark.parametrize(
    "text, masked",
    [
        ("sqlite:////tmp/x.db?password=secretpw", "sqlite:////tmp/x.db?password=***"),
        ("http://127.0.0.1:9/v1?api_key=secretpw&a=b", "http://127.0.0.1:9/v1?api_key=***&a=b"),
        ("postgresql://u@h/db?sslmode=require&password=pw", "postgresql://u@h/db?sslmode=require&password=***"),
        ("http://h/v1?a=b;token=abc#frag", "http://h/v1?a=b;token=***#frag"),
        ("http://h/cb#access_token=abc&token_type=bearer", "http://h/cb#access_token=***&token_type=bearer"),
        ("s3://b/k?AWSAccessKeyId=AKID&Signature=zz%2B", "s3://b/k?AWSAccessKeyId=AKID&Signature=***"),
        (
            "https://h/o?X-Amz-Signature=ab12&X-Amz-Security-Token=cd",
            "https://h/o?X-Amz-Signature=***&X-Amz-Security-Token=***",
        ),
        ("https://acct.blob/c?sv=2021&sig=abc%3D", "https://acct.blob/c?sv=2021&sig=***"),
        ("http://h/?apiKey=a&accessToken=b&client_secret=c", "http://h/?apiKey=***&accessToken=***&client_secret=***"),
        ("mysql://u@h/db?passwd=pw&charset=utf8", "mysql://u@h/db?passwd=***&charset=utf8"),
        ("redis://h:6379/0?PWD=pw", "redis://h:6379/0?PWD=***"),
        ("http://h/?auth=abc&credentials=xyz", "http://h/?auth=***&credentials=***"),
        ("http://h/?api%5Fkey=abc", "http://h/?api%5Fkey=***"),  # the name %-encoded
        ("postgresql://u@h/db?sslpassword=pw&authtoken=t", "postgresql://u@h/db?sslpassword=***&authtoken=***"),
        # a URL in another's query, %-encoded: its = as %3D, its & as %26, its password's @ as %40
        (
            "http://h/?next=http%3A%2F%2Fi%2F%3Fa%3Db%26token%3Dpw%26c%3Dd",
            "http://h/?next=http%3A%2F%2Fi%2F%3Fa%3Db%26token%3D***%26c%3Dd",
        ),
        ("http://h/?next=http%3a%2f%2fi%2f%3fpassword%3dpw", "http://h/?next=http%3a%2f%2fi%2f%3fpassword%3d***"),
        ("http://h/?next=http%3A%2F%2Fu%3Apw%40i%2F", "http://h/?next=http%3A%2F%2Fu%3A***%40i%2F"),
        (
            "mssql+pyodbc:///?odbc_connect=DRIVER%3Dx%3BUID%3Du%3BPWD%3Dpw%3B",
            "mssql+pyodbc:///?odbc_connect=DRIVER%3Dx%3BUID%3Du%3BPWD%3D***%3B",
        ),
        # as Hydra quotes an override in a sweep's job list, and as an error message goes on after the URL
        ("job 0 (url=http\\://h\\:1/v1?api_key\\=pw)", "job 0 (url=http\\://h\\:1/v1?api_key\\=***)"),
        ("base_url=http://h/v1?api_key=pw: mismatched input", "base_url=http://h/v1?api_key=***: mismatched input"),
        ("'http://h/v1?token=pw'", "'http://h/v1?token=***'"),
        ("[a,http://h?sig=pw]", "[a,http://h?sig=***]"),
        # the password of a URL, and of one with a query
        ("http://u:pw@h:8000/v1?a=b", "http://u:***@h:8000/v1?a=b"),
    ],
)
def test_every_secret_a_url_carries_is_masked_and_is_a_credential(text, masked):
    assert redact(text, []) == masked
    assert credential_in(text)
    assert redact(masked, []) == masked  # masked once


@pytest.mark.parametrize(
    "text",
    [
        "http://judge:8000/v1?a=b",
        "http://judge:8000/v1?timeout=5&max_new_tokens=16&pad_token_id=0",
        "http://h/?token_type=bearer&key_id=k1&AWSAccessKeyId=AKID&authSource=admin&auth_mechanism=x",
        "postgresql://u@h/db?sslkey=/etc/k.pem&sslmode=require",
        "http://h/?bypass=1&monkey=2&tokens=3&oauth=1&compass=n",
        "http://h?token=${oc.env:JUDGE_TOKEN}",  # the way to hand one over: nothing written down
        "http://h/?token=",
        "max_new_tokens=16, password: see the docs",  # no URL parameter
    ],
)
def test_ordinary_query_strings_pass_untouched(text):
    assert redact(text, []) == text and credential_in(text) is None


def test_a_resolved_url_in_a_summary_is_masked_by_the_query_rule():
    """What a run writes holds ``${oc.env:JUDGE_URL}`` resolved (summary.json, checkpoints/config.yaml)."""
    data = {"reward_mix": {"judge": {"factory_args": {"base_url": f"http://127.0.0.1:9/v1?api_key={PW}"}}}}
    assert redact(data, [])["reward_mix"]["judge"]["factory_args"]["base_url"] == "http://127.0.0.1:9/v1?api_key=***"


def test_the_storage_check_refuses_a_query_secret_and_keeps_an_interpolation():
    with pytest.raises(ValueError, match=r"x\.db\?password=\*\*\*': a secret in the URL would be saved") as refused:
        check_no_password(f"sqlite:////tmp/x.db?password={PW}")
    assert PW not in str(refused.value)
    check_no_password("${oc.env:OPTUNA_STORAGE}")
    check_no_password("sqlite:////tmp/x.db?timeout=5")
    assert shown(f"postgresql://u:{PW}@h/db?sslpassword={PW}") == "postgresql://u:***@h/db?sslpassword=***"


def test_the_storage_check_reads_what_is_typed_around_an_interpolation():
    """An interpolation stays unresolved in what is saved, but the text typed around it is saved as typed."""
    with pytest.raises(ValueError, match=r"x\.db\?password=\*\*\*': a secret in the URL would be saved"):
        check_no_password(f"sqlite:///${{oc.env:DIR}}/x.db?password={PW}")
    check_no_password("postgresql://u:${oc.env:PW}@h/db")
    check_no_password("postgresql://u@h/db?password=${oc.env:PW}")


STORE = "hydra.sweeper.storage"


def no_storage_made(inputs) -> None:
    assert not list(inputs.iterdir()), "a refused study made its storage"


# tests/test_hostile_input.py runs this table ("URL secrets") with the others; a study's refusal costs ~1.5 s, so
# beyond the first (SQLite) the storage cases are the slow stage's
CASES = [
    # the reproductions
    (
        "a password in the SQLite storage URL's query",
        args(
            "-m", "hparams_search=lr", "hydra.sweeper.n_trials=2", f'{STORE}="sqlite:///{{inputs}}/x.db?password={PW}"'
        ),
        Refused("x.db?password=***': a secret in the URL would be saved with the study's config", also=no_storage_made),
    ),
    (
        "an api_key in a judge's base_url query",
        judge(f'base_url="http://127.0.0.1:9/v1?api_key={PW}"'),
        Refused(
            "reward_mix.judge.factory_args.base_url=http://127.0.0.1:9/v1?api_key=***: a secret in a URL is written "
            "into the run's files; put the URL in an environment variable and write ${oc.env:JUDGE_URL}"
        ),
    ),
    slow(
        (
            "a password in a PostgreSQL storage URL's query",
            args("-m", "hparams_search=lr", f'{STORE}="postgresql://u@127.0.0.1:1/optuna?password={PW}"'),
            Refused("hydra.sweeper.storage='postgresql://u@127.0.0.1:1/optuna?password=***': a secret in the URL"),
        )
    ),
    (
        "a URL's password in an override Hydra cannot parse",
        args(f"+reward_mix.judge.factory_args.base_url=http://u:{PW}@h:8000/v1?a=b"),
        Refused("base_url=http://u:***@h:8000/v1?a=b: mismatched input '='"),
    ),
    # the second batch
    (
        "a token in a judge's base_url query after another parameter",
        judge(f'base_url="http://127.0.0.1:8000/v1?timeout=5&token={PW}"'),
        Refused("base_url=http://127.0.0.1:8000/v1?timeout=5&token=***: a secret in a URL is written"),
    ),
    (
        "an access_key on an s3 URL in a logger field",
        args(f'logger.notes="s3://bucket/run?access_key={PW}"'),
        Refused("logger.notes=s3://bucket/run?access_key=***: a secret in a URL is written into the run's files"),
    ),
    (
        "a sig in a W&B URL in a list item",
        args(f'logger.tags=[run-a,"https://api.wandb.ai/x?sig={PW}"]'),
        Refused("logger.tags.1=https://api.wandb.ai/x?sig=***: a secret in a URL is written into the run's files"),
    ),
    slow(
        (
            "a passwd in a MySQL storage URL's query",
            args("-m", "hparams_search=lr", f'{STORE}="mysql://u@127.0.0.1:1/x?passwd={PW}"'),
            Refused("hydra.sweeper.storage='mysql://u@127.0.0.1:1/x?passwd=***': a secret in the URL would be saved"),
        )
    ),
    (
        "a password in a Redis URL's query",
        args(f'logger.notes="redis://cache:6379/0?password={PW}"'),
        Refused("logger.notes=redis://cache:6379/0?password=***: a secret in a URL is written"),
    ),
    (
        "an access_token in a URL's fragment",
        judge(f'base_url="http://127.0.0.1:8000/v1#access_token={PW}"'),
        Refused("base_url=http://127.0.0.1:8000/v1#access_token=***: a secret in a URL is written"),
    ),
    (
        "a %3D-encoded api_key in a URL inside a query",
        args(f'logger.notes="https://h/login?next=http%3A%2F%2Fj%2F%3Fapi_key%3D{PW}"'),
        Refused("logger.notes=https://h/login?next=http%3A%2F%2Fj%2F%3Fapi_key%3D***: a secret in a URL"),
    ),
    (
        "a query secret in an override Hydra cannot parse",
        args(f"+reward_mix.judge.factory_args.base_url=http://127.0.0.1:9/v1?api_key={PW}"),
        Refused("base_url=http://127.0.0.1:9/v1?api_key=***: mismatched input '='"),
    ),
    (
        "a query secret in a grid sweep's job",
        args("-m", f'logger.notes="http://h/x?token={PW}"', "trainer.max_steps=2,4"),
        Refused("logger.notes=http://h/x?token=***: a secret in a URL is written into the run's files"),
    ),
]


def test_an_ordinary_query_string_passes_the_gate(tmp_path):
    assert gate_refusal(judge('base_url="http://127.0.0.1:8000/v1?timeout=5"')(tmp_path)) is None
    assert gate_refusal(['logger.notes="http://h/x?a=b&max_new_tokens=16"']) is None


@pytest.mark.slow
def test_a_query_secret_from_the_environment_reaches_no_file(tmp_path, monkeypatch):
    """``${oc.env:JUDGE_URL}`` is the way to hand the URL over: .hydra/ keeps the interpolation, and everything the
    run writes with it resolved (summary.json, checkpoints/config.yaml, launch.log) masks the key."""
    monkeypatch.setenv("JUDGE_URL", f"http://127.0.0.1:9/v1?api_key={PW}")
    setup = judge("base_url=${{oc.env:JUDGE_URL}}")
    run_case(
        "Secrets",
        lambda inputs: [*setup(inputs), "trainer.max_steps=2", "trainer.save_steps=2"],
        Failed("reward_mix.judge failed on every sample of training"),
        tmp_path,
    )
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert len(files) > 5 and not [p for p in files if PW.encode() in p.read_bytes()]
    [summary] = [p for p in files if p.name == "summary.json"]
    assert "v1?api_key=***" in summary.read_text()
