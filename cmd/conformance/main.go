// Command conformance runs the ask contract's conformance suite against a service and prints one
// line per check ("PASS|FAIL|SKIP name — detail") and the closing line "N passed, M failed, K
// skipped". It exits 1 when a check failed and 2 when it could not run.
//
// Against a running implementation:
//
//	conformance --url http://127.0.0.1:8080/ask --idp http://127.0.0.1:8090 --audit http://127.0.0.1:8091
//	conformance --url https://gw.example/ask --token-a "$A" --token-b "$B"
//
// Against the development stack, started in process on loopback (demo/stack, with the
// llm-stub), directly or through nginx with deploy/nginx/ask.conf:
//
//	conformance --dev-stack --behaviour
//	conformance --dev-stack --gateway --behaviour
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/conformance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, config.Process)
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	url, overflowURL, idp, overflowIdP, tokenA, tokenB, audit string
	behaviour, jsonOut, devStack, gateway, verbose            bool
	phase2                                                    bool
	sources                                                   string
	only                                                      string
	keepAlive, slowWait, runTimeout                           time.Duration
	nginx, nginxConf                                          string
	gatewayReadTimeout                                        time.Duration
	webhookSecrets, webhookListen, webhookURL                 string
	maxEvents, overflowMaxEvents                              int
	limitsURL, limitsIdP                                      string
	limits                                                    conformance.Limits
}

