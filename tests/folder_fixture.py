"""A small documentation folder of real files (Markdown, text, HTML, PDF, Word) and a questions file, built in a tmp
dir by the folder-dataset tests."""

from __future__ import annotations

import csv
import io
from pathlib import Path

INSTALL_MD = """# Installing Nimbus

Nimbus runs on Linux hosts with at least four cores. Install the package on every node, then start the broker.

## Ports

The broker listens on port 7400 for clients and on port 7401 for replication traffic between nodes.

## First start

Run `nimbusctl init --cluster-name prod` once on the first node; it writes the cluster identity to disk.
"""

UPGRADE_MD = """# Upgrading Nimbus

Upgrade one node at a time. Drain the node first so that no job is lost.

## Draining

Jobs still running when --drain-timeout expires are returned to their queues and offered to other workers.
"""

ERRORS_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>Errors</title>
<script>console.log("not text")</script></head><body><nav>Home | Docs</nav>
<h1>Error codes</h1>
<p>Every error carries a code of the form NMB-nnnn.</p>
<h2>NMB-4013: batch too large</h2>
<p>The combined payload of a batch is larger than <code>queue.max_batch_bytes</code>. Split the batch.</p>
<h2>NMB-5021: write quorum lost</h2>
<p>Too few replicas acknowledged the write in time. Check for a slow disk on the storage nodes.</p>
</body></html>
"""

FAQ_TXT = "Frequently asked questions\n\nCan workers be written in Go? Yes, there's an official Go client library.\n"

PDF_TITLE = "Release notes 3.4"
PDF_PARAGRAPHS = [
    "Version 3.4 adds single sign-on for the admin console through OpenID Connect.",
    "The default of queue.max_inflight_bytes changes from 128MiB to 256MiB in this release.",
    "Fixed a race where two schedulers could both act as leader after a network partition healed.",
]

DOCX_TITLE = "Backup and restore"
DOCX_SECTIONS = [
    ("Snapshots", "Snapshots are taken every six hours and kept for fourteen days by default."),
    ("Restoring", "To restore, stop the brokers and run nimbusctl restore with the snapshot identifier."),
]

#: (question, doc, quote, answer, class): quotes as people paste them (case, spacing, typographic marks)
QUESTIONS = [
    ("Which port do clients connect to?", "guides/install.md", "The broker listens on port 7400 for clients",
     "7400", "identifier"),
    ("What happens to running jobs when the drain timeout ends?", "",
     "jobs still running when —drain-timeout expires are returned to their queues", "returned to their queues",
     "paraphrase"),
    ("What does NMB-4013 mean?", "reference/errors.html",
     "The combined payload of a batch is larger than queue.max_batch_bytes.", "queue.max_batch_bytes", "identifier"),
    ("What is the new default of queue.max_inflight_bytes?", "",
     "The default of  queue.max_inflight_bytes changes from 128MiB to 256MiB", "256MiB", "identifier"),
    ("How often are snapshots taken?", "guides/backup.docx", "“Snapshots are taken every six hours”",
     "every six hours", "paraphrase"),
    ("Is there a Go client?", "faq.txt", "YES, THERE’S an official   Go client library", "official Go client library",
     "paraphrase"),
    ("Which release added single sign-on?", "release-notes/3.4.pdf", "", "", "paraphrase"),
    ("How do I restore a snapshot?", "", "stop the brokers and run nimbusctl restore", "", "paraphrase"),
    ("What is the meaning of life?", "", "", "", ""),
]


def questions_csv(rows=QUESTIONS) -> str:
    """The rows as a questions CSV with the columns question, doc, quote, answer, class."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["question", "doc", "quote", "answer", "class"])
    writer.writerows(rows)
    return buf.getvalue()


QUESTIONS_CSV = questions_csv()


def make_pdf(path: Path, title: str, paragraphs: list[str], *, password: str | None = None) -> Path:
    """A PDF with a text layer (fpdf2): the title in bold, then the paragraphs; ``password`` encrypts it."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title(title)
    if password:
        pdf.set_encryption(owner_password="owner", user_password=password)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.multi_cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    for p in paragraphs:
        pdf.multi_cell(0, 6, p, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def make_docx(path: Path, title: str, sections: list[tuple[str, str]]) -> Path:
    """A Word file (python-docx) with a Heading 1 title and a Heading 2 per section."""
    import docx

    d = docx.Document()
    d.add_heading(title, 1)
    for heading, text in sections:
        d.add_heading(heading, 2)
        d.add_paragraph(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    d.save(str(path))
    return path


def build_folder(root: Path, questions: str | None = QUESTIONS_CSV) -> Path:
    """Write the folder under ``root`` (and ``questions.csv`` unless ``questions`` is None); returns ``root``."""
    (root / "guides").mkdir(parents=True, exist_ok=True)
    (root / "reference").mkdir(parents=True, exist_ok=True)
    (root / "guides" / "install.md").write_text(INSTALL_MD)
    (root / "guides" / "upgrade.md").write_text(UPGRADE_MD)
    (root / "reference" / "errors.html").write_text(ERRORS_HTML)
    (root / "faq.txt").write_text(FAQ_TXT)
    make_pdf(root / "release-notes" / "3.4.pdf", PDF_TITLE, PDF_PARAGRAPHS)
    make_docx(root / "guides" / "backup.docx", DOCX_TITLE, DOCX_SECTIONS)
    if questions is not None:
        (root / "questions.csv").write_text(questions, encoding="utf-8")
    return root
