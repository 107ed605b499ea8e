"""Summarise an Nsight Compute SASS source page (`ncu -i R --page source --csv
--print-source sass`): shared-memory wavefronts per instruction kind, against the ideal.

    python3 docs/probes/wavefronts.py SOURCE.csv [...]
"""

import csv
import sys
from collections import defaultdict


def number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def summary(path: str) -> str:
    rows = list(csv.reader(open(path)))
    start = next(i for i, r in enumerate(rows) if r[:2] == ["Address", "Source"])
    header = rows[start]
    col = {name: header.index(name) for name in header}
    kinds = defaultdict(lambda: [0.0, 0.0, 0.0])
    for r in rows[start + 1 :]:
        if len(r) != len(header):
            continue
        wavefronts = number(r[col["L1 Wavefronts Shared"]])
        if not wavefronts:
            continue
        op = r[col["Source"]].split()
        op = op[1] if op[0].startswith("@") else op[0]
        k = kinds[op.split(".")[0]]
        k[0] += wavefronts
        k[1] += number(r[col["L1 Wavefronts Shared Ideal"]])
        k[2] += number(r[col["L1 Wavefronts Shared Excessive"]])
    lines = [f"{path}:"]
    total = sum(v[0] for v in kinds.values())
    for op, (w, ideal, excess) in sorted(kinds.items()):
        lines.append(
            f"  {op:8s} wavefronts {w:12,.0f}  ideal {ideal:12,.0f}  ({w / ideal:.2f}x)  "
            f"excess {excess:12,.0f}  share {w / total:.0%}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(summary(p))
