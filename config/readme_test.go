package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/config"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/webhook"
)

// readers are every reader of package config, each run over lookup for its error.
var readers = []func(lookup func(string) (string, bool)) error{
	func(l func(string) (string, bool)) error { _, err := config.FromEnv(l); return err },
	func(l func(string) (string, bool)) error { _, err := config.ClientFromEnv(l); return err },
	func(l func(string) (string, bool)) error { _, err := config.ConformanceFromEnv(l); return err },
	func(l func(string) (string, bool)) error { _, err := config.TargetFromEnv(l); return err },
	func(l func(string) (string, bool)) error { _, err := config.StubFromEnv(l); return err },
	func(l func(string) (string, bool)) error { _, err := config.DemoSourceFromEnv(l); return err },
}

// TestReadmeStatesEveryRange: every setting that takes a number (or a duration) has its
// allowed range stated in its row of README's Configuration tables, as the reader enforces
// it: the range is what an invalid value's message says ("want a whole number from 1 to
// 3600"), so the documentation and the check cannot drift apart.
func TestReadmeStatesEveryRange(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]bool{}
	for _, r := range readers {
		_ = r(func(k string) (string, bool) { asked[k] = true; return "", false })
	}
	want := regexp.MustCompile(`^(?:configuration: )?([A-Z0-9_]+)="x": want a (?:whole number(?: of seconds)?|duration such as 5s,) from (\S+) to (\S+)$`)
	checked := 0
	for k := range asked {
		var lo, hi string
		for _, r := range readers {
			err := r(func(n string) (string, bool) { return "x", n == k })
			if err == nil {
				continue
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if m := want.FindStringSubmatch(line); m != nil && m[1] == k {
					lo, hi = canonical(m[2]), canonical(m[3])
				}
			}
		}
		if lo == "" {
			continue // not a number
		}
		checked++
		rows := readmeRows(string(readme), k)
		if len(rows) == 0 {
			t.Errorf("README.md has no table row for %s", k)
			continue
		}
		if !statesRange(rows, lo, hi) {
			t.Errorf("README.md's row for %s does not state its range, %s to %s:\n%s", k, lo, hi, strings.Join(rows, "\n"))
		}
	}
	if checked < 20 {
		t.Fatalf("checked the ranges of %d settings: the readers' messages are not the ones parsed", checked)
	}
}

// readmeRows are the table rows whose first cell names k.
func readmeRows(readme, k string) []string {
	var rows []string
	for _, line := range strings.Split(readme, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(line, " | ")
		if strings.Contains(cells[0], "`"+k+"`") {
			rows = append(rows, line)
		}
	}
	return rows
}

// rangeText is a range as README writes it: "1 to 3600", "1024 to 16 MiB", "1ms to 1h",
// "`1` or `2`".
var rangeText = regexp.MustCompile("`?(\\d+(?: [KMG]iB|ms|s|m|h)?)`?\\s+(?:to|or)\\s+`?(\\d+(?: [KMG]iB|ms|s|m|h)?)`?")

func statesRange(rows []string, lo, hi string) bool {
	for _, row := range rows {
		for _, m := range rangeText.FindAllStringSubmatch(row, -1) {
			if canonical(m[1]) == lo && canonical(m[2]) == hi {
				return true
			}
		}
	}
	return false
}

// canonical is a number, a size in KiB/MiB/GiB or a duration as one spelling: a size as its
// bytes, a duration as time.Duration prints it, a number as it is.
func canonical(s string) string {
	for i, unit := range []string{" KiB", " MiB", " GiB"} {
		if n, ok := strings.CutSuffix(s, unit); ok {
			v, _ := strconv.ParseInt(n, 10, 64)
			return strconv.FormatInt(v<<(10*(i+1)), 10)
		}
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return s
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d.String()
	}
	return s
}

