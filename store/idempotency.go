package store

import (
	"context"
	"time"
)

// Idempotency keeps the records behind the Idempotency-Key header of the creating calls
// (IETF draft-ietf-httpapi-idempotency-key-header), shared by every replica that shares the
// store. A record is scoped to an owner and a key; it holds the request's fingerprint, the id
// of the resource the request creates (a conversation or a ticket) and, once the request has
// completed, its response. It lives for the TTL it was begun with.
//
// The protocol, for one request carrying a key:
//
//  1. BeginIdempotent with a fresh candidate id. IdemNew: go ahead and create the resource
//     under Result.ID (and, when Result.Prev is set, first look for the resource a lapsed
//     earlier attempt may have created under that id). IdemDone: answer Result.Response.
//     IdemMismatch: the key was used for another request. IdemBusy: the first request is
//     still in progress (its lock has not lapsed).
//  2. CompleteIdempotent with the candidate and the id actually answered, and the response.
//     It fails with ErrIdemLost when another attempt has taken the record over meanwhile (this
//     one stalled past its lock): the caller must then undo what it created. The record then
//     no longer names the candidate as the one it was taken from (Result.Prev): a refused
//     takeover frees it rather than give it back (3), and no retry answers the undone resource:
//     a takeover completing with final = Result.Prev fails with ErrIdemLost once that attempt
//     has undone it (still holding the record, it then creates its own resource, and completes
//     with that).
//  3. Or, when the request was refused and created nothing, AbandonIdempotent, so that a
//     retry is processed afresh. A record the candidate took over (Result.Prev) goes back to
//     the attempt it was taken from, its lock lapsed, rather than away: that attempt, stalled,
//     may yet create its resource, and must then complete the record, not find it gone (a
//     complete on a record that is gone succeeds, as the record may have expired) while a
//     retry creates a second resource under the key. A retry takes it over again, and looks
//     for what that attempt made. An abandon by the attempt it was taken from (refused, having
//     made nothing) likewise stops it being named.
//
// Every method is safe under a client's retry of the same call (a lost reply): Begin with the
// same candidate answers IdemNew again, Complete with the same ids succeeds again, Abandon of
// a record no longer held by the candidate does nothing.
type Idempotency interface {
	BeginIdempotent(ctx context.Context, owner Owner, key string, b IdemBegin) (IdemResult, error)
	CompleteIdempotent(ctx context.Context, owner Owner, key, candidate, final string, response []byte) error
	AbandonIdempotent(ctx context.Context, owner Owner, key, candidate string) error
}

// IdemBegin is what BeginIdempotent records for a new request.
type IdemBegin struct {
	// Fingerprint identifies the request (method, path, body); it never holds the body itself.
	Fingerprint string
	// Candidate is the id the request will create its resource under.
	Candidate string
	// Lock is how long the request may take before another attempt with the same key may
	// take the record over.
	Lock time.Duration
	// TTL is how long the record is kept from its first use; zero or less: the store's TTL.
	TTL time.Duration
}

// IdemState is BeginIdempotent's verdict.
type IdemState int

// BeginIdempotent's verdicts.
const (
	// IdemNew: the caller holds the record and creates the resource under IdemResult.ID.
	IdemNew IdemState = iota + 1
	// IdemDone: the request completed earlier; IdemResult.Response is its response.
	IdemDone
	// IdemMismatch: the key was used for a request with another fingerprint.
	IdemMismatch
	// IdemBusy: a request with this key is in progress and holds its lock.
	IdemBusy
)

// IdemResult is what BeginIdempotent answers.
type IdemResult struct {
	State IdemState
	// ID: for IdemNew the candidate to create under; for IdemDone the resource answered.
	ID string
	// Prev, for IdemNew after a takeover, is the candidate of the attempt whose lock lapsed:
	// the resource may exist under it.
	Prev string
	// Response is the stored response, for IdemDone.
	Response []byte
}

// ErrIdemLost is CompleteIdempotent's answer when the record is no longer held by the
// candidate (another attempt took it over after this one's lock lapsed), or when final is the
// resource of the attempt the candidate took the record over from and that attempt has since
// undone it.
var ErrIdemLost = errIdemLost{}

type errIdemLost struct{}

func (errIdemLost) Error() string { return "store: the idempotency record was taken over" }
