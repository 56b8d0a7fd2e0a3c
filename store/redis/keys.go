package redis

import (
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/das-ask/ask/store"
)

// keys names everything the store keeps in Redis. Every key starts with its bucket's hash tag,
// {<prefix>b<N>}, so that Redis Cluster places all of a bucket's keys in one slot and every
// script, which touches one bucket only, runs on one slot. See the package documentation.
type keys struct {
	prefix  string
	buckets int
	// Made once (made, which New calls): keys are named at every call. tags[b] is tag(b);
	// sets[b] is bucket b's store-wide sets; the channels' names follow.
	tags             []string
	sets             []bucketSets
	changedCh, endCh string
}

// bucketSets are a bucket's store-wide sets' names.
type bucketSets struct{ convs, tickets, running string }

// tag is bucket b's hash tag: every key of the bucket starts with it.
func (k keys) tag(b int) string {
	if b >= 0 && b < len(k.tags) {
		return k.tags[b]
	}
	return "{" + k.prefix + "b" + strconv.Itoa(b) + "}"
}

// made is k with the names it makes at every call made once.
func (k keys) made() keys {
	k.tags = make([]string, max(k.buckets, 1))
	k.sets = make([]bucketSets, len(k.tags))
	for b := range k.tags {
		k.tags[b] = "{" + k.prefix + "b" + strconv.Itoa(b) + "}"
		k.sets[b] = bucketSets{convs: k.tags[b] + "convs", tickets: k.tags[b] + "tickets", running: k.tags[b] + "running"}
	}
	k.changedCh, k.endCh = k.prefix+"changed", k.prefix+"ended"
	return k
}

// set is bucket b's store-wide sets' names.
func (k keys) set(b int) bucketSets {
	if b >= 0 && b < len(k.sets) {
		return k.sets[b]
	}
	t := k.tag(b)
	return bucketSets{convs: t + "convs", tickets: t + "tickets", running: t + "running"}
}

func (k keys) conv(b int, id string) string   { return k.tag(b) + "c:" + id }
func (k keys) convPrefix(b int) string        { return k.tag(b) + "c:" }
func (k keys) turns(b int, id string) string  { return k.tag(b) + "c:" + id + ":turns" }
func (k keys) ticketPrefix(b int) string      { return k.tag(b) + "t:" }
func (k keys) ticket(b int, id string) string { return k.tag(b) + "t:" + id }
func (k keys) log(b int, id string) string    { return k.tag(b) + "t:" + id + ":log" }
func (k keys) steps(b int, id string) string  { return k.tag(b) + "t:" + id + ":steps" }
func (k keys) convs(b int) string             { return k.set(b).convs }
func (k keys) tickets(b int) string           { return k.set(b).tickets }
func (k keys) running(b int) string           { return k.set(b).running }

// changed is the change channel, not a key: PUBLISH reaches every node of a cluster.
func (k keys) changed() string { return k.changedCh }

// ended is the end channel (not a key either): every end of a log publishes the ticket there.
func (k keys) ended() string { return k.endCh }

// generation lives in bucket 0's slot.
func (k keys) generation() string { return k.tag(0) + "generation" }

// ownerConvs and ownerTickets are an owner's conversations and tickets in bucket b (zsets id →
// expiry, as convs and tickets). The owner part is ownerField's, so no two owners share a key.
func (k keys) ownerConvs(b int, o store.Owner) string   { return k.tag(b) + "o:c:" + ownerField(o) }
func (k keys) ownerTickets(b int, o store.Owner) string { return k.tag(b) + "o:t:" + ownerField(o) }

// owners is ownerConvs and ownerTickets, naming the owner once.
func (k keys) owners(b int, o store.Owner) (convs, tickets string) {
	f := ownerField(o)
	return k.tag(b) + "o:c:" + f, k.tag(b) + "o:t:" + f
}

// home is the owner's bucket: a hash of the owner, modulo the buckets. Everything the owner
// creates lives there, so the per-owner caps are counted in one slot, exactly.
func (k keys) home(o store.Owner) int {
	if k.buckets <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(ownerField(o)))
	return int(h.Sum32() % uint32(k.buckets))
}

// homeMark is what ids of a bucket end with: "-b<N>". The store reads the bucket back from it.
func homeMark(b int) string { return "b" + strconv.Itoa(b) }

// bucketOf is the bucket an id names: the N of its trailing "-b<N>", modulo the buckets, or 0
// for an id without one (minted by a store without homes, or before them).
func (k keys) bucketOf(id string) int {
	if k.buckets <= 1 {
		return 0
	}
	i := strings.LastIndexByte(id, '-')
	if i < 0 || i+2 > len(id) || id[i+1] != 'b' {
		return 0
	}
	n, err := strconv.Atoi(id[i+2:])
	if err != nil || n < 0 {
		return 0
	}
	return n % k.buckets
}

// perBucket is a store-wide cap as each bucket enforces it: ceil(n / buckets); 0 (no cap) stays 0.
func (k keys) perBucket(n int) int {
	if n <= 0 || k.buckets <= 1 {
		return n
	}
	return (n + k.buckets - 1) / k.buckets
}

func ms(d time.Duration) string    { return strconv.FormatInt(d.Milliseconds(), 10) }
func nanos(t time.Time) string     { return strconv.FormatInt(t.UnixNano(), 10) }
func fromNanos(s string) time.Time { n, _ := strconv.ParseInt(s, 10, 64); return time.Unix(0, n).UTC() }
func atoi(s string) int64          { n, _ := strconv.ParseInt(s, 10, 64); return n }

// ownerField names an owner in its keys: the tenant length-prefixed, then the oid, so no two
// owners share one.
func ownerField(o store.Owner) string {
	return strconv.Itoa(len(o.Tenant)) + ":" + o.Tenant + o.OID
}
