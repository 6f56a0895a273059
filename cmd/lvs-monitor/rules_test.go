package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The alerting rules shipped in docs/examples/lvs-monitor.rules.yml are
// the ones docs/metrics.md shows, name only series lvs-monitor exports,
// pass `promtool check rules`, and fire as their unit tests
// (lvs-monitor.rules.test.yml, synthetic series) say: `promtool test
// rules`.
func TestAlertRules(t *testing.T) {
	const rules, tests = "../../docs/examples/lvs-monitor.rules.yml", "../../docs/examples/lvs-monitor.rules.test.yml"
	file := readDoc(t, rules)
	shown := regexp.MustCompile("(?s)```yaml\n(groups:.*?)```").FindStringSubmatch(readDoc(t, "../../docs/metrics.md"))
	if shown == nil || shown[1] != file {
		t.Errorf("docs/metrics.md's alert rules differ from %s: copy the file into the page", rules)
	}
	fams := lvsFamilies(t)
	for _, text := range []string{file, readDoc(t, tests)} {
		for _, n := range metricName.FindAllString(text, -1) {
			if _, ok := fams[baseName(n, fams)]; !ok {
				t.Errorf("the rules or their tests use %s, which lvs-monitor does not export", n)
			}
		}
	}
	if n := strings.Count(file, "- alert: "); n < 11 {
		t.Errorf("%d alerts in %s, want the 11 documented", n, rules)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed: apt-get install -y --no-install-recommends prometheus (.ci/run does)")
	}
	for _, args := range [][]string{{"check", "rules", rules}, {"test", "rules", tests}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
