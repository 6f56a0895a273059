package monitor

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestEffectiveConfigLines: a file that sets a few keys at known lines
// prints them with their lines, and every other key with its default, in
// the order the tables come in Config.
func TestEffectiveConfigLines(t *testing.T) {
	const file = `interval = "10s"
[weight]
controller = "lvs"
gain = 6.5
[[service]]
address = "192.0.2.10:80/tcp"
probe = { type = "http", reference = "250ms" }
[[service.server]]
address = "198.51.100.11:80"
weight = 10
[[service.server]]
address = "198.51.100.12:8080"
weight = 20
source = "node_exporter"
`
	text, ws, err := EffectiveConfig("t.toml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 0 {
		t.Errorf("warnings %v, want none", ws)
	}
	// In this order, each a whole line of the output.
	want := []string{
		`interval = "10s"  # t.toml:1`,
		`agent_timeout = "2s"  # default`,
		`concurrency = 64  # default`,
		`state_dir = "/var/lib/lvs-monitor"  # default`,
		`agent_port = 9771  # default`,
		`metrics_listen = "127.0.0.1:9772"  # default`,
		`[coefficients]`,
		`input = 0.1  # default`,
		`cpu = 0.3  # default`,
		`[weight]  # t.toml:2`,
		`gain = 6.5  # t.toml:4`,
		`target = 0.95  # default`,
		`scale = 10.0  # default`,
		`min = 1  # default`,
		`threshold = 1  # default`,
		`controller = "lvs"  # t.toml:3`,
		`smoothing = 0.7  # default; ignored by controller "lvs"`,
		`confirm = 5  # default; ignored by controller "lvs"`,
		`[availability]`,
		`freeze_share = 0.5  # default`,
		`agent_expiry = "30s"  # default`,
		`[backlog_guard]`,
		`check = "1s"  # default`,
		`raise = true  # default`,
		`[sync]`,
		`id = ""  # default`,
		`vips = []  # default`,
		`[history]`,
		`enabled = true  # default`,
		`[[service]]  # t.toml:5`,
		`address = "192.0.2.10:80/tcp"  # t.toml:6`,
		`agent_port = 9771  # default`,
		`health_checker = ""  # default`,
		`[service.probe]  # t.toml:7`,
		`type = "http"  # t.toml:7`,
		`path = "/"  # default`,
		`expect_status = 200  # default`,
		`port = 0  # default`,
		`reference = "250ms"  # t.toml:7`,
		`[[service.server]]  # t.toml:8`,
		`address = "198.51.100.11:80"  # t.toml:9`,
		`weight = 10  # t.toml:10`,
		`agent = ""  # default`,
		`source = ""  # default`,
		`[[service.server]]  # t.toml:11`,
		`address = "198.51.100.12:8080"  # t.toml:12`,
		`weight = 20  # t.toml:13`,
		`source = "node_exporter"  # t.toml:14`,
	}
	lines := strings.Split(text, "\n")
	at := 0
	for _, w := range want {
		i := slices.Index(lines[at:], w)
		if i < 0 {
			t.Fatalf("line %q missing, or out of order after line %d, in\n%s", w, at, text)
		}
		at += i + 1
	}
	for _, absent := range []string{"[sync.etcd]", "[[sync.peer]]"} {
		if slices.Contains(lines, absent) {
			t.Errorf("%s printed for a director that runs alone", absent)
		}
	}
}

// roundTripConfigs are valid files between them setting every kind of key
// and table: the example, two services, a pair, a fleet (with every etcd
// key), the lvs controller with capacity keys set, inline tables, and
// strings that need quoting.
func roundTripConfigs(t *testing.T) map[string]string {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"example":      string(mustReadFile(t, "../docs/examples/lvs-monitor.toml")),
		"two services": twoServices,
		"pair": minimal + `[sync]
id = "a"
listen = "127.0.0.1:9773"
key_file = "/etc/k"
vips = ["192.0.2.10", "192.0.2.11"]
[[sync.peer]]
id = "b"
address = "127.0.0.1:9774"
[[sync.peer]]
id = "c"
address = "127.0.0.1:9775"
`,
		"fleet": minimal + `[sync]
id = "dir1"
backend = "etcd"
[sync.etcd]
endpoints = ["https://127.0.0.1:2379", "https://127.0.0.2:2379"]
directors = ["dir1", "dir2"]
prefix = "/lb/"
lease_ttl = "20s"
dial_timeout = "1500ms"
ca_file = "/etc/ca.pem"
cert_file = "/etc/c.pem"
key_file = "/etc/c.key"
username = "lvs"
password_file = "` + pw + `"
`,
		"fleet defaults": fleetMinimal,
		"lvs controller": `interval = "1m30s"
agent_timeout = "250ms"
[weight]
controller = "lvs"
target = 0.123456789012345
scale = 2.5
anchor = 0.05
[availability]
agent_expiry = "2m"
slow_start = "0s"
[backlog_guard]
check = "0s"
raise = false
[history]
enabled = false
[[service]]
address = "fwmark:7"
agent_port = 9900
health_checker = "keepalived"
[service.probe]
port = 8443
host = "www.example.com"
[[service.server]]
address = "198.51.100.11:0"
weight = 3
agent = "198.51.100.11:9901"
`,
		"inline tables": `coefficients = { input = 0.0, cpu = 0.5, memory = 0.1, disk = 0.0, response = 0.3, process = 0.1 }
service = [{ address = "[2001:db8::10]:443/tcp", server = [{ address = "[2001:db8::11]:443", weight = 6553 }] }]
`,
		"quoted strings": `state_dir = "/var/lib/lvs \"monitor\" é\\x\t"` + "\n" + minimal,
	}
}

