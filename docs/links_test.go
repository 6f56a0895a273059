// Package docs holds the project's documentation: the pages under docs/,
// its manual pages (docs/man) and example files (docs/examples). It has no
// code; this test keeps the pages' links working: every relative link in
// README.md and the pages under docs/ names a file that exists and, when it
// names a heading (#anchor), a heading that exists, as GitHub renders it.
package docs

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// link is a Markdown inline link or image: [text](target) or ![alt](target),
// the target without an optional "title".
var link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// htmlAnchor is an anchor a page sets by hand.
var htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)

// Patterns of slug and sentences: a link (its text kept), a fenced code
// block, a heading line, a sentence's end.
var (
	linkText    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	codeBlock   = regexp.MustCompile("(?s)```.*?```")
	headingLine = regexp.MustCompile(`(?m)^#.*$`)
	sentenceEnd = regexp.MustCompile(`[.!?] `)
)

// slug is the anchor GitHub gives a heading's text: lower case, inline code
// marks and link targets dropped, every character but letters, digits,
// spaces, hyphens and underscores removed, spaces made hyphens.
func slug(heading string) string {
	heading = linkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Balancing quality: results", "balancing-quality-results"},
		{"A predicted backlog in the guard (commit `65fba87`)", "a-predicted-backlog-in-the-guard-commit-65fba87"},
		{"`make demo` — the loop, live", "make-demo--the-loop-live"},
		{"Significance, not size (commit 9661ab1)", "significance-not-size-commit-9661ab1"},
		{"See [the guide](guide.md)", "see-the-guide"},
		{"lvs_monitor_weight: what it is", "lvs_monitor_weight-what-it-is"},
	} {
		if got := slug(c.in); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// anchors lists the anchors of a Markdown page: its headings' slugs (a
// repeated one numbered -1, -2, … as GitHub does) and its hand-set anchors.
// Lines inside fenced code blocks are not headings.
func anchors(text string) map[string]bool {
	out, seen := map[string]bool{}, map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		s := slug(h)
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func TestAnchorsNumberRepeats(t *testing.T) {
	a := anchors("# Top\n## Figures\n```\n# not a heading\n```\n## Figures\n<a id=\"by-hand\"></a>\n")
	for _, want := range []string{"top", "figures", "figures-1", "by-hand"} {
		if !a[want] {
			t.Errorf("anchors lack %q: %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Errorf("a line in a code block was taken as a heading: %v", a)
	}
}

// pages are the Markdown files a reader follows links through.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"../README.md"}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// brokenLinks returns, for one page, each relative link whose file or
// heading does not exist, as "page: target (why)".
func brokenLinks(page, text string, read func(string) (string, error)) []string {
	var bad []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			body, err := read(path)
			if err != nil {
				bad = append(bad, page+": "+target+" (no such file)")
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(body)[anchor] {
				bad = append(bad, page+": "+target+" (no such heading)")
			}
		}
	}
	return bad
}

func readPage(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return "", nil
	}
	b, err := os.ReadFile(path)
	return string(b), err
}

func TestBrokenLinksFound(t *testing.T) {
	files := map[string]string{
		"a.md":     "# A\n## Part two\n[ok](b.md#b) [ok](#part-two) [bad](b.md#nope) [bad](c.md) [web](https://example.com/x)\n```\n[in code](nowhere.md)\n```\n",
		"b.md":     "# B\n",
		"pic.svg":  "<svg/>",
		"sub/c.md": "[up](../a.md#a) ![plot](../pic.svg)\n",
	}
	read := func(p string) (string, error) {
		if s, ok := files[filepath.ToSlash(p)]; ok {
			return s, nil
		}
		return "", os.ErrNotExist
	}
	got := brokenLinks("a.md", files["a.md"], read)
	want := []string{"a.md: b.md#nope (no such heading)", "a.md: c.md (no such file)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("a.md: got %q, want %q", got, want)
	}
	if got := brokenLinks("sub/c.md", files["sub/c.md"], read); len(got) != 0 {
		t.Errorf("sub/c.md: got %q, want none", got)
	}
}

func TestDocsLinks(t *testing.T) {
	ps := pages(t)
	if len(ps) < 10 {
		t.Fatalf("found only %d pages: %v", len(ps), ps)
	}
	for _, p := range ps {
		text, err := readPage(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range brokenLinks(p, text, readPage) {
			t.Error(b)
		}
	}
}

// sentences are a page's sentences of at least minLen characters, outside
// code blocks and headings, with white space folded.
func sentences(text string, minLen int) []string {
	text = codeBlock.ReplaceAllString(text, "")
	text = headingLine.ReplaceAllString(text, "")
	text = strings.Join(strings.Fields(text), " ")
	var out []string
	for _, s := range sentenceEnd.Split(text, -1) {
		if len(s) >= minLen {
			out = append(out, s)
		}
	}
	return out
}

// repeats returns each long sentence found on more than one page, with the
// pages, as "sentence… (a.md, b.md)".
func repeats(pages map[string]string, minLen int) []string {
	where := map[string][]string{}
	var order []string
	for _, p := range slices.Sorted(maps.Keys(pages)) {
		for _, s := range sentences(pages[p], minLen) {
			if len(where[s]) == 0 {
				order = append(order, s)
			}
			if !slices.Contains(where[s], p) {
				where[s] = append(where[s], p)
			}
		}
	}
	var out []string
	for _, s := range order {
		if len(where[s]) > 1 {
			out = append(out, s[:min(len(s), 80)]+"… ("+strings.Join(where[s], ", ")+")")
		}
	}
	return out
}

func TestRepeatsFound(t *testing.T) {
	long := "The monitor writes a weight only when the change passes the threshold and the server is in rotation"
	got := repeats(map[string]string{
		"a.md": "# A\n" + long + ". Short one.\n",
		"b.md": "Intro.\n" + long + "! More.\n```\n" + "Only in code: " + long + "\n```\n",
		"c.md": "Nothing shared here, though this sentence is long enough to be compared with the others.",
	}, 80)
	want := []string{long[:80] + "… (a.md, b.md)"}
	if !slices.Equal(got, want) {
		t.Errorf("repeats = %q, want %q", got, want)
	}
}

// No page repeats another: a sentence of 100 characters or more stands on
// one page only (the README included); the other pages link to it. The
// manual pages are left out: they are the same references for man(1),
// rendered from the same declarations as configuration.md's key table.
func TestNoPageRepeatsAnother(t *testing.T) {
	all := map[string]string{}
	for _, p := range pages(t) {
		if strings.HasPrefix(filepath.ToSlash(p), "man/") {
			continue
		}
		text, err := readPage(p)
		if err != nil {
			t.Fatal(err)
		}
		all[p] = text
	}
	for _, r := range repeats(all, 100) {
		t.Error("repeated: " + r)
	}
}
