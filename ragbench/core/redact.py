"""Secrets never reach a log, a file or MLflow: credentials in URLs and values that look like keys are masked.

:func:`redact` masks

* the user-info part of any URL (``https://user:key@host/v1`` -> ``https://***@host/v1``);
* ``key=value`` / ``key: value`` pairs whose name says secret (``api_key``, ``token``, ``password``, ``secret``,
  ``authorization``), and ``Bearer <token>``; a name inside a path (``/etc/passwd: ...``, ``my.secret: ...``) is a
  file's name, not a variable's, and masks nothing;
* strings shaped like API keys (``sk-...``, ``hf_...``, ``ghp_...``, and ``xoxb-...`` style tokens).

:class:`RedactingFilter` applies it to every record of the ``ragbench`` logger; the store and MLflow tracking
redact errors and stored specs with :func:`redact_obj`.
"""

from __future__ import annotations

import logging
import re
from typing import Any

MASK = "***"
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/\s@]+)@")
# a name that says secret, as a variable or key (not a path or file name: ``/etc/passwd: ...`` names a file, so the
# name may not follow ``/``, ``\``, ``.``, ``~`` or a word character)
_NAMED = re.compile(r"(?i)(?P<name>(?<![/\\.~\w-])(?:[\w-]*[_-])?(?:api[_-]?key|apikey|token|password|passwd|"
                    r"secret|authorization)\b['\"]?\s*[=:]\s*)(?P<quote>['\"]?)(?!(?i:bearer|basic)\b)"
                    r"(?P<value>[^\s'\",;&]+)")
_SECRET_KEY = re.compile(r"(?i)(?:[\w-]*[_-])?(?:api[_-]?key|apikey|token|password|passwd|secret|authorization)")
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}")
_KEYLIKE = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}|\bhf_[A-Za-z0-9]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}"
                      r"|\bxox[abpr]-[A-Za-z0-9-]{10,}")


def redact(text: str) -> str:
    """``text`` with every credential masked (see the module docstring for what counts)."""
    if not text:
        return text
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _NAMED.sub(lambda m: f"{m.group('name')}{m.group('quote')}{MASK}", text)
    return _KEYLIKE.sub(MASK, text)


def redact_obj(obj: Any) -> Any:
    """:func:`redact` applied to every string inside dicts, lists and tuples (keys included); the string value of a
    key named as a secret (``api_key``, ``db_password``, ...) is masked whole."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):  # a string value under a key named as a secret is masked whole
        return {redact_obj(k): MASK if isinstance(v, str) and v and _SECRET_KEY.fullmatch(str(k)) else redact_obj(v)
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact_obj(v) for v in obj)
    return obj


class RedactingFilter(logging.Filter):
    """Masks credentials in a log record's message (arguments are merged in first)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True
