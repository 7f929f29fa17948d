"""What `questions generate` keeps, without the LLM: a row that copies the prompt's example (question or quote) is
rejected, a repeated question or quote is a duplicate, a copied sentence is not a question; the reply schema offers
only sentences located once, wrapped lines joined; the yields funnel adds up; the next command names a file outside
the folder by its absolute path."""

from __future__ import annotations

import json
import shlex
from collections import Counter

from ragbench.data.quotes import locate_quote
from ragbench.generation.synthetic import (EXAMPLE, EXAMPLE_QUESTION, EXAMPLE_QUOTE, Generation, RowScreen,
                                           next_command, parse_reply, quote_candidates, reply_schema)

DOC = """# Backups

Snapshots are taken every six hours and kept
for fourteen days by default. Restores need an admin token.

```
Restores are run by hand with the CLI tool.
```

## Restoring

- Run `nimbusctl restore --snapshot ID` on the primary node.
- Restores need an admin token.
"""


def test_rows_copying_the_example_are_rejected_and_repeats_are_duplicates():
    screen = RowScreen()
    quote = "Snapshots are taken every six hours"
    # the prompt's own example, word for word or with another case and end mark, paired with a real quote
    assert screen.reject(EXAMPLE_QUESTION, quote, "b.md", DOC) == "copies the example"
    assert screen.reject(EXAMPLE_QUESTION.upper().rstrip("?") + ".", quote, "b.md", DOC) == "copies the example"
    assert screen.reject("Public holiday: can I visit?", quote, "b.md", DOC) == "copies the example"  # its words
    # the example's quote, had the document contained it
    holiday_doc = DOC + "\n" + EXAMPLE_QUOTE + "\n"
    assert screen.reject("Is the building open on holidays?", EXAMPLE_QUOTE, "h.md", holiday_doc) == \
        "copies the example"
    assert screen.reject("Snapshots are taken every six hours.", quote, "b.md", DOC) == "not a question"
    assert screen.reject("Snapshots are taken every six hours?", quote, "b.md", DOC) == "not a question"  # copied
    assert screen.reject("How often are snapshots taken?", "every six days", "b.md", DOC) == "quote not located"
    assert screen.reject("What do restores need?", "Restores need an admin token", "b.md", DOC) == "quote ambiguous"
    # kept once; the same question again (any case), or another question on the same quote, is a duplicate
    assert screen.reject("How often are snapshots taken?", quote, "b.md", DOC) is None
    assert screen.reject("how often are SNAPSHOTS taken ?", "Snapshots are taken every six hours and kept", "b.md",
                         DOC) == "duplicate"
    assert screen.reject("When is a snapshot made?", quote, "b.md", DOC) == "duplicate"
    # a new question on another sentence is kept
    assert screen.reject("How long are snapshots kept?", "kept for fourteen days by default", "b.md", DOC) is None


def test_the_reply_schema_offers_sentences_located_once():
    passage = DOC.split("## Restoring")[0]
    candidates = quote_candidates(passage, DOC)
    # the heading is no choice; the sentence found twice in the document is left out; each choice is located once
    # the sentence wrapped over two lines is one choice, the code block none
    assert candidates == ["Snapshots are taken every six hours and kept for fourteen days by default."]
    assert all(len(locate_quote(c, DOC)) == 1 for c in candidates)
    schema = reply_schema(candidates)
    assert list(schema["properties"]) == ["quote", "question"] and schema["properties"]["quote"]["enum"] == candidates
    assert "enum" not in reply_schema([])["properties"]["quote"]  # nothing quotable: a free quote, still JSON
    listed = quote_candidates(DOC.split("## Restoring")[1], DOC)
    assert listed == ["Run `nimbusctl restore --snapshot ID` on the primary node."]  # list mark dropped


def test_replies_parse_as_json_or_lines():
    assert parse_reply(EXAMPLE[1]) == (EXAMPLE_QUESTION, EXAMPLE_QUOTE)
    assert parse_reply(json.dumps({"quote": "a b c", "question": "Why?"})) == ("Why?", "a b c")
    assert parse_reply("QUOTE: a b c\nQUESTION: Why?") == ("Why?", "a b c")
    assert parse_reply('{"quote": "a b c"}') is None and parse_reply("no idea") is None


def test_yields_count_every_stage():
    g = Generation(asked=10, dropped=Counter({"no reply": 1, "unparsed": 2, "quote not located": 1,
                                              "quote ambiguous": 1, "copies the example": 1, "duplicate": 1}))
    g.questions = [None] * 3  # only counted here
    assert g.yields() == {"sampled": 10, "replied": 9, "parsed": 7, "quote located": 5, "kept": 3,
                          "rejected as example": 1, "not a question": 0, "duplicate": 1}


def test_the_next_command_names_the_file_from_anywhere(tmp_path, monkeypatch):
    root = tmp_path / "my docs"
    (root / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    inside = next_command(root, root / "sub" / "q.csv")
    assert shlex.split(inside) == ["ragbench", "datasets", "validate", str(root), "--questions", "sub/q.csv"]
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    relative = next_command("../my docs", "q.csv")  # as typed from another directory
    assert shlex.split(relative)[3:] == ["../my docs", "--questions", str(elsewhere / "q.csv")]
