"""Keep API keys, tokens and passwords out of every file a run writes, everything it sends to a tracker and every
refusal it prints (the one place that knows what a secret looks like; results files, log records, the W&B config
and summary, the gate's refusals and config validation use it).

Three kinds of secret are masked as ``***`` wherever they turn up (a reward logging its environment, an error
message quoting a URL, an httpx request line):

- the values of environment variables whose names say they are secrets (``WANDB_API_KEY``, ``HF_TOKEN``,
  ``*_SECRET``, ``*_PASSWORD`` …), and any value under a secret-looking key (``hub_token``, ``api_key``; not
  ``max_new_tokens``);
- the secrets a URL carries: its password (``http://judge:***@host/v1``) and the values of its query and fragment
  parameters whose names say they are secrets (``?api_key=***``, ``&X-Amz-Signature=***``, ``#access_token=***``;
  not ``?timeout=5``), also %-encoded (a URL inside another's query) and as Hydra quotes them in a sweep's job list:
  a URL handed in through ``${oc.env:…}`` reaches the run resolved, and the variable's name (``JUDGE_URL``) does
  not say it is a secret;
- strings shaped like the well-known providers' tokens (``hf_…``, ``sk-…``, ``ghp_…``, ``AKIA…``), whichever
  variable, if any, they came from.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import urllib.parse
from typing import Any

# Environment variable names: any of these words anywhere (GITHUB_AUTH, AWS_SECRET_ACCESS_KEY) — masking a value
# too many costs nothing there.
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
# Config and summary keys: a secret word as a whole part of the key (hub_token, WANDB_API_KEY, db.password), so
# that ordinary keys (max_new_tokens, pad_token_id) keep their values.
SECRET_KEY = re.compile(r"(?:^|[_.-])(?:api_?key|token|secret|password|passwd|credentials?)(?:$|[_.-])", re.IGNORECASE)
MASK = "***"
# Short values (e.g. "1", "true") would mask ordinary text; real keys are long.
MIN_SECRET_CHARS = 8

# scheme://user:password@host — the user stays (it says which account), the password goes. A URL without a
# password (http://judge:8000/v1, git@host) does not match: the ``@`` must come before the first ``/``. Also as
# Hydra quotes an override in a sweep's job list (``http\://judge\:pw@host``).
URL_PASSWORD = re.compile(r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*\\?://[^/\s:@]*:)[^/\s@]+@")
# The same %-encoded (``http%3A%2F%2Fjudge%3Apw%40host``: a URL riding in another's query).
URL_PASSWORD_ENCODED = re.compile(
    r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*%3A%2F%2F(?:(?!%2F|%3A|%40)[^/\s:@&])*%3A)(?:(?!%2F|%40)[^/\s@&])+%40",
    re.IGNORECASE,
)
# A query or fragment parameter: after ?, &, ; or #, its name, then = (or Hydra's \= in a sweep's job list), then its
# value up to the next parameter, or a colon that ends a phrase ("url?token=pw: refused"). An interpolation
# (``${oc.env:TOKEN}``) or a value already masked is no secret written down.
URL_PARAM = re.compile(
    r"(?P<keep>[?&;#](?P<name>[A-Za-z0-9_.~%-]+?)\\?=)(?!\$\{|\*\*\*)"
    r"(?:\\[^\s&#]|:(?=[^\s&;#])|[^:&;#\s'\"<>,)\]}\\])+"
)
# The same %-encoded (``%3Fpassword%3Dpw%26``: a URL riding in another's query, where the outer parameter's value
# holds it whole), masked first.
URL_PARAM_ENCODED = re.compile(
    r"(?P<keep>(?:%3F|%26|%3B|%23)(?P<name>[A-Za-z0-9_.~-]+?)%3D)(?!\*\*\*)"
    r"(?:(?!%26|%3B|%23|%20)(?::(?=[^\s&;#])|[^:&;#\s'\"<>,)\]}\\]))+",
    re.IGNORECASE,
)
# Parameter names whose LAST word says the value is a secret (api_key, apiKey, X-Amz-Signature, client_secret,
# refresh_token, PWD), the same idea as SECRET_KEY: a key's id (AWSAccessKeyId), a token's type (token_type) and a
# database's auth_source keep their values, and a URL with them is not refused. The long words also end a word
# (sslpassword, authtoken, clientsecret); the short ones only as themselves (not monkey, bypass, oauth).
SECRET_PARAM_WORDS = frozenset({"key", "pass", "pwd", "sig", "auth"})
SECRET_PARAM_ENDINGS = ("password", "passwd", "secret", "token", "apikey", "signature", "credential", "credentials")
_NAME_WORDS = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
# The token shapes of gitleaks' rules for the providers a GRPO run talks to, with a minimum length instead of an
# exact one (providers lengthen their tokens). Deliberately not matched: 40 hex digits (W&B's keys have that
# shape, and so do git commits and Hub revisions, which runs record; the W&B key is masked as WANDB_API_KEY's
# value) and "high-entropy strings" in general (sha256 of the weights, run ids, hashes a summary holds).
TOKEN = re.compile(
    r"\bhf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|\bsk-[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic (sk-proj-…, sk-ant-…) and the servers that copy them
    r"|\bgh[pousr]_[A-Za-z0-9]{36,}"  # GitHub
    r"|\bgithub_pat_[A-Za-z0-9_]{22,}"  # GitHub, fine-grained
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key id
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
)


def secret_values() -> list[str]:
    values = {v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_SECRET_CHARS}
    return sorted(values, key=len, reverse=True)


def is_secret_key(key: Any) -> bool:
    return bool(SECRET_KEY.search(str(key)))


def is_secret_param(name: str) -> bool:
    """Whether a URL's query or fragment parameter ``name`` (%-encoded or not) says its value is a secret."""
    words = [w for w in _NAME_WORDS.split(urllib.parse.unquote(name)) if w]
    last = words[-1].lower() if words else ""
    return last in SECRET_PARAM_WORDS or last.endswith(SECRET_PARAM_ENDINGS)


