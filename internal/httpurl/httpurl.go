// Package httpurl checks that a string is an absolute http or https URL with a host: the one
// shape every URL the service, its clients and its test tools are given must have.
package httpurl

import (
	"errors"
	"net/url"
	"strings"
)

// The reasons Parse refuses a string. None quotes the string, which may hold a credential.
var (
	ErrEmpty    = errors.New("empty")
	ErrSyntax   = errors.New("not a URL")
	ErrPort     = errors.New("its port is not a number")
	ErrNoScheme = errors.New("no scheme: want http:// or https://")
	ErrScheme   = errors.New("its scheme is not http or https")
	ErrNoHost   = errors.New("no host")
)

// Parse returns s parsed when it is an absolute http or https URL with a host, and otherwise one
// of the Err values above, to be told with errors.Is. The scheme is compared as url.Parse reads
// it, without case (HTTP://X is accepted). The host is u.Hostname(), not u.Host: http://:8080 has
// a port and no host, and Go's dialer would take the empty host for this machine.
//
// Parse checks nothing else: user info, a query or a fragment are for the caller to refuse. Note
// that url.Parse ends the authority at the first / ? or #, so https://u:7/secret@idp/ is a URL to
// host u, port 7, with the path /secret@idp/.
func Parse(s string) (*url.URL, error) {
	if s == "" {
		return nil, ErrEmpty
	}
	u, err := url.Parse(s)
	if err != nil {
		// url.Parse's error quotes s: only its kind is kept.
		if strings.Contains(err.Error(), "invalid port") {
			return nil, ErrPort
		}
		return nil, ErrSyntax
	}
	switch {
	case u.Scheme == "":
		return nil, ErrNoScheme
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, ErrScheme
	case u.Hostname() == "":
		return nil, ErrNoHost
	}
	return u, nil
}
