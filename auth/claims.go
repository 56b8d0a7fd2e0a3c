package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask/internal/jsontext"
)

// claims are the parts of a token this package reads. A claim of the wrong JSON type makes the
// token malformed; an exp, nbf or iat that is not a number is named as such (UnmarshalJSON).
type claims struct {
	jwt.RegisteredClaims
	OID   string   `json:"oid"`
	TID   string   `json:"tid"`
	Scope string   `json:"scope"`
	SCP   scpClaim `json:"scp"`

	// tidGiven is whether the token has a tid claim (not null): a tid given as "" names no
	// tenant and is refused, not read as a token without one (authenticate).
	tidGiven bool
}

// UnmarshalJSON refuses an exp, nbf or iat that is not a JSON number, as RFC 7519 §2 defines a
// NumericDate: golang-jwt decodes them through json.Number, which also takes a string holding a
// number ("exp":"1796394415"). null is left to mean absent, as golang-jwt reads it.
//
// It reads claim names case-sensitively (RFC 7519 §4): encoding/json matches a member to a field
// whatever its case, so a token with "OID" and no "oid" was taken as that identity, and one with
// "AUD" and "EXP" as having an audience and an expiry. A member whose name differs from a claim
// this package reads only in case is another claim, not understood, and ignored (§4).
//
// And it refuses claims that are not UTF-8 (RFC 7519 §7.2) or that escape an unpaired surrogate:
// encoding/json reads either as U+FFFD, so tokens whose oids were "v\xff", "v\xfe" and
// "v\ud800" were one identity, each reading the others' tickets and conversations.
func (c *claims) UnmarshalJSON(b []byte) error {
	if !utf8.Valid(b) || bytes.IndexByte(b, '\\') >= 0 && jsontext.LoneSurrogate(b) {
		return errNotText
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return err
	}
	folded := false
	for name := range members {
		if foldsToRead(name) {
			delete(members, name)
			folded = true
		}
	}
	if folded {
		var err error
		if b, err = json.Marshal(members); err != nil {
			return err
		}
	}
	for _, claim := range [...]string{"exp", "nbf", "iat"} {
		raw := members[claim]
		if !numberOrNull(raw) {
			return &notNumberError{claim: claim}
		}
		if !inDateRange(raw) {
			return &outOfRangeError{claim: claim}
		}
	}
	type plain claims // the same fields without this method, which would otherwise recurse
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	// A claim named twice is read as its last (RFC 7519 §4 allows that), which members holds;
	// the struct's decoding keeps an earlier string over a later null, so "oid":"a" then
	// "oid":null was the identity a, and "tid":"" then "tid":null an empty tid read as given.
	// Each string claim whose last is null is emptied.
	for _, sc := range [...]struct {
		name  string
		field *string
	}{{"iss", &c.Issuer}, {"sub", &c.Subject}, {"jti", &c.ID}, {"oid", &c.OID}, {"tid", &c.TID}, {"scope", &c.Scope}} {
		if raw := members[sc.name]; len(raw) == 0 || string(raw) == "null" {
			*sc.field = ""
		}
	}
	tid := members["tid"]
	c.tidGiven = len(tid) > 0 && string(tid) != "null"
	return nil
}

// errNotText is a claims set that does not spell its strings in UTF-8 (golang-jwt reports it as
// a malformed token).
var errNotText = errors.New("claims are not UTF-8 text: invalid UTF-8 or an escaped unpaired surrogate")

// readNames are the claims claims decodes (its fields' and jwt.RegisteredClaims' JSON names).
var readNames = [...]string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti", "oid", "tid", "scope", "scp"}

// foldsToRead reports whether name is not one of readNames but encoding/json would decode it
// into one (its case folding, which strings.EqualFold shares: "OID", or "ſcope" with a long s).
func foldsToRead(name string) bool {
	for _, r := range readNames {
		if name != r && strings.EqualFold(name, r) {
			return true
		}
	}
	return false
}

// numberOrNull reports whether raw, one valid JSON value as the decoder hands it over (or
// nothing, for an absent member), is a number or null: a JSON number starts with '-' or a digit.
func numberOrNull(raw json.RawMessage) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return true
	}
	return raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9'
}

// The NumericDates this package takes: years 1 to 9999, as RFC 3339 writes them. golang-jwt
// converts a date to whole seconds with int64(f), which for a float beyond the int64 range gives
// the most negative int64 on amd64: an nbf or iat of 1e19 was read as a date in the distant past
// and the token accepted, though its issuer said it is not valid until then.
const (
	minNumericDate = -62135596800 // 0001-01-01T00:00:00Z
	maxNumericDate = 253402300799 // 9999-12-31T23:59:59Z
)

// inDateRange reports whether raw, a JSON number or null (numberOrNull), is null or absent or
// a date from minNumericDate to maxNumericDate.
func inDateRange(raw json.RawMessage) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return err == nil && minNumericDate <= f && f <= maxNumericDate
}

// outOfRangeError is a NumericDate claim (exp, nbf or iat) that is a number outside
// minNumericDate to maxNumericDate.
type outOfRangeError struct{ claim string }

func (e *outOfRangeError) Error() string { return e.claim + " claim is out of range" }

// notNumberError is a NumericDate claim (exp, nbf or iat) that is not a JSON number.
type notNumberError struct{ claim string }

func (e *notNumberError) Error() string { return e.claim + " claim is not a number" }

// scopes returns the granted scopes: the space-separated `scope` claim (RFC 8693 §4.2) and the
// `scp` claim (an array, or a space-separated string, as some issuers send), without duplicates.
func (c claims) scopes() []string {
	var out []string
	for _, s := range append(strings.Fields(c.Scope), c.SCP...) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// scpClaim accepts `scp` as a JSON array of strings or as one space-separated string.
type scpClaim []string

func (s *scpClaim) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*s = list
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err != nil {
		return errors.New("scp: want an array of strings or a string")
	}
	*s = strings.Fields(one)
	return nil
}

// missingRequired names the first claim New's parser requires that c lacks ("" if none), in
// the order golang-jwt checks them, and judging absence as it does: exp not set, aud not set or
// only "", iss "". Every one of these is required, so the first absent one is among those the
// parser reported.
func (c *claims) missingRequired() string {
	switch {
	case c.ExpiresAt == nil:
		return "exp"
	case len(c.Audience) == 0 || len(c.Audience) == 1 && c.Audience[0] == "":
		return "aud"
	case c.Issuer == "":
		return "iss"
	}
	return ""
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// tenant is the tenant a token's identity belongs to: its issuer, and its `tid` claim when it
// has one. An issuer that serves several tenants (Microsoft Entra ID) names each in `tid`, and
// an oid is unique only within its tenant (Microsoft's docs: key a user by tid and oid
// together), so the same oid under another tid, or under none, is someone else. The tid is
// quoted so that a tenant never holds a NUL (store.Owner.Key separates tenant and oid by one).
func (c *claims) tenant() string {
	if c.TID == "" {
		return c.Issuer
	}
	return c.Issuer + " tid=" + strconv.Quote(c.TID)
}
