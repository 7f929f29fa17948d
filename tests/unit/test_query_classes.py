"""Query classes: dataset classes win, the identifier rule fires on identifier-like tokens only, custom rules."""

from __future__ import annotations

import polars as pl
import pytest

from ragbench.core.schemas import QUERY_SCHEMA
from ragbench.evaluation.query_classes import assign_classes, classify

IDENTIFIER_QUERIES = [
    "What does error NMB-4013 mean?",
    "Which bug was fixed in v3.4.1?",
    "what changed in 3.4.1",
    "default of queue.max_inflight_bytes",
    "What does the --drain-timeout flag do?",
    "client fails with ERR_CONN_RESET",
    "set max_inflight_bytes higher?",
    "job 9f86d081884c failed",
    "pointer 0x7ffe is null",
    "what does maxRetries default to",
    "POST /v2/cluster/tenants returns 403",
    "what does `nimbusctl drain` do",
]
NATURAL_QUERIES = [
    "Why do my background processes get killed when nothing is happening?",
    "How do I rotate keys, e.g. every month?",
    "What happened in 2023 and costs 2.5 dollars?",
    "state-of-the-art retrieval for long documents",
    "Can I skip a version when upgrading?",
    "deadbeef cafe",                    # hex letters only, no digits: a word, not an id
    "Is 12345678 a phone number?",       # digits only: a number, not a hex id
]


@pytest.mark.parametrize("text", IDENTIFIER_QUERIES)
def test_identifier_tokens_are_detected(text):
    assert classify(text) == "identifier"


@pytest.mark.parametrize("text", NATURAL_QUERIES)
def test_plain_language_is_natural(text):
    assert classify(text) == "natural"


def _queries(rows):
    return pl.DataFrame([(q, t, c, []) for q, t, c in rows], schema=QUERY_SCHEMA, orient="row")


def test_dataset_classes_win_and_blank_ones_are_filled():
    qs = _queries([("a", "error NMB-4013", "paraphrase"), ("b", "error NMB-4013", None),
                   ("c", "why is it slow", ""), ("d", "why is it slow", None)])
    out = assign_classes(qs)
    assert out["query_class"].to_list() == ["paraphrase", "identifier", "natural", "natural"]
    assert out["class_source"].to_list() == ["dataset", "rule", "rule", "rule"]
    assert out.select("query_id", "text").equals(qs.select("query_id", "text"))
    forced = assign_classes(qs, override=True)
    assert forced["query_class"].to_list() == ["identifier", "identifier", "natural", "natural"]


def test_custom_rules_first_match_wins_and_bad_rules_are_named():
    rules = [("error-code", r"\bNMB-\d{4}\b"), ("question", r"\?\s*$")]
    qs = _queries([("a", "What is NMB-4013?", None), ("b", "is it slow?", None), ("c", "slow cluster", None)])
    out = assign_classes(qs, rules=rules, default="other")
    assert out["query_class"].to_list() == ["error-code", "question", "other"]
    with pytest.raises(ValueError, match=r"rule 0 \('bad'\): invalid regex"):
        assign_classes(qs, rules=[("bad", "([")])
    with pytest.raises(ValueError, match="expected a .class_name, regex. pair"):
        assign_classes(qs, rules=["identifier"])


def test_rule_reproduces_the_demo_identifier_class():
    from ragbench.config import DatasetSpec
    from ragbench.data import load_dataset
    from conftest import DEMO

    q = load_dataset(DatasetSpec(path=DEMO, queries="all")).queries
    ruled = assign_classes(q, override=True)
    given_ident = [c == "identifier" for c in q["query_class"]]
    assert [c == "identifier" for c in ruled["query_class"]] == given_ident
    assert sum(given_ident) == 12