// TestDocsNameEveryStoreURLForm: every URL form DAS_ASK_STORE accepts is named in the
// README's row for it, in docs/scale-out.md's, and in the message an invalid value gets, so an
// operator whose Redis Cluster or Sentinel speaks TLS finds the form to write.
func TestDocsNameEveryStoreURLForm(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	scaleOut, err := os.ReadFile(filepath.Join("..", "docs", "scale-out.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, invalid := config.FromEnv(func(k string) (string, bool) { return "mysql://h", k == "DAS_ASK_STORE" })
	if invalid == nil {
		t.Fatal("DAS_ASK_STORE=mysql://h was accepted")
	}
	for _, scheme := range []string{"redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"} {
		form := scheme + "://"
		if _, err := config.FromEnv(func(k string) (string, bool) { return form + "127.0.0.1:6379/x", k == "DAS_ASK_STORE" }); err != nil {
			t.Errorf("DAS_ASK_STORE=%s… refused: %v", form, err)
		}
		for name, doc := range map[string]string{"README.md": string(readme), "docs/scale-out.md": string(scaleOut)} {
			if rows := readmeRows(doc, "DAS_ASK_STORE"); len(rows) != 1 || !strings.Contains(rows[0], "`"+form) {
				t.Errorf("%s's DAS_ASK_STORE row does not name %s:\n%s", name, form, strings.Join(rows, "\n"))
			}
		}
		if !strings.Contains(invalid.Error(), " "+form) {
			t.Errorf("an invalid DAS_ASK_STORE's message does not name %s: %v", form, invalid)
		}
	}
}

// TestReadmeDefaultsAreTheDefaults: a variable set to the default its row in README.md's (or
// docs/scale-out.md's) Variable/Default tables states configures what leaving it unset does. The rows checked are those whose default is one
// value a variable (`10`, `memory`, `json`, `info`); a default the reader leaves as zero for
// its part to resolve (the Redis store's, the webhooks') is compared with that part's own.
func TestReadmeDefaultsAreTheDefaults(t *testing.T) {
	var tables []string
	for _, doc := range []string{"README.md", "docs/scale-out.md"} {
		b, err := os.ReadFile(filepath.Join("..", doc))
		if err != nil {
			t.Fatal(err)
		}
		tables = append(tables, string(b))
	}
	unset, err := config.FromEnv(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	// Set explicitly, the admin address is one to listen on or fail (unset, the default's is
	// skipped when taken): the same address, not the same leniency.
	unset.Ops.AdminOptional = false
	resolved := map[string]func(config.Config) any{
		"DAS_ASK_LEASE_S":              func(c config.Config) any { return c.Store.Lease == redisstore.DefaultLease },
		"DAS_ASK_REDIS_PREFIX":         func(c config.Config) any { return c.Store.Prefix == redisstore.DefaultPrefix },
		"DAS_ASK_REDIS_CACHE_MB":       func(c config.Config) any { return c.Store.CacheMB<<20 == redisstore.DefaultCacheBytes },
		"DAS_ASK_WEBHOOK_MAX_ATTEMPTS": func(c config.Config) any { return c.Webhooks.MaxAttempts == webhook.DefaultMaxAttempts },
		"DAS_ASK_WEBHOOK_TIMEOUT_S":    func(c config.Config) any { return c.Webhooks.Timeout == webhook.DefaultTimeout },
	}
	code := regexp.MustCompile("`([^`]+)`")
	checked, inTable := 0, false
	for _, line := range strings.Split(strings.Join(tables, "\n"), "\n") {
		if strings.HasPrefix(line, "| Variable | Default |") {
			inTable = true
		} else if !strings.HasPrefix(line, "|") {
			inTable = false
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !inTable || !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		names, defaults := code.FindAllStringSubmatch(cells[0], -1), code.FindAllStringSubmatch(cells[1], -1)
		// Only a cell that is its values and nothing else: "`json`, `info`", not "`6` in phase 2".
		if len(defaults) != len(names) || strings.TrimSpace(code.ReplaceAllString(cells[1], "")) != strings.Repeat(",", len(names)-1) {
			continue
		}
		for i, n := range names {
			k, v := n[1], defaults[i][1]
			got, err := config.FromEnv(func(name string) (string, bool) { return v, name == k })
			if err != nil {
				t.Errorf("the documented default of %s, %q, is refused: %v", k, v, err)
				continue
			}
			checked++
			if r, ok := resolved[k]; ok {
				if r(got) != true {
					t.Errorf("the documented default of %s, %q, is not the one its part applies when it is unset", k, v)
				}
				continue
			}
			got.Ops.AdminOptional = false
			if !reflect.DeepEqual(got, unset) {
				t.Errorf("the documented default of %s is %q, but setting it configures something else than leaving it unset:\n set: %+v\n unset: %+v", k, v, got, unset)
			}
		}
	}
	if checked < 25 {
		t.Fatalf("checked the defaults of %d variables: the docs' tables are not the ones parsed", checked)
	}
}

// TestReadmeStatesEveryChoice: a setting that takes one of a few words has each word in its
// README row, as the reader's message for an invalid value lists them ("want json or text"),
// so the row and the check cannot drift apart, as the ranges cannot.
func TestReadmeStatesEveryChoice(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]bool{}
	for _, r := range readers {
		_ = r(func(k string) (string, bool) { asked[k] = true; return "", false })
	}
	want := regexp.MustCompile(`^(?:configuration: )?([A-Z0-9_]+)="zz": want ((?:[a-z]+, )*[a-z]+ or [a-z]+)$`)
	checked := 0
	for k := range asked {
		for _, r := range readers {
			err := r(func(n string) (string, bool) { return "zz", n == k })
			if err == nil {
				continue
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				m := want.FindStringSubmatch(line)
				if m == nil || m[1] != k {
					continue
				}
				checked++
				rows := strings.Join(readmeRows(string(readme), k), "\n")
				for _, word := range strings.FieldsFunc(m[2], func(r rune) bool { return r == ',' || r == ' ' }) {
					if word != "or" && !strings.Contains(rows, "`"+word+"`") {
						t.Errorf("README.md's row for %s does not name %q, one of the values it takes (%s):\n%s", k, word, m[2], rows)
					}
				}
			}
		}
	}
	if checked < 4 {
		t.Fatalf("checked the choices of %d settings: the readers' messages are not the ones parsed", checked)
	}
}
