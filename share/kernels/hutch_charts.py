"""A matplotlib figure's data as E2B's `chart` result field (the shapes of
E2B's code-interpreter template: line, scatter, bar, pie, box_and_whisker,
superchart, unknown), read from the figure's artists after it is drawn.

    chart(fig) -> dict, or None for a figure with no data"""
import datetime
import math
import re

import matplotlib.dates
from matplotlib.collections import PathCollection
from matplotlib.lines import Line2D
from matplotlib.patches import PathPatch, Rectangle, Wedge
from matplotlib.text import Text

UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")


def num(v):
    """A plain JSON number (numpy's as Python's; NaN: null), rounded as E2B
    rounds box and pie values: 8 - exponent significant digits, so that
    drawing's float noise (323.99999 for 324) is gone."""
    v = float(v)
    if not math.isfinite(v):
        return None
    digits = max(1, 8 - (math.floor(math.log10(abs(v))) if v else 0))
    v = float(f"{v:.{digits}g}")
    return int(v) if v.is_integer() and abs(v) < 2 ** 53 else v


def point(v):
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if type(v).__name__ == "datetime64":
        return str(v.astype("datetime64[s]"))
    if isinstance(v, str):
        return v
    try:
        return float(v) if math.isfinite(float(v)) else None
    except (TypeError, ValueError):
        return str(v)


def text_or_none(s):
    return s or None


def children(ax):
    """What was drawn on the axes, its texts aside."""
    found = getattr(ax, "_children", None)
    if found is None:
        found = [*ax.lines, *ax.patches, *ax.collections, *ax.artists]
    return [a for a in found if not isinstance(a, Text)]


def is_grid_line(line):
    x, y = line.get_xdata(), line.get_ydata()
    return len(x) == 2 and len(y) == 2 and (x[0] == x[1] or y[0] == y[1])


def kind(ax):
    """E2B's order of tests: all lines, boxes and lines, then (two-point
    straight lines aside) all scatter sets, wedges or rectangles."""
    found = children(ax)
    if all(isinstance(a, Line2D) for a in found):
        return "line"
    if all(isinstance(a, (PathPatch, Line2D)) for a in found):
        return "box_and_whisker"
    found = [a for a in found if not (isinstance(a, Line2D) and is_grid_line(a))]
    for name, cls in (("scatter", PathCollection), ("pie", Wedge), ("bar", Rectangle)):
        if all(isinstance(a, cls) for a in found):
            return name
    return "unknown"


def labels_2d(ax, out):
    for axis in ("x", "y"):
        label = text_or_none(getattr(ax, f"get_{axis}label")())
        m = UNIT.search(label) if label else None
        out[f"{axis}_label"] = label
        out[f"{axis}_unit"] = (m.group(1) or m.group(2)) if m else None


def swap_axes(out):
    for a, b in (("x_label", "y_label"), ("x_unit", "y_unit")):
        out[a], out[b] = out[b], out[a]


def converter(axis):
    get = getattr(axis, "get_converter", None)
    return get() if get else axis.converter


def is_dates(axis):
    return type(converter(axis)).__module__ == matplotlib.dates.__name__


def ticks_of(ax, axis_name, out):
    axis = getattr(ax, f"{axis_name}axis")
    ticks = list(getattr(ax, f"get_{axis_name}ticks")())
    labels = [t.get_text() for t in getattr(ax, f"get_{axis_name}ticklabels")()]
    dates = is_dates(axis)
    if dates:
        values = [matplotlib.dates.num2date(t).isoformat() for t in ticks]
    else:
        values = [point(t) for t in ticks]
    scale = getattr(ax, f"get_{axis_name}scale")()
    if dates:
        scale = "datetime"
    elif scale == "linear" and labels and all(
            t == i and label != str(i) for i, (t, label) in enumerate(zip(ticks, labels))):
        scale = "categorical"  # positions 0..n-1 named otherwise
    out[f"{axis_name}_ticks"] = values
    out[f"{axis_name}_tick_labels"] = labels
    out[f"{axis_name}_scale"] = scale


def auto_label(label, prefix, name):
    """matplotlib's own names for unlabelled artists (_child3, _container1)
    as E2B shows them (Line 3, Group 1)."""
    if label.startswith(prefix) and label[len(prefix):].isdigit():
        return f"{name} {int(label[len(prefix):])}"
    return label


def tick_label_at(ax, axis_name, position):
    ticks = getattr(ax, f"get_{axis_name}ticks")()
    labels = getattr(ax, f"get_{axis_name}ticklabels")()
    for t, label in zip(ticks, labels):
        if math.isclose(float(t), position, rel_tol=1e-9, abs_tol=1e-9):
            return label.get_text()
    return str(num(position))