// TestEffectiveConfigRoundTrip: the printed text read back gives the same
// configuration, and printed again sets every key it prints (no
// "default" left) with the same values: the output is a complete config.
// Together the files print every key lvs-monitor reads.
func TestEffectiveConfigRoundTrip(t *testing.T) {
	printed := map[string]bool{}
	for name, file := range roundTripConfigs(t) {
		name += "\n\x7f\u0085 name" // the file name is in the comments: no control character may end one
		want, _, err := CheckConfig(name, []byte(file))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text, _, err := EffectiveConfig(name, []byte(file))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := ParseConfig("printed.toml", []byte(text))
		if err != nil {
			t.Fatalf("%s: the printed text does not read back: %v\n%s", name, err, text)
		}
		if !reflect.DeepEqual(emptySlicesNil(got), emptySlicesNil(want)) {
			t.Errorf("%s: read back\n%+v\nwant\n%+v\nprinted:\n%s", name, got, want, text)
		}
		again, _, err := EffectiveConfig("printed.toml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if values(again) != values(text) {
			t.Errorf("%s: printed twice, the values differ:\n%s\nthen\n%s", name, text, again)
		}
		for l := range strings.SplitSeq(again, "\n") {
			if strings.HasSuffix(l, "# default") {
				t.Errorf("%s: printed back, %q is still a default: the output left it out", name, l)
			}
		}
		idx, _, err := indexTOML([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range idx.settings {
			printed[schemaKey(s.path)] = true
		}
	}
	for k := range configKeys {
		if !printed[k] {
			t.Errorf("key %s is never printed", k)
		}
	}
}

// TestEffectiveConfigOfExample: the example sets only what an operator
// usually sets; -print-config on it shows every other key with its
// default, all but those of [[sync.peer]] and [sync.etcd], which a
// director that runs alone has none of.
func TestEffectiveConfigOfExample(t *testing.T) {
	text, _, err := EffectiveConfig("lvs-monitor.toml", mustReadFile(t, "../docs/examples/lvs-monitor.toml"))
	if err != nil {
		t.Fatal(err)
	}
	idx, _, err := indexTOML([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	printed := map[string]bool{}
	for _, s := range idx.settings {
		printed[schemaKey(s.path)] = true
	}
	n := 0
	for k := range configKeys {
		if k == "sync.peer" || k == "sync.etcd" || strings.HasPrefix(k, "sync.peer.") || strings.HasPrefix(k, "sync.etcd.") {
			if printed[k] {
				t.Errorf("%s printed for a director that runs alone", k)
			}
			continue
		}
		n++
		if !printed[k] {
			t.Errorf("-print-config of the example does not print %s", k)
		}
	}
	if n < 50 {
		t.Errorf("only %d keys expected in the example's effective configuration", n)
	}
}

// values returns text without its comments.
func values(text string) string {
	var b strings.Builder
	for l := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		v, _, _ := strings.Cut(l, "  # ")
		b.WriteString(v + "\n")
	}
	return b.String()
}

// emptySlicesNil returns cfg with every empty slice nil: the decoder makes
// `vips = []` an empty slice where a file without it leaves nil, which
// the monitor reads alike.
func emptySlicesNil(cfg Config) Config {
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			if v.Len() == 0 {
				v.SetZero()
			}
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(&cfg).Elem())
	return cfg
}

// TestEffectiveConfigRefusesBadFile: a broken file prints nothing and
// gives the check's error.
func TestEffectiveConfigRefusesBadFile(t *testing.T) {
	bad := strings.Replace(minimal, `interval = "5s"`, `interval = 5`, 1)
	_, _, want := CheckConfig("bad.toml", []byte(bad))
	text, _, err := EffectiveConfig("bad.toml", []byte(bad))
	if err == nil || want == nil || err.Error() != want.Error() || text != "" {
		t.Fatalf("got %q, %v; want no text and the check's error %v", text, err, want)
	}
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
