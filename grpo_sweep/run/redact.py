"""Keep API keys and tokens out of every file a run writes and everything it sends (the one place that knows
what a secret looks like; results files, log records, the W&B config and summary and config validation use it).

The values of environment variables whose names say they are secrets (``WANDB_API_KEY``, ``HF_TOKEN``,
``*_SECRET``, ``*_PASSWORD`` …) are replaced by ``***`` wherever they turn up (a reward logging its environment,
an error message quoting a URL with a token in it), and so is any value under a secret-looking key
(``hub_token``, ``api_key``; not ``max_new_tokens``).
"""
from __future__ import annotations

import logging
import os
import re
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


def secret_values() -> list[str]:
    values = {v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_SECRET_CHARS}
    return sorted(values, key=len, reverse=True)


def is_secret_key(key: Any) -> bool:
    return bool(SECRET_KEY.search(str(key)))


def redact(value: Any, secrets: list[str] | None = None) -> Any:
    """``value`` with every secret string masked, and every non-empty value under a secret-looking key, through
    dicts, lists and strings."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {redact(k, secrets): MASK if is_secret_key(k) and v else redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value


class RedactSecrets(logging.Filter):
    """Masks secrets in a log record's final message (handlers format after filters run)."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = secret_values()
        if secrets:
            message = record.getMessage()
            masked = redact(message, secrets)
            if masked != message:
                record.msg, record.args = masked, None
        return True


def install_log_redaction() -> None:
    """Put the filter on every handler of the root logger (Hydra's console and launch.log handlers)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())
