"""An AOT build's memory map as an SVG timeline: steps across, workspace offsets down.

Each buffer is a rectangle from its first to its last step, at its offset, as tall as it
is large; hovering shows its node, size and steps. A dashed line marks the liveness lower
bound. Deterministic text (no dates, fixed number formatting)::

    svg = memory_map_svg(MemoryMap.from_json(data))
"""

from __future__ import annotations

from html import escape

from ember.formats.memory_map import MemoryMap

WIDTH = 960
HEIGHT = 540
MARGIN = 48
_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1")


def memory_map_svg(mm: MemoryMap) -> str:
    """The SVG text of ``mm``."""
    steps = max((b.last_step for b in mm.buffers), default=0) + 1
    total = max(mm.workspace_size_bytes, 1)
    plot_w, plot_h = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN
    sx, sy = plot_w / steps, plot_h / total
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{MARGIN}" y="{MARGIN - 16}">workspace {mm.workspace_size_bytes} bytes, '
        f"lower bound {mm.lower_bound_bytes} ({escape(mm.algorithm)}), {len(mm.buffers)} "
        f"buffers over {steps} steps</text>",
        f'<rect x="{MARGIN}" y="{MARGIN}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#999"/>',
    ]
    for k, b in enumerate(mm.buffers):
        x = MARGIN + b.first_step * sx
        y = MARGIN + b.offset * sy
        w = max((b.last_step - b.first_step + 1) * sx, 1.0)
        h = max(b.size * sy, 1.0)
        steps_text = f"steps {b.first_step}-{b.last_step}"
        tip = f"{b.node} (e{b.entry}): {b.size} bytes at {b.offset}, {steps_text}"
        out.append(
            f'<rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" '
            f'fill="{_COLORS[k % len(_COLORS)]}" fill-opacity="0.8" stroke="white" '
            f'stroke-width="0.5"><title>{escape(tip)}</title></rect>'
        )
    bound_y = MARGIN + mm.lower_bound_bytes * sy
    out += [
        f'<line x1="{MARGIN}" y1="{bound_y:.2f}" x2="{MARGIN + plot_w}" y2="{bound_y:.2f}" '
        'stroke="black" stroke-dasharray="4 3"/>',
        f'<text x="{MARGIN}" y="{HEIGHT - MARGIN + 16}">step 0</text>',
        f'<text x="{MARGIN + plot_w}" y="{HEIGHT - MARGIN + 16}" text-anchor="end">'
        f"step {steps - 1}</text>",
        "</svg>",
        "",
    ]
    return "\n".join(out)
