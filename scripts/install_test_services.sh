#!/usr/bin/env bash
# Install the servers the test suite runs for real, when they are missing: PostgreSQL (MLflow's production
# backend). Debian's packages; needs root (CI runs as root). Idempotent: a no-op when everything is there.
set -euo pipefail

missing=()
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
  missing+=(postgresql)
fi
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "[install_test_services] missing ${missing[*]}; run as root (or install them) to run every test" >&2
  exit 0
fi
echo "[install_test_services] installing ${missing[*]} from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
