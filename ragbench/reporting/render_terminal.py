"""The leaderboard model in the terminal: rich tables that fit the console width (the columns that do not fit are
named in the caption; ``--format markdown|csv|json`` shows every column).

:func:`leaderboard_rich` renders a report (CIs, marks, the test against the best), :func:`leaderboard_table` the
leaderboard a sweep prints when it ends; both render :class:`~ragbench.reporting.leaderboard.Leaderboard` rows.
"""

from __future__ import annotations

from rich.table import Table

from ragbench.evaluation.metrics import unreached_depth
from ragbench.evaluation.comparison import Comparison
from ragbench.reporting.cells import display_rows, fmt, report_columns, say_why_unranked, sweep_columns
from ragbench.reporting.columns import LEADERBOARD_MEASURES, shallow_notes
from ragbench.reporting.decision import decision_lines
from ragbench.reporting.headline import Headline, build_headline
from ragbench.reporting.leaderboard import sweep_leaderboard
from ragbench.reporting.model import SweepReport
from ragbench.reporting.verdicts import legend, resolution, vs_best_rows
from ragbench.reporting.pareto import cost_summary
from ragbench.reporting.screening import SCREENING_COLUMNS, screening_rows, screening_sentence
from ragbench.reporting.since import SincePrevious, change_columns, change_rows, since_lines
from ragbench.reporting.tables import Column, fit_table, number
from ragbench.results.outcomes import NOT_RUN_STATUSES, SweepResult


def leaderboard_rich(report: SweepReport, width: int = 160) -> Table:
    """The leaderboard with bootstrap CIs and significance marks, best first, failed configs last, in a table
    that fits ``width`` columns (the columns that do not fit are named in the caption)."""
    rows = display_rows(report.board)
    return fit_table(report_columns(report.board), rows, width,
                     title=f"sweep {report.sweep_id} · {report.dataset_name} [{report.dataset_fingerprint}]",
                     caption="\n".join([*([f"warning: {report.unfinished}"] if report.unfinished else []),
                                         build_headline(report).verdict, *([report.winner_heldout.sentence()]
                                                            if report.winner_heldout else []),
                                         *decision_lines(report.questions_needed, report.holdout_repeats, 3),
                                         *(report.pooled.lines(3) if report.pooled else []),
                                         *(report.assessor.lines(False) if report.assessor else []),
                                         *(f"warning: {w}" for w in report.dataset_warnings), legend(report),
                                         *cost_summary(report.costs, report.primary)]),
                     row_styles=["red" if r["status"] != "finished" else None for r in rows])


def since_rich(section: SincePrevious | None, note: str | None, primary: str, width: int = 160) -> list:
    """The section "since the previous sweep" (what ``diff`` prints): sentences, then a table of the shared
    configs' changes; or the note saying why there is no previous sweep."""
    from rich.text import Text  # plain text: labels and question texts may hold [brackets]

    out: list = [Text("Since the previous sweep", style="bold")]
    if section is None:
        return out + [Text(f"No previous sweep to compare with: {note}.")]
    out += [Text(line) for line in since_lines(section)]
    if section.changes:
        out.append(fit_table(change_columns(primary), change_rows(section), width,
                             title=f"{primary}: each config in both sweeps, now against then"))
    return out


def sections_rich(report: SweepReport, width: int = 160) -> list:
    """What ``report`` prints under the leaderboard: the screen (:func:`screening_rich`), :func:`since_rich`, then
    "against production" (a sentence: the best against the live promotion and the command to promote, or why not),
    as rich renderables."""
    from rich.text import Text

    note = (report.production_note or "not compared") + ("" if report.vs_production else ".")
    return [*screening_rich(report, width), *since_rich(report.since_previous, report.since_note, report.primary,
                                                         width),
            Text("Against production", style="bold"), Text(note)]


def screening_rich(report: SweepReport, width: int = 160) -> list:
    """The "Screening" section of a screened sweep (:mod:`ragbench.reporting.screening`); nothing without one."""
    from rich.text import Text

    rows = screening_rows(report.screening)
    if not rows:
        return []
    return [Text("Screening", style="bold"), Text(screening_sentence(report.screening)),
            fit_table(SCREENING_COLUMNS, rows, width, title=f"{report.primary} on the pooled sub-corpus")]


def headline_rich(headline: Headline, width: int = 160):
    """The verdict box: the :class:`~ragbench.reporting.headline.Headline` (winner with its CI, the tied set, the
    margin over the runner-up, since the previous sweep, against production, what to do next) in a panel."""
    from rich.panel import Panel
    from rich.table import Table as Grid
    from rich.text import Text

    grid = Grid.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for what, text in headline.items():
        grid.add_row(Text(what), Text(text))
    return Panel(grid, title=Text(f"verdict · sweep {headline.sweep_id}", style="bold"), title_align="left",
                 width=width, border_style="green")


