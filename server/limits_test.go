package server_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// createConv posts createConversation for tok and returns the response and its body.
func (h *harness) createConv(tok string) (*http.Response, []byte) {
	h.t.Helper()
	resp := h.do(newReq(h.t, http.MethodPost, "/ask/v1/conversations", tok, `{}`))
	return resp, readBody(h.t, resp)
}

// refused checks a per-identity refusal: 429 problem+json with a Retry-After of retry whole
// seconds (when the first of what is held is due to expire), a detail naming what is full, and
// nothing of the request in the body.
func refused(t *testing.T, status int, hdr http.Header, body []byte, what, retry string) {
	t.Helper()
	p := problemOf(t, status, hdr.Get("Content-Type"), body, http.StatusTooManyRequests)
	if ra := hdr.Get("Retry-After"); ra != retry {
		t.Errorf("Retry-After %q, want %s", ra, retry)
	}
	if p.Detail == nil || !strings.Contains(*p.Detail, what) {
		t.Errorf("detail %v does not name the %s", p.Detail, what)
	}
	if p.Ticket != nil {
		t.Errorf("a per-identity refusal names ticket %s", *p.Ticket)
	}
	if strings.Contains(string(body), alice) || strings.Contains(string(body), bob) {
		t.Errorf("the problem holds a token: %s", body)
	}
}

// TestConversationsPerIdentity: an identity at DAS_ASK_MAX_CONVERSATIONS_PER_ID gets 429 +
// Retry-After, creating nothing; another identity is not affected; the cap frees as the
// identity's conversations expire.
func TestConversationsPerIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{MaxConversationsPerID: 2, TTL: time.Minute})
		c1 := h.conv(alice)
		time.Sleep(5 * time.Second)
		h.conv(alice)
		time.Sleep(15 * time.Second)
		// The first conversation is due to expire in 40 s: that is when to come back.
		resp, body := h.createConv(alice)
		refused(t, resp.StatusCode, resp.Header, body, "conversations", "40")
		if resp.Header.Get("Location") != "" {
			t.Errorf("a refused conversation has a Location: %s", resp.Header.Get("Location"))
		}
		h.ask(bob, h.conv(bob), "bob's question while alice is at her cap")
		h.ask(alice, c1, "alice may still ask in what she holds")
		synctest.Wait()
		time.Sleep(time.Minute + time.Second) // both of alice's conversations expire
		h.conv(alice)
		h.conv(alice)
	})
}

// TestRetainedPerIdentity: an identity holding DAS_ASK_MAX_RETAINED_PER_ID tickets, finished
// ones included, gets 429 + Retry-After for its next ask, creating nothing; another identity
// is not affected; the cap frees as the identity's tickets expire.
func TestRetainedPerIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{MaxRetainedPerID: 2, MaxInFlight: 2, TTL: time.Minute})
		cid := h.conv(alice)
		for _, q := range []string{"one", "two"} {
			h.ask(alice, cid, q)
			synctest.Wait() // finished, and still retained
		}
		time.Sleep(25 * time.Second)
		// The first ticket is due to expire in 35 s.
		r := h.askRaw(alice, cid, "three, over the cap")
		refused(t, r.StatusCode(), r.HTTPResponse.Header, r.Body, "tickets", "35")
		if strings.Contains(string(r.Body), "three, over the cap") {
			t.Errorf("the problem holds the question: %s", r.Body)
		}
		if loc := r.HTTPResponse.Header.Get("Location"); loc != "" {
			t.Errorf("a refused ask has a Location: %s", loc)
		}
		bc := h.conv(bob)
		checkLifecycle(t, h.events(bob, h.ask(bob, bc, "bob's question while alice is at her cap")), gen.EventTypeAnswer)
		time.Sleep(time.Minute + time.Second) // alice's tickets, and her conversation, expire
		h.ask(alice, h.conv(alice), "after the TTL")
	})
}

