"""Credentials never reach a log, the DuckDB file or MLflow: a key inside an endpoint URL, or in the environment,
is masked wherever a message or a spec is written."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import duckdb
from conftest import DEMO, ROOT, write_config

from ragbench.core.redact import redact, redact_obj

SECRET = "sk-SECRETSECRET1234567890"


def test_redact_masks_urls_named_values_bearer_tokens_and_key_shapes():
    assert redact(f"POST https://bob:{SECRET}@api.example.com/v1 failed") == "POST https://***@api.example.com/v1 failed"
    assert redact("api_key=abc123 token: 'xyz98765'") == "api_key=*** token: '***'"
    assert redact("Authorization: Bearer abcdefghijklmnop") == "Authorization: Bearer ***"
    assert redact(f"the key {SECRET} leaked") == "the key *** leaked"
    assert redact("access_token=abc12345 client-secret: zz99") == "access_token=*** client-secret: ***"
    untouched = ("ndcg@10 = 0.71 at http://127.0.0.1:9/health for user@example.com; max_tokens: Input should be "
                 "greater than 0; token_budget: 512; tokenizer: all-MiniLM-L6-v2")
    assert redact(untouched) == untouched
    assert redact_obj({"generation": {"endpoint": f"http://u:{SECRET}@h/v1", "k": [1, "p=q"]}}) == {
        "generation": {"endpoint": "http://***@h/v1", "k": [1, "p=q"]}}


def test_masking_touches_secrets_only_not_paths_or_words_that_name_a_secret():
    # a file or a dotted key whose name says secret is not a variable holding one: nothing of it is masked
    ordinary = ["/etc/passwd: no questions file (questions.csv, .jsonl or .yaml)",
                "/home/u/secret: a questions file is .csv, .tsv, .jsonl, .yaml or .yml, not no suffix",
                r"C:\keys\token: not found", "secret.yaml: no such config file", "./password: is a folder",
                "generation.api_key: Input should be a valid string", "~/.token: permission denied",
                "max_tokens: 256; token_budget: 512"]
    for text in ordinary:
        assert redact(text) == text
    # ...while a variable, key or header named as a secret is masked wherever it stands
    secret = {"PASSWORD=hunter2 and more": "PASSWORD=*** and more",
              "env SECRET: s3cr3tvalue": "env SECRET: ***",
              "{'api_key': 'abc123'}": "{'api_key': '***'}",
              "https://h/v1?x=1&token=abc123&y=2": "https://h/v1?x=1&token=***&y=2",
              "failed: client_secret=zz99 at /etc/passwd: x": "failed: client_secret=*** at /etc/passwd: x",
              f"/srv/{SECRET}/x": "/srv/***/x"}
    for text, masked in secret.items():
        assert redact(text) == masked, text
    assert redact_obj({"api_key": "abc123", "db_password": "hunter2", "max_tokens": "256", "token_budget": 512}) == {
        "api_key": "***", "db_password": "***", "max_tokens": "256", "token_budget": 512}


class _Broken(BaseHTTPRequestHandler):
    """An LLM endpoint that is there (the preflight sees it answer) but fails every request."""

    def do_GET(self):  # noqa: N802 - the stdlib's spelling
        self.send_response(503)
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass


def test_a_key_in_the_endpoint_url_reaches_no_log_no_file_and_no_mlflow(tmp_path):
    home = tmp_path / "home"
    broken = HTTPServer(("127.0.0.1", 0), _Broken)
    threading.Thread(target=broken.serve_forever, daemon=True).start()
    port = broken.server_port
    cfg = write_config(tmp_path / "s.yaml", f"""name: secrets
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
metrics: {{cutoffs: [10]}}
generation: {{endpoint: "http://alice:{SECRET}@127.0.0.1:{port}/v1", model: m, retries: 0, timeout: 2, sample: 2,
              k_sweep: null}}
""")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGBENCH_", "MLFLOW_"))}
    env.update(RAGBENCH_PROGRESS="0", RAGBENCH_LLM_API_KEY=SECRET)
    proc = subprocess.run([sys.executable, "-m", "ragbench.cli", "sweep", str(cfg), "--orchestrator", "local",
                           "--home", str(home)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    broken.shutdown()
    broken.server_close()
    assert proc.returncode == 1, proc.stderr[-2000:]  # the LLM endpoint fails: the config fails, recorded
    assert SECRET not in proc.stdout + proc.stderr
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    stored = " ".join(str(v) for row in con.execute("SELECT spec_json FROM sweeps UNION ALL SELECT coalesce(error, '') "
                                                      "FROM configs").fetchall() for v in row)
    con.close()
    assert "alice:***" not in stored and f"***@127.0.0.1:{port}" in stored and SECRET not in stored
    leaked = [p for p in home.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert not leaked, leaked  # DuckDB, the MLflow store and its artifacts, caches
