package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/prometheus/client_golang/prometheus"

	"lvs-feedback/monitor"
)

// configKeys returns every key monitor.Config accepts, dotted
// ("service.probe.type"), from its toml tags, and the tables
// ("coefficients", "service.server").
func configKeys() (leaves, tables []string) {
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("toml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			key := prefix + tag
			ft := f.Type
			if ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			// A table is a struct of ours (monitor's or policy's), not
			// a value type such as time.Duration or netip.Addr.
			if ft.Kind() == reflect.Struct && strings.HasPrefix(ft.PkgPath(), "lvs-feedback/") {
				tables = append(tables, key)
				walk(ft, key+".")
				continue
			}
			leaves = append(leaves, key)
		}
	}
	walk(reflect.TypeFor[monitor.Config](), "")
	return leaves, tables
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docRow matches a row of the key table of configuration.md: the key and
// its default (the third column; a cell may hold an escaped \|).
var docRow = regexp.MustCompile("^\\| `([a-z_.]+)` \\| (?:[^|\\\\]|\\\\.)* \\| ((?:[^|\\\\]|\\\\.)*) \\|")

// docTableKeys returns the keys in the first column of the key table of
// configuration.md, each with its default as written.
func docTableKeys(doc string) map[string]string {
	keys := map[string]string{}
	for _, line := range strings.Split(doc, "\n") {
		if m := docRow.FindStringSubmatch(line); m != nil {
			keys[m[1]] = strings.TrimSpace(m[2])
		}
	}
	return keys
}

// exampleKeys returns the dotted keys assigned in the example file,
// commented-out assignments included, each under the table it appears in.
func exampleKeys(text string) map[string]bool {
	assigned := map[string]bool{}
	// A commented-out table or key counts: it must be real too.
	header := regexp.MustCompile(`^#?\s*\[\[?([a-z_.]+)\]\]?\s*(#.*)?$`)
	assign := regexp.MustCompile(`^#?\s*([a-z_]+)\s*=`)
	table := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := header.FindStringSubmatch(line); m != nil {
			table = m[1]
			assigned[table] = true
			continue
		}
		if m := assign.FindStringSubmatch(line); m != nil {
			key := m[1]
			if table != "" {
				key = table + "." + key
			}
			assigned[key] = true
		}
	}
	return assigned
}

// Every key the configuration accepts is in the key table of
// configuration.md with a default, and every key there is accepted. The
// example shows only what an operator usually sets; each table and key it
// names, commented out or not, is real, and it parses.
func TestConfigurationDocMatchesCode(t *testing.T) {
	leaves, tables := configKeys()
	if len(leaves) < 30 {
		t.Fatalf("found only %d keys in monitor.Config: %v", len(leaves), leaves)
	}
	doc := readDoc(t, "../../docs/configuration.md")
	inDoc := docTableKeys(doc)
	real := map[string]bool{}
	for _, k := range leaves {
		real[k] = true
		if def, ok := inDoc[k]; !ok {
			t.Errorf("docs/configuration.md: key %s is not in the key table", k)
		} else if def == "" {
			t.Errorf("docs/configuration.md: key %s has no default", k)
		}
	}
	for k := range inDoc {
		if !real[k] {
			t.Errorf("docs/configuration.md documents %s, which the configuration does not accept", k)
		}
	}
	for _, tb := range tables {
		real[tb] = true
		if !strings.Contains(doc, "["+tb+"]") {
			t.Errorf("docs/configuration.md does not show the table [%s]", tb)
		}
	}
	example := readDoc(t, "../../docs/examples/lvs-monitor.toml")
	inExample := exampleKeys(example)
	for _, k := range []string{"service", "service.address", "service.server", "service.server.address", "service.server.weight"} {
		if !inExample[k] {
			t.Errorf("docs/examples/lvs-monitor.toml does not set %s", k)
		}
	}
	for k := range inExample {
		if !real[k] {
			t.Errorf("docs/examples/lvs-monitor.toml names %s, which the configuration does not accept", k)
		}
	}
	// The parser refuses unknown keys: every uncommented key is real.
	if _, err := monitor.ParseConfig("lvs-monitor.toml", []byte(example)); err != nil {
		t.Errorf("the example does not parse: %v", err)
	}
}

