package redis

import (
	"strconv"
	"time"

	"github.com/das-ask/ask/store"
)

// keys names everything the store keeps in Redis.
type keys struct{ prefix string }

func (k keys) conv(id string) string   { return k.prefix + "c:" + id }
func (k keys) turns(id string) string  { return k.prefix + "c:" + id + ":turns" }
func (k keys) ticketPrefix() string    { return k.prefix + "t:" }
func (k keys) ticket(id string) string { return k.prefix + "t:" + id }
func (k keys) log(id string) string    { return k.prefix + "t:" + id + ":log" }
func (k keys) steps(id string) string  { return k.prefix + "t:" + id + ":steps" }
func (k keys) convs() string           { return k.prefix + "convs" }
func (k keys) tickets() string         { return k.prefix + "tickets" }
func (k keys) running() string         { return k.prefix + "running" }
func (k keys) inflight() string        { return k.prefix + "inflight" }
func (k keys) changed() string         { return k.prefix + "changed" }
func (k keys) ended() string           { return k.prefix + "ended" }
func (k keys) generation() string      { return k.prefix + "generation" }

func ms(d time.Duration) string    { return strconv.FormatInt(d.Milliseconds(), 10) }
func nanos(t time.Time) string     { return strconv.FormatInt(t.UnixNano(), 10) }
func fromNanos(s string) time.Time { n, _ := strconv.ParseInt(s, 10, 64); return time.Unix(0, n).UTC() }
func atoi(s string) int64          { n, _ := strconv.ParseInt(s, 10, 64); return n }

// ownerConvs and ownerTickets are an owner's conversations and tickets (zsets id → expiry, as
// convs and tickets). The owner part is ownerField's, so no two owners share a key.
func (k keys) ownerConvs(o store.Owner) string   { return k.prefix + "o:c:" + ownerField(o) }
func (k keys) ownerTickets(o store.Owner) string { return k.prefix + "o:t:" + ownerField(o) }

// ownerField is the prelude's owner_field: the tenant length-prefixed, then the oid.
func ownerField(o store.Owner) string {
	return strconv.Itoa(len(o.Tenant)) + ":" + o.Tenant + o.OID
}
