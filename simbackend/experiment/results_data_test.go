package experiment

import (
	"bufio"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The data beside the results pages (docs/results): scripts/figures.txt
// lists every experiment whose CSVs and plots are committed there, and
// scripts/figures.sh writes them with a RUN.md naming the command, the
// commit and the config's hash.
const (
	resultsDir   = "../../docs/results"
	manifestFile = "../../scripts/figures.txt"
	configsDir   = "../../configs/experiments"
)

type manifestEntry struct {
	set, dir, config, flags string
	line                    int
	pending                 bool // listed "pending": its data are not committed yet
}

func readManifest(t *testing.T) []manifestEntry {
	t.Helper()
	f, err := os.Open(manifestFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []manifestEntry
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		pending := len(fs) > 0 && fs[0] == "pending"
		if pending {
			fs = fs[1:]
		}
		if len(fs) < 3 {
			t.Fatalf("%s:%d: want SET DIR CONFIG [FLAGS...], have %q", manifestFile, n, line)
		}
		out = append(out, manifestEntry{fs[0], fs[1], fs[2], strings.Join(fs[3:], " "), n, pending})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var runShaRE = regexp.MustCompile(`(?m)^- config sha256: ([0-9a-f]{64})$`)

// TestResultsDataCurrent: every experiment scripts/figures.txt lists has
// its data committed under docs/results/DIR (results.csv, its plots, RUN.md
// with the command), produced from the config as it is now (the hash in
// RUN.md); no committed results.csv is left without an entry; every plot a
// page shows exists. A config changed without rerunning
// `SET=... ONLY=DIR bash scripts/figures.sh` fails here.
func TestResultsDataCurrent(t *testing.T) {
	entries := readManifest(t)
	dirs := map[string]bool{}
	for _, e := range entries {
		where := e.dir + " (" + manifestFile + ":" + strconv.Itoa(e.line) + ")"
		if dirs[e.dir] {
			t.Errorf("%s: listed twice", where)
		}
		dirs[e.dir] = true
		rerun := "rerun: SET=" + e.set + " ONLY=" + e.dir + " bash scripts/figures.sh"
		cfg, err := os.ReadFile(filepath.Join(configsDir, e.config))
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		dir := filepath.Join(resultsDir, e.dir)
		if _, err := os.Stat(filepath.Join(dir, ResultsFile)); err != nil {
			if e.pending {
				t.Logf("%s: pending, its data not committed yet; %s", where, rerun)
				continue
			}
			t.Errorf("%s: no results.csv committed; %s", where, rerun)
			continue
		}
		run, err := os.ReadFile(filepath.Join(dir, "RUN.md"))
		if err != nil {
			t.Errorf("%s: no RUN.md saying which command and commit wrote the data; %s", where, rerun)
			continue
		}
		sum := sha256.Sum256(cfg)
		m := runShaRE.FindSubmatch(run)
		switch {
		case m == nil:
			t.Errorf("%s: RUN.md names no config sha256; %s", where, rerun)
		case string(m[1]) != hex.EncodeToString(sum[:]):
			t.Errorf("%s: stale: configs/experiments/%s changed since its data were written; %s", where, e.config, rerun)
		}
		cmd := "gridsub sim configs/experiments/" + e.config
		if e.flags != "" {
			cmd += " " + e.flags
		}
		if !strings.Contains(string(run), "    "+cmd+"\n") {
			t.Errorf("%s: RUN.md does not give the command %q; %s", where, cmd, rerun)
		}
		if !regexp.MustCompile(`at commit [0-9a-f]{40}`).Match(run) {
			t.Errorf("%s: RUN.md names no commit", where)
		}
		if svgs, _ := filepath.Glob(filepath.Join(dir, "*.svg")); len(svgs) == 0 {
			t.Errorf("%s: no plot committed; %s", where, rerun)
		}
	}
	// Every committed results.csv belongs to an entry.
	filepath.WalkDir(resultsDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == ResultsFile {
			rel, _ := filepath.Rel(resultsDir, filepath.Dir(p))
			if !dirs[filepath.ToSlash(rel)] {
				t.Errorf("docs/results/%s/results.csv: no entry in scripts/figures.txt writes it", rel)
			}
		}
		return nil
	})
	// Every plot a page shows is committed.
	pages, _ := filepath.Glob(filepath.Join(resultsDir, "*.md"))
	img := regexp.MustCompile(`!\[[^\]]*\]\(([^)]+\.svg)\)`)
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range img.FindAllSubmatch(b, -1) {
			if _, err := os.Stat(filepath.Join(resultsDir, string(m[1]))); err != nil {
				t.Errorf("%s shows %s, which is not committed", filepath.Base(page), m[1])
			}
		}
	}
}

// A verdict table is a Markdown table with a "verdict" column. The line
// before it (blank lines aside) must be a marker naming the data it quotes:
//
//	<!-- data: paper002/fig4a paper002/fig4b/compare.csv -->
//
// (a directory stands for its results.csv and compare.csv), or, for a
// table whose data are not committed yet, "<!-- data: none: REASON -->",
// which the test reports in its log.
var dataMarkerRE = regexp.MustCompile(`^<!-- data: (.*) -->$`)

// The columns of a verdict table that quote the paper, name a claim or
// give a command, not gridsub's numbers.
var notData = regexp.MustCompile(`(?i)paper|claim|finding|reproduce|what`)

// numberRE finds a number as the pages write it: thousands separators,
// decimals, and what follows it (a percent sign, a ratio, millions).
var numberRE = regexp.MustCompile(`(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(\s?%|×|\s?M\b)?`)

// TestResultsPagesQuoteTheirData: every number in a verdict table of a
// results page (other than the paper's own, in the columns notData names)
// is found in the CSVs its marker names: some value of theirs rounds to it
// at the precision the page prints (a percentage may be a share × 100, "M"
// millions). Run with -v to see the tables checked.
func TestResultsPagesQuoteTheirData(t *testing.T) {
	pages, _ := filepath.Glob(filepath.Join(resultsDir, "*.md"))
	if len(pages) == 0 {
		t.Fatal("no results pages")
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(page)
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "|") || (i > 0 && strings.HasPrefix(lines[i-1], "|")) {
				continue
			}
			head := cells(lines[i])
			if !slices.ContainsFunc(head, func(c string) bool { return strings.EqualFold(c, "verdict") }) {
				continue
			}
			at := name + ":" + strconv.Itoa(i+1)
			marker := ""
			for k := i - 1; k >= 0; k-- {
				if s := strings.TrimSpace(lines[k]); s != "" {
					marker = s
					break
				}
			}
			m := dataMarkerRE.FindStringSubmatch(marker)
			if m == nil {
				t.Errorf("%s: a verdict table without a <!-- data: ... --> marker naming the CSVs it quotes", at)
				continue
			}
			if strings.HasPrefix(m[1], "none:") {
				t.Logf("%s: not checked, %s", at, m[1])
				continue
			}
			vals, err := csvNumbers(strings.Fields(m[1]))
			if err != nil {
				t.Errorf("%s: %v", at, err)
				continue
			}
			checked++
			for j := i + 2; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
				row := cells(lines[j])
				for c, cell := range row {
					if c >= len(head) || notData.MatchString(head[c]) || (c == 0 && !numericLabel(cell)) {
						continue
					}
					for _, tok := range numberRE.FindAllStringSubmatch(stripCode(cell), -1) {
						if !vals.has(tok) {
							t.Errorf("%s: %q (column %q, row %q) is in none of %s", name+":"+strconv.Itoa(j+1), tok[0], head[c], row[0], m[1])
						}
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no verdict table was checked against its data")
	}
}

func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	out := strings.Split(line, "|")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// numericLabel: a first column that is a point of the sweep (p, jobs, σ)
// rather than words, and so is checked like the others.
func numericLabel(s string) bool {
	_, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	return err == nil
}

var codeRE = regexp.MustCompile("`[^`]*`|\\[[^\\]]*\\]\\([^)]*\\)")

func stripCode(s string) string { return codeRE.ReplaceAllString(s, "") }

// numbers is every value of some CSVs, sorted, with its percent and
// million forms.
type numbers []float64

func csvNumbers(names []string) (numbers, error) {
	var out numbers
	for _, n := range names {
		files := []string{n}
		if st, err := os.Stat(filepath.Join(resultsDir, n)); err == nil && st.IsDir() {
			files = []string{filepath.Join(n, ResultsFile), filepath.Join(n, CompareFile)}
		}
		for _, f := range files {
			fh, err := os.Open(filepath.Join(resultsDir, f))
			if err != nil {
				if strings.HasSuffix(f, CompareFile) && os.IsNotExist(err) {
					continue
				}
				return nil, err
			}
			rows, err := csv.NewReader(fh).ReadAll()
			fh.Close()
			if err != nil {
				return nil, err
			}
			for _, r := range rows {
				for _, c := range r {
					if v, err := strconv.ParseFloat(c, 64); err == nil {
						v = math.Abs(v)
						out = append(out, v, v*100, v/1e6)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// has: some value lies within half a unit of the token's last digit.
func (ns numbers) has(tok []string) bool {
	text := strings.ReplaceAll(tok[1], ",", "") + tok[2]
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return false
	}
	tol := 0.5*math.Pow(10, -float64(max(len(tok[2])-1, 0))) + 1e-9
	i, _ := slices.BinarySearch(ns, v-tol)
	return i < len(ns) && ns[i] <= v+tol
}
