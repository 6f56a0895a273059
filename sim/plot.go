package sim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Hand-written SVG time series, readable at a glance: per kernel policy
// (first seed) three stacked panels — weight share vs ideal share, per-server
// utilisation, sliding p99 against the ideal-weights counterfactual — and,
// per scenario and scheduler, the sliding p99 of every policy.

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

const (
	plotW    = 900
	plotL    = 60  // left margin
	plotR    = 130 // right margin (legend)
	panelH   = 150
	panelGap = 40
	plotTop  = 40
)

type svgDoc struct {
	b strings.Builder
	h int
}

func newSVG(title string, panels int) *svgDoc {
	d := &svgDoc{h: plotTop + panels*(panelH+panelGap) + 10}
	fmt.Fprintf(&d.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		plotW, d.h, plotW, d.h)
	fmt.Fprintf(&d.b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&d.b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", plotL, esc(title))
	return d
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// panel is one chart area with linear x (seconds) and linear or log y.
type panel struct {
	d          *svgDoc
	y0         int // top pixel
	x1         float64
	ylo, yhi   float64
	log        bool
	legendRows int
}

func (d *svgDoc) panel(i int, title string, x1, ylo, yhi float64, logY bool, yTicks []float64, yFmt func(float64) string) *panel {
	p := &panel{d: d, y0: plotTop + i*(panelH+panelGap), x1: x1, ylo: ylo, yhi: yhi, log: logY}
	pw := plotW - plotL - plotR
	fmt.Fprintf(&d.b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", plotL, p.y0-6, esc(title))
	fmt.Fprintf(&d.b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", plotL, p.y0, pw, panelH)
	for _, t := range yTicks {
		y := p.py(t)
		fmt.Fprintf(&d.b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", plotL, y, plotL+pw, y)
		fmt.Fprintf(&d.b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", plotL-4, y+4, yFmt(t))
	}
	step := niceStep(x1 / 8)
	for t := 0.0; t <= x1+1e-9; t += step {
		x := p.px(t)
		fmt.Fprintf(&d.b, `<text x="%.1f" y="%d" text-anchor="middle">%gs</text>`+"\n", x, p.y0+panelH+13, t)
	}
	return p
}

func niceStep(x float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= x {
			return m * e
		}
	}
	return 10 * e
}

func (p *panel) px(t float64) float64 {
	return plotL + t/p.x1*float64(plotW-plotL-plotR)
}

func (p *panel) py(v float64) float64 {
	lo, hi := p.ylo, p.yhi
	if p.log {
		v, lo, hi = math.Log10(math.Max(v, p.ylo)), math.Log10(lo), math.Log10(hi)
	}
	f := (math.Min(math.Max(v, lo), hi) - lo) / (hi - lo)
	return float64(p.y0+panelH) - f*panelH
}

// line draws a polyline of (t, v) points, skipping NaN and ±Inf (gaps: a
// sliding p99 is +Inf where more than 1 % of the window's requests failed).
func (p *panel) line(ts, vs []float64, color string, dashed bool, width float64) {
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="5,3"`
	}
	var pts []string
	flush := func() {
		if len(pts) > 1 {
			fmt.Fprintf(&p.d.b, `<polyline fill="none" stroke="%s" stroke-width="%.1f"%s points="%s"/>`+"\n", color, width, dash, strings.Join(pts, " "))
		}
		pts = pts[:0]
	}
	for i, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			flush()
			continue
		}
		pts = append(pts, fmt.Sprintf("%.0f,%.0f", p.px(ts[i]), p.py(v)))
	}
	flush()
}

func (p *panel) hline(v float64, color string) {
	y := p.py(v)
	fmt.Fprintf(&p.d.b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-dasharray="2,2"/>`+"\n", plotL, y, plotW-plotR, y, color)
}

func (p *panel) legend(label, color string, dashed bool) {
	y := p.y0 + 10 + 14*p.legendRows
	x := plotW - plotR + 8
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="5,3"`
	}
	fmt.Fprintf(&p.d.b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", x, y, x+18, y, color, dash)
	fmt.Fprintf(&p.d.b, `<text x="%d" y="%d">%s</text>`+"\n", x+22, y+4, esc(label))
	p.legendRows++
}

func (p *panel) events(sc *Scenario) {
	for i, e := range sc.Events {
		x := p.px(e.At.Seconds())
		fmt.Fprintf(&p.d.b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#555" stroke-dasharray="1,3"/>`+"\n", x, p.y0, x, p.y0+panelH)
		fmt.Fprintf(&p.d.b, `<text x="%.1f" y="%d" fill="#555" font-size="9">%d</text>`+"\n", x+2, p.y0+10, i+1)
	}
}

func (d *svgDoc) write(path string) error {
	d.b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(d.b.String()), 0o644)
}

// smooth averages xs over blocks of k samples (dt each) and returns block
// mid-times and means.
func smooth(xs []float32, dt float64, k int) ([]float64, []float64) {
	var ts, vs []float64
	for i := 0; i+k <= len(xs); i += k {
		var s float64
		for _, x := range xs[i : i+k] {
			s += float64(x)
		}
		ts = append(ts, (float64(i)+float64(k))*dt)
		vs = append(vs, s/float64(k))
	}
	return ts, vs
}

// WritePlots writes the SVG plots of every result that kept its series
// (the first seed). only, when non-empty, limits the per-policy plots to
// those policies. It returns the files written.
func WritePlots(dir string, results []Result, scenarios []*Scenario, only []string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	byName := map[string]*Scenario{}
	for _, sc := range scenarios {
		byName[sc.Name] = sc
	}
	type key struct{ sc, sched string }
	groups := map[key][]Result{}
	var order []key
	refs := map[string][]Result{}
	for _, r := range results {
		if r.series == nil {
			continue
		}
		if !r.IsKernel {
			refs[r.Scenario] = append(refs[r.Scenario], r)
			continue
		}
		k := key{r.Scenario, r.Scheduler}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var files []string
	for _, k := range order {
		sc := byName[k.sc]
		rs := groups[k]
		var ideal *Result
		for i := range rs {
			if rs[i].Policy == PolIdeal {
				ideal = &rs[i]
			}
		}
		for _, r := range rs {
			if len(only) > 0 && !slices.Contains(only, r.Policy) {
				continue
			}
			path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.svg", k.sc, k.sched, r.Policy))
			if err := policyPlot(path, sc, r, ideal); err != nil {
				return files, err
			}
			files = append(files, path)
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-%s-p99.svg", k.sc, k.sched))
		if err := p99Plot(path, sc, k.sched, append(slices.Clone(rs), refs[k.sc]...)); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

func msTicks(lo, hi float64) []float64 {
	var t []float64
	mult := []float64{1, 2, 5}
	if hi/lo > 200 {
		mult = []float64{1} // wide range: decades only
	}
	for v := 1e-3; v <= hi*1.0001; v *= 10 {
		for _, m := range mult {
			if x := v * m; x >= lo && x <= hi {
				t = append(t, x)
			}
		}
	}
	return t
}

func msFmt(v float64) string {
	if v >= 1 {
		return fmt.Sprintf("%gs", math.Round(v*10)/10)
	}
	return fmt.Sprintf("%gms", math.Round(v*1e4)/10)
}

func p99Range(rs ...*Result) (float64, float64) {
	lo, hi := math.Inf(1), 0.0
	for _, r := range rs {
		if r == nil || r.series == nil {
			continue
		}
		for _, v := range r.series.p99 {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return 1e-3, 1
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	return lo, hi
}

func policyPlot(path string, sc *Scenario, r Result, ideal *Result) error {
	s := r.series
	n := len(sc.Servers)
	end := sc.Duration.Seconds()
	d := newSVG(fmt.Sprintf("%s · %s · %s (seed %d)", sc.Name, r.Scheduler, r.Policy, r.Seed), 3)

	// Weight shares vs ideal shares, one point every 2 s (weights are
	// steps; the writes are at most once per interval).
	var ts []float64
	ws := make([][]float64, n)
	is := make([][]float64, n)
	maxShare := 0.0
	for i := 1; i < len(s.weights); i += 2 {
		ts = append(ts, float64(i+1)*s.dt)
		var sw, si float64
		for k := 0; k < n; k++ {
			sw += float64(s.weights[i][k])
			si += float64(s.ideal[i][k])
		}
		for k := 0; k < n; k++ {
			a, b := math.NaN(), math.NaN()
			if sw > 0 {
				a = float64(s.weights[i][k]) / sw
			}
			if si > 0 {
				b = float64(s.ideal[i][k]) / si
			}
			ws[k] = append(ws[k], a)
			is[k] = append(is[k], b)
			maxShare = math.Max(maxShare, math.Max(nz(a), nz(b)))
		}
	}
	top := math.Min(1, math.Ceil(maxShare*10+0.5)/10)
	pct := func(v float64) string { return fmt.Sprintf("%.0f%%", v*100) }
	p := d.panel(0, "weight share (solid) vs ideal share (dashed)", end, 0, top, false, []float64{0, top / 2, top}, pct)
	p.events(sc)
	for k := 0; k < n; k++ {
		c := palette[k%len(palette)]
		p.line(ts, is[k], c, true, 1.5)
		p.line(ts, ws[k], c, false, 1.5)
		p.legend(sc.Servers[k].Name, c, false)
	}

	// Utilisation, 5-second means.
	p = d.panel(1, "utilisation per server (5 s means; dashed: 95 %)", end, 0, 1, false, []float64{0, 0.5, 1}, pct)
	p.events(sc)
	p.hline(0.95, "#999")
	for k := 0; k < n && k < len(s.busy); k++ {
		c := palette[k%len(palette)]
		t, v := smooth(s.busy[k], s.dt, 5)
		p.line(t, v, c, false, 1.2)
		p.legend(sc.Servers[k].Name, c, false)
	}

	// Sliding p99.
	lo, hi := p99Range(&r, ideal)
	p = d.panel(2, "p99 response time, sliding 30 s window (log scale)", end, lo, hi, true, msTicks(lo, hi), msFmt)
	p.events(sc)
	if ideal != nil && ideal.series != nil {
		p.line(ideal.series.p99t, ideal.series.p99, "#777", true, 1.5)
		p.legend("ideal", "#777", true)
	}
	p.line(s.p99t, s.p99, "#000", false, 1.5)
	p.legend(r.Policy, "#000", false)
	return d.write(path)
}

func nz(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

func p99Plot(path string, sc *Scenario, sched string, rs []Result) error {
	d := newSVG(fmt.Sprintf("%s · %s · sliding p99 of every policy (seed %d)", sc.Name, sched, rs[0].Seed), 1)
	ptrs := make([]*Result, len(rs))
	for i := range rs {
		ptrs[i] = &rs[i]
	}
	lo, hi := p99Range(ptrs...)
	p := d.panel(0, "p99 response time, sliding 30 s window (log scale)", sc.Duration.Seconds(), lo, hi, true, msTicks(lo, hi), msFmt)
	p.events(sc)
	for i, r := range rs {
		c := palette[i%len(palette)]
		dashed := r.Policy == PolIdeal || !r.IsKernel
		p.line(r.series.p99t, r.series.p99, c, dashed, 1.5)
		p.legend(r.Policy, c, dashed)
	}
	return d.write(path)
}

// WriteOverview writes the one picture of a scenario an operator reads
// first: under one scheduler, the weight every server was given by policy
// pol (solid) against its static weight (dashed), and the sliding p99 of
// pol against static weights (nominal) and the ideal. It needs results
// that kept their series for pol, nominal and ideal.
func WriteOverview(path string, results []Result, sc *Scenario, sched, pol string) error {
	var ctl, static, ideal *Result
	for i := range results {
		r := &results[i]
		if r.Scenario != sc.Name || r.series == nil || r.IsKernel && r.Scheduler != sched {
			continue
		}
		switch {
		case r.Policy == pol && ctl == nil:
			ctl = r
		case r.Policy == PolNominal && static == nil:
			static = r
		case r.Policy == PolIdeal && ideal == nil:
			ideal = r
		}
	}
	if ctl == nil || static == nil {
		return fmt.Errorf("overview of %s under %s: needs the series of %q and %q", sc.Name, sched, pol, PolNominal)
	}
	n := len(sc.Servers)
	end := sc.Duration.Seconds()
	d := newSVG(fmt.Sprintf("%s · %s: %s against static weights (seed %d)", sc.Name, sched, pol, ctl.Seed), 2)
	var ts []float64
	ws, ss := make([][]float64, n), make([][]float64, n)
	top := 1.0
	for i := 1; i < len(ctl.series.weights) && i < len(static.series.weights); i += 2 {
		ts = append(ts, float64(i+1)*ctl.series.dt)
		for k := 0; k < n; k++ {
			w, s := float64(ctl.series.weights[i][k]), float64(static.series.weights[i][k])
			ws[k], ss[k] = append(ws[k], w), append(ss[k], s)
			top = math.Max(top, math.Max(w, s))
		}
	}
	top = math.Ceil(top/5) * 5
	p := d.panel(0, fmt.Sprintf("weight per server: %s (solid), static (dashed)", pol), end, 0, top, false,
		[]float64{0, top / 2, top}, func(v float64) string { return fmt.Sprintf("%g", v) })
	p.events(sc)
	for k := 0; k < n; k++ {
		c := palette[k%len(palette)]
		p.line(ts, ss[k], c, true, 1.2)
		p.line(ts, ws[k], c, false, 1.8)
		p.legend(sc.Servers[k].Name, c, false)
	}
	lo, hi := p99Range(ctl, static, ideal)
	p = d.panel(1, "p99 response time, sliding 30 s window (log scale)", end, lo, hi, true, msTicks(lo, hi), msFmt)
	p.events(sc)
	if ideal != nil {
		p.line(ideal.series.p99t, ideal.series.p99, "#777", true, 1.2)
		p.legend("ideal", "#777", true)
	}
	p.line(static.series.p99t, static.series.p99, palette[1], false, 1.5)
	p.legend("static", palette[1], false)
	p.line(ctl.series.p99t, ctl.series.p99, "#000", false, 1.8)
	p.legend(pol, "#000", false)
	return d.write(path)
}
