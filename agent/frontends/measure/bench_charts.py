"""The charts of `agent bench --out DIR`, drawn with matplotlib from results.json's document.

speed.png/.svg: generation tok/s per prompt and profile (the median of the runs, whiskers from min to
max), each speculative bar labelled with its ratio to the first profile; acceptance.png/.svg: draft
tokens accepted / drafted per prompt; acceptance_per_position.png/.svg (when the server counts them,
llama-server's /metrics): per draft position, the share of drafts whose token there was accepted. Figures are built without pyplot (no global state, no display).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def draw_charts(doc: dict[str, Any], out: Path) -> list[Path]:
    written = []
    charts = [("speed", speed_chart), ("acceptance", acceptance_chart)]
    if any((row or {}).get("acceptance_per_position") for row in doc["summary"].values()):
        charts.append(("acceptance_per_position", position_chart))
    for name, draw in charts:
        fig = draw(doc)
        for ext in ("png", "svg"):
            path = out / f"{name}.{ext}"
            # No date in the files: the same results give the same charts.
            metadata = {"Date": None} if ext == "svg" else {"Software": None}
            fig.savefig(path, dpi=150, metadata=metadata)
            written.append(path)
    return written


def _prompts(doc: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(r["prompt"] for r in doc["requests"]))


def _footer(doc: dict[str, Any]) -> str:
    settings, machine = doc["settings"], doc.get("machine") or {}
    parts = [
        f"runs {settings.get('runs')}",
        f"max_tokens {settings.get('max_tokens')}",
        f"temperature {settings.get('temperature'):g}",
    ]
    if settings.get("seed") is not None:
        parts.append(f"seed {settings['seed']}")
    where = ", ".join(
        str(x)
        for x in (
            machine.get("cpu"),
            f"{machine['cpus']} CPUs" if machine.get("cpus") else None,
            machine.get("gpu"),
            (machine.get("time") or "")[:10],
        )
        if x
    )
    loads = [
        f"{name} {la['before'][0]:.1f}→{la['after'][0]:.1f}"
        for name, about in (doc.get("profiles") or {}).items()
        if (la := about.get("load_average")) and la.get("before") and la.get("after")
    ]
    text = f"$ {doc.get('command') or 'agent bench'}\n{' · '.join(parts)}" + (f" · {where}" if where else "")
    if loads:
        text += f"\nload average (1 min) while each profile ran: {', '.join(loads)}"
    return text


def _value(tok_s: float) -> str:
    return f"{tok_s:.1f}" if tok_s < 10 else f"{tok_s:.0f}"


def _figure(width: float = 10.0, height: float = 5.8):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    ax = fig.subplots()
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    return fig, ax


def _label(profile: str, doc: dict[str, Any]) -> str:
    spec = (doc.get("profiles", {}).get(profile) or {}).get("spec_mode")
    return f"{profile} ({spec})" if spec and spec != "none" else profile


def speed_chart(doc: dict[str, Any]):
    summary = doc["summary"]
    profiles = list(summary)
    prompts = _prompts(doc)
    fig, ax = _figure()
    width = 0.8 / max(1, len(profiles))
    top = 0.0
    for k, profile in enumerate(profiles):
        cells = summary[profile]["per_prompt"]
        speedup = summary[profile].get("speedup") or {}
        xs, heights, low, high, labels = [], [], [], [], []
        for i, prompt in enumerate(prompts):
            gen = (cells.get(prompt) or {}).get("gen_tok_s")
            if not gen:
                continue
            xs.append(i - 0.4 + width * (k + 0.5))
            heights.append(gen["median"])
            low.append(gen["median"] - gen["min"])
            high.append(gen["max"] - gen["median"])
            ratio = (speedup.get("per_prompt") or {}).get(prompt)
            labels.append(_value(gen["median"]) + (f"\n{ratio:.2f}×" if ratio else ""))
            top = max(top, gen["max"])
        bars = ax.bar(
            xs, heights, width * 0.92, yerr=[low, high], capsize=3, label=_label(profile, doc),
            color=COLOURS[k % len(COLOURS)], error_kw={"elinewidth": 1, "alpha": 0.7},
        )  # fmt: skip
        for bar, err, text in zip(bars, high, labels, strict=True):
            ax.annotate(
                text, (bar.get_x() + bar.get_width() / 2, bar.get_height() + err), xytext=(0, 3),
                textcoords="offset points", ha="center", va="bottom", fontsize=8,
                fontweight="bold" if "×" in text else "normal",
            )  # fmt: skip
    ax.set_xticks(range(len(prompts)), prompts)
    ax.set_ylabel("generation tok/s (server)")
    ax.set_ylim(0, top * 1.25 or 1)
    runs = doc["settings"].get("runs")
    ax.set_title(
        f"Generation speed per prompt: median of {runs} run{'s' if runs != 1 else ''}, whiskers min–max",
        loc="left", fontsize=11,
    )  # fmt: skip
    lines = []
    for profile in profiles[1:]:
        sp = summary[profile].get("speedup") or {}
        spread = sp.get("spread")
        if spread:
            lines.append(
                f"{profile}: {spread['median']:.2f}× {sp['against']} (per-run ratios {spread['min']:.2f}–"
                f"{spread['max']:.2f}, IQR {spread['iqr']:.2f})"
            )
    if lines:
        ax.text(0.0, 1.0, "\n".join(lines), transform=ax.transAxes, va="top", fontsize=9)
    ax.legend(loc="upper right", fontsize=9, frameon=False)
    fig.text(0.01, 0.0, _footer(doc), fontsize=7, color="#555555", va="bottom", family="monospace")
    fig.get_layout_engine().set(h_pad=0.45)
    return fig


def acceptance_chart(doc: dict[str, Any]):
    summary = doc["summary"]
    drafting = [p for p in summary if any(c.get("drafted") for c in summary[p]["per_prompt"].values())]
    prompts = _prompts(doc)
    fig, ax = _figure(height=5.0)
    ax.set_title("Draft acceptance per prompt: accepted / drafted tokens, all runs", loc="left", fontsize=11)
    ax.set_xticks(range(len(prompts)), prompts)
    ax.set_ylim(0, 115)
    ax.set_ylabel("accepted %")
    if not drafting:
        ax.text(0.5, 0.5, "no profile drafted any token in this run", transform=ax.transAxes,
                ha="center", va="center", fontsize=11, color="#555555")  # fmt: skip
    width = 0.8 / max(1, len(drafting))
    labelled: set[str] = set()
    for k, profile in enumerate(drafting):
        cells = summary[profile]["per_prompt"]
        colour = COLOURS[list(summary).index(profile) % len(COLOURS)]
        for i, prompt in enumerate(prompts):
            cell = cells.get(prompt) or {}
            x = i - 0.4 + width * (k + 0.5)
            if not cell.get("drafted"):
                ax.annotate("nothing\ndrafted", (x, 0), xytext=(0, 3), textcoords="offset points",
                            ha="center", va="bottom", fontsize=8, color="#555555")  # fmt: skip
                continue
            value = 100 * cell["acceptance"]
            label = _label(profile, doc) if profile not in labelled else None
            labelled.add(profile)
            ax.bar(x, value, width * 0.92, color=colour, label=label)
            ax.annotate(
                f"{value:.0f}%\n{cell['accepted']}/{cell['drafted']}", (x, value), xytext=(0, 3),
                textcoords="offset points", ha="center", va="bottom", fontsize=8,
            )  # fmt: skip
    if drafting:
        ax.legend(loc="upper right", fontsize=9, frameon=False)
    fig.text(0.01, 0.0, _footer(doc), fontsize=7, color="#555555", va="bottom", family="monospace")
    fig.get_layout_engine().set(h_pad=0.45)
    return fig


def position_chart(doc: dict[str, Any]):
    """One line per drafting profile: position 1 is the first drafted token. A line that falls fast
    says the drafts are longer than what gets accepted."""
    summary = doc["summary"]
    fig, ax = _figure(height=5.0)
    ax.set_title(
        "Acceptance by draft position: drafts whose token there was accepted, all runs",
        loc="left",
        fontsize=11,
    )
    top = 1
    for k, profile in enumerate(summary):
        per_position = summary[profile].get("acceptance_per_position")
        if not per_position:
            continue
        rates = [100 * r for r in per_position["rate"]]
        xs = list(range(1, len(rates) + 1))
        top = max(top, len(rates))
        label = f"{_label(profile, doc)}: {per_position['drafts']} drafts"
        ax.plot(xs, rates, marker="o", markersize=3, color=COLOURS[k % len(COLOURS)], label=label)
    ax.set_xlim(0.5, top + 0.5)
    ax.set_ylim(0, 105)
    ax.set_xlabel("draft position")
    ax.set_ylabel("accepted %")
    ax.legend(loc="upper right", fontsize=9, frameon=False)
    fig.text(0.01, 0.0, _footer(doc), fontsize=7, color="#555555", va="bottom", family="monospace")
    fig.get_layout_engine().set(h_pad=0.45)
    return fig
