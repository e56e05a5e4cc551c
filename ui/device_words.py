"""The device the demos run on, in the session's language (the sidebar and the captions
under each measured result)."""

from __future__ import annotations

from demos.device import DeviceInfo
from i18n import N_
from ui.i18n import t, tn

# The engine names a CPU run's reason in English (demos.device.detect_device): worded here.
_CPU_REASONS = (N_("no GPU found"), N_("CPU chosen"))


def device_text(device: DeviceInfo) -> str:
    """The device the demos run on, in the session's language."""
    if device.kind == "cuda":
        if not device.total_bytes:
            return device.name
        return t("{name} ({size:.1f} GiB)", name=device.name, size=device.total_bytes / 2**30)
    return tn("CPU ({reason}), {count} core", "CPU ({reason}), {count} cores", device.cores,
              reason=t(device.name))
