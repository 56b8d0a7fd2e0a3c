package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// clusterStateReload is how often a Redis Cluster client reads the slot map again while in use.
const clusterStateReload = time.Second

// slotMapWait bounds one node's answer to the slot map read (CLUSTER SLOTS) a Redis Cluster
// client makes to learn where the slots are.
const slotMapWait = 500 * time.Millisecond

// ErrURL is what New's error matches (errors.Is) when the URL is not one of the forms below or
// cannot be read: a setting to correct, which no retry gets past (askd exits 2 for it, 1 for a
// Redis it cannot reach). The URL may carry a password, so it is never echoed: the error says
// what is wrong (a port, a database, an option) and the forms wanted.
var ErrURL = errors.New("redis store: invalid URL")

// urlForms are the forms a URL may take, for ErrURL's messages.
const urlForms = `redis://, rediss:// (one server), ` +
	`redis+cluster://host:port[,host:port...] (Redis Cluster) or redis+sentinel://host:port[,host:port...]/master[/db] (Sentinel), ` +
	`rediss+cluster:// and rediss+sentinel:// for TLS`

// urlError is ErrURL saying why: what go-redis found wrong (a database, an option), without its
// "redis: ". What url.Parse finds wrong is not quoted: its error holds the URL whole, and even
// its reason alone may hold a piece of the password (":pa/ss@h" reads as the host ":pa", an
// invalid port "pa").
func urlError(why error) error {
	if ue := (*url.Error)(nil); errors.As(why, &ue) {
		why = errNotURL
	}
	return fmt.Errorf("%w: %s; want %s", ErrURL, strings.TrimPrefix(why.Error(), "redis: "), urlForms)
}

// CheckURL is what New would say of raw's form (an error matching ErrURL, saying what is
// wrong and never echoing the URL), without reaching Redis: for a start to refuse a URL it
// cannot use before it starts anything else.
func CheckURL(raw string) error {
	c, _, err := newClient(raw, nil)
	if err != nil {
		return err
	}
	return c.Close() // made, never used: nothing was dialled
}

// errNotURL stands for url.Parse's reason, which is not quoted (it holds the URL).
var errNotURL = errors.New("not a URL (a port that is not a number, or a character of the user or password such as / ? # not percent-encoded)")

// userinfoNotEncoded reports whether rest (a URL after its "://") has a / ? or # before its
// last "@": a user or password with one of them not percent-encoded. url.Parse may then read
// the URL without an error, the password's start as a port and the rest as the path, which a
// reason would quote ("invalid database number: \"hunter2@host:6379\""); it is refused as
// not a URL, unquoted.
func userinfoNotEncoded(rest string) bool {
	at := strings.LastIndex(rest, "@")
	return at >= 0 && strings.ContainsAny(rest[:at], "/?#")
}

// newClient opens the client a URL names, and for the Sentinel form also answers the
// failover client's options, whose Sentinels and master the store watches itself (sentinel.go;
// nil for the other forms):
//
//	redis://[user:password@]host:port[/db]               one server (rediss:// for TLS)
//	redis+cluster://[user:password@]host:port[,host:port...][?go-redis cluster options]
//	                                                     Redis Cluster, from any of its nodes (rediss+cluster:// for TLS)
//	redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]
//	                                                     the primary Sentinel names master (rediss+sentinel:// for TLS);
//	                                                     the user and password are the primary's
//
// The cluster form is go-redis's ParseClusterURL (its query options included) with the seed
// nodes listed in the host; the Sentinel form goes through goredis.UniversalOptions.
//
// The client speaks RESP2 unless the URL asks for ?protocol=3 (the Sentinel form, which takes
// no query, always speaks RESP2): the store uses nothing RESP3 has beyond it (push
// notifications, client-side caching), and on RESP3 go-redis looks for a pending push
// notification before every reply it reads, about 2% of the service's CPU at concurrency 64
// in the time-to-ticket benchmark's profile.
//
// Every form respects a call's context deadline (ContextTimeoutEnabled): without it go-redis
// waits out its own read timeout, with retries, whatever the caller's deadline, so a readiness
// probe bounded at 2 s took 5 s against a stalled Redis. Calls with no deadline are bounded by
// the client's timeouts as before.
//
// onConnect, when not nil, runs on every new connection to a Redis (and to a Sentinel) before
// its first command: the store judges there whether the server persists (persist.go).
func newClient(raw string, onConnect func(context.Context, *goredis.Conn) error) (goredis.UniversalClient, *goredis.UniversalOptions, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, nil, urlError(errors.New("no scheme"))
	}
	if userinfoNotEncoded(rest) {
		return nil, nil, urlError(errNotURL)
	}
	switch scheme {
	case "redis", "rediss":
		o, err := goredis.ParseURL(raw)
		if err != nil {
			return nil, nil, urlError(err)
		}
		o.Protocol = resp(o.Protocol)
		o.ContextTimeoutEnabled = true
		o.OnConnect = onConnect
		return goredis.NewClient(o), nil, nil
	case "redis+cluster", "rediss+cluster":
		base := strings.TrimSuffix(scheme, "+cluster")
		u, err := url.Parse(base + "://" + rest)
		switch {
		case err != nil:
			return nil, nil, urlError(err)
		case u.Host == "":
			return nil, nil, urlError(errors.New("no host"))
		case strings.Trim(u.Path, "/") != "" && strings.Trim(u.Path, "/") != "0":
			// go-redis ignores the path: a /3 carried over from a redis:// URL would leave
			// the keys in database 0 unsaid.
			return nil, nil, urlError(errors.New("a database in the path: Redis Cluster has database 0 only"))
		}
		hosts := strings.Split(u.Host, ",")
		q := u.Query()
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		u.Host, u.RawQuery = hosts[0], q.Encode()
		o, err := goredis.ParseClusterURL(u.String())
		if err != nil {
			return nil, nil, urlError(err)
		}
		o.Protocol = resp(o.Protocol)
		// go-redis learns where the slots are only from a MOVED or ASK, or every
		// ClusterStateReloadInterval (default 60 s); a primary that died answers no MOVED, so
		// after its replica took over the client would dial the dead address for up to a
		// minute. A slot map read every second costs one CLUSTER SLOTS a second per replica.
		if o.ClusterStateReloadInterval == 0 {
			o.ClusterStateReloadInterval = clusterStateReload
		}
		o.ContextTimeoutEnabled = true
		o.OnConnect = onConnect
		cc := goredis.NewClusterClient(o)
		// Before its first command, so that every node's client has the hook (go-redis makes
		// them as it learns the nodes).
		cc.OnNewNode(func(n *goredis.Client) { n.AddHook(slotMapDeadline{}) })
		return cc, nil, nil
	case "redis+sentinel", "rediss+sentinel":
		uo, err := sentinelOptions(scheme, rest)
		if err != nil {
			return nil, nil, err
		}
		uo.OnConnect = onConnect
		return goredis.NewUniversalClient(uo), uo, nil
	}
	return nil, nil, urlError(errors.New("unknown scheme"))
}

