"""``ragbench diff [SWEEP_A] [SWEEP_B]``: what changed between two sweeps, registered on the CLI by :func:`register`.

With no argument: the latest sweep against its predecessor (the previous finished sweep of the same name on the same
dataset fingerprint); with one: that sweep against its predecessor; with two: SWEEP_B (now) against SWEEP_A (then).
The section is the one every report shows (:mod:`ragbench.reporting.since`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ragbench.cli.options import fail


def register(app: typer.Typer) -> None:
    """Add the ``diff`` command to ``app``."""

    @app.command()
    def diff(
        sweep_a: Annotated[Optional[str], typer.Argument(help="the earlier sweep (then); alone: the sweep to "
                                                              "compare with its predecessor (default: latest)")]
        = None,
        sweep_b: Annotated[Optional[str], typer.Argument(help="the later sweep (now)")] = None,
        measure: Annotated[Optional[str], typer.Option(help="measure compared (default: the later sweep's "
                                                            "primary)")] = None,
        test: Annotated[str, typer.Option(help="paired test: randomization or student")] = "randomization",
        alpha: Annotated[float, typer.Option(help="family-wise level (Holm over the configs in both)")] = 0.05,
        json_out: Annotated[bool, typer.Option("--json", help="print the section as one JSON object")] = False,
        home: Annotated[Optional[Path], typer.Option("--home", help="ragbench home holding results.duckdb "
                                                                     "(default: $RAGBENCH_HOME, else ./.ragbench)")]
        = None,
    ) -> None:
        """Configs added and removed, each shared config's change in the primary measure (paired test on the shared
        queries, Holm-corrected), the winner's change and the questions that flipped under the winner."""
        from ragbench.cli.options import home_store
        from ragbench.core.errors import RagbenchError
        from ragbench.core.measure_keys import measure_key
        from ragbench.core.progress import stdout
        from ragbench.reporting.render_terminal import since_rich
        from ragbench.reporting.since import StatOptions, since_previous
        from ragbench.reporting.tables import to_json_lines
        from ragbench.results.lookup import resolve_sweep_id, sweep_primary

        if test not in ("randomization", "student"):
            fail(ValueError(f"--test {test!r}: use randomization or student"))
        try:
            store, _ = home_store(home)
            now = resolve_sweep_id(store, sweep_b if sweep_b is not None else (sweep_a or "latest"))
            then = resolve_sweep_id(store, sweep_a) if sweep_b is not None and sweep_a is not None else None
            primary = measure_key(measure) if measure else sweep_primary(store, now)
            section, why = since_previous(store, now, primary, StatOptions(test, alpha), since=then)
        except (RagbenchError, ValueError) as e:
            fail(e)
        if json_out:
            typer.echo(to_json_lines([{"since_previous": section.as_dict() if section else None,
                                       "since_previous_reason": why}])[0])
            return
        for part in since_rich(section, why, primary, width=stdout.width):
            stdout.print(part)
