package sim

import (
	"fmt"
	"io"

	"github.com/BurntSushi/toml"
)

// WriteScenario writes sc as a scenario file that LoadScenario reads back
// to the same scenario (durations as Go duration strings, zero values
// left out), for scenarios built in code.
func WriteScenario(w io.Writer, sc *Scenario) error {
	if err := toml.NewEncoder(w).Encode(sc); err != nil {
		return fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	return nil
}
