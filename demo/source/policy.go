package source

import (
	"slices"
	"strings"
)

// identity is who a call is made by: an oid within its tenant (ask.Identity.Tenant: the token's
// issuer, and its `tid` claim when it has one). The same oid in another tenant is someone else,
// as it is to the ask service (SECURITY.md): its sessions, permissions and queries are its own.
type identity struct {
	tenant string
	oid    string
}

// key is the identity as one string: what a session is pinned to (the SDK's TokenInfo.UserID)
// and what per-identity limits count by. package auth quotes a tenant's tid, so a tenant holds no
// NUL and two identities never share a key.
func (id identity) key() string { return id.tenant + "\x00" + id.oid }

// policy is who may read what. Analysts read every table; everyone else — named restricted
// identities and any oid the source has never heard of alike — may not read the restricted
// tables. The catalog and the schema are public: only the rows are protected.
//
// Analysts are oids of one tenant, the analysts' tenant (Options.AnalystTenant); the same oid of
// any other tenant is anyone else, and gets anyone else's permissions.
type policy struct {
	analysts   []string
	restricted []string
	// tenant is the analysts' tenant; "" means the tenant of tokens with no `tid` claim.
	tenant string
}

// mayRead reports whether who may read rows of table.
func (p policy) mayRead(who identity, table string) bool {
	if p.analystTenant(who.tenant) && slices.Contains(p.analysts, who.oid) {
		return true
	}
	return !slices.ContainsFunc(p.restricted, func(r string) bool { return strings.EqualFold(r, table) })
}

// analystTenant reports whether tenant is the analysts' tenant. With none configured, it is the
// tenant of tokens that carry no `tid` (package auth names such a tenant by its issuer alone, and
// one with a tid as `<issuer> tid="<tid>"`): the demo's identity provider mints none unless asked.
func (p policy) analystTenant(tenant string) bool {
	if p.tenant != "" {
		return tenant == p.tenant
	}
	return !strings.Contains(tenant, ` tid=`)
}
