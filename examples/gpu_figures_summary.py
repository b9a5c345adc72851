"""Print the figures of `agent bench --out DIR`'s results.json: python3 examples/gpu_figures_summary.py DIR..."""

import json
import sys

for d in sys.argv[1:]:
    try:
        r = json.load(open(f"{d}/results.json"))
    except Exception as e:
        print(d, "no results:", e)
        continue
    for name, s in r.get("summary", {}).items():
        keep = {k: v for k, v in s.items() if not isinstance(v, (list, dict))}
        print(d, name, json.dumps(keep)[:900])
