"""Turn TRL's completion objects into plain text.

TRL passes each completion either as a string (plain-text datasets) or as a list of chat messages
(conversational datasets: ``[{"role": "assistant", "content": "..."}]``). Rewards score the text.
"""

from __future__ import annotations

from typing import Any


def completion_text(completion: Any) -> str:
    """The generated text of one completion, whatever shape TRL gave it in."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        # The model's turn is the last assistant message; fall back to the last message.
        for message in reversed(completion):
            if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
                return _content(message.get("content"))
        return completion_text(completion[-1]) if completion else ""
    return "" if completion is None else str(completion)


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal-style [{"type": "text", "text": ...}]
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def texts(completions: list) -> list[str]:
    return [completion_text(c) for c in completions]
