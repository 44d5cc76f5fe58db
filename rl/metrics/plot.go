package metrics

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Point is one value of a metric at a step.
type Point struct {
	Step  int
	Value float64
}

// Chart is a line plot of metrics over steps, such as the training score and
// the validation exact match the trainer draws at the end of a run.
type Chart struct {
	Title  string
	XLabel string             // empty means "step"
	YLabel string             // empty means "value"
	Series map[string][]Point // legend name → points, in any order
}

// The PNG's size in pixels.
const (
	PlotWidth  = 960
	PlotHeight = 600
	plotDPI    = 96
)

// Plot draws c as a PNG of PlotWidth×PlotHeight pixels at path: one line
// with point marks per series, series in name order with distinct colours and
// dashes, a legend clear of the lines, the title and both axis labels. Points
// are sorted by step; NaN and ±Inf values are left out (a line cannot pass
// through them). It is an error when no series has a finite point.
func Plot(path string, c Chart) error {
	p, err := newPlot(c)
	if err != nil {
		return fmt.Errorf("metrics: plot %s: %w", path, err)
	}
	canvas := vgimg.PngCanvas{Canvas: newCanvas()}
	dc := plotArea(draw.New(canvas))
	raiseAboveLegend(p, dc)
	p.Draw(dc)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("metrics: plot: %w", err)
	}
	_, werr := canvas.WriteTo(f)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("metrics: plot %s: %w", path, err)
	}
	return nil
}

// newPlot builds c's plot: its series, legend, grid and labels.
func newPlot(c Chart) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = orDefault(c.XLabel, "step")
	p.Y.Label.Text = orDefault(c.YLabel, "value")
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(10) // clear of the y axis
	p.Legend.YOffs = -vg.Points(4)
	p.X.Padding = vg.Points(6)
	p.Y.Padding = vg.Points(6)

	names := make([]string, 0, len(c.Series))
	for name := range c.Series {
		names = append(names, name)
	}
	sort.Strings(names)
	drawn := 0
	for i, name := range names {
		xys := finitePoints(c.Series[name])
		if len(xys) == 0 {
			continue
		}
		line, marks, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", name, err)
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i)
		line.Width = vg.Points(1.5)
		marks.Color = plotutil.Color(i)
		marks.Shape = plotutil.Shape(i)
		p.Add(line, marks)
		p.Legend.Add(name, line, marks)
		drawn++
	}
	if drawn == 0 {
		return nil, errors.New("no series has a finite point")
	}
	return p, nil
}

// newCanvas is a blank picture of PlotWidth×PlotHeight pixels.
func newCanvas() *vgimg.Canvas {
	return vgimg.NewWith(
		vgimg.UseWH(vg.Length(PlotWidth)*vg.Inch/plotDPI, vg.Length(PlotHeight)*vg.Inch/plotDPI),
		vgimg.UseDPI(plotDPI),
	)
}

// plotArea is the picture less a margin round it, which keeps the last point
// and the title off its edge.
func plotArea(c draw.Canvas) draw.Canvas {
	m := vg.Points(12)
	return draw.Crop(c, m, -m, m/2, -m/2)
}

// legendGap is the room kept between the legend's last entry and the highest
// point under it.
const legendGap = 4 // points

// raiseAboveLegend lifts the top of p's y axis so that the legend, drawn in
// the top left of the data area, covers no line: curves that climb to their
// maximum (validation EM over steps) otherwise run through its text. The
// data keep the rest of the height.
func raiseAboveLegend(p *plot.Plot, c draw.Canvas) {
	lo, hi := p.Y.Min, p.Y.Max
	data := p.DataCanvas(c)
	height := data.Max.Y - data.Min.Y
	if hi <= lo || height <= 0 {
		return // a flat line, which gonum centres, or no room to draw in
	}
	legend := p.Legend.Rectangle(data)
	// The legend's top is the data area's top plus the y padding plus
	// YOffs; the highest point must sit legendGap below its bottom.
	need := legend.Max.Y - legend.Min.Y - p.Legend.YOffs - p.Y.Padding + vg.Points(legendGap)
	frac := float64(need / height)
	if frac <= 0 || frac >= 0.5 {
		return // no legend to clear, or too little room to keep the data readable
	}
	p.Y.Max = (hi - frac*lo) / (1 - frac)
}

func finitePoints(pts []Point) plotter.XYs {
	xys := make(plotter.XYs, 0, len(pts))
	for _, pt := range pts {
		if !math.IsNaN(pt.Value) && !math.IsInf(pt.Value, 0) {
			xys = append(xys, plotter.XY{X: float64(pt.Step), Y: pt.Value})
		}
	}
	sort.SliceStable(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
	return xys
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// History is a sink that keeps chosen metrics in memory, for the plot at the
// end of a run.
type History struct {
	keys   map[string]bool
	series map[string][]Point
}

// NewHistory keeps the given metrics; with no keys it keeps every metric.
func NewHistory(keys ...string) *History {
	h := &History{series: map[string][]Point{}}
	if len(keys) > 0 {
		h.keys = map[string]bool{}
		for _, k := range keys {
			h.keys[k] = true
		}
	}
	return h
}

// Name reports "history".
func (h *History) Name() string { return "history" }

// Log records the kept metrics of the step.
func (h *History) Log(step int, values map[string]float64) error {
	for k, v := range values {
		if h.keys == nil || h.keys[k] {
			h.series[k] = append(h.series[k], Point{step, v})
		}
	}
	return nil
}

// Close does nothing; the history stays readable.
func (h *History) Close() error { return nil }

// Series returns the recorded points by metric name (the history's own maps).
func (h *History) Series() map[string][]Point { return h.series }

// SeriesFromScalars groups event-file scalars by tag, for plotting a run
// from its TensorBoard file.
func SeriesFromScalars(scalars []Scalar) map[string][]Point {
	out := map[string][]Point{}
	for _, s := range scalars {
		out[s.Tag] = append(out[s.Tag], Point{int(s.Step), float64(s.Value)})
	}
	return out
}

// SeriesFromRecords groups JSONL records by metric name, for plotting a run
// from its metrics file.
func SeriesFromRecords(recs []Record) map[string][]Point {
	out := map[string][]Point{}
	for _, r := range recs {
		for k, v := range r.Data {
			out[k] = append(out[k], Point{r.Step, v})
		}
	}
	return out
}
