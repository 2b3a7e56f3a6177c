#!/usr/bin/env python3
"""Draws the cost curve of `node-lifecycled-sim bench --sizes curve --csv FILE` as one SVG.

    scripts/plot-bench-curve.py bench-curve.csv BENCHMARKS-curve.svg

Four panels against the node count (30 pods per node, 500 to 65,000 nodes): steady and peak RSS, initial sync,
CPU per Lease watch event, detection p50/p99. Each panel draws the measured points and the
straight line fitted through them (least squares), and a dashed line for the target where
the issue sets one. Python's standard library only: the SVG is written by hand.
"""

import csv
import sys

WIDTH, HEIGHT = 960, 640
PANEL_W, PANEL_H = 400, 220
MARGIN_L, MARGIN_T = 70, 50


def fit(xs, ys):
    """Slope and intercept of the least-squares line; None with fewer than two distinct x."""
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
    if len(pts) < 2:
        return None
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    slope = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
    return slope, my - slope * mx


def number(text):
    text = (text or "").strip()
    return float(text) if text else None


def panel(out, x0, y0, title, unit, nodes, series, target=None):
    """One panel: series is [(label, colour, values)], target a (nodes, value) step list."""
    values = [v for _, _, vs in series for v in vs if v is not None]
    if target:
        values += [t for _, t in target]
    top = max(values + [1e-9]) * 1.15
    right = max(nodes) * 1.05

    def px(x):
        return x0 + x / right * PANEL_W

    def py(y):
        return y0 + PANEL_H - y / top * PANEL_H

    out.append(f'<text x="{x0}" y="{y0 - 12}" font-size="14" font-weight="bold">{title}</text>')
    out.append(
        f'<rect x="{x0}" y="{y0}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#999"/>'
    )
    for i in range(5):
        y = top * i / 4
        out.append(
            f'<line x1="{x0}" x2="{x0 + PANEL_W}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
            f'stroke="#eee"/>'
        )
        out.append(
            f'<text x="{x0 - 6}" y="{py(y) + 4:.1f}" font-size="10" text-anchor="end">'
            f"{y:.3g}</text>"
        )
    for n in nodes:
        out.append(
            f'<text x="{px(n):.1f}" y="{y0 + PANEL_H + 14}" font-size="10" '
            f'text-anchor="middle">{n:,.0f}</text>'
        )
    out.append(
        f'<text x="{x0 + PANEL_W / 2}" y="{y0 + PANEL_H + 30}" font-size="11" '
        f'text-anchor="middle">nodes (30 pods each) — {unit}</text>'
    )
    if target:
        pts = " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in target)
        out.append(
            f'<polyline points="{pts}" fill="none" stroke="#c00" stroke-dasharray="5,4"/>'
        )
    for k, (label, colour, vs) in enumerate(series):
        line = fit(nodes, vs)
        if line:
            slope, intercept = line
            out.append(
                f'<line x1="{px(0):.1f}" y1="{py(max(intercept, 0)):.1f}" x2="{px(right):.1f}" '
                f'y2="{py(max(slope * right + intercept, 0)):.1f}" stroke="{colour}" '
                f'stroke-opacity="0.4"/>'
            )
        for n, v in zip(nodes, vs):
            if v is not None:
                out.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="4" fill="{colour}"/>')
        out.append(
            f'<text x="{x0 + 8}" y="{y0 + 16 + 14 * k}" font-size="11" fill="{colour}">'
            f"{label}</text>"
        )


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot-bench-curve.py FIGURES.csv OUT.svg")
    with open(sys.argv[1], newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: int(r["nodes"]))
    if not rows:
        sys.exit(f"{sys.argv[1]}: no sizes")
    nodes = [int(r["nodes"]) for r in rows]
    col = lambda name: [number(r.get(name)) for r in rows]  # noqa: E731
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'font-family="sans-serif">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        '<text x="20" y="24" font-size="16" font-weight="bold">node-lifecycled cost curve '
        "(node-lifecycled-sim bench --sizes curve)</text>",
    ]
    x1, x2 = MARGIN_L, MARGIN_L + PANEL_W + 90
    y1, y2 = MARGIN_T + 20, MARGIN_T + PANEL_H + 90
    panel(
        out, x1, y1, "Memory", "MiB", nodes,
        [("steady RSS", "#1f77b4", col("steady_rss_mib")),
         ("peak RSS during sync", "#ff7f0e", col("peak_rss_mib"))],
        target=[(5000, 24), (15000, 64), (65000, 224)],
    )
    panel(
        out, x2, y1, "Initial sync", "seconds", nodes,
        [("start → READY=1", "#2ca02c", col("sync_s"))],
        target=[(5000, 0.5), (15000, 1.5), (65000, 5)],
    )
    panel(
        out, x1, y2, "CPU per watch event", "µs", nodes,
        [("steady, per Lease event", "#9467bd", col("steady_us_per_event")),
         ("marginal (steady less idle), per Lease event", "#e377c2", col("marginal_us_per_event")),
         ("floor: a bare reader of the same watch", "#7f7f7f", col("floor_us_per_event")),
         ("pod burst, per event", "#8c564b", col("absorb_us_per_event"))],
        target=[(500, 5), (15000, 3), (65000, 3)],
    )
    panel(
        out, x2, y2, "Detection, 100 nodes at once", "ms after the deadline", nodes,
        [("p50", "#17becf", col("detection_p50_ms")),
         ("p99", "#d62728", col("detection_p99_ms"))],
        target=[(5000, 50), (15000, 100), (65000, 100)],
    )
    out.append(
        f'<text x="20" y="{HEIGHT - 12}" font-size="10" fill="#c00">dashed: the targets of the '
        "issues (24 MiB / 0.5 s / 50 ms at 5,000 nodes; 64 MiB / 1.5 s / 100 ms / 3 µs at "
        "15,000; 224 MiB / 5 s / 100 ms / 3 µs at 65,000)</text>"
    )
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