def points_chart(ax, out):
    labels_2d(ax, out)
    ticks_of(ax, "x", out)
    ticks_of(ax, "y", out)
    if out["type"] == "line":
        out["elements"] = [
            {"label": auto_label(line.get_label(), "_child", "Line"),
             "points": [[point(x), point(y)] for x, y in zip(line.get_xdata(), line.get_ydata())]}
            for line in ax.get_lines() if not is_grid_line(line)]
    else:
        out["elements"] = [
            {"label": c.get_label(), "points": [[point(x), point(y)] for x, y in c.get_offsets()]}
            for c in ax.collections]


def bar_chart(ax, out):
    labels_2d(ax, out)
    horizontal = False
    for container in ax.containers:
        group = auto_label(container.get_label(), "_container", "Group")
        horizontal = getattr(container, "orientation", None) == "horizontal"
        for rect in container:
            if horizontal:
                label = tick_label_at(ax, "y", rect.get_y() + rect.get_height() / 2)
                value = rect.get_width()
            else:
                label = tick_label_at(ax, "x", rect.get_x() + rect.get_width() / 2)
                value = rect.get_height()
            out["elements"].append({"label": label, "group": group, "value": num(value)})
    if horizontal:
        swap_axes(out)


def box_chart(ax, out):
    """Each box is a patch from the first to the third quartile; its median
    a straight line across it, its whiskers straight lines out of it to the
    minimum and maximum, its fliers a line of markers only."""
    labels_2d(ax, out)
    patches = [p for p in ax.patches if isinstance(p, PathPatch)]
    extents = [p.get_path().get_extents() for p in patches]
    horizontal = bool(extents) and len({round(e.height, 9) for e in extents}) == 1 and \
        len({round(e.width, 9) for e in extents}) > 1
    along, across = (1, 0) if horizontal else (0, 1)  # position axis, value axis
    boxes = []
    for e in extents:
        lo, hi = (e.x0, e.x1) if not horizontal else (e.y0, e.y1)
        q1, q3 = (e.y0, e.y1) if not horizontal else (e.x0, e.x1)
        label = tick_label_at(ax, "y" if horizontal else "x", (lo + hi) / 2)
        boxes.append({"lo": lo, "hi": hi, "label": label, "min": num(q1), "first_quartile": num(q1),
                      "median": None, "third_quartile": num(q3), "max": num(q3), "outliers": []})
    for line in ax.get_lines():
        data = (line.get_xdata(), line.get_ydata())
        pos, val = [float(v) for v in data[along]], [float(v) for v in data[across]]
        if not pos:
            continue
        box = next((b for b in boxes if b["lo"] - 1e-9 <= min(pos) and max(pos) <= b["hi"] + 1e-9),
                   None)
        if box is None:
            continue
        if line.get_linestyle() in ("None", "none", " ", ""):
            box["outliers"] += [num(v) for v in val]
        elif len(val) == 2 and val[0] == val[1]:
            if math.isclose(abs(pos[1] - pos[0]), box["hi"] - box["lo"], rel_tol=1e-6):
                box["median"] = num(val[0])  # across the whole box; caps are narrower
        elif len(val) == 2 and pos[0] == pos[1]:
            low, high = num(min(val)), num(max(val))
            if high == box["first_quartile"]:
                box["min"] = low
            elif low == box["third_quartile"]:
                box["max"] = high
    out["elements"] = [{k: b[k] for k in ("label", "min", "first_quartile", "median",
                                          "third_quartile", "max", "outliers")} for b in boxes]
    if horizontal:
        swap_axes(out)


def pie_chart(ax, out):
    out["elements"] = [{"label": w.get_label(), "angle": num(abs(w.theta2 - w.theta1)),
                        "radius": num(w.r)} for w in ax.patches if isinstance(w, Wedge)]


def axes_chart(ax):
    out = {"type": kind(ax), "title": text_or_none(ax.get_title()), "elements": []}
    if out["type"] in ("line", "scatter"):
        points_chart(ax, out)
    elif out["type"] == "bar":
        bar_chart(ax, out)
    elif out["type"] == "box_and_whisker":
        box_chart(ax, out)
    elif out["type"] == "pie":
        pie_chart(ax, out)
    return out


def chart(fig):
    axes = fig.get_axes()
    if not any(ax.has_data() for ax in axes):
        return None
    if len(axes) == 1:
        return axes_chart(axes[0])
    sup = getattr(fig, "_suptitle", None)
    return {"type": "superchart", "title": text_or_none(sup.get_text() if sup else ""),
            "elements": [axes_chart(ax) for ax in axes]}