func parse(args []string, stderr io.Writer, lookup func(string) (string, bool)) (options, error) {
	var o options
	env, err := config.ConformanceFromEnv(lookup)
	if err != nil {
		return o, err
	}
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", env.URL, "the service's base URL, a gateway prefix allowed (env ASK_URL)")
	fs.StringVar(&o.overflowURL, "overflow-url", "", "the same implementation started with a small DAS_ASK_MAX_EVENTS (e.g. 8), for the overflow check")
	fs.StringVar(&o.idp, "idp", env.IdP, "a development identity provider's root, to mint every token the suite needs (env ASK_IDP, or ASK_IDP_URL, which wins)")
	fs.StringVar(&o.overflowIdP, "overflow-idp", "", "the identity provider --overflow-url trusts; default --idp")
	// The bearers and the webhook secrets take their environment values after parsing, not as
	// the flags' defaults: a default is printed in the usage, which every mistyped flag writes
	// to stderr (a CI log), the secret with it.
	fs.StringVar(&o.tokenA, "token-a", "", "a bearer of identity A, without --idp (env ASK_TOKEN_A)")
	fs.StringVar(&o.tokenB, "token-b", "", "a bearer of identity B, refused by the source for the refusal question (env ASK_TOKEN_B)")
	fs.StringVar(&o.audit, "audit", env.Audit, "a source's root serving GET /audit?call_id=, or several comma-separated (env ASK_AUDIT_URL)")
	fs.BoolVar(&o.phase2, "phase2", env.Phase2, "the target runs phase 2: a branch per source, and divergence (default: ASK_PHASE=2; with --dev-stack, a split demo in phase 2)")
	fs.StringVar(&o.sources, "sources", "", "with --phase2: the target's configured source names, comma-separated (DAS_SOURCES' names)")
	fs.BoolVar(&o.behaviour, "behaviour", false, "add the behaviour checks (refusal, abstention, path, conversation memory)")
	fs.StringVar(&o.only, "only", "", "run only the checks whose name matches this regular expression")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	fs.DurationVar(&o.keepAlive, "keepalive", 0, "the target's keep-alive interval (DAS_ASK_KEEPALIVE_S); default 10s, or 1s with --dev-stack")
	fs.DurationVar(&o.slowWait, "slow-wait", 0, "how long the slow question's first model turn is silent; default 3s")
	fs.DurationVar(&o.runTimeout, "run-timeout", 0, "how long one run may take; default 60s")
	fs.BoolVar(&o.devStack, "dev-stack", false, "start the development stack in process (llm-stub) and check it")
	fs.BoolVar(&o.gateway, "gateway", false, "with --dev-stack: put nginx with deploy/nginx/ask.conf in front and check through /ask")
	fs.StringVar(&o.nginx, "nginx", "nginx", "the nginx binary, for --gateway")
	fs.StringVar(&o.nginxConf, "nginx-conf", "deploy/nginx/ask.conf", "the checked-in gateway config, for --gateway")
	fs.DurationVar(&o.gatewayReadTimeout, "gateway-read-timeout", 2*time.Second, "with --gateway: nginx's proxy_read_timeout, shorter than the slow question's silence")
	fs.StringVar(&o.webhookSecrets, "webhook-secret", "", "the target's webhook signing secret(s), whsec_…, comma-separated, for the webhook checks (env ASK_WEBHOOK_SECRETS)")
	fs.StringVar(&o.webhookListen, "webhook-listen", "127.0.0.1:0", "where the suite's webhook receiver listens")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "the receiver's root as the target reaches it; default http://<webhook-listen address>")
	fs.IntVar(&o.maxEvents, "max-events", 0, "the target's DAS_ASK_MAX_EVENTS: a stream may skip a seq only in a run longer than it; default 1000")
	fs.IntVar(&o.overflowMaxEvents, "overflow-max-events", 0, "--overflow-url's DAS_ASK_MAX_EVENTS; default 8")
	fs.StringVar(&o.limitsURL, "limits-url", "", "the same implementation with small limits and a short deadline and TTL, for the 413/429/503, deadline and TTL checks (give its settings below)")
	fs.StringVar(&o.limitsIdP, "limits-idp", "", "the identity provider --limits-url trusts; default --idp")
	fs.Int64Var(&o.limits.MaxBodyBytes, "limits-max-body", 0, "--limits-url's DAS_ASK_MAX_BODY_BYTES")
	fs.IntVar(&o.limits.MaxInFlight, "limits-max-inflight", 0, "--limits-url's DAS_ASK_MAX_INFLIGHT_PER_ID")
	fs.IntVar(&o.limits.MaxTickets, "limits-max-tickets", 0, "--limits-url's DAS_ASK_MAX_TICKETS")
	fs.DurationVar(&o.limits.Deadline, "limits-deadline", 0, "--limits-url's DAS_ASK_DEADLINE_S, shorter than --slow-wait")
	fs.DurationVar(&o.limits.TTL, "limits-ttl", 0, "--limits-url's DAS_ASK_TTL_S")
	fs.BoolVar(&o.verbose, "v", false, "log progress to stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	// Every bound and count here reads 0 as its default: a negative one was taken so, unsaid.
	var bad []error
	fs.VisitAll(func(f *flag.Flag) {
		switch v := f.Value.(flag.Getter).Get().(type) {
		case time.Duration:
			if v <= 0 && f.Name == "gateway-read-timeout" {
				bad = append(bad, fmt.Errorf("--%s %v: want a positive duration", f.Name, v))
			} else if v < 0 {
				bad = append(bad, fmt.Errorf("--%s %v: want 0 (the default) or more", f.Name, v))
			}
		case int:
			if v < 0 {
				bad = append(bad, fmt.Errorf("--%s %d: want 0 (the default) or more", f.Name, v))
			}
		case int64: // --limits-max-body
			if v < 0 {
				bad = append(bad, fmt.Errorf("--%s %d: want 0 (the default) or more", f.Name, v))
			}
		}
	})
	if err := errors.Join(bad...); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, v := range map[string]struct {
		dst *string
		env string
	}{"token-a": {&o.tokenA, env.TokenA}, "token-b": {&o.tokenB, env.TokenB}, "webhook-secret": {&o.webhookSecrets, env.WebhookSecrets}} {
		if !set[name] {
			*v.dst = v.env
		}
	}
	switch {
	case o.devStack && (set["url"] || set["idp"] || set["overflow-url"] || set["audit"] || set["limits-url"] || set["max-events"] || set["overflow-max-events"]):
		return o, errors.New("--dev-stack starts its own targets: drop --url, --idp, --overflow-url, --limits-url, --audit and the targets' settings")
	case o.gateway && !o.devStack:
		return o, errors.New("--gateway needs --dev-stack (to check an existing gateway, give its /ask URL to --url)")
	case !o.devStack && o.url == "":
		return o, errors.New("give --url (or --dev-stack)")
	case !o.devStack && o.idp == "" && (o.tokenA == "" || o.tokenB == ""):
		return o, errors.New("give --idp, or both --token-a and --token-b")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	o, err := parse(args, stderr, lookup)
	if errors.Is(err, flag.ErrHelp) {
		return 0 // the usage was asked for, and printed
	}
	if err != nil {
		fmt.Fprintln(stderr, "conformance:", err)
		return 2
	}
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	cfg := conformance.Config{
		BaseURL:           o.url,
		OverflowURL:       o.overflowURL,
		MaxEvents:         o.maxEvents,
		OverflowMaxEvents: o.overflowMaxEvents,
		LimitsURL:         o.limitsURL,
		Limits:            o.limits,
		Behaviour:         o.behaviour,
		Phase2:            o.phase2,
		KeepAlive:         o.keepAlive,
		SlowWait:          o.slowWait,
		RunTimeout:        o.runTimeout,
		Logger:            log,
	}
	if !o.devStack && o.webhookSecrets != "" {
		l, err := net.Listen("tcp", o.webhookListen)
		if err != nil {
			fmt.Fprintln(stderr, "conformance: --webhook-listen:", err)
			return 2
		}
		secrets := strings.Split(o.webhookSecrets, ",")
		rcv, err := conformance.NewWebhookReceiver(l, o.webhookURL, secrets...)
		if err != nil {
			fmt.Fprintln(stderr, "conformance: --webhook-secret:", err)
			return 2
		}
		defer rcv.Close()
		cfg.Webhooks = conformance.WebhookConfig{Receiver: rcv, Secrets: secrets}
	}
	if o.audit != "" {
		audits := strings.Split(o.audit, ",")
		cfg.AuditURL, cfg.AuditURLs = audits[0], audits[1:]
	}
	if o.sources != "" {
		cfg.Sources = strings.Split(o.sources, ",")
	}
	if o.only != "" {
		if cfg.Only, err = regexp.Compile(o.only); err != nil {
			fmt.Fprintln(stderr, "conformance: --only:", err)
			return 2
		}
	}
	if o.idp != "" {
		cfg.Tokens = conformance.IdPTokens{URL: o.idp}
	} else {
		cfg.Tokens = conformance.FixedTokens{TokenA: o.tokenA, TokenB: o.tokenB}
	}
	if o.overflowIdP != "" {
		cfg.OverflowTokens = conformance.IdPTokens{URL: o.overflowIdP}
	}
	if o.limitsIdP != "" {
		cfg.LimitsTokens = conformance.IdPTokens{URL: o.limitsIdP}
	}

	var rep conformance.Report
	if o.devStack {
		rep, err = runDev(ctx, o, cfg, log, lookup)
	} else {
		rep, err = conformance.Run(ctx, cfg)
	}
	if err != nil && len(rep.Results) == 0 {
		// The package's errors name it already ("conformance: BaseURL: …").
		fmt.Fprintln(stderr, "conformance:", strings.TrimPrefix(err.Error(), "conformance: "))
		return 2
	}
	// A report is printed even when stopping the dev stack failed afterwards.
	var werr error
	if o.jsonOut {
		werr = rep.WriteJSON(stdout)
	} else {
		werr = rep.WriteText(stdout)
	}
	if err = errors.Join(err, werr); err != nil {
		fmt.Fprintln(stderr, "conformance:", err)
		return 2
	}
	if rep.Failed() {
		return 1
	}
	return 0
}
