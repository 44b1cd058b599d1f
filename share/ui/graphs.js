// CPU and memory drawn on canvases, without a library: a sparkline for a
// row of the list, a larger graph with its scale for a sandbox's page.

// A canvas's drawing size: its data-w and data-h where it has them (the
// list's sparklines: reading a size from layout there would lay out the
// whole table again for each of hundreds of rows), else its laid-out size.
function prepare(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const w = Number(canvas.dataset.w) || canvas.clientWidth;
  const h = Number(canvas.dataset.h) || canvas.clientHeight;
  if (canvas.width !== Math.round(w * ratio)) canvas.width = Math.round(w * ratio);
  if (canvas.height !== Math.round(h * ratio)) canvas.height = Math.round(h * ratio);
  const g = canvas.getContext('2d');
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, w, h);
  return { g, w, h };
}

function line(g, values, max, w, h, colour, fill) {
  if (values.length < 1) return;
  const step = values.length > 1 ? w / (values.length - 1) : 0;
  const y = (v) => h - 1 - Math.min(1, Math.max(0, v / max)) * (h - 2);
  g.beginPath();
  values.forEach((v, i) => (i ? g.lineTo(i * step, y(v)) : g.moveTo(0, y(v))));
  if (values.length === 1) g.lineTo(w, y(values[0])); // one sample: a level line
  g.strokeStyle = colour;
  g.lineWidth = 1.25;
  g.stroke();
  if (fill) {
    g.lineTo((values.length - 1) * step, h);
    g.lineTo(0, h);
    g.closePath();
    g.fillStyle = fill;
    g.fill();
  }
}

// values from 0 to max, oldest first.
export function sparkline(canvas, values, max, colour) {
  const { g, w, h } = prepare(canvas);
  line(g, values, max || 1, w, h, colour, null);
}

// A graph of one series with its title and its latest value.
export function graph(canvas, values, max, colour, title, label) {
  const { g, w, h } = prepare(canvas);
  g.strokeStyle = '#d0d7de';
  g.lineWidth = 1;
  for (const f of [0.25, 0.5, 0.75]) {
    g.beginPath();
    g.moveTo(0, Math.round(h * f) + 0.5);
    g.lineTo(w, Math.round(h * f) + 0.5);
    g.stroke();
  }
  line(g, values, max || 1, w, h - 4, colour, `${colour}33`);
  g.fillStyle = '#24292f';
  g.font = '12px system-ui, sans-serif';
  g.fillText(`${title}${values.length ? `: ${label(values[values.length - 1])}` : ': no samples yet'}`, 6, 14);
}
