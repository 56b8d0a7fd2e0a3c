package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// devKeepAlive is the keep-alive interval of the stacks --dev-stack starts: shorter than the
// slow question's 3 s silence, so the keep-alive check has something to observe.
const devKeepAlive = time.Second

// devOverflowEvents is the buffer of the stack the overflow check runs against: smaller than
// one run's events.
const devOverflowEvents = 8

// The gateway checks, made after the suite in --gateway mode.
const (
	nameSurvives = "gateway.silence-survives-with-keepalives"
	nameCutOff   = "gateway.silence-cut-without-keepalives"
)

// runDev starts the development stack (and one with a small buffer for the overflow check, and
// one with small limits for the limits checks), optionally nginx in front of them, runs the
// suite, and stops everything.
//
// The model is the llm-stub unless ASK_LLM names a real one (config.FromEnv); with a real
// model the behaviour checks test its judgement rather than the stub's script.
func runDev(ctx context.Context, o options, cfg conformance.Config, log *slog.Logger, lookup func(string) (string, bool)) (rep conformance.Report, err error) {
	all, err := config.FromEnv(lookup)
	if err != nil {
		return rep, fmt.Errorf("model: %w", err)
	}
	model := all.Agent
	start := func(opts stack.Options) (*stack.Stack, error) {
		opts.Logger = log
		if o.phase2 {
			opts.Split, opts.Phase = true, 2
		}
		if model.LLM != agent.LLMStub {
			opts.Model = &model
		}
		s, err := stack.Start(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("start the dev stack: %w", err)
		}
		return s, nil
	}
	// The suite's webhook receiver, which the primary stack's allow-list admits.
	hookLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return rep, err
	}
	hookSecret := webhooktest.Secret()
	hooks, err := conformance.NewWebhookReceiver(hookLn, "", hookSecret)
	if err != nil {
		return rep, err
	}
	defer hooks.Close()
	cfg.Webhooks = conformance.WebhookConfig{Receiver: hooks, Secrets: []string{hookSecret}}
	primary, err := start(stack.Options{KeepAlive: devKeepAlive,
		WebhookAllow: []string{hooks.URL() + "/ask-conformance/"}, WebhookSecret: hookSecret})
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, primary.Close()) }()
	small, err := start(stack.Options{KeepAlive: devKeepAlive, MaxEvents: devOverflowEvents})
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, small.Close()) }()

	devLimits := conformance.DevLimits()
	svc := server.DefaultConfig()
	svc.MaxBodyBytes, svc.MaxInFlight, svc.MaxTickets = devLimits.MaxBodyBytes, devLimits.MaxInFlight, devLimits.MaxTickets
	limited, err := start(stack.Options{KeepAlive: devKeepAlive, Service: &svc, Deadline: devLimits.Deadline, TTL: devLimits.TTL})
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, limited.Close()) }()

	cfg.BaseURL, cfg.OverflowURL, cfg.LimitsURL = primary.AskURL, small.AskURL, limited.AskURL
	cfg.MaxEvents, cfg.OverflowMaxEvents, cfg.Limits = server.DefaultMaxEvents, devOverflowEvents, devLimits
	cfg.Tokens = conformance.IdPTokens{URL: primary.IdPURL}
	cfg.OverflowTokens = conformance.IdPTokens{URL: small.IdPURL}
	cfg.LimitsTokens = conformance.IdPTokens{URL: limited.IdPURL}
	cfg.AuditURL, cfg.AuditURLs = primary.SourceURLs[0], primary.SourceURLs[1:]
	if o.phase2 {
		cfg.Phase2, cfg.Sources = true, []string{"catalog", "warehouse"}
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = devKeepAlive
	}
	if !o.gateway {
		return conformance.Run(ctx, cfg)
	}

	// The control: a stack that sends no keep-alive within any run, behind the same gateway.
	quiet, err := start(stack.Options{KeepAlive: time.Hour})
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, quiet.Close()) }()
	gw, err := startGateway(ctx, gatewayOptions{
		nginx: o.nginx, template: o.nginxConf, readTimeout: o.gatewayReadTimeout, logger: log,
		upstreams: []string{primary.AskURL, small.AskURL, quiet.AskURL, limited.AskURL},
	})
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, gw.stop()) }()

	cfg.BaseURL, cfg.OverflowURL, cfg.LimitsURL = gw.urls[0], gw.urls[1], gw.urls[3]
	if rep, err = conformance.Run(ctx, cfg); err != nil {
		return rep, err
	}
	wanted := func(name string) bool { return cfg.Only == nil || cfg.Only.MatchString(name) }
	if wanted(nameSurvives) {
		rep.Results = append(rep.Results, silenceSurvives(ctx, cfg, o.gatewayReadTimeout))
	}
	if wanted(nameCutOff) {
		control := cfg
		control.BaseURL = gw.urls[2]
		control.Tokens = conformance.IdPTokens{URL: quiet.IdPURL}
		rep.Results = append(rep.Results, silenceCutOff(ctx, control, o.gatewayReadTimeout))
	}
	return rep, nil
}

// silenceSurvives: through the gateway, a run silent for longer than proxy_read_timeout reaches
// done, because keep-alives arrive within the timeout.
func silenceSurvives(ctx context.Context, cfg conformance.Config, readTimeout time.Duration) conformance.Result {
	const name = nameSurvives
	s, err := conformance.SilentWait(ctx, cfg)
	switch {
	case err != nil:
		return conformance.Result{Name: name, Status: conformance.Fail, Detail: "expected a slow run through the gateway; saw " + err.Error()}
	case !s.ReachedDone:
		return conformance.Result{Name: name, Status: conformance.Fail, Detail: fmt.Sprintf("expected the stream to reach done through a gateway with proxy_read_timeout %s; saw it %s", readTimeout, s.Ended)}
	case s.LongestGap <= readTimeout:
		return conformance.Result{Name: name, Status: conformance.Fail, Detail: fmt.Sprintf("expected a silence longer than proxy_read_timeout %s; saw at most %s between events, which proves nothing", readTimeout, s.LongestGap.Round(time.Millisecond))}
	}
	return conformance.Result{Name: name, Status: conformance.Pass, Detail: fmt.Sprintf("a %s silence through nginx with proxy_read_timeout %s reached done; %d keep-alives, longest quiet %s",
		s.LongestGap.Round(100*time.Millisecond), readTimeout, s.Comments, s.LongestQuiet.Round(100*time.Millisecond))}
}

// silenceCutOff is the control: the same run through the same gateway, from a service that
// sends no keep-alives, is cut off, so the survival above is the keep-alives' doing.
func silenceCutOff(ctx context.Context, cfg conformance.Config, readTimeout time.Duration) conformance.Result {
	const name = nameCutOff
	s, err := conformance.SilentWait(ctx, cfg)
	switch {
	case err != nil:
		return conformance.Result{Name: name, Status: conformance.Fail, Detail: "expected a slow run through the gateway; saw " + err.Error()}
	case s.ReachedDone:
		return conformance.Result{Name: name, Status: conformance.Fail, Detail: fmt.Sprintf("expected nginx to cut a stream silent for longer than proxy_read_timeout %s; saw it reach done (longest quiet %s), so the timeout is not in effect", readTimeout, s.LongestQuiet.Round(100*time.Millisecond))}
	}
	return conformance.Result{Name: name, Status: conformance.Pass, Detail: fmt.Sprintf("without keep-alives the same run was %s (proxy_read_timeout %s)", s.Ended, readTimeout)}
}
