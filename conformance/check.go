package conformance

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// verdict is what a check function returns.
type verdict struct {
	status Status
	detail string
}

func pass(format string, args ...any) verdict {
	return verdict{Pass, fmt.Sprintf(format, args...)}
}

func skip(format string, args ...any) verdict {
	return verdict{Skip, fmt.Sprintf(format, args...)}
}

// fail reports what the contract expected and what the target did.
func fail(expected, seen string) verdict {
	return verdict{Fail, "expected " + expected + "; saw " + seen}
}

// broken reports that a fixture the check needs could not be made: a failure of the target,
// since the fixture uses only what the contract promises.
func broken(err error) verdict {
	return verdict{Fail, "could not make the run this check examines: " + err.Error()}
}

// problems folds a list of violations into a verdict: pass with ok when there are none.
func problems(expected string, found []string, ok string) verdict {
	if len(found) == 0 {
		return pass("%s", ok)
	}
	const maxShown = 3
	more := ""
	if len(found) > maxShown {
		more = fmt.Sprintf(" (and %d more)", len(found)-maxShown)
		found = found[:maxShown]
	}
	return fail(expected, strings.Join(found, "; ")+more)
}

// check is one assertion of the contract.
type check struct {
	name string
	// behaviour checks depend on the model's judgement (or the stub's script).
	behaviour bool
	run       func(context.Context, *session) verdict
}

// jwtLike matches anything shaped like a compact JWS, so no token reaches a detail.
var jwtLike = regexp.MustCompile(`eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*`)

// redact removes the questions and anything token-shaped from a detail.
func (s *session) redact(detail string) string {
	q := s.cfg.Questions
	for _, text := range []string{q.Answer, q.Slow, q.Refusal, q.Abstention, q.CatalogOnly, q.FollowUpFirst, q.FollowUpSecond} {
		if text != "" {
			detail = strings.ReplaceAll(detail, text, "<question>")
		}
	}
	return jwtLike.ReplaceAllString(detail, "<token>")
}
