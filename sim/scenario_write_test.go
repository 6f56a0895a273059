package sim

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"
)

// Every shipped scenario, written by WriteScenario and read back, is the
// scenario it was.
func TestWriteScenarioRoundTrip(t *testing.T) {
	files, err := filepath.Glob("scenarios/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		sc, err := LoadScenario(f)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteScenario(&b, sc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		back, err := ParseScenario(f, b.Bytes())
		if err != nil {
			t.Fatalf("%s written and read back: %v\n%s", f, err, b.String())
		}
		back.File = sc.File
		if !reflect.DeepEqual(sc, back) {
			t.Errorf("%s: read back differs:\n%+v\n%+v", f, sc, back)
		}
	}
}
