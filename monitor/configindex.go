package monitor

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Positions come from go-toml's syntax tree (unstable.Parser), not from
// BurntSushi/toml, which decodes: BurntSushi v1.6 keeps a position per
// dotted key without array indices, so the keys of every [[service]] and
// [[service.server]] share the position of the last one, and MetaData
// exposes none of them.

// pathElem is one component of a key as set in the file.
type pathElem struct {
	name  string
	index int // element of an array of tables; -1 for none
}

// setting is one key, table header or array-of-tables element in the file.
type setting struct {
	path []pathElem
	line int
	// kind is what the file holds there: a scalar kind, Array,
	// InlineTable, or Table/ArrayTable for a header.
	kind unstable.Kind
	// value is a scalar as written (strings unquoted); elems are the kinds
	// of an array's elements.
	value string
	elems []unstable.Kind
}

// key returns the indexed dotted key, e.g. "service[0].server[1].weight".
func (s setting) key() string { return indexedKey(s.path) }

func indexedKey(path []pathElem) string {
	var b strings.Builder
	for i, e := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.name)
		if e.index >= 0 {
			fmt.Fprintf(&b, "[%d]", e.index)
		}
	}
	return b.String()
}

func schemaKey(path []pathElem) string {
	names := make([]string, len(path))
	for i, e := range path {
		names[i] = e.name
	}
	return strings.Join(names, ".")
}

// fileIndex is what a configuration file sets, in file order, and where.
type fileIndex struct {
	settings []setting
	// lines maps an indexed key, table or array element to the line that
	// first defines it (a dotted key defines its tables too).
	lines map[string]int
}

// indexTOML lists the keys of a TOML document with their lines. Its error
// is a syntax error with the line it is on (0 when unknown).
func indexTOML(data []byte) (fileIndex, int, error) {
	idx := fileIndex{lines: map[string]int{}}
	var newlines []int
	for i, c := range data {
		if c == '\n' {
			newlines = append(newlines, i)
		}
	}
	lineAt := func(offset uint32) int {
		n, _ := slices.BinarySearch(newlines, int(offset))
		return n + 1
	}
	w := indexWalker{idx: &idx, counts: map[string]int{}, lineAt: lineAt}

	var p unstable.Parser
	p.Reset(data)
	var table []pathElem
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			names, line := keyNames(e.Key(), lineAt)
			if e.Kind == unstable.Table {
				table = w.resolve(nil, names, line)
			} else {
				// [[a.b]]: a new element of a.b, in the last element of a.
				table = append(w.resolve(nil, names[:len(names)-1], line), pathElem{name: names[len(names)-1], index: -1})
				k := indexedKey(table)
				table[len(table)-1].index = w.counts[k]
				w.counts[k]++
			}
			w.record(setting{path: table, line: line, kind: e.Kind})
		case unstable.KeyValue:
			w.keyValue(table, e)
		}
	}
	if err := p.Error(); err != nil {
		var pe *unstable.ParserError
		if errors.As(err, &pe) && len(pe.Highlight) > 0 {
			return idx, lineAt(p.Range(pe.Highlight).Offset), err
		}
		return idx, 0, err
	}
	return idx, 0, nil
}

type indexWalker struct {
	idx *fileIndex
	// counts: elements seen so far of each array of tables, by indexed key.
	counts map[string]int
	lineAt func(uint32) int
}

// resolve appends names to base; a name that is an array of tables in this
// file refers to its last element, as in TOML.
func (w *indexWalker) resolve(base []pathElem, names []string, line int) []pathElem {
	path := slices.Clone(base)
	for _, n := range names {
		path = append(path, pathElem{name: n, index: -1})
		if c := w.counts[indexedKey(path)]; c > 0 {
			path[len(path)-1].index = c - 1
		}
		if _, ok := w.idx.lines[indexedKey(path)]; !ok {
			w.idx.lines[indexedKey(path)] = line
		}
	}
	return path
}

func (w *indexWalker) record(s setting) {
	w.idx.settings = append(w.idx.settings, s)
	if _, ok := w.idx.lines[s.key()]; !ok {
		w.idx.lines[s.key()] = s.line
	}
}

func (w *indexWalker) keyValue(table []pathElem, e *unstable.Node) {
	names, line := keyNames(e.Key(), w.lineAt)
	path := w.resolve(table, names, line)
	v := e.Value()
	switch v.Kind {
	case unstable.InlineTable:
		w.record(setting{path: path, line: line, kind: unstable.InlineTable})
		for it := v.Children(); it.Next(); {
			w.keyValue(path, it.Node())
		}
	case unstable.Array:
		var elems []unstable.Kind
		for it := v.Children(); it.Next(); {
			elems = append(elems, it.Node().Kind)
		}
		if len(elems) == 0 || slices.ContainsFunc(elems, func(k unstable.Kind) bool { return k != unstable.InlineTable }) {
			w.record(setting{path: path, line: line, kind: unstable.Array, elems: elems})
			return
		}
		// An array of inline tables is an array of tables.
		k := indexedKey(path)
		for it := v.Children(); it.Next(); {
			el := slices.Clone(path)
			el[len(el)-1].index = w.counts[k]
			w.counts[k]++
			w.record(setting{path: el, line: line, kind: unstable.InlineTable})
			for kv := it.Node().Children(); kv.Next(); {
				w.keyValue(el, kv.Node())
			}
		}
	default:
		w.record(setting{path: path, line: line, kind: v.Kind, value: string(v.Data)})
	}
}

// keyNames returns the parts of a (dotted) key and the line of its first.
func keyNames(it unstable.Iterator, lineAt func(uint32) int) ([]string, int) {
	var names []string
	line := 0
	for it.Next() {
		n := it.Node()
		if line == 0 {
			line = lineAt(n.Raw.Offset)
		}
		names = append(names, string(n.Data))
	}
	return names, line
}
