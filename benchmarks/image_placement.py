"""What the optimal checkpoint placement saves on the image presets, from their shipped
measurements (planner/presets/pictures/measured.json: nothing is measured here).

Not a test: a table. For each image preset (LoRA rank 16 on the attention, mixed
precision, one image at the preset's default side, its encoders resident, no headroom),
GPUs between the peak with every block checkpointed and the peak without checkpointing
(a quarter, half and three quarters of the way): what the recommended placement
(`--placement optimal`) recomputes, and what it saves against every block and against
the fewest first blocks that fit, each a share of a step's FLOPs as counted by torch
(planner.picture_measure.count_flops). Prints the table and writes
benchmarks/image-placement.json.

    .venv/bin/python -m benchmarks.image_placement
"""

from __future__ import annotations

import json
from pathlib import Path

from planner import picture_plan as plan
from planner.picture_cli import DEFAULT_RESOLUTION, picture_kind
from planner.picture_presets import PICTURE_PRESETS, preset_config
from planner.picture_report import measured_for, report

OUT = Path(__file__).with_name("image-placement.json")
WAYS = (0.25, 0.5, 0.75)  # where the GPU sits between every block's peak and none's


def rows() -> list[dict]:
    out = []
    for name in PICTURE_PRESETS:
        cfg = preset_config(name)
        side = DEFAULT_RESOLUTION.get(picture_kind(cfg) or "", 1024)
        p = plan.PictureInputs(cfg, resolution=side, tuning="lora", headroom=0.0, label=name)
        measured = measured_for(p)
        b = plan.blocks(measured, p.batch, side)
        low = plan.row(p, measured, b, "every-layer").peak
        high = plan.row(p, measured, b, "none").peak
        for way in WAYS:
            q = p.with_(gpu_bytes=int(low + way * (high - low)))
            data = report(q, measured)
            placed, rec = data["placement"], data["recommendation"]
            out.append(
                {
                    "preset": name,
                    "resolution": side,
                    "blocks": len(b.plain),
                    "gpu_gib": q.gpu_bytes / 2**30,
                    "way": way,
                    "checkpointed": rec["blocks_checkpointed"],
                    "recompute_share": placed["recompute_share"],
                    "saved_vs_every_layer": placed["saved_vs_every_layer"],
                    "first_k": placed["first_k"],
                    "saved_vs_first_k": placed["saved_vs_first_k"],
                }
            )
    return out


def main() -> None:
    table = rows()
    print(
        f"{'preset':27} {'px':>5} {'GPU GiB':>8} {'blocks':>9} {'recompute':>9} "
        f"{'vs every':>8} {'vs first-k':>14}"
    )
    for r in table:
        print(
            f"{r['preset']:27} {r['resolution']:>5} {r['gpu_gib']:>8.2f} "
            f"{r['checkpointed']:>4}/{r['blocks']:<4} {r['recompute_share']:>9.1%} "
            f"{r['saved_vs_every_layer']:>8.1%} {r['saved_vs_first_k']:>7.1%} "
            f"(k={r['first_k']})"
        )
    OUT.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
