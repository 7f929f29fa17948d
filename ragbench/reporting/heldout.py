"""The winner's held-out check, in words, for every report (terminal leaderboard, ``ragbench report``, HTML).

With ``dataset.holdout`` the sweep ranks configs on the tuning queries and measures each on the held-out ones too
(``heldout_<measure>``). The winner is the best of N configs on M tuning questions: part of its lead is the noise
of those M questions, so its tuning score is optimistic (the winner's curse). Its held-out score is measured on
questions the choice never saw; ``drop = tuning − held-out`` is how much of the tuning score did not carry over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class WinnerHeldOut:
    """The winner (best on the tuning set by ``primary``) with its tuning and held-out means.

    ``n_tuning`` / ``n_heldout``: labelled queries scored on each side (None when unknown).
    """

    config_id: str
    label: str
    primary: str
    tuning: float
    heldout: float
    n_configs: int
    n_tuning: int | None = None
    n_heldout: int | None = None

    @property
    def drop(self) -> float:
        """``tuning − heldout`` (positive: the winner scores lower on questions it was not chosen on)."""
        return self.tuning - self.heldout

    def numbers(self) -> str:
        """``"ndcg_at_10: tuning 0.712 (35 q) · held-out 0.655 (15 q) · drop 0.057"``."""
        def n(x: int | None) -> str:
            return f" ({x} q)" if x is not None else ""
        drop = "–" if math.isnan(self.drop) else f"{self.drop:+.3f}"
        return (f"{self.primary}: tuning {self.tuning:.3f}{n(self.n_tuning)} · held-out {self.heldout:.3f}"
                f"{n(self.n_heldout)} · drop (tuning − held-out) {drop}")

    def sentence(self) -> str:
        """The winner's scores side by side and why they differ."""
        on = f"{self.n_tuning} tuning questions" if self.n_tuning is not None else "the tuning questions"
        return (f"Winner {self.label} on the held-out set — {self.numbers()}. Winner's curse: the best of "
                f"{self.n_configs} configs on {on} is optimistic, because part of its lead is the luck of those "
                f"questions; the held-out score, on questions the choice never saw, is the estimate to expect.")
