package eval

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	colTerminal  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colMilestone = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colTicket    = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colCorrect   = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
)

// WriteChart draws the report as a PNG: on the left the latency of each ask (time to ticket,
// to the first milestone and to the terminal event, one dot per ask, p50 and p95 marked), on the
// right each category's outcome accuracy and answer correctness.
func WriteChart(w io.Writer, r *Report) error {
	lat, err := latencyPlot(r)
	if err != nil {
		return err
	}
	cat, err := categoryPlot(r)
	if err != nil {
		return err
	}
	const width, height = 14 * vg.Inch, 6 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(96), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 8, PadTop: vg.Millimeter * 4, PadBottom: vg.Millimeter * 4, PadLeft: vg.Millimeter * 4, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{{lat, cat}}, tiles, dc)
	lat.Draw(canvases[0][0])
	cat.Draw(canvases[0][1])
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// latencyPlot: one row per latency kind, each ask a dot at its seconds, p50 and p95 as ticks.
func latencyPlot(r *Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Latency per ask, %s (%d asks)", r.Model, len(r.Items))
	p.X.Label.Text = "seconds from the ask's POST (log scale); solid bar p50, dashed bar p95"
	// A log scale: tickets take milliseconds and answers from a real model tens of seconds.
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), 0.0
	kinds := []struct {
		name string
		col  color.Color
		get  func(ItemResult) float64
		q    Quantiles
	}{
		{"terminal", colTerminal, func(i ItemResult) float64 { return i.TerminalMS }, r.Scores.Latency.Terminal},
		{"first milestone", colMilestone, func(i ItemResult) float64 { return i.FirstMilestoneMS }, r.Scores.Latency.FirstMilestone},
		{"ticket", colTicket, func(i ItemResult) float64 { return i.TicketMS }, r.Scores.Latency.Ticket},
	}
	var names []string
	for row, k := range kinds {
		y := float64(row)
		var pts plotter.XYs
		for i, it := range r.Items {
			v := k.get(it)
			if v < 0 {
				continue
			}
			// Spread the dots of one row a little, so equal latencies stay countable.
			jitter := (float64(i%7) - 3) * 0.06
			x := max(v, 0.1) / 1000
			lo, hi = min(lo, x), max(hi, x)
			pts = append(pts, plotter.XY{X: x, Y: y + jitter})
		}
		label := fmt.Sprintf("%s  p50 %s  p95 %s", k.name, msStr(k.q.P50), msStr(k.q.P95))
		names = append(names, label)
		if len(pts) > 0 {
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle.Color = k.col
			sc.GlyphStyle.Radius = vg.Points(3)
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			p.Add(sc)
		}
		for _, q := range []struct {
			v    *float64
			half float64
		}{{k.q.P50, 0.35}, {k.q.P95, 0.25}} {
			if q.v == nil {
				continue
			}
			x := max(*q.v, 0.1) / 1000
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: y - q.half}, {X: x, Y: y + q.half}})
			if err != nil {
				return nil, err
			}
			l.LineStyle.Color = color.Black
			l.LineStyle.Width = vg.Points(2)
			if q.half < 0.3 {
				l.LineStyle.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
			}
			p.Add(l)
		}
	}
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.6, float64(len(kinds))-0.4
	if hi == 0 {
		lo, hi = 0.001, 1
	}
	// Whole decades, so the log ticks have labels at both ends.
	p.X.Min = math.Pow(10, math.Floor(math.Log10(lo))) * (1 - 1e-9)
	p.X.Max = math.Pow(10, math.Ceil(math.Log10(hi)+1e-9)) * (1 + 1e-9)
	return p, nil
}

// categoryPlot: grouped bars per category, outcome accuracy and answer correctness in percent.
func categoryPlot(r *Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Scores per category, set %s", r.Set.Name)
	p.Y.Label.Text = "%"
	p.Y.Min, p.Y.Max = 0, 125
	p.Add(plotter.NewGrid())
	cats := r.Scores.Categories
	var names []string
	acc := make(plotter.Values, len(cats))
	cor := make(plotter.Values, len(cats))
	for i, c := range cats {
		names = append(names, fmt.Sprintf("%s (%d)", c.Name, c.Items))
		if c.OutcomeAccuracy.Value != nil {
			acc[i] = 100 * *c.OutcomeAccuracy.Value
		}
		if c.AnswerCorrectness.Value != nil {
			cor[i] = 100 * *c.AnswerCorrectness.Value
		}
	}
	if len(cats) == 0 {
		return p, nil
	}
	bw := vg.Points(14)
	a, err := plotter.NewBarChart(acc, bw)
	if err != nil {
		return nil, err
	}
	a.Color, a.LineStyle.Width, a.Offset = colTerminal, 0, -bw/2
	c, err := plotter.NewBarChart(cor, bw)
	if err != nil {
		return nil, err
	}
	c.Color, c.LineStyle.Width, c.Offset = colCorrect, 0, bw/2
	p.Add(a, c)
	// The figure above each bar, so that a zero is seen as a zero and not as a missing bar;
	// "n/a" where the category has nothing to check.
	for _, b := range []struct {
		vals  plotter.Values
		off   float64
		ratio func(CategoryScore) Ratio
	}{
		{acc, -0.18, func(c CategoryScore) Ratio { return c.OutcomeAccuracy }},
		{cor, 0.18, func(c CategoryScore) Ratio { return c.AnswerCorrectness }},
	} {
		var xys plotter.XYLabels
		for i, c := range cats {
			txt := "n/a"
			if r := b.ratio(c); r.Value != nil {
				txt = fmt.Sprintf("%.0f", 100**r.Value)
			}
			xys.XYs = append(xys.XYs, plotter.XY{X: float64(i) + b.off, Y: b.vals[i] + 2})
			xys.Labels = append(xys.Labels, txt)
		}
		l, err := plotter.NewLabels(xys)
		if err != nil {
			return nil, err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].XAlign = draw.XCenter
			l.TextStyle[i].Font.Size = vg.Points(9)
		}
		p.Add(l)
	}
	p.Legend.Add("outcome accuracy", a)
	p.Legend.Add("answer correctness (where checked)", c)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(10)
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	return p, nil
}
