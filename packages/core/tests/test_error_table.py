"""Every error code the core can raise is documented in docs/errors.md, and only those."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "packages" / "core" / "src" / "fevex"
# Codes built from parts in the source, listed whole here.
COMPOSED = {"MAX_INPUT_TOKENS_EXCEEDED", "MAX_OUTPUT_TOKENS_EXCEEDED"}
NOT_CODES = {"FEVEX_RUN_STORE", "FEVEX_PLUGINS", "FEVEX_DISABLE_PLUGIN_AUTOLOAD", "EVENT_TYPES"}
NOT_CODES |= {"COMMAND", "RUN_FIELDS_A_COMMIT_CHANGES", "RUN_STORE_CHECKS", "REDACTED"}
NOT_CODES |= {"FEVEX_TRACE_EXPORTERS", "DEFAULT_SENSITIVE_KEYS", "CONTENT_KINDS"}
NOT_CODES |= {"ERROR_STATUS", "FEVEX_SERVE_APP", "FEVEX_SERVE_WORKER", "FEVEX_SERVE_UI"}
NOT_CODES |= {"FEVEX_MEMORY_STORE", "DEFAULT_NAMESPACE", "MAX_SEARCH_TERMS", "REMEMBER_TOOL"}
NOT_CODES |= {"SANDBOX_TOOL_NAMES", "FORMER_DEFAULT_NAMESPACE", "FEVEX_SERVE_ACTOR"}
NOT_CODES |= {"FEVEX_SERVE_HOSTS", "LOOPBACK_HOSTS", "REQUEST_HEADER", "MAX_ID_LENGTH"}
NOT_CODES |= {"MAX_RECORD_CHARS", "FEVEX_CHECKPOINT_KEY"}
# fevex.net: a table's name, and a range's name in the IANA registry.
NOT_CODES |= {"OTHER_RANGES", "TEREDO"}
# A tool call's reports (progress, trace events) and the untrusted-text pattern.
NOT_CODES |= {"PROGRESS_INTERVAL", "MAX_PROGRESS_EVENTS", "TRACE_EVENT", "MAX_TRACE_EVENTS"}
NOT_CODES |= {"CONTROL_CHARACTERS"}
NOT_CODES |= {"MAX_ANSWER_CHARS", "NAMESPACE", "POLL_INTERVAL", "CLAIM_TIMEOUT"}


def raised_codes() -> set[str]:
    codes: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        codes |= set(re.findall(r'"([A-Z][A-Z_]{4,})"', path.read_text()))
    return (codes - NOT_CODES) | COMPOSED


def documented_codes() -> set[str]:
    table = (ROOT / "docs" / "errors.md").read_text()
    return set(re.findall(r"^\| `([A-Z_]+)` \|", table, flags=re.MULTILINE))


def test_the_error_table_matches_the_code() -> None:
    assert raised_codes() == documented_codes()
