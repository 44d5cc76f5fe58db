package metrics

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotRun returns the score and validation-EM curves of a made-up run.
func plotRun() map[string][]Point {
	score, em := []Point{}, []Point{}
	for s := 1; s <= 40; s++ {
		score = append(score, Point{s, -0.8 + 1.2*(1-math.Exp(-float64(s)/12))})
		if s%5 == 0 {
			em = append(em, Point{s, 0.45 * (1 - math.Exp(-float64(s)/15))})
		}
	}
	score = append(score, Point{41, math.NaN()}) // left out, not an error
	return map[string][]Point{"critic/score/mean": score, "val-core/hotpotqa/em@1": em}
}

func TestPlotPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.png")
	if dir := os.Getenv("R1GO_PLOT_DIR"); dir != "" { // to look at the picture
		path = filepath.Join(dir, "run.png")
	}
	err := Plot(path, Chart{Title: "GRPO on HotpotQA", YLabel: "score / exact match", Series: plotRun()})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != PlotWidth || b.Dy() != PlotHeight {
		t.Fatalf("PNG is %dx%d, want %dx%d", b.Dx(), b.Dy(), PlotWidth, PlotHeight)
	}
	// Both series are drawn in their own colours, and most of the picture is
	// white background.
	for i, name := range []string{"critic/score/mean", "val-core/hotpotqa/em@1"} {
		if n := countColor(img, plotutil.Color(i)); n < 200 {
			t.Errorf("series %q: %d pixels of its colour, want a line", name, n)
		}
	}
	if n := countColor(img, color.White); n < PlotWidth*PlotHeight/2 {
		t.Errorf("only %d white pixels", n)
	}
}

func countColor(img image.Image, c color.Color) int {
	r0, g0, b0, _ := c.RGBA()
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r, r0) && near(g, g0) && near(bl, b0) {
				n++
			}
		}
	}
	return n
}

func near(a, b uint32) bool { return a-b < 0x0800 || b-a < 0x0800 }

// TestLegendClearOfLines checks that no point is drawn under the legend when
// the curves reach their top at once, as the learning table's validation
// curves do, for a few series and for nine.
func TestLegendClearOfLines(t *testing.T) {
	for _, n := range []int{2, 9} {
		series := map[string][]Point{}
		for i := 0; i < n; i++ {
			var pts []Point
			for s := 0; s <= 30; s += 5 {
				v := 0.6 + 0.01*float64(i)
				if s == 0 {
					v = 0
				}
				pts = append(pts, Point{s, v})
			}
			series[strings.Repeat("a series with a long name ", 2)+string(rune('A'+i))] = pts
		}
		p, err := newPlot(Chart{Title: "validation EM", Series: series})
		if err != nil {
			t.Fatal(err)
		}
		dc := plotArea(draw.New(newCanvas()))
		highest := func() (y, legendBottom vg.Length) {
			data := p.DataCanvas(dc)
			r := p.Legend.Rectangle(data)
			legendBottom = data.Max.Y + p.Y.Padding + p.Legend.YOffs - (r.Max.Y - r.Min.Y)
			y = data.Min.Y
			for _, pts := range series {
				for _, pt := range pts {
					y = max(y, data.Y(p.Y.Norm(pt.Value)))
				}
			}
			return y, legendBottom
		}
		if y, bottom := highest(); y < bottom {
			t.Fatalf("%d series: the unraised axis already clears the legend (%v < %v): the check below proves nothing", n, y, bottom)
		}
		raiseAboveLegend(p, dc)
		y, bottom := highest()
		if y > bottom-vg.Points(legendGap)+0.01 {
			t.Errorf("%d series: highest point at %v, legend's bottom at %v: under the legend", n, y, bottom)
		}
		if data := p.DataCanvas(dc); y-data.Min.Y < (data.Max.Y-data.Min.Y)/2 {
			t.Errorf("%d series: the data fill %v of %v: squeezed", n, y-data.Min.Y, data.Max.Y-data.Min.Y)
		}
	}
}

func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	if err := Plot(filepath.Join(dir, "a.png"), Chart{Series: map[string][]Point{"x": {{1, math.NaN()}}}}); err == nil ||
		!strings.Contains(err.Error(), "no series has a finite point") {
		t.Errorf("all-NaN series: %v", err)
	}
	bad := filepath.Join(dir, "missing", "a.png")
	if err := Plot(bad, Chart{Series: plotRun()}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("unwritable path: %v", err)
	}
}

func TestSeriesFromRecords(t *testing.T) {
	got := SeriesFromRecords([]Record{{1, map[string]float64{"a": 1}}, {2, map[string]float64{"a": 3, "b": 4}}})
	if len(got["a"]) != 2 || got["a"][1] != (Point{2, 3}) || len(got["b"]) != 1 {
		t.Errorf("%v", got)
	}
	h := NewHistory("a")
	h.Log(1, map[string]float64{"a": 1, "b": 2})
	if s := h.Series(); len(s) != 1 || s["a"][0] != (Point{1, 1}) {
		t.Errorf("history keeps %v", s)
	}
}
