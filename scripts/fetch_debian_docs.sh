#!/usr/bin/env bash
# Fetch the real documentation folder of docs/debian-walkthrough.md: HTML pages of the Python 3.11 manual as Debian
# ships them (package python3.11-doc, version 3.11.2-6+deb12u9, bookworm-security), reproduced file for file.
# The pages are the Python Software Foundation's (PSF licence, see the package's copyright file); they are not
# committed here, only the questions written for them (datasets/debian-python-howto/questions.csv).
#
#   scripts/fetch_debian_docs.sh [DEST]      # default /tmp/debian-docs/python-howto
#
# configs/debian-python-howto*.yaml read the pages from the default DEST and the questions from this repository
# (`ragbench datasets validate DEST --questions datasets/debian-python-howto/questions.csv` checks them).
# Needs apt-get (Debian 12 sources) or network access to snapshot.debian.org; checks the package's SHA-256.
set -euo pipefail

PKG=python3.11-doc
VERSION=3.11.2-6+deb12u9
DEB="${PKG}_${VERSION}_all.deb"
SHA256=5b3594189d6ef9a6963ce0347fd307a1cc67620ad697e144db366070e2e146be
SNAPSHOT="https://snapshot.debian.org/file/924896f88455aa449baeae5c3268c4672b95c9b8"   # the same file by its SHA-1
DEST="${1:-/tmp/debian-docs/python-howto}"
WORK="$(dirname "$DEST")/.${PKG}-${VERSION}"

# The HOWTOs without the two longest (the logging cookbook and Argument Clinic, a CPython-internal tool), the FAQ,
# and six tutorial chapters that the FAQ and HOWTOs refer to: 33 pages.
HOWTO=(annotations argparse cporting curses descriptor enum functional index instrumentation ipaddress
       isolating-extensions logging pyporting regex sockets sorting unicode urllib2)
FAQ=(design extending general gui index installed library programming windows)
TUTORIAL=(datastructures errors floatingpoint inputoutput modules venv)

mkdir -p "$WORK"
cd "$WORK"
if [[ ! -f "$DEB" ]]; then
  if ! apt-get download "${PKG}=${VERSION}" >/dev/null 2>&1; then
    echo "[fetch_debian_docs] apt-get download ${PKG}=${VERSION} failed; trying snapshot.debian.org" >&2
    curl -fsSL -o "$DEB" "$SNAPSHOT"
  fi
fi
echo "${SHA256}  ${DEB}" | sha256sum -c --quiet - || {
  echo "[fetch_debian_docs] ${DEB}: checksum differs from ${SHA256}; delete ${WORK} and retry" >&2; exit 1; }
rm -rf x && dpkg-deb -x "$DEB" x
SRC="x/usr/share/doc/python3.11/html"

rm -rf "$DEST" && mkdir -p "$DEST"/{howto,faq,tutorial}
for f in "${HOWTO[@]}"; do cp "$SRC/howto/$f.html" "$DEST/howto/"; done
for f in "${FAQ[@]}"; do cp "$SRC/faq/$f.html" "$DEST/faq/"; done
for f in "${TUTORIAL[@]}"; do cp "$SRC/tutorial/$f.html" "$DEST/tutorial/"; done
n=$(find "$DEST" -name '*.html' | wc -l)
echo "[fetch_debian_docs] ${n} pages of ${PKG} ${VERSION} in ${DEST}"
