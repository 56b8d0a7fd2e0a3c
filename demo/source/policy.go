package source

import (
	"slices"
	"strings"
)

// policy is who may read what. Analysts read every table; everyone else — named restricted
// identities and any oid the source has never heard of alike — may not read the restricted
// tables. The catalog and the schema are public: only the rows are protected.
type policy struct {
	analysts   []string
	restricted []string
}

// mayRead reports whether oid may read rows of table.
func (p policy) mayRead(oid, table string) bool {
	if slices.Contains(p.analysts, oid) {
		return true
	}
	return !slices.ContainsFunc(p.restricted, func(r string) bool { return strings.EqualFold(r, table) })
}