// TestConversationFull: a conversation that holds DAS_ASK_MAX_TURNS_PER_CONVERSATION turns
// refuses the next ask with 409 problem+json that names no ticket, creating nothing; a new
// conversation takes it.
func TestConversationFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var histories []int64
		h := newHarness(t, server.Options{MaxTurns: 2, Runner: ask.RunnerFunc(func(_ context.Context, req ask.Request, _ ask.Emitter) ask.Outcome {
			mu.Lock()
			histories = append(histories, int64(len(req.History)))
			mu.Unlock()
			return ask.Outcome{Answer: answer("42")}
		})})
		cid := h.conv(alice)
		for _, q := range []string{"first", "second"} {
			h.ask(alice, cid, q)
			synctest.Wait()
		}
		r := h.askRaw(alice, cid, "third, in a full conversation")
		p := problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusConflict)
		if p.Detail == nil || *p.Detail != "conversation is full; start a new one" {
			t.Errorf("detail %v", p.Detail)
		}
		if p.Ticket != nil {
			t.Errorf("a full conversation's 409 names ticket %s: nothing runs in it", *p.Ticket)
		}
		if strings.Contains(string(r.Body), "third, in a full conversation") {
			t.Errorf("the problem holds the question: %s", r.Body)
		}
		// Still full, and nothing was half-created: the same answer again.
		r = h.askRaw(alice, cid, "fourth")
		problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusConflict)
		h.ask(alice, h.conv(alice), "in a new conversation")
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if want := []int64{0, 1, 0}; !equalInts(histories, want) {
			t.Errorf("the runner saw histories of %v turns, want %v", histories, want)
		}
	})
}

// TestOneIdentityCannotLockOthersOut is the hardening review's case: one valid identity
// creating conversations and asking as fast as it can, until it is refused, is stopped at its
// own caps (429, never the shared 503), and another identity can still create a conversation,
// ask, and get its answer. The shared caps are sized so that without the per-identity ones
// alice alone would fill them.
func TestOneIdentityCannotLockOthersOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const convCap, heldCap = 3, 5
		h := newHarness(t, server.Options{MaxTickets: 8, MaxConversationsPerID: convCap, MaxRetainedPerID: heldCap,
			MaxInFlight: 4, TTL: time.Hour})

		var convs []string
		for range 20 {
			resp, body := h.createConv(alice)
			if resp.StatusCode == http.StatusCreated {
				var c gen.Conversation
				if err := jsonUnmarshal(body, &c); err != nil {
					t.Fatal(err)
				}
				convs = append(convs, c.Id)
				continue
			}
			refused(t, resp.StatusCode, resp.Header, body, "conversations", "3600")
		}
		if len(convs) != convCap {
			t.Fatalf("alice created %d conversations, want her cap of %d", len(convs), convCap)
		}
		asked := 0
		for i := range 40 {
			r := h.askRaw(alice, convs[i%len(convs)], "flood")
			switch r.StatusCode() {
			case http.StatusAccepted:
				asked++
				synctest.Wait() // the run ends; its ticket stays retained for the TTL
			case http.StatusConflict:
				t.Errorf("a 409 though every run had ended: %s", r.Body)
			default:
				refused(t, r.StatusCode(), r.HTTPResponse.Header, r.Body, "tickets", "3600")
			}
		}
		if asked != heldCap {
			t.Fatalf("alice was admitted %d asks, want her cap of %d", asked, heldCap)
		}

		// bob is unaffected: he creates, asks and is answered.
		bc := h.conv(bob)
		checkLifecycle(t, h.events(bob, h.ask(bob, bc, "bob's question after alice's flood")), gen.EventTypeAnswer)
		checkLifecycle(t, h.events(bob, h.ask(bob, bc, "and a follow-up")), gen.EventTypeAnswer)
	})
}

