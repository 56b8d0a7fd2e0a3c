package redis

import (
	"errors"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// TestURLForms: each URL form opens the client it names, and a URL that is not one is refused
// without echoing it (it may hold a password).
func TestURLForms(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string
	}{
		{"redis://:hunter2@127.0.0.1:6379/0", "*redis.Client"},
		{"rediss://u:hunter2@127.0.0.1:6379/1", "*redis.Client"},
		{"redis+cluster://:hunter2@127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002", "*redis.ClusterClient"},
		{"redis+cluster://127.0.0.1:7000?max_redirects=5", "*redis.ClusterClient"},
		{"redis+sentinel://:hunter2@127.0.0.1:26379,127.0.0.1:26380/mymaster/2", "*redis.Client"},
		{"redis://127.0.0.1:6379?protocol=3", "*redis.Client"},
		{"redis+cluster://127.0.0.1:7000?protocol=3", "*redis.ClusterClient"},
	} {
		c, sentinel, err := newClient(tc.url, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		// the Sentinel form also answers the Sentinels and master the store watches
		if isSentinel := strings.HasPrefix(tc.url, "redis+sentinel://"); isSentinel != (sentinel != nil) ||
			isSentinel && (sentinel.MasterName != "mymaster" || len(sentinel.Addrs) != 2) {
			t.Errorf("%s: Sentinel options %+v", tc.url, sentinel)
		}
		got := typeName(c)
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.url, got, tc.want)
		}
		// RESP2 unless the URL asks for RESP3 (see newClient)
		wantProto := 2
		if strings.Contains(tc.url, "protocol=3") {
			wantProto = 3
		}
		switch c := c.(type) {
		case *goredis.ClusterClient:
			if c.Options().Protocol != wantProto {
				t.Errorf("%s: protocol %d, want %d", tc.url, c.Options().Protocol, wantProto)
			}
			if o := c.Options(); o.Password != "hunter2" && strings.Contains(tc.url, "hunter2") || len(o.Addrs) == 0 {
				t.Errorf("%s: options %v %d addrs", tc.url, o.Password != "", len(o.Addrs))
			}
			if strings.Count(tc.url, ",") == 2 && len(c.Options().Addrs) != 3 {
				t.Errorf("%s: seeds %v", tc.url, c.Options().Addrs)
			}
		case *goredis.Client:
			if c.Options().Protocol != wantProto {
				t.Errorf("%s: protocol %d, want %d", tc.url, c.Options().Protocol, wantProto)
			}
			if strings.Contains(tc.url, "hunter2") && c.Options().Password != "hunter2" {
				t.Errorf("%s: the password is not the primary's", tc.url)
			}
		}
		_ = c.Close()
	}
	for _, bad := range []string{"postgres://u:hunter2@db/ask", "redis+cluster://:hunter2@", "redis+sentinel://:hunter2@127.0.0.1:26379", "redis://:hunter2@[bad"} {
		_, _, err := newClient(bad, nil)
		if err == nil {
			t.Errorf("%s accepted", bad)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error echoes the password: %v", bad, err)
		}
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *goredis.ClusterClient:
		return "*redis.ClusterClient"
	case *goredis.Client:
		return "*redis.Client"
	}
	return "other"
}

// TestPrefixWithABraceIsRefused: a brace in the prefix would move every key's hash tag
// ({<prefix>b<N>}: "a}" made "{a}b0}", whose tag is "a"), so every bucket would share one slot
// on Redis Cluster. New refuses it before connecting.
func TestPrefixWithABraceIsRefused(t *testing.T) {
	for _, p := range []string{"a}", "{x", "a{b}:"} {
		s, err := New(t.Context(), Options{URL: "redis://127.0.0.1:1/0", Prefix: p})
		if err == nil || !strings.Contains(err.Error(), "prefix") {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("prefix %q: %v, want it refused", p, err)
		}
	}
}

// TestURLErrorSaysWhatIsWrong: a URL of a known form that cannot be read is refused with what is
// wrong with it (the port, the database, an option), never the password; every such URL was
// refused as "not one of redis://, …", which it was, misleading the operator to the scheme. A
// database in the cluster form (Redis Cluster has database 0 only) was ignored, the keys written
// to 0 unsaid.
func TestURLErrorSaysWhatIsWrong(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis://:hunter2@127.0.0.1:notaport/0", "not a URL (a port that is not a number"},
		{"redis://:hun/ter2@127.0.0.1:6379/0", "not a URL"}, // url.Parse: invalid port ":hun"
		{"redis://:hunter2@127.0.0.1:6379/abc", `invalid database number: "abc"`},
		{"redis://:hunter2@127.0.0.1:6379/0?dial_timeout=abc", "invalid dial_timeout duration"},
		{"redis://:hunter2@127.0.0.1:6379/0?foo=bar", "unexpected option: foo"},
		{"redis+cluster://:hunter2@127.0.0.1:7000/3", "Redis Cluster has database 0 only"},
		{"redis+cluster://:hunter2@127.0.0.1:7000?foo=bar", "unexpected option: foo"},
		{"redis+sentinel://:hunter2@127.0.0.1:26379", "want /master"},
		{"redis+sentinel://:hunter2@127.0.0.1:26379/ask/x", `invalid database number: "x"`},
		{"redis+sentinel://:hunter2@127.0.0.1:26379/ask?db=1", "takes no query"},
		{"postgres://u:hunter2@db/ask", "unknown scheme"},
		// A password with a / not percent-encoded whose start reads as a port: url.Parse takes
		// the rest for the path, which go-redis's reason quoted ("invalid database number").
		{"redis://u:7/hunter2@127.0.0.1:6379", "not a URL"},
		{"redis://:12/hunter2@127.0.0.1:6379/0", "not a URL"},
		{"redis+sentinel://:12/hunter2@127.0.0.1:26379/ask", "not a URL"},
	} {
		_, _, err := newClient(tc.url, nil)
		if !errors.Is(err, ErrURL) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "hun\"") {
			t.Errorf("%s: err = %v, want ErrURL saying %q, without the password", tc.url, err, tc.want)
		}
	}
}