def _secret_params(text: str) -> list[re.Match]:
    return [m for p in (URL_PARAM_ENCODED, URL_PARAM) for m in p.finditer(text) if is_secret_param(m["name"])]


def credential_in(text: str) -> str | None:
    """What kind of credential ``text`` holds by its shape alone ("a password in a URL", "a secret in a URL", "an
    API token"), or None. The environment is not asked: the gate's verdict on a config must not depend on the
    launching shell."""
    if URL_PASSWORD.search(text) or URL_PASSWORD_ENCODED.search(text):
        return "a password in a URL"
    if _secret_params(text):
        return "a secret in a URL"
    if TOKEN.search(text):
        return "an API token"
    return None


def _masked_param(match: re.Match) -> str:
    return match["keep"] + MASK if is_secret_param(match["name"]) else match[0]


def _mask_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    if "://" in text:
        text = URL_PASSWORD.sub(rf"\g<keep>{MASK}@", text)
    if "%" in text:
        text = URL_PASSWORD_ENCODED.sub(rf"\g<keep>{MASK}%40", text)
    for params in (URL_PARAM_ENCODED, URL_PARAM):
        text = params.sub(_masked_param, text)
    return TOKEN.sub(MASK, text)


def redact(value: Any, secrets: list[str] | None = None) -> Any:
    """``value`` with every secret string masked, and every non-empty value under a secret-looking key, through
    dicts, lists and strings."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(value, str):
        return _mask_text(value, secrets)
    if isinstance(value, dict):
        return {redact(k, secrets): MASK if is_secret_key(k) and v else redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value


class RedactSecrets(logging.Filter):
    """Masks secrets in a log record's final message and its traceback (handlers format after filters run, and
    reuse a traceback's text once it is set)."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = secret_values()
        message = record.getMessage()
        masked = redact(message, secrets)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, secrets)
        return True


class MaskedStream:
    """``sys.stdout``/``sys.stderr`` with secrets masked in each write: what a reward prints or warns reaches a
    terminal, and under SLURM a log file in the sweep's directory. ``print`` writes each argument on its own, so
    a key printed as one is masked whole."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, text: Any) -> int:
        self.stream.write(redact(text) if isinstance(text, str) else text)
        return len(text)

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, flush, encoding …: the stream's own
        return getattr(self.stream, name)


def install_log_redaction() -> None:
    """Put the filter on every handler of the root logger (Hydra's console and launch.log handlers), and mask what
    the process prints."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, MaskedStream):
            setattr(sys, name, MaskedStream(stream))
