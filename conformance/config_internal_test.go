package conformance

import (
	"strings"
	"testing"
)

// Every URL the suite is given must be absolute http(s) with a host. OverflowURL, LimitsURL,
// AuditURL and AuditURLs were once checked for a host only, so ftp://host passed and the runs
// against it failed later with a transport error instead of a configuration one.
func TestConfigURLs(t *testing.T) {
	base := func() Config { return Config{BaseURL: "http://127.0.0.1:1/ask", Tokens: FixedTokens{}} }
	for _, tc := range []struct {
		name string
		set  func(*Config, string)
		want string
	}{
		{"BaseURL", func(c *Config, v string) { c.BaseURL = v }, "conformance: BaseURL: want an absolute http(s) URL"},
		{"OverflowURL", func(c *Config, v string) { c.OverflowURL = v }, "conformance: OverflowURL: want an absolute http(s) URL"},
		{"LimitsURL", func(c *Config, v string) { c.LimitsURL = v }, "conformance: LimitsURL: want an absolute http(s) URL"},
		{"AuditURL", func(c *Config, v string) { c.AuditURL = v }, "conformance: AuditURL: want an absolute http(s) URL"},
		{"AuditURLs", func(c *Config, v string) { c.AuditURLs = []string{"http://127.0.0.1:2", v} }, "conformance: AuditURLs: want absolute http(s) URLs"},
	} {
		for _, v := range []string{"ftp://127.0.0.1:2/x", "mailto:x", "http://:8080", "//127.0.0.1:2/x"} {
			c := base()
			tc.set(&c, v)
			_, err := c.withDefaults()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s=%q: err = %v, want %q", tc.name, v, err, tc.want)
			}
		}
		c := base()
		tc.set(&c, "https://127.0.0.1:2/x")
		if _, err := c.withDefaults(); err != nil {
			t.Errorf("%s=https://127.0.0.1:2/x: %v", tc.name, err)
		}
	}
}
