"""Whether a `pareto --json` document is one Pareto set: rows, distinct designs, twin rows (rows
whose design another row already is: same shape once fields the model does not use, the dense
width of an MoE without dense layers, are set aside) and rows another row dominates in the
objectives the table reports (`design_values` when present, else frontier area, loss proxy and
the trial's own values). Works on documents of older versions too, so before/after compare:

    archscout search studies/moe-400b-gb300-nvl72.toml --trials 2000 --no-progress
    archscout pareto studies/moe-400b-gb300-nvl72.toml --json > pareto.json
    python tests/benchmarks/measure_pareto_set.py pareto.json
"""

import json
import sys

DIRECTION = {"frontier_area": 1.0, "loss": -1.0, "ttft_ms": -1.0, "gpus": -1.0}


def design(arch: dict) -> tuple:
    fields = {k: v for k, v in arch.items() if k != "name"}
    if fields["num_experts"] and not fields["first_dense_layers"]:
        fields["intermediate_size"] = 0
    return tuple(sorted(fields.items()))


def reported(item: dict, names: list[str]) -> list[float]:
    """The item's objective values, all to be maximized."""
    values = item.get("design_values") or {}
    shown = {"frontier_area": item["frontier_area"], "loss": item["loss_proxy"]}
    return [DIRECTION[n] * values.get(n, shown.get(n, item["values"][n])) for n in names]


def main(path: str) -> None:
    doc = json.load(open(path, encoding="utf-8"))
    items, names = doc["pareto"], doc["objectives"]
    keys = [design(i["architecture"]) for i in items]
    v = [reported(i, names) for i in items]
    dominated = sum(any(all(b >= a for a, b in zip(v[i], v[j])) and
                        any(b > a for a, b in zip(v[i], v[j])) for j in range(len(v)) if j != i)
                    for i in range(len(v)))
    print(f"rows {len(items)}  distinct designs {len(set(keys))}  "
          f"twin rows {len(items) - len(set(keys))}  dominated rows {dominated}")


if __name__ == "__main__":
    main(sys.argv[1])
