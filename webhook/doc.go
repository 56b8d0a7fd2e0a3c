// Package webhook delivers the end of an ask (its terminal event and done) to the webhook the
// ask named, for clients that do not hold the event stream: a Slack bot, a scheduled report, a
// serverless function.
//
// A delivery is one POST of a WebhookDelivery body, signed per Standard Webhooks
// (https://www.standardwebhooks.com): webhook-id (one per ticket, the same on every attempt),
// webhook-timestamp (of the attempt) and webhook-signature, "v1,<base64 HMAC-SHA256 over
// id.timestamp.body>" once per signing secret the operator configured for the destination
// (space-separated: the shared secrets, or a prefix's own, DAS_ASK_WEBHOOK_ENDPOINT_SECRETS), so
// a receiver keeps verifying while the operator rotates secrets.
//
// Safety, which the operator configures (Config) and no caller can widen:
//   - Destinations must start with a prefix of the operator's allow-list; https is required,
//     except plain http to a loopback host (the dev stack). Checked at createAsk and again
//     before every attempt, so a prefix the operator drops stops its pending deliveries.
//   - The address a destination resolves to is checked when the connection is made (a dialer's
//     Control hook), so DNS rebinding cannot turn an allowed name into a private, link-local,
//     loopback, reserved or metadata address; those are refused unless the operator allows
//     them (a metadata address only by naming it exactly). Plain
//     http connects only to a loopback address, whatever the name resolved to.
//   - No redirect is followed, no proxy is used, no bearer or cookie is ever sent; the response
//     headers and body are read up to small bounds; every attempt has a timeout.
//
// Retries: every answer but a 2xx, a 410 or a redirect (a 4xx included, as Standard Webhooks
// says), and timeouts or transport failures, are retried with exponential backoff and equal
// jitter (a Retry-After honoured, capped), up to MaxAttempts within the ticket's TTL; 2xx ends
// delivery as delivered; a 410 (the receiver wants no more) or a redirect (never followed; the
// same URL would answer the same) ends it as failed.
//
// Exactly one delivery id per ticket, and one deliverer at a time: deliveries live in the
// store's Outbox and are claimed there, so with replicas the one that claims delivers, and a
// replica that dies mid-delivery leaves a claim that lapses and is taken again.
package webhook
