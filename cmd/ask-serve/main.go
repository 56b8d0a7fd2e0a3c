// Command ask-serve runs the whole development system in the foreground (package demo/stack):
// the development identity provider, the demo source, the llm-stub (unless a real model is
// configured) and the ask service, on loopback, with nothing to install and no keys.
//
//	ask-serve [-addr 127.0.0.1:8080] [-idp-addr 127.0.0.1:8090] [-source-addr 127.0.0.1:8091]
//	          [-stub-addr 127.0.0.1:8092] [-state .state] [-ui=true] [-v]
//
// The service's DAS_ASK_* settings apply as for askd; DAS_ASK_ADDR and DAS_ASK_ADMIN_ADDR are
// the defaults of -addr and -admin-addr (with neither, no admin listener; the service is
// observed as askd is all the same: request ids and the per-ask "ask finished" line). ASK_LLM=anthropic or openai (with the provider's key, ASK_LLM_MODEL
// and ASK_LLM_BASE_URL as in package agent) uses a real model
// instead of the llm-stub; DAS_SOURCES points the agent at other MCP sources instead of the demo
// source; ASK_STUB_SCRIPT replaces the llm-stub's script. Ctrl-C stops everything, giving
// running asks the service's shutdown grace (DAS_ASK_SHUTDOWN_GRACE_S); a second Ctrl-C ends
// them at once (error{shutdown} and done). SIGTERM and SIGHUP (the terminal closing) stop it
// the same way, as they stop askd; SIGHUP reloads nothing. One that comes while it is still
// starting is a stop too, as askd's: the line "stopped while starting", exit status 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/internal/redact"
)

func main() {
	sigs := make(chan os.Signal, 2)
	// SIGHUP too: Go's default for it, when the terminal closes, was to die at once, the
	// streams cut without their terminal event and done.
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	if err := run(sigs, os.Args[1:], config.Process, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ask-serve:", err)
		os.Exit(exitStatus(err))
	}
}

// modelLine is the banner's line for a real model: the provider, the model and where it is
// asked (a password in ASK_LLM_BASE_URL shown as xxxxx). It printed the configuration's Go
// form, "agent.Config{llm=anthropic model=… base_url= sources=1 max_model_calls=12}".
func modelLine(c agent.Config) string {
	where := "the provider's API"
	if c.BaseURL != "" {
		where = c.BaseURL
		if u, err := url.Parse(c.BaseURL); err == nil {
			where = u.Redacted()
		}
	}
	return fmt.Sprintf("%s %s at %s", c.LLM, c.Model, where)
}

// environNames lists the names the environment sets, for config.Unknown; tests replace it.
var environNames = config.ProcessNames

// exitStatus is ask-serve's exit status for run's error, as askd's: 2 when a setting is invalid
// or misspelt (the environment must change), 1 for any other failure to start or serve.
func exitStatus(err error) int {
	if errors.Is(err, config.ErrInvalid) || errors.Is(err, auth.ErrInvalidConfig) {
		return 2
	}
	return 1
}