// TestBodyLimitBoundary: a body of exactly DAS_ASK_MAX_BODY_BYTES is taken and one byte more is
// a 413 problem+json whose detail names the limit, whether the length is declared or the body
// is chunked; the refused ask created nothing.
func TestBodyLimitBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 1024 // the least DAS_ASK_MAX_BODY_BYTES allows
		h := newHarness(t, server.Options{MaxBodyBytes: limit})
		body := func(n int) string {
			frame := `{"question":""}`
			return `{"question":"` + strings.Repeat("q", n-len(frame)) + `"}`
		}
		for _, declared := range []bool{true, false} {
			cid := h.conv(alice)
			post := func(b string) *http.Response {
				h.secret(b[len(`{"question":"`) : len(b)-2])
				req := newReq(t, http.MethodPost, "/ask/v1/conversations/"+cid+"/asks", alice, b)
				if !declared {
					req.Body, req.ContentLength = io.NopCloser(strings.NewReader(b)), -1
				}
				return h.do(req)
			}
			resp := post(body(limit + 1))
			p := problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), http.StatusRequestEntityTooLarge)
			if detail := orDefault(ptrValue(p.Detail), "(none)"); !strings.Contains(detail, "at most 1024 bytes") {
				t.Errorf("declared %v: the 413's detail %q does not name the limit", declared, detail)
			}
			if resp := post(body(limit)); resp.StatusCode != http.StatusAccepted {
				t.Errorf("declared %v: a body of exactly the limit: %d %s", declared, resp.StatusCode, readBody(t, resp))
			}
			synctest.Wait()
		}
	})
}

// ptrValue is *p, or "" when p is nil.
func ptrValue(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestDefaultBodyLimitTakesEveryValidAsk: the default body limit admits the largest ask the
// contract allows however a client escapes it: 4000 characters each sent as a surrogate pair
// (Python's json.dumps sends every emoji so: 12 bytes a character) and a webhook URL of 2048
// characters each escaped so too, about 72 KB (a URL's path may hold emoji, as a question may;
// the 64 KiB default refused this with a 413). The question is taken; the webhook's body is not
// refused for its size (400: no webhook is allowed here, so it reaches validation).
func TestDefaultBodyLimitTakesEveryValidAsk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{})
		question := strings.Repeat(`\ud83d\ude00`, 4000)
		h.secret(strings.Repeat("😀", 4000))
		for _, c := range []struct {
			body string
			want int
		}{
			{`{"question":"` + question + `"}`, http.StatusAccepted},
			{`{"question":"` + question + `","webhook":{"url":"` + strings.Repeat(`\u0061`, 2048) + `"}}`, http.StatusBadRequest},
			{`{"question":"` + question + `","webhook":{"url":"https://h/` + strings.Repeat(`\ud83d\ude00`, 2048-len("https://h/")) + `"}}`, http.StatusBadRequest},
		} {
			resp := h.do(newReq(t, http.MethodPost, "/ask/v1/conversations/"+h.conv(alice)+"/asks", alice, c.body))
			if resp.StatusCode != c.want {
				t.Errorf("an ask of %d bytes: %d %s, want %d", len(c.body), resp.StatusCode, readBody(t, resp), c.want)
			}
			synctest.Wait()
		}
	})
}

// TestQuestionLengthInCodePoints: the question's 4000 is counted in Unicode code points, as the
// contract's maxLength is (JSON Schema): not bytes (é is two, 😀 four) nor UTF-16 units (😀 is
// two), and a letter with a combining accent is two. At the bound the ask is taken, the question
// intact in its accepted event; one more is a 400 naming the length.
func TestQuestionLengthInCodePoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{})
		cid := h.conv(alice)
		for _, c := range []struct{ name, unit string }{
			{"two-byte letters", "é"}, {"emoji", "😀"}, {"letters with a combining accent", "e\u0301"},
		} {
			n := 4000 / utf8.RuneCountInString(c.unit)
			at := strings.Repeat(c.unit, n)
			r := h.askRaw(alice, cid, at)
			if r.StatusCode() != http.StatusAccepted {
				t.Fatalf("%s: 4000 code points (%d bytes): %d %s", c.name, len(at), r.StatusCode(), r.Body)
			}
			synctest.Wait()
			if q := decode(t, h.events(alice, r.JSON202.Ticket)[0]).Q; q != at {
				t.Errorf("%s: the accepted event holds another question (%d bytes, want %d)", c.name, len(q), len(at))
			}
			r = h.askRaw(alice, cid, at+"a")
			p := problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusBadRequest)
			if p.Errors == nil || !slices.Contains(*p.Errors, "body/question: maximum string length is 4000") {
				t.Errorf("%s: 4001 code points: violations %v", c.name, p.Errors)
			}
		}
	})
}

