package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Env reads settings from an environment (os.LookupEnv in production; a map in tests). It is
// the only reader of the environment in the module: every part's setting is parsed here, in one
// way per kind. A value that is unset, or empty or blank, means the setting's default. Every
// invalid value is kept as an error naming its variable and what it accepts; Err reports them
// all at once. An Env is not safe for concurrent use.
type Env struct {
	lookup func(string) (string, bool)
	errs   []error
}

// NewEnv returns a reader over lookup; nil reads nothing (every setting its default).
func NewEnv(lookup func(string) (string, bool)) *Env {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	return &Env{lookup: lookup}
}

// MapEnv is a lookup over m, for tests and for callers that hold settings in a map.
func MapEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// Set reports whether name holds a non-blank value.
func (e *Env) Set(name string) bool {
	_, ok := e.get(name)
	return ok
}

func (e *Env) get(name string) (string, bool) {
	v, ok := e.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

// String is name's value, trimmed, or def.
func (e *Env) String(name, def string) string {
	if v, ok := e.get(name); ok {
		return v
	}
	return def
}

// Int is name's value as a whole number from min to max, or def.
func (e *Env) Int(name string, def, min, max int64) int64 {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		e.Failf(name, "%q: want a whole number from %d to %d", v, min, max)
		return def
	}
	return n
}

// Seconds is name's value, a whole number of seconds from min to max, as a duration, or def.
// Every *_S variable is read by it.
func (e *Env) Seconds(name string, def time.Duration, min, max int64) time.Duration {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		e.Failf(name, "%q: want a whole number of seconds from %d to %d", v, min, max)
		return def
	}
	return time.Duration(n) * time.Second
}

// List is name's value split at sep (commas, or spaces with sep " "), each item trimmed and
// empty items dropped, or def. A value of separators only (DAS_JWT_ALGS=",") is invalid: it is
// set, so it is not the default, and it names no item.
func (e *Env) List(name, sep string, def []string) []string {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	var items []string
	split := strings.Split(v, sep)
	if sep == " " {
		split = strings.Fields(v)
	}
	for _, s := range split {
		if s = strings.TrimSpace(s); s != "" {
			items = append(items, s)
		}
	}
	if len(items) == 0 {
		e.Failf(name, "%q: want at least one item, separated by %q", v, sep)
		return def
	}
	return items
}

// Failf records that name's value is invalid; the message follows "NAME", after an "=" unless it
// begins with one, a colon or a space.
func (e *Env) Failf(name, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !strings.HasPrefix(msg, ":") && !strings.HasPrefix(msg, " ") && !strings.HasPrefix(msg, "=") {
		msg = "=" + msg
	}
	e.errs = append(e.errs, errors.New(name+msg))
}

// Fail records err, a message that already names its variable (a part's own Validate).
func (e *Env) Fail(err error) {
	if err != nil {
		e.errs = append(e.errs, err)
	}
}

// Err is every invalid value read so far, joined; nil when all were valid.
func (e *Env) Err() error { return errors.Join(e.errs...) }

// Duration is name's value, a Go duration (300ms, 5s, 1m) from min to max, or def.
func (e *Env) Duration(name string, def, min, max time.Duration) time.Duration {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < min || d > max {
		e.Failf(name, "%q: want a duration such as 5s, from %v to %v", v, min, max)
		return def
	}
	return d
}
