"""What the libraries print at import reaches the terminal only when someone can act on it."""

from __future__ import annotations

import logging


def test_bitsandbytes_kernel_hub_warning_is_quiet_and_its_errors_show() -> None:
    """bitsandbytes' CPU backend warns at import that its optional Hub-kernel package is
    missing (the app never fetches kernels); every floor that imports the library (the
    planner's class builds as well as the lab) goes through model_classes, which quiets
    that warning and nothing above it."""
    import model_classes  # noqa: F401

    logger = logging.getLogger("bitsandbytes.backends.cpu.ops")
    assert not logger.isEnabledFor(logging.WARNING)
    assert logger.isEnabledFor(logging.ERROR)
    assert logging.getLogger("bitsandbytes").isEnabledFor(logging.WARNING)