// Outside [[service]], whose addresses, weights and probes are the
// operator's own, the example restates only defaults: each key it sets
// has the value configuration.md gives as that key's default, so the
// installed file runs exactly as the reference says.
func TestExampleRestatesOnlyDefaults(t *testing.T) {
	inDoc := docTableKeys(readDoc(t, "../../docs/configuration.md"))
	const name = "lvs-monitor.toml"
	text, _, err := monitor.EffectiveConfig(name, []byte(readDoc(t, "../../docs/examples/lvs-monitor.toml")))
	if err != nil {
		t.Fatal(err)
	}
	set := exampleSettings(text, name)
	if len(set) == 0 {
		t.Fatalf("no key of the example in its effective configuration:\n%s", text)
	}
	for key, value := range set {
		if key == "service" || strings.HasPrefix(key, "service.") {
			continue
		}
		def := inDoc[key]
		lit, ok := strings.CutPrefix(def, "`")
		if lit, _, found := strings.Cut(lit, "`"); ok && found {
			def = lit
		} else {
			t.Errorf("docs/examples/lvs-monitor.toml sets %s = %s; its documented default %q is no value to restate", key, value, def)
			continue
		}
		if !sameTOMLValue(t, value, def) {
			t.Errorf("docs/examples/lvs-monitor.toml sets %s = %s, not its documented default %s", key, value, def)
		}
	}
}

// exampleSettings returns the keys an effective configuration printed
// for the file name says that file set, dotted, with their values as
// printed.
func exampleSettings(text, name string) map[string]string {
	set := map[string]string{}
	table := ""
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if strings.HasPrefix(line, "[") {
			table = strings.Trim(strings.Fields(line)[0], "[]")
			continue
		}
		i := strings.LastIndex(line, "  # ")
		key, value, ok := strings.Cut(line[:max(i, 0)], " = ")
		if i < 0 || !ok || !strings.HasPrefix(line[i+4:], name+":") {
			continue
		}
		if table != "" {
			key = table + "." + key
		}
		set[key] = value
	}
	return set
}

// sameTOMLValue reports whether two TOML values are the same setting: a
// number is the same integer or fractional, a duration the same length.
func sameTOMLValue(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb struct{ V any }
	if _, err := toml.Decode("V = "+a, &va); err != nil {
		t.Errorf("%s: %v", a, err)
		return false
	}
	if _, err := toml.Decode("V = "+b, &vb); err != nil {
		t.Errorf("%s: %v", b, err)
		return false
	}
	num := func(v any) (float64, bool) {
		switch v := v.(type) {
		case int64:
			return float64(v), true
		case float64:
			return v, true
		}
		return 0, false
	}
	if x, ok := num(va.V); ok {
		y, ok := num(vb.V)
		return ok && x == y
	}
	if x, ok := va.V.(string); ok {
		y, _ := vb.V.(string)
		dx, errx := time.ParseDuration(x)
		dy, erry := time.ParseDuration(y)
		if errx == nil && erry == nil {
			return dx == dy
		}
		return x == y
	}
	return reflect.DeepEqual(va.V, vb.V)
}

var metricName = regexp.MustCompile(`\b(lvs_monitor_[a-z_]+)`)

// baseName strips the suffixes a histogram's series add.
func baseName(n string, families map[string]series) string {
	for _, suf := range []string{"_bucket", "_count", "_sum"} {
		if b, ok := strings.CutSuffix(n, suf); ok && families[b].typ == "histogram" {
			return b
		}
	}
	return n
}

// series is one metric family as monitor.NewMetrics registers it.
type series struct {
	typ    string // gauge, counter, histogram
	labels []string
}

// recorder is a prometheus.Registerer that records what is registered, so
// that every family is known whether or not a code path has created a
// child of it yet (the sync series exist only in a synchronised group).
type recorder struct{ families map[string]series }

var descRE = regexp.MustCompile(`fqName: "([a-z_]+)".*variableLabels: \{([^}]*)\}`)

