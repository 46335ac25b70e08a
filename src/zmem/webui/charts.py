"""The overview's charts as numbers for a server-rendered SVG: day-keyed counts become a
cumulative line (growth) or bars (recall activity) scaled to a fixed box. Only coordinates and
labels leave here; the template draws them, so no text of a memory is ever part of a chart."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

WIDTH = 640
HEIGHT = 160
PAD = 4
MAX_POINTS = 180  # days beyond this are pooled into weeks, then months: the path stays small
BAR_DAYS = 30


@dataclass
class Chart:
    """What a template needs to draw one chart, or `empty` with nothing to draw."""

    width: int = WIDTH
    height: int = HEIGHT
    points: str = ""  # polyline "x,y x,y ..."
    bars: list[dict[str, float | str]] = field(default_factory=list)
    first: str = ""
    last: str = ""
    peak: int = 0
    total: int = 0

    @property
    def empty(self) -> bool:
        return not self.points and not self.bars


def _days(counts: dict[str, int]) -> dict[date, int]:
    out: dict[date, int] = {}
    for key, n in counts.items():
        try:
            day = date.fromisoformat(key)
        except (TypeError, ValueError):
            continue  # a time this store did not write: not drawable, not fatal
        out[day] = out.get(day, 0) + n
    return out


def growth(added: dict[str, int], retired: dict[str, int]) -> Chart:
    """Live rows at the end of each day since the first write."""
    plus, minus = _days(added), _days(retired)
    if not plus:
        return Chart()
    start = min(plus)
    end = max(max(plus), max(minus, default=start))
    span = (end - start).days + 1
    step = max(1, -(-span // MAX_POINTS))  # days per point
    live, values = 0, []
    for offset in range(span):
        day = start + timedelta(days=offset)
        live += plus.get(day, 0) - minus.get(day, 0)
        if offset % step == step - 1 or offset == span - 1:
            values.append(live)
    peak = max(values) or 1
    inner_w, inner_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    denominator = max(1, len(values) - 1)
    coords = [
        f"{PAD + inner_w * i / denominator:.1f},{PAD + inner_h * (1 - v / peak):.1f}"
        for i, v in enumerate(values)
    ]
    if len(coords) == 1:  # one day: a flat line across, not a dot
        coords.append(f"{WIDTH - PAD:.1f},{coords[0].split(',')[1]}")
    return Chart(
        points=" ".join(coords),
        first=start.isoformat(),
        last=end.isoformat(),
        peak=max(values),
        total=values[-1],
    )


def activity(counts: dict[str, int], today: date) -> Chart:
    """One bar per day over the last BAR_DAYS days (today last)."""
    days = _days(counts)
    window = [today - timedelta(days=BAR_DAYS - 1 - i) for i in range(BAR_DAYS)]
    values = [days.get(d, 0) for d in window]
    total = sum(values)
    if not total:
        return Chart(first=window[0].isoformat(), last=today.isoformat())
    peak = max(values)
    slot = (WIDTH - 2 * PAD) / BAR_DAYS
    inner_h = HEIGHT - 2 * PAD
    bars = []
    for i, (d, v) in enumerate(zip(window, values, strict=True)):
        h = inner_h * v / peak
        bars.append(
            {
                "x": round(PAD + i * slot + 1, 1),
                "y": round(PAD + inner_h - h, 1),
                "w": round(max(1.0, slot - 2), 1),
                "h": round(h, 1),
                "label": f"{d.isoformat()}: {v}",
            }
        )
    return Chart(
        bars=bars, first=window[0].isoformat(), last=today.isoformat(), peak=peak, total=total
    )
