package main

import (
	"context"
	"path/filepath"
	"strconv"
	"time"
)

// groupAddrs are each group's listen addresses, for the gateway; nil for a group not started.
type groupAddrs struct{ main, overflow, limits []string }

// startReplicas starts the askd replicas, all with DAS_ASK_STORE on the cluster's Redis, and
// the overflow and limits groups when asked; it returns each group's listen addresses.
func (c *Cluster) startReplicas(ctx context.Context) (g groupAddrs, err error) {
	o := c.opts
	env := append(append(append([]string{}, c.authEnv...), o.ReplicaEnv...),
		"DAS_LOG_FORMAT=json", "DAS_ASK_ADMIN_ADDR=127.0.0.1:0",
		"ASK_LLM=stub", "ASK_LLM_BASE_URL="+c.StubURL, "DAS_SOURCES=demo="+c.SourceURL+"/mcp")
	env = append(env, o.Env...)
	for name, v := range map[string]time.Duration{"DAS_ASK_LEASE_S": o.Lease, "DAS_ASK_KEEPALIVE_S": o.KeepAlive, "DAS_ASK_TTL_S": o.TTL, "DAS_ASK_DEADLINE_S": o.Deadline} {
		if v > 0 {
			env = append(env, name+"="+strconv.Itoa(int(v/time.Second)))
		}
	}
	if o.Phase > 0 {
		env = append(env, "ASK_PHASE="+strconv.Itoa(o.Phase))
	}
	mainEnv := env
	if o.MaxEvents > 0 {
		mainEnv = append(append([]string{}, env...), "DAS_ASK_MAX_EVENTS="+strconv.Itoa(o.MaxEvents))
	}
	store := func(i int) string {
		if o.ReplicaStore != nil {
			return "DAS_ASK_STORE=" + o.ReplicaStore(i, c.RedisURL)
		}
		return "DAS_ASK_STORE=" + c.RedisURL
	}
	c.replicas, g.main, err = c.startGroup(ctx, "askd", o.Replicas, o.ReplicaAddrs, mainEnv, store)
	if err != nil {
		return g, err
	}
	for _, a := range g.main {
		c.ReplicaURLs = append(c.ReplicaURLs, "http://"+a+"/ask")
	}
	if o.OverflowReplicas > 0 {
		maxEv := o.OverflowMaxEvents
		if maxEv <= 0 {
			maxEv = 8
		}
		c.overflow, g.overflow, err = c.startGroup(ctx, "askd-overflow", o.OverflowReplicas, nil, append(append([]string{}, env...),
			"DAS_ASK_MAX_EVENTS="+strconv.Itoa(maxEv), "DAS_ASK_REDIS_PREFIX=ask-overflow:"),
			func(int) string { return "DAS_ASK_STORE=" + c.RedisURL })
		if err != nil {
			return g, err
		}
	}
	if o.LimitsReplicas > 0 {
		// LimitsEnv last: exec keeps the last of a duplicated variable (DAS_ASK_DEADLINE_S, …).
		lenv := append(append(append([]string{}, env...), "DAS_ASK_REDIS_PREFIX=ask-limits:"), o.LimitsEnv...)
		c.limits, g.limits, err = c.startGroup(ctx, "askd-limits", o.LimitsReplicas, nil, lenv,
			func(int) string { return "DAS_ASK_STORE=" + c.RedisURL })
		if err != nil {
			return g, err
		}
		for _, a := range g.limits {
			c.LimitsReplicaURLs = append(c.LimitsReplicaURLs, "http://"+a+"/ask")
		}
	}
	return g, nil
}

// startGroup starts n replicas named name-1…name-n with env and store(i) (DAS_ASK_STORE=…),
// each on its address (or a free one) with its own admin listener, and waits until each serves
// the contract.
func (c *Cluster) startGroup(ctx context.Context, name string, n int, addrs, env []string, store func(i int) string) ([]*member, []string, error) {
	var procs []*proc
	var members []*member // every process started, so that Stop stops it whatever failed
	var listen []string
	for i := range n {
		a := ""
		if i < len(addrs) {
			a = addrs[i]
		}
		a, err := addrOr(a)
		if err != nil {
			return members, nil, err
		}
		// The admin listener's port is the kernel's pick (env has 127.0.0.1:0): nothing here
		// reads it, and a port picked ahead could be taken before the replica binds it.
		pname, penv := name+"-"+strconv.Itoa(i+1), append(append([]string{}, env...), store(i), "DAS_ASK_ADDR="+a)
		p, err := startProc(pname, c.logDir, filepath.Join(c.bins, "askd"), nil, penv, c.opts.Echo)
		if err != nil {
			return members, nil, err
		}
		procs = append(procs, p)
		listen = append(listen, a)
		members = append(members, newMember(pname, p,
			func() (*proc, error) {
				return restartProc(pname, c.logDir, filepath.Join(c.bins, "askd"), nil, penv, c.opts.Echo)
			},
			func(ctx context.Context, p *proc) error {
				return p.waitReady(ctx, getReady("http://"+a+"/ask/v1/openapi.json"))
			}, c.log))
	}
	for i, p := range procs {
		if err := p.waitReady(ctx, getReady("http://"+listen[i]+"/ask/v1/openapi.json")); err != nil {
			return members, nil, err
		}
	}
	return members, listen, nil
}
