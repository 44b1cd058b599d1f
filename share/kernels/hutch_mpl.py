"""matplotlib backend of hutch's Python kernel (MPLBACKEND=module://hutch_mpl):
figures are drawn off screen by Agg, and plt.show() sends every open figure
as a PNG result instead of opening a window (kernel.py does the sending)."""
import builtins

from matplotlib.backend_bases import FigureManagerBase as FigureManager  # noqa: F401
from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas  # noqa: F401


def show(*args, **kwargs):
    builtins.__hutch_show_figures__()