// run serves until the first signal on sigs, then stops; a second signal ends the service's
// shutdown grace.
func run(sigs <-chan os.Signal, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	again, ended, watched := make(chan struct{}), make(chan struct{}), make(chan struct{})
	// first holds the signal that stopped it, for the line of a stop while starting.
	first := make(chan os.Signal, 1)
	go func() { // the signals' one reader; it ends before run returns
		defer close(watched)
		select {
		case s := <-sigs:
			first <- s
			cancel()
		case <-ended:
			return
		}
		select {
		case <-sigs:
			close(again)
		case <-ended:
		}
	}()
	defer func() { close(ended); <-watched }()
	// The environment first, for the defaults of -addr and -admin-addr; an invalid setting is
	// reported once the flags are parsed, so that -h still prints the usage.
	cfg, cfgErr := config.FromEnv(lookup)
	askAddr, adminAddr := config.DefaultAddr, ""
	if cfgErr == nil {
		askAddr = cfg.Addr // DAS_ASK_ADDR
		if !cfg.Ops.AdminOptional {
			adminAddr = cfg.Ops.AdminAddr // DAS_ASK_ADMIN_ADDR, "" for off; unset, none here
		}
	}
	fs := flag.NewFlagSet("ask-serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// Observed as askd is, admin listener or not: README promises every ask's one "ask finished"
	// line and every response's X-Request-Id, and without -admin-addr ask-serve gave neither.
	opts := stack.Options{Observe: true}
	fs.StringVar(&opts.AskAddr, "addr", askAddr, "the ask service's listen address ($DAS_ASK_ADDR)")
	fs.StringVar(&opts.IdPAddr, "idp-addr", "127.0.0.1:8090", "the development identity provider's listen address")
	fs.StringVar(&opts.SourceAddr, "source-addr", "127.0.0.1:8091", "the demo source's listen address")
	fs.StringVar(&opts.StubAddr, "stub-addr", "127.0.0.1:8092", "the llm-stub's listen address")
	fs.StringVar(&opts.CatalogAddr, "catalog-addr", "127.0.0.1:8093", "with -split: the demo catalog source's listen address (-source-addr is then the warehouse's)")
	fs.BoolVar(&opts.Split, "split", false, "run the demo as two sources, a catalog and a warehouse, each its own MCP server (on with -phase 2)")
	phase := fs.Int("phase", 0, "2: a branch per source and divergence, on the split demo (default $ASK_PHASE, else 1)")
	fs.StringVar(&opts.StateDir, "state", ".state", "where the IdP's keys and the source's audit log are kept")
	fs.StringVar(&opts.AdminAddr, "admin-addr", adminAddr, "serve /metrics, /healthz and /readyz here, e.g. 127.0.0.1:9090 ($DAS_ASK_ADMIN_ADDR; unset or off: none)")
	fs.BoolVar(&opts.UI, "ui", true, "serve the reference web page at {base}/ui/ (development sign-in; askd never serves it)")
	verbose := fs.Bool("v", false, "debug logs (wins over $DAS_LOG_LEVEL)")
	// A flag it does not know, or an argument, is a setting to change, as a misspelt DAS_ name
	// is: exit status 2, as askd's for an argument (it was 1, the status of a failure a restart
	// may get past).
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // the usage was asked for, and printed
		}
		return fmt.Errorf("%w: %w", config.ErrInvalid, err)
	}
	// An argument is refused, as askd refuses one, not ignored: "-ui false" parsed as -ui (true)
	// and an argument "false", and served the page it was meant to turn off.
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q: ask-serve takes flags only (ask-serve -h); a boolean flag takes its value after =, as -ui=false", config.ErrInvalid, fs.Arg(0))
	}
	addrErr := checkAddrs(&opts) // reported with the environment's, all at once
	// Text for people by default; DAS_LOG_FORMAT and DAS_LOG_LEVEL as askd reads them, when set
	// (they were validated and then ignored, unsaid), and -v wins over the level. Through
	// askd's logger, so a line logged with a request's context names its request and trace ids.
	logOps := config.OpsConfig{LogFormat: "text", LogLevel: slog.LevelInfo}
	if cfgErr == nil {
		if _, set := lookup("DAS_LOG_FORMAT"); set {
			logOps.LogFormat = cfg.Ops.LogFormat
		}
		if _, set := lookup("DAS_LOG_LEVEL"); set {
			logOps.LogLevel = cfg.Ops.LogLevel
		}
	}
	if *verbose {
		logOps.LogLevel = slog.LevelDebug
	}
	opts.Logger = app.NewLogger(logOps, stderr)
	// The dev stack validates every bearer against its own IdP, replacing the issuer settings
	// askd reads: said, not left to look applied (DAS_ISSUER=https://login.example make
	// ask-serve served the dev IdP's tokens and said nothing). Names only.
	var ignored []string
	for _, k := range []string{auth.EnvJWKSURL, auth.EnvIssuer, auth.EnvAudience, auth.EnvRequiredScope} {
		if v, ok := lookup(k); ok && strings.TrimSpace(v) != "" {
			ignored = append(ignored, k)
		}
	}
	if len(ignored) > 0 {
		opts.Logger.Warn("ignoring the bearer settings: the dev stack validates bearers against its own identity provider (askd reads them)", "variables", strings.Join(ignored, ","))
	}
	// -phase is ASK_PHASE, and wins over it: the settings that depend on the phase are read
	// again under it. Read under $ASK_PHASE alone, -phase 2 ignored ASK_DIVERGENCE_TURNS=0 (the
	// withheld branch ran), refused ASK_DIVERGENCE_TURNS=3 ("divergence needs ASK_PHASE=2"),
	// and -phase 1 under ASK_PHASE=2 ran phase 2.
	if *phase == 1 || *phase == 2 {
		cfg, cfgErr = config.FromEnv(func(k string) (string, bool) {
			if k == "ASK_PHASE" {
				return strconv.Itoa(*phase), true
			}
			return lookup(k)
		})
	}
	// A misspelt DAS_ name is refused beside any invalid value, as askd refuses it: left alone,
	// its setting kept its default unseen.
	if cfgErr = errors.Join(cfgErr, config.Unknown(environNames()), addrErr); cfgErr != nil {
		return cfgErr
	}
	opts.Config = &cfg
	if *phase == 0 {
		*phase = cfg.Agent.Phase // ASK_PHASE
	}
	switch *phase {
	case 0, 1:
	case 2:
		opts.Phase, opts.Split = 2, true
	default:
		return fmt.Errorf("%w: -phase %d: want 1 or 2", config.ErrInvalid, *phase)
	}
	var err error
	if opts.StubScript, err = stubScript(cfg.StubScript); err != nil {
		return err
	}
	modelName := "llm-stub (scripted; set ASK_LLM=anthropic|openai for a real model)"
	if cfg.Agent.LLM != agent.LLMStub {
		modelName = modelLine(cfg.Agent)
	}

	s, err := stack.Start(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			// A signal while starting (a store slow to answer, or Ctrl-C as it builds the demo
			// data) is a stop asked for, as askd takes it: the pieces started are closed and
			// nothing ran. It exited 1 naming what the cancel cut ("demo source: load
			// deployments: context canceled", "ask service: DAS_ASK_STORE: redis store: context
			// canceled"), a failure to start that make reported as an error.
			opts.Logger.Info("stopped while starting", "signal", (<-first).String(), "cause", err.Error())
			return nil
		}
		return stateUnwritable(addrInUse(err, opts), opts.StateDir)
	}
	if s.StubURL != "" {
		modelName = "llm-stub at " + s.StubURL
	}
	sources := fmt.Sprintf("demo source (MCP)  %[1]s/mcp   (audit log: %[1]s/audit)", s.SourceURL)
	if s.CatalogURL != "" {
		sources = fmt.Sprintf("catalog (MCP)      %[1]s/mcp   (audit log: %[1]s/audit)\n  warehouse (MCP)    %[2]s/mcp   (audit log: %[2]s/audit)", s.CatalogURL, s.SourceURL)
	}
	if theirs := ownSources(s); theirs != "" {
		sources += "\n  agent's sources    " + theirs + "   (DAS_SOURCES: the demo's above run, unasked)"
	}
	if opts.Phase == 2 {
		if cfg.Agent.DivergenceTurns > 0 {
			sources += "\n  phase 2            a branch per source, and divergence"
		} else {
			sources += "\n  phase 2            a branch per source, no divergence (ASK_DIVERGENCE_TURNS=0)"
		}
	}
	page := "off (-ui=false)"
	if s.UIURL != "" {
		page = s.UIURL + "   (sign in as alice or bob)"
	}
	admin := "off (-admin-addr 127.0.0.1:9090 serves /metrics, /healthz and /readyz)"
	if s.AdminURL != "" {
		admin = fmt.Sprintf("%[1]s/metrics   (probes: %[1]s/healthz, %[1]s/readyz)", s.AdminURL)
	}
	fmt.Fprintf(stdout, `The ask dev stack is running:
  ask service        %[1]s   (contract: %[1]s/v1/openapi.yaml)
  identity provider  %[2]s   (JWKS: %[2]s/.well-known/jwks.json)
  %[3]s
  model              %[4]s
  web page           %[5]s
  webhook sink       %[6]s   (ask with -webhook %[6]sinbox)
  admin              %[7]s

Next, in another terminal:
  %[8]smake ask Q="How many sev1 incidents did we have in 2026-Q2?"
  %[8]smake ask AS=bob Q="What was the on-call pay per team in 2026-Q3?"     # a refusal
  %[9]s

Ctrl-C stops everything.
`, s.AskURL, s.IdPURL, sources, modelName, page, s.WebhooksURL, admin, clientEnv(s), tokenLine(s))

	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping… (running asks have the service's shutdown grace; Ctrl-C again ends them now)")
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		return err
	case <-again:
		fmt.Fprintln(stdout, "ending running asks now…")
		s.Main.EndGrace()
		return <-closed
	}
}