func (r *recorder) Register(c prometheus.Collector) error {
	typ := ""
	switch c.(type) { // Gauge before Counter: a gauge has Inc and Add too
	case prometheus.Gauge, *prometheus.GaugeVec:
		typ = "gauge"
	case prometheus.Counter, *prometheus.CounterVec:
		typ = "counter"
	case prometheus.Histogram, *prometheus.HistogramVec:
		typ = "histogram"
	}
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			return fmt.Errorf("cannot read %s", d)
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		r.families[m[1]] = series{typ: typ, labels: labels}
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(prometheus.Collector) bool { return false }

// lvsFamilies returns every lvs_monitor_ family monitor.NewMetrics
// registers.
func lvsFamilies(t *testing.T) map[string]series {
	t.Helper()
	r := &recorder{families: map[string]series{}}
	monitor.NewMetrics(r)
	for name, f := range r.families {
		if f.typ == "" || !strings.HasPrefix(name, "lvs_monitor_") {
			t.Fatalf("family %s: type %q", name, f.typ)
		}
	}
	return r.families
}

func TestMetricsDocMatchesCode(t *testing.T) {
	fams := lvsFamilies(t)
	if len(fams) < 20 {
		t.Fatalf("only %d lvs_monitor_ families registered", len(fams))
	}
	doc := readDoc(t, "../../docs/metrics.md")
	for name, f := range fams {
		row := regexp.MustCompile("(?m)^\\| `" + name + "` \\| (\\w+) \\|([^|]*)\\|.*$").FindStringSubmatch(doc)
		if row == nil {
			t.Errorf("docs/metrics.md has no row for %s", name)
			continue
		}
		if row[1] != f.typ {
			t.Errorf("docs/metrics.md: %s is a %s, the doc says %s", name, f.typ, row[1])
		}
		var documented []string
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(row[2], -1) {
			documented = append(documented, m[1])
		}
		sort.Strings(documented)
		labels := append([]string(nil), f.labels...)
		sort.Strings(labels)
		if strings.Join(documented, ",") != strings.Join(labels, ",") {
			t.Errorf("docs/metrics.md: %s has labels %v, the doc says %v", name, labels, documented)
		}
	}
	for _, n := range metricName.FindAllString(doc, -1) {
		if _, ok := fams[baseName(n, fams)]; !ok {
			t.Errorf("docs/metrics.md mentions %s, which lvs-monitor does not export", n)
		}
	}
}

func TestGrafanaDashboardUsesRealSeries(t *testing.T) {
	fams := lvsFamilies(t)
	data := readDoc(t, "../../docs/grafana-dashboard.json")
	var dash map[string]any
	if err := json.Unmarshal([]byte(data), &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	used := map[string]bool{}
	for _, n := range metricName.FindAllString(data, -1) {
		b := baseName(n, fams)
		used[b] = true
		if _, ok := fams[b]; !ok {
			t.Errorf("the dashboard queries %s, which lvs-monitor does not export", n)
		}
	}
	var unused []string
	for name := range fams {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("series not on the dashboard: %v", unused)
	}
}

// Every PromQL expression of the dashboard and of the alert rules in
// docs/metrics.md parses: promtool checks them as a rule file.
func TestPromQLInDocsParses(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install --no-install-recommends prometheus)")
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Annotations struct{ List []struct{ Expr string } }
	}
	if err := json.Unmarshal([]byte(readDoc(t, "../../docs/grafana-dashboard.json")), &dash); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*", "$service", ".*", "$server", ".*", "$job", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	add := func(expr string) {
		n++
		q, _ := json.Marshal(vars.Replace(expr)) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: dashboard:expr%d\n        expr: %s\n", n, q)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			add(tg.Expr)
		}
	}
	for _, a := range dash.Annotations.List {
		add(a.Expr)
	}
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "dashboard.yml"), filepath.Join(dir, "alerts.yml")}
	if err := os.WriteFile(files[0], []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile("(?s)```yaml\n(groups:.*?)```").FindStringSubmatch(readDoc(t, "../../docs/metrics.md"))
	if alerts == nil {
		t.Fatal("docs/metrics.md has no alert rules")
	}
	if err := os.WriteFile(files[1], []byte(alerts[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, append([]string{"check", "rules"}, files...)...).CombinedOutput()
	if err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	if n < 20 {
		t.Errorf("only %d expressions in the dashboard", n)
	}
}
