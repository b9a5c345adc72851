"""Print the summary figures of `agent bench --out DIR` (its results.json), one line per profile.

python3 examples/gpu_figures_summary.py DIR...
"""

import json
import sys
from pathlib import Path

for folder in sys.argv[1:]:
    try:
        results = json.loads(Path(folder, "results.json").read_text())
    except (OSError, ValueError) as exc:
        print(folder, "no results:", exc)
        continue
    for name, summary in results.get("summary", {}).items():
        flat = {k: v for k, v in summary.items() if not isinstance(v, (list, dict))}
        print(folder, name, json.dumps(flat)[:900])