// sentinelOptions are the failover client's options a redis+sentinel:// URL names (scheme and
// rest are the URL's, cut at "://").
func sentinelOptions(scheme, rest string) (*goredis.UniversalOptions, error) {
	u, err := url.Parse("redis://" + rest)
	switch {
	case err != nil:
		return nil, urlError(err)
	case u.Host == "":
		return nil, urlError(errors.New("no host"))
	case u.RawQuery != "":
		return nil, urlError(errors.New("the Sentinel form takes no query"))
	}
	path := strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' })
	if len(path) < 1 || len(path) > 2 {
		return nil, urlError(errors.New("the Sentinel form's path: want /master or /master/db"))
	}
	uo := &goredis.UniversalOptions{Addrs: strings.Split(u.Host, ","), MasterName: path[0], Protocol: resp(0), ContextTimeoutEnabled: true}
	if len(path) == 2 {
		if uo.DB, err = strconv.Atoi(path[1]); err != nil {
			return nil, urlError(fmt.Errorf("invalid database number: %q", path[1]))
		}
	}
	if u.User != nil {
		uo.Username = u.User.Username()
		uo.Password, _ = u.User.Password()
	}
	if scheme == "rediss+sentinel" {
		uo.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return uo, nil
}

// resp is the protocol a URL's client speaks: the one it asks for, else RESP2 (see newClient).
func resp(asked int) int {
	if asked == 0 {
		return 2
	}
	return asked
}

// slotMapDeadline bounds each slot map read (CLUSTER SLOTS) a cluster client's node makes to
// slotMapWait. go-redis reads the map from one node at a time, in random order, with no
// deadline but the node client's read timeout (3 s), behind the node's pool: a frozen primary
// (SIGSTOP, a hung host) accepts connections and answers nothing, so a reload that asked it
// first kept the old map, which still named it, for seconds after its replica's election, and
// every write to its slots waited that long (a black-box probe, docs/scale-out.md: the first
// write 3.7 to 5.3 s after the election in 4 freezes of 6; with the bound, at most 0.85 s in 4).
// A node that answers later than slotMapWait is passed over for the next.
type slotMapDeadline struct{}

func (slotMapDeadline) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (slotMapDeadline) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

func (slotMapDeadline) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if !isClusterSlots(cmd) {
			return next(ctx, cmd)
		}
		ctx, cancel := context.WithTimeout(ctx, slotMapWait)
		defer cancel()
		return next(ctx, cmd)
	}
}

// isClusterSlots reports whether cmd is CLUSTER SLOTS.
func isClusterSlots(cmd goredis.Cmder) bool {
	a := cmd.Args()
	if len(a) != 2 {
		return false
	}
	sub, ok := a[1].(string)
	return ok && strings.EqualFold(cmd.Name(), "cluster") && strings.EqualFold(sub, "slots")
}
