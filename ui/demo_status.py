"""What a demo page says while its run waits or runs: its place in the queue and the
estimated wait, or a progress bar with the time left, drawn only when that reading
changes."""

from __future__ import annotations

from typing import Any

from ui.i18n import t


def duration_text(seconds: float) -> str:
    """'35 s', '12 min', '5.1 hours': a rough duration a learner can read at a glance."""
    if seconds < 100:
        return t("{seconds:.0f} s", seconds=seconds)
    if seconds < 5400:
        return t("{minutes:.0f} min", minutes=seconds / 60)
    return t("{hours:.1f} hours", hours=seconds / 3600)


def show_status(ticket: Any, notice: Any, noun: str, shown: tuple | None = None) -> tuple:
    """Draw the run's place, estimate or progress in `notice` unless it reads as `shown`
    (what this returned last time: each drawing is a message the browser lays out anew,
    and a waiting page polls four times a second); what it shows now. `noun`: "CPU" or
    "GPU", the device the run waits for."""
    status = ticket.status()
    if status.state == "queued" and status.restart > 0 and status.ahead == 0:
        now = ("info", t("Waiting for the {device}: its demo engine is restarting after a "
                         "stopped run, about {wait} until this run starts, then about {run} "
                         "to run.", device=noun, wait=duration_text(status.start_in),
                         run=duration_text(status.run_seconds)), ":material/restart_alt:")
    elif status.state == "queued" and not getattr(status, "known", True):
        # No run measured on this server's current load: a number would be a guess.
        now = ("info", t("Waiting for the {device}: {ahead} ahead; no estimate yet on this "
                         "load.", device=noun, ahead=status.ahead), ":material/hourglass:")
    elif status.state == "queued":
        now = ("info", t("Waiting for the {device}: {ahead} ahead, about {wait} until this "
                         "run starts, then about {run} to run.", device=noun,
                         ahead=status.ahead, wait=duration_text(status.start_in),
                         run=duration_text(status.run_seconds)), ":material/hourglass:")
    elif status.state == "remote":
        now = ("info", t("Another server is measuring this same demo; its result will show "
                         "here."), ":material/hourglass:")
    elif not getattr(status, "known", True):
        now = ("progress", t("Running on the {device} ({elapsed} so far); no estimate yet "
                             "on this load.", device=noun,
                             elapsed=duration_text(status.elapsed)), _steps(status.progress))
    else:  # progress 0..1: DemoService.status clamps it
        now = ("progress", t("Running on the {device}: about {left} left ({elapsed} so far).",
                             device=noun, left=duration_text(status.left),
                             elapsed=duration_text(status.elapsed)), _steps(status.progress))
    if now != shown:
        kind, text, extra = now
        if kind == "info":
            notice.info(text, icon=extra)
        else:
            notice.progress(extra, text=text)
    return now


def _steps(progress: float) -> float:
    """A progress bar's value in twentieths: a finer step is not seen, only redrawn."""
    return round(progress * 20) / 20
