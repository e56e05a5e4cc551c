"""The GPUs a plan can target, and what of their memory a run cannot use for its tensors."""

from __future__ import annotations

from dataclasses import dataclass

GiB = 2**30
MiB = 2**20


@dataclass(frozen=True)
class Gpu:
    """A GPU preset: its name and the total memory nvidia-smi reports (MiB), which is less
    than the "24 GB" of the data sheet (decimal GB, and part of it reserved)."""

    name: str
    total_mib: int

    @property
    def bytes(self) -> int:
        return self.total_mib * MiB


# nvidia-smi's memory.total per card: Modal's table of its GPUs
# (https://github.com/modal-labs/modal-client/pull/2797: H100 81559, A100 80GB 81920,
# A100 40GB 40960, A10 23028, L40S 46068, L4 23034, T4 15360 MiB) and nvidia-smi outputs
# of H200 machines (143771 MiB).
GPUS: dict[str, Gpu] = {
    "t4": Gpu("T4 16 GB", 15_360), "a10": Gpu("A10 24 GB", 23_028),
    "l4": Gpu("L4 24 GB", 23_034), "a100-40": Gpu("A100 40 GB", 40_960),
    "l40s": Gpu("L40S 48 GB", 46_068), "a100-80": Gpu("A100 80 GB", 81_920),
    "h100": Gpu("H100 80 GB", 81_559), "h200": Gpu("H200 141 GB", 143_771),
}

# Assumptions, each named on the page with its size.
WORKSPACE_BYTES = 1 * GiB  # CUDA context, cuBLAS and attention workspaces
FRAGMENTATION = 0.05  # of everything allocated: the caching allocator's unusable gaps
