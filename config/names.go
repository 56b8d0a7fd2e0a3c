package config

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
)

// ProcessNames are the names this process's environment sets (never their values), for
// Unknown.
func ProcessNames() []string {
	env := os.Environ()
	names := make([]string, 0, len(env))
	for _, kv := range env {
		if name, _, ok := strings.Cut(kv, "="); ok && name != "" {
			names = append(names, name)
		}
	}
	return names
}

// knownPrefix is the prefix of the settings package config owns: a name under it that no
// reader reads is a misspelling, not someone else's variable.
const knownPrefix = "DAS_"

// KnownNames are the DAS_ variables some reader of package config reads, sorted: the service's
// (FromEnv) and every command's section. Every DAS_ read is unconditional, so one pass of each
// reader over an empty environment asks for all of them (TestKnownNamesAreEveryDASLiteral).
func KnownNames() []string {
	asked := map[string]bool{}
	record := func(k string) (string, bool) {
		if strings.HasPrefix(k, knownPrefix) {
			asked[k] = true
		}
		return "", false
	}
	_, _ = FromEnv(record)
	_, _ = ClientFromEnv(record)
	_, _ = DevIdPTokenFromEnv(record)
	_, _ = TargetFromEnv(record)
	_, _ = EvalFromEnv(record)
	_, _ = ConformanceFromEnv(record)
	_, _ = StubFromEnv(record)
	_, _ = DemoSourceFromEnv(record)
	names := make([]string, 0, len(asked))
	for k := range asked {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Unknown is an error naming each of names that begins with DAS_ and is no setting (see
// KnownNames), with the setting it is nearest to when one is close; nil when there is none. A
// misspelt setting would otherwise leave its default in force unnoticed (DAS_ASK_SEAL_KEY for
// DAS_ASK_SEAL_KEYS: the questions kept unsealed). It matches ErrInvalid, like FromEnv's
// errors, and names variables only, never a value.
func Unknown(names []string) error {
	known := KnownNames()
	isKnown := make(map[string]bool, len(known))
	for _, k := range known {
		isKnown[k] = true
	}
	var errs []error
	seen := map[string]bool{}
	for _, n := range names {
		if !strings.HasPrefix(n, knownPrefix) || isKnown[n] || seen[n] {
			continue
		}
		seen[n] = true
		msg := n + ": no such setting"
		if near := nearest(n, known); near != "" {
			msg += " (did you mean " + near + "?)"
		}
		errs = append(errs, errors.New(msg+"; README.md's Configuration lists every DAS_ variable"))
	}
	if len(errs) == 0 {
		return nil
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
}

// nearest is the name in known closest to n by edit distance, when that is small enough to be
// a slip (at most a third of n's length, and at most 4); "" otherwise.
func nearest(n string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		if d := editDistance(n, k); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD < 0 || bestD > 4 || bestD*3 > len(n) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, with a transposition of two
// neighbours counted as one edit (TLL for TTL).
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
