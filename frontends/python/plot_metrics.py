#!/usr/bin/env python3
"""plot_metrics.py - draws loss against step from megatrain-run --metrics as an SVG line chart.

    python3 frontends/python/plot_metrics.py METRICS.jsonl -o loss.svg [--png]

Reads one JSON object per line (`step`, `loss`; a null loss, written for a
non-finite value, is skipped) and writes plain SVG text: axes with ticks at
1-2-5 steps, tick labels, axis labels, a title, the raw loss as a thin line and
an exponentially smoothed one (weight --smoothing, bias-corrected, as
TensorBoard draws it) over it. Needs only the Python standard library; --png
also writes OUT.png through matplotlib when it is installed, and says so and
skips the PNG when it is not.
"""
import argparse
import json
import math
import os
import sys
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 800, 480
LEFT, RIGHT, TOP, BOTTOM = 72, 24, 48, 56  # margins around the plot area
RAW_COLOR, SMOOTH_COLOR = "#9ecae1", "#08519c"


def read_losses(path):
    steps, losses = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                sys.exit(f"plot_metrics.py: {path}:{number}: not JSON ({error.msg})")
            loss = row.get("loss")
            if loss is None or "step" not in row or not math.isfinite(loss):
                continue
            steps.append(float(row["step"]))
            losses.append(float(loss))
    return steps, losses


def smooth(values, weight):
    """Exponential moving average, divided by (1 - weight^n) so early points are not pulled to 0."""
    out, average = [], 0.0
    for n, value in enumerate(values, 1):
        average = weight * average + (1 - weight) * value
        out.append(average / (1 - weight ** n))
    return out


def nice_ticks(lo, hi, count=6):
    """Round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(lo / step) * step
    last = math.ceil(hi / step) * step
    ticks = []
    k = 0
    while first + k * step <= last + step * 1e-9:
        ticks.append(first + k * step)
        k += 1
    return ticks, step


def label(value, step):
    digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{value:.{digits}f}"


def svg_chart(steps, losses, smoothed, title):
    xticks, xstep = nice_ticks(min(steps), max(steps))
    yticks, ystep = nice_ticks(min(losses), max(losses))
    x0, x1, y0, y1 = xticks[0], xticks[-1], yticks[0], yticks[-1]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x):
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y):
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    def points(ys):
        return " ".join(f"{px(x):.2f},{py(y):.2f}" for x, y in zip(steps, ys))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="{TOP / 2 + 6}" text-anchor="middle" font-size="16">'
           f'{escape(title)}</text>']
    for x in xticks:
        out.append(f'<line x1="{px(x):.2f}" y1="{TOP}" x2="{px(x):.2f}" y2="{TOP + plot_h}" '
                   f'stroke="#eeeeee"/>')
        out.append(f'<line x1="{px(x):.2f}" y1="{TOP + plot_h}" x2="{px(x):.2f}" '
                   f'y2="{TOP + plot_h + 5}" stroke="black"/>')
        out.append(f'<text x="{px(x):.2f}" y="{TOP + plot_h + 19}" text-anchor="middle">'
                   f'{label(x, xstep)}</text>')
    for y in yticks:
        out.append(f'<line x1="{LEFT}" y1="{py(y):.2f}" x2="{LEFT + plot_w}" y2="{py(y):.2f}" '
                   f'stroke="#eeeeee"/>')
        out.append(f'<line x1="{LEFT - 5}" y1="{py(y):.2f}" x2="{LEFT}" y2="{py(y):.2f}" '
                   f'stroke="black"/>')
        out.append(f'<text x="{LEFT - 8}" y="{py(y) + 4:.2f}" text-anchor="end">'
                   f'{label(y, ystep)}</text>')
    out.append(f'<polyline class="axes" points="{LEFT},{TOP} {LEFT},{TOP + plot_h} '
               f'{LEFT + plot_w},{TOP + plot_h}" fill="none" stroke="black"/>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 14}" text-anchor="middle">step</text>')
    out.append(f'<text x="18" y="{TOP + plot_h / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {TOP + plot_h / 2})">loss</text>')
    out.append(f'<polyline class="loss" points="{points(losses)}" fill="none" '
               f'stroke="{RAW_COLOR}" stroke-width="1"/>')
    out.append(f'<polyline class="smoothed" points="{points(smoothed)}" fill="none" '
               f'stroke="{SMOOTH_COLOR}" stroke-width="2"/>')
    legend_x = LEFT + plot_w - 150
    for row, (color, text) in enumerate([(RAW_COLOR, "loss"), (SMOOTH_COLOR, "smoothed")]):
        y = TOP + 16 + 18 * row
        out.append(f'<line x1="{legend_x}" y1="{y}" x2="{legend_x + 24}" y2="{y}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{legend_x + 30}" y="{y + 4}">{text}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_png(path, steps, losses, smoothed, title):
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_metrics.py: matplotlib is not installed; no PNG written")
        return False
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=100)
    ax.plot(steps, losses, color=RAW_COLOR, linewidth=1, label="loss")
    ax.plot(steps, smoothed, color=SMOOTH_COLOR, linewidth=2, label="smoothed")
    ax.set(xlabel="step", ylabel="loss", title=title)
    ax.legend()
    fig.savefig(path)
    plt.close(fig)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics", help="megatrain-run --metrics file (JSON lines)")
    parser.add_argument("-o", "--out", required=True, help="SVG file to write")
    parser.add_argument("--png", action="store_true", help="also write OUT.png (needs matplotlib)")
    parser.add_argument("--smoothing", type=float, default=0.9,
                        help="weight of the moving average, in [0, 1) (default 0.9)")
    parser.add_argument("--title", help="chart title (default: the metrics file's name)")
    args = parser.parse_args()
    if not 0 <= args.smoothing < 1:
        sys.exit("plot_metrics.py: --smoothing must lie in [0, 1)")

    steps, losses = read_losses(args.metrics)
    if not steps:
        sys.exit(f"plot_metrics.py: {args.metrics} has no finite loss to plot")
    smoothed = smooth(losses, args.smoothing)
    title = args.title or f"loss: {os.path.basename(args.metrics)}"
    with open(args.out, "w") as f:
        f.write(svg_chart(steps, losses, smoothed, title))
    print(f"wrote {args.out} ({len(steps)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f})")
    if args.png:
        png = os.path.splitext(args.out)[0] + ".png"
        if write_png(png, steps, losses, smoothed, title):
            print(f"wrote {png}")


if __name__ == "__main__":
    main()