// checkAddrs checks the listen addresses the flags give, as config checks DAS_ASK_ADDR and
// DAS_ASK_ADMIN_ADDR, before anything starts: a flag's value replaces the environment's, so
// -addr bad was found only at the service's listen, after the IdP, the source and the llm-stub
// had started and written their files under -state, as a failure to start (status 1) rather than
// a setting to correct (2). -admin-addr off is none, as DAS_ASK_ADMIN_ADDR=off.
func checkAddrs(opts *stack.Options) error {
	if opts.AdminAddr == "off" {
		opts.AdminAddr = ""
	}
	var errs []error
	for _, f := range []struct{ name, addr string }{
		{"-addr", opts.AskAddr}, {"-idp-addr", opts.IdPAddr}, {"-source-addr", opts.SourceAddr},
		{"-stub-addr", opts.StubAddr}, {"-catalog-addr", opts.CatalogAddr},
	} {
		if !config.ListenAddrValid(f.addr) {
			errs = append(errs, fmt.Errorf("%s %q: want host:port", f.name, f.addr))
		}
	}
	if a := opts.AdminAddr; a != "" && !config.ListenAddrValid(a) {
		errs = append(errs, fmt.Errorf(`-admin-addr %q: want host:port, or "off"`, a))
	} else if _, port, err := net.SplitHostPort(a); err == nil && port != "0" && a == opts.AskAddr {
		errs = append(errs, fmt.Errorf("-admin-addr %q: the same address as -addr; give the admin listener its own", a))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", config.ErrInvalid, err)
	}
	return nil
}

