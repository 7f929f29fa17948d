"""EVALUATION_VERSION is bumped whenever evaluation code changes: stored results are reused across sweeps only
while it is unchanged (ragbench.sweep.evaluate.evaluation_key), so code that changes results without a bump
would silently serve stale numbers. This test pins a digest of that code (comments, docstrings and formatting
ignored) to the version number.

When it fails: bump EVALUATION_VERSION in ragbench/sweep/evaluate.py if the change can alter any stored result,
and pin the new digest below under the new number (a pure refactor may keep the number: re-pin the digest).
"""

from __future__ import annotations

import ast
import hashlib

from conftest import ROOT

from ragbench.sweep.evaluate import EVALUATION_VERSION

#: the code a stored result depends on, beyond the caches' own keys (chunks and vectors are keyed by content)
EVALUATION_CODE = ["ragbench/evaluation", "ragbench/retrieval", "ragbench/generation/answering.py",
                   "ragbench/generation/oracle.py", "ragbench/generation/stage.py",
                   "ragbench/generation/llm/context.py", "ragbench/generation/llm/graders.py",
                   "ragbench/chunking/stats.py", "ragbench/sweep/evaluate.py", "ragbench/sweep/stages.py",
                   "ragbench/results/outcomes.py"]
PINNED = {1: "bb145c4acc24204a", 2: "7706c7cd7df01a25", 3: "6ce154f28d7ccd9a", 4: "f18d4ebc90c0a2fb"}


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return tree


def evaluation_code_digest() -> str:
    files = []
    for entry in EVALUATION_CODE:
        path = ROOT / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(ast.dump(_strip_docstrings(ast.parse(f.read_text(encoding="utf-8")))).encode())
    return h.hexdigest()[:16]


def test_evaluation_code_is_pinned_to_the_version():
    digest = evaluation_code_digest()
    assert PINNED.get(EVALUATION_VERSION) == digest, (
        f"evaluation code changed (digest {digest}) but EVALUATION_VERSION is still {EVALUATION_VERSION}: bump it "
        f"in ragbench/sweep/evaluate.py if stored results could change, and pin {{version: {digest!r}}} here")
