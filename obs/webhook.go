package obs

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/webhook"
)

// webhookMetrics are the webhook deliverer's metrics. Labels are bounded classes only: never a
// URL, a host, a ticket or a secret.
type webhookMetrics struct {
	attempts *prometheus.CounterVec   // outcome, code (2xx, 4xx, 5xx, none)
	latency  prometheus.Histogram     // one attempt
	ended    *prometheus.CounterVec   // state
	toEnd    *prometheus.HistogramVec // state: from the run's done to the delivery's end
}

// Webhooks returns the webhook deliverer's Observer, registering its metrics in the Observer's
// registry: ask_webhook_attempts_total{outcome,code}, ask_webhook_attempt_duration_seconds,
// ask_webhook_deliveries_total{state} and ask_webhook_delivery_seconds{state}. Call it once.
func (o *Observer) Webhooks() webhook.Observer {
	m := newWebhookMetrics()
	o.m.reg.MustRegister(m.collectors()...)
	return m
}

func newWebhookMetrics() *webhookMetrics {
	return &webhookMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "webhook_attempts_total",
			Help: "Webhook POSTs made, by outcome (delivered; retry: a failure worth retrying, counted so on a delivery's last attempt too; rejected) and status class (2xx, 3xx, 4xx, 5xx, none). Deliveries given up: ask_webhook_deliveries_total{state=\"failed\"}."},
			[]string{"outcome", "code"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "webhook_attempt_duration_seconds",
			Help: "Time of one webhook POST, connect to response headers.", Buckets: fastBuckets}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "webhook_deliveries_total",
			Help: "Webhook deliveries ended, by final state (delivered, failed)."}, []string{"state"}),
		toEnd: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "webhook_delivery_seconds",
			Help: "Time from a run's done to its webhook delivery's end, retries included, by final state.", Buckets: durationBuckets},
			[]string{"state"}),
	}
}

func (m *webhookMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.attempts, m.latency, m.ended, m.toEnd}
}

func (m *webhookMetrics) Attempted(outcome string, status int, elapsed time.Duration) {
	code := "none"
	if status >= 100 && status < 600 {
		code = strconv.Itoa(status/100) + "xx"
	}
	m.attempts.WithLabelValues(outcome, code).Inc()
	m.latency.Observe(elapsed.Seconds())
}

func (m *webhookMetrics) Ended(state gen.WebhookState, _ int, sinceDone time.Duration) {
	m.ended.WithLabelValues(string(state)).Inc()
	if sinceDone > 0 {
		m.toEnd.WithLabelValues(string(state)).Observe(sinceDone.Seconds())
	}
}