// stateUnwritable names -state in err when err is a file under it that could not be made or
// opened (the IdP's keys, the audit log): the pieces' own errors name the file, not the flag.
func stateUnwritable(err error, dir string) error {
	var pe *fs.PathError
	if dir == "" || !errors.As(err, &pe) {
		return err
	}
	if rel, rerr := filepath.Rel(dir, pe.Path); rerr != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return err
	}
	return fmt.Errorf("-state %q: %w", dir, err)
}

// addrInUse words a taken address for a newcomer, whose usual cause is a second make
// ask-serve while the first still runs: what to stop, or which flags move the pieces.
func addrInUse(err error, opts stack.Options) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	taken := ""
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		for _, f := range []struct{ name, addr string }{
			{"-addr", opts.AskAddr}, {"-idp-addr", opts.IdPAddr}, {"-source-addr", opts.SourceAddr},
			{"-stub-addr", opts.StubAddr}, {"-catalog-addr", opts.CatalogAddr}, {"-admin-addr", opts.AdminAddr},
		} {
			if f.addr == op.Addr.String() {
				taken = "; the one taken is " + f.name + "'s"
				break
			}
		}
	}
	return fmt.Errorf("%w\n  another ask-serve (make ask-serve) is probably running: stop it with Ctrl-C in its terminal,\n"+
		"  or give this one free addresses with -addr, -idp-addr, -source-addr, -stub-addr and -catalog-addr\n"+
		"  (make ask-serve ARGS=\"…\")%s", err, taken)
}

// stubScript is the llm-stub's script: the file ASK_STUB_SCRIPT names, else the embedded one.
func stubScript(path string) (*llmstub.Script, error) {
	if path != "" {
		s, err := llmstub.LoadScript(path)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", llmstub.ScriptEnv, path, err)
		}
		return s, nil
	}
	return llmstub.DefaultScript()
}

// ownSources names the agent's sources as name=URL, comma-separated, when DAS_SOURCES put any
// other than the demo's in their place, and is "" when the agent asks the demo's: the banner
// must not leave a newcomer believing the demo source it lists answers their questions.
func ownSources(s *stack.Stack) string {
	demo := map[string]bool{}
	for _, u := range s.SourceURLs {
		demo[u+"/mcp"] = true
	}
	var names []string
	own := false
	for _, src := range s.Main.Config.Agent.Sources {
		names = append(names, src.Name+"="+redact.URL(src.URL)) // a password as xxxxx, as the model line's
		own = own || !demo[src.URL]
	}
	if !own {
		return ""
	}
	return strings.Join(names, ",")
}

// clientEnv is what make ask needs before it to reach this stack: nothing on the default
// addresses, else ASK_URL and ASK_IDP (moved with -addr and -idp-addr, as the message of a
// taken port suggests), which the ask CLI reads.
func clientEnv(s *stack.Stack) string {
	env := ""
	if s.AskURL != config.DefaultClientURL {
		env += "ASK_URL=" + s.AskURL + " "
	}
	if s.IdPURL != config.DefaultClientIdP {
		env += "ASK_IDP=" + s.IdPURL + " "
	}
	return env
}

// tokenLine is the banner's make token line, with the --idp of this stack's IdP when it moved.
func tokenLine(s *stack.Stack) string {
	if s.IdPURL == config.DefaultClientIdP {
		return "make token OID=alice                                                  # a bearer for curl"
	}
	return `make token OID=alice ARGS="--idp ` + s.IdPURL + `"   # a bearer for curl`
}