def report_rich(report: SweepReport, width: int = 160) -> list:
    """What ``report`` prints, and what a sweep prints when it ends: the leaderboard with CIs and marks
    (:func:`leaderboard_rich`), the sections since the previous sweep and against production
    (:func:`sections_rich`), then the verdict box (:func:`headline_rich`)."""
    return [leaderboard_rich(report, width), *sections_rich(report, width),
            headline_rich(build_headline(report), width)]


def leaderboard_table(result: SweepResult, measures: tuple[str, ...] = LEADERBOARD_MEASURES,
                      width: int = 160) -> Table:
    """The sweep's closing leaderboard: configs best first by the primary measure in a table that fits ``width``
    columns; failed configs last with their error."""
    board = sweep_leaderboard(result, measures)
    rows = board.dicts()
    for r in rows:
        say_why_unranked(r)
    notes = [f"{result.n_failed} of {len(result.outcomes)} configs failed"] if result.n_failed else []
    notes += shallow_notes({m: {o.config_id: d for o in result.outcomes
                                if (d := unreached_depth(o.metrics, m)) is not None}
                            for m in board.measures})
    notes += [board.winner.sentence()] if board.winner else []
    return fit_table(sweep_columns(board), rows, width,
                     title=f"sweep {result.sweep_id}  ·  dataset {result.dataset_fingerprint}  ·  "
                           f"{result.seconds:.0f} s  ·  {result.vectors_computed} vectors computed",
                     caption="\n".join(notes) or None,
                     row_styles=["red" if r["status"] == "failed" else "yellow" if r["status"] in NOT_RUN_STATUSES
                                 else None for r in rows])


def vs_best_rich(report: SweepReport, width: int = 160) -> Table:
    """Each config against the best on the primary measure (what ``compare`` shows by default)."""
    comp = report.comparisons[report.primary]
    rows = vs_best_rows(report)
    for r in rows:
        r["cell"] = f"{r['mark']} {fmt(r['mean'])}"
        r["diff"] = f"{r['mean_diff']:+.4f}"
        r["wtl"] = f"{r['wins']}/{r['ties']}/{r['losses']}"
    cols = [Column("#", "rank", number(0), numeric=True, required=True), Column("chunker", "chunker", required=True),
            Column("model", "model", required=True), Column("retriever", "retriever", required=True),
            Column(report.primary, "cell", numeric=True, required=True),
            Column("− best", "diff", numeric=True, required=True),
            Column("p", "p_vs_best", number(4), numeric=True, required=True),
            Column("W/T/L", "wtl", numeric=True), Column("queries", "n", number(0), numeric=True)]
    best = report.leaderboard().row(0, named=True)
    return fit_table(cols, rows, width,
                     title=f"{report.primary}: every config against the best, {report.label_of(comp.best)} "
                           f"({best['mean']:.4f}); paired {comp.test} test, {resolution(comp)}",
                     caption="▼ significantly worse than the best, ≈ not distinguishable from it; p: Holm-adjusted; "
                             "W/T/L: queries where the config beats / ties / loses to the best. Every pair: "
                             "`ragbench compare --all`." + "".join(f" {n}" for n in shallow_notes(report.shallow)),
                     every_column="--json")


def comparison_rich(comp: Comparison, names: dict[str, str], width: int = 160) -> Table:
    """All pairs of one measure: mean difference, raw and Holm-adjusted p-values, win/tie/loss; ``names`` maps
    config ids to what to show (labels)."""
    rows = []
    for p in sorted(comp.pairs, key=lambda p: (p.p_adjusted if p.p_adjusted == p.p_adjusted else 2.0)):
        a, b, d = p.config_a, p.config_b, p.mean_diff
        if d < 0:  # orient every row so that A is the better one: easier to read
            p = comp.pair(b, a)
            a, b, d = b, a, -d
        rows.append({"a": names.get(a, a), "b": names.get(b, b), "diff": f"{d:+.4f}", "p": p.p_value,
                     "p_adj": p.p_adjusted, "sig": "yes" if p.significant else "no",
                     "wtl": f"{p.wins}/{p.ties}/{p.losses}", "n": p.n})
    cols = [Column("A (better mean)", "a", required=True), Column("B", "b", required=True),
            Column("mean A−B", "diff", numeric=True, required=True),
            Column("p (Holm)", "p_adj", number(4), numeric=True, required=True),
            Column("significant", "sig", required=True), Column("p", "p", number(4), numeric=True),
            Column("W/T/L (A vs B)", "wtl", numeric=True), Column("queries", "n", number(0), numeric=True)]
    return fit_table(cols, rows, width,
                     title=f"{comp.measure}: paired {comp.test} test, Holm over {len(comp.pairs)} pairs, "
                           f"α={comp.alpha:g}",
                     caption=f"best: {names.get(comp.best, comp.best)}; tied with best: "
                             f"{'; '.join(names.get(c, c) for c in comp.tied_with_best if c != comp.best) or 'none'}",
                     every_column="--json")
