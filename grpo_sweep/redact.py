"""Keep API keys and tokens out of every file a run writes.

The values of environment variables whose names say they are secrets (``WANDB_API_KEY``, ``HF_TOKEN``,
``*_SECRET``, ``*_PASSWORD`` …) are replaced by ``***`` in results files and log records, wherever they
turn up (a reward logging its environment, an error message quoting a URL with a token in it).
"""
from __future__ import annotations

import logging
import os
import re
from typing import Any

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
MASK = "***"
# Short values (e.g. "1", "true") would mask ordinary text; real keys are long.
MIN_SECRET_CHARS = 8


def secret_values() -> list[str]:
    values = {v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_SECRET_CHARS}
    return sorted(values, key=len, reverse=True)


def redact(value: Any, secrets: list[str] | None = None) -> Any:
    """``value`` with every secret string masked, through dicts, lists and strings."""
    secrets = secret_values() if secrets is None else secrets
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {redact(k, secrets): redact(v, secrets) for k, v in value.items()}
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