// TestOwnerFullRetryAfterWithinTTL: under a TTL shorter than the usual 30 s hint, an identity at
// its cap of conversations or tickets is told to retry after the TTL, when the retry succeeds
// (the oldest has expired), not 30 s later.
func TestOwnerFullRetryAfterWithinTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 5 * time.Second
		h := newHarness(t, server.Options{MaxConversationsPerID: 1, MaxRetainedPerID: 1, MaxInFlight: 1, TTL: ttl})
		cid := h.conv(alice)
		h.ask(alice, cid, "one")
		synctest.Wait() // finished, and still retained
		r := h.askRaw(alice, cid, "two, over the cap")
		if got, want := r.HTTPResponse.Header.Get("Retry-After"), "5"; r.StatusCode() != http.StatusTooManyRequests || got != want {
			t.Errorf("ticket cap: %d Retry-After %q, want 429 %q", r.StatusCode(), got, want)
		}
		resp, _ := h.createConv(alice)
		if got, want := resp.Header.Get("Retry-After"), "5"; resp.StatusCode != http.StatusTooManyRequests || got != want {
			t.Errorf("conversation cap: %d Retry-After %q, want 429 %q", resp.StatusCode, got, want)
		}
		time.Sleep(ttl + time.Millisecond) // the Retry-After, and the cap is free
		h.ask(alice, h.conv(alice), "after the Retry-After")
	})
}

// TestServiceFullRetryAfterWithinTTL: under a TTL shorter than the usual 5 s hint, a service
// holding DAS_ASK_MAX_TICKETS conversations answers 503 with Retry-After the TTL, when the
// retry succeeds (the idle conversation has expired), not 5 s.
func TestServiceFullRetryAfterWithinTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 2 * time.Second
		h := newHarness(t, server.Options{MaxTickets: 1, TTL: ttl})
		h.conv(alice)
		resp, _ := h.createConv(bob)
		if got, want := resp.Header.Get("Retry-After"), "2"; resp.StatusCode != http.StatusServiceUnavailable || got != want {
			t.Errorf("service full: %d Retry-After %q, want 503 %q", resp.StatusCode, got, want)
		}
		time.Sleep(ttl + time.Millisecond) // the Retry-After, and alice's idle conversation is gone
		h.conv(bob)
	})
}

// TestInFlightRetryAfterWithinDeadline: under a run deadline shorter than the usual 2 s hint,
// an identity at DAS_ASK_MAX_INFLIGHT_PER_ID is told to retry after the deadline, by when its
// running ask has ended and the retry is taken, not 2 s.
func TestInFlightRetryAfterWithinDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{MaxInFlight: 1, Deadline: time.Second, Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
			<-ctx.Done() // runs until its deadline
			return ask.Outcome{}
		})})
		c1, c2 := h.conv(alice), h.conv(alice)
		h.ask(alice, c1, "runs to its deadline")
		r := h.askRaw(alice, c2, "one more while it runs")
		if got, want := r.HTTPResponse.Header.Get("Retry-After"), "1"; r.StatusCode() != http.StatusTooManyRequests || got != want {
			t.Errorf("in flight: %d Retry-After %q, want 429 %q", r.StatusCode(), got, want)
		}
		time.Sleep(time.Second) // the Retry-After: the first ask has met its deadline
		synctest.Wait()
		h.ask(alice, c2, "after the Retry-After")
	})
}
