package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// scripter is what the run's scripts go through (Store.writes): go-redis's Scripter, and
// Process, which sends a command the store built itself.
type scripter interface {
	goredis.Scripter
	Process(ctx context.Context, cmd goredis.Cmder) error
}

// evalCmd is a script's EVALSHA as go-redis sends it: the command's name, the script's digest
// and the key count, then the keys, then the arguments, in one slice the store sizes once. The
// ask path builds it directly where Script.Run would take the keys and the arguments apart and
// copy both into a slice of its own, boxing every key again: 2 KB an ask (askbench's time to
// ticket on Redis allocated 21.9 KB per ask before, 19.9 KB after).
type evalCmd []any

// newEval starts sc's command for nkeys keys and nargs arguments (a size: more can be
// appended).
func newEval(sc *goredis.Script, nkeys, nargs int) evalCmd {
	c := make(evalCmd, 3, 3+nkeys+nargs)
	c[0], c[1], c[2] = "evalsha", sc.Hash(), nkeys
	return c
}

// nkeys is the command's key count.
func (c evalCmd) nkeys() int { return c[2].(int) }

// keys and args are the command's keys and its arguments (the slice's, not copies).
func (c evalCmd) keys() []any { return c[3 : 3+c.nkeys()] }
func (c evalCmd) args() []any { return c[3+c.nkeys():] }

// eval runs c, a command of sc, on w, and returns it answered.
func eval(ctx context.Context, w scripter, sc *goredis.Script, c evalCmd) *goredis.Cmd {
	cmd, f, queued := send(ctx, w, c)
	if queued {
		_ = f.Wait()
	}
	return noScript(ctx, w, sc, c, cmd)
}

// submitter is an autopipeline's asynchronous face: a command queued returns at once with a
// future its caller waits on, as long as it likes (AutoFuture.WaitContext), while the command
// goes on to Redis.
type submitter interface {
	Submit(ctx context.Context, cmd goredis.Cmder) goredis.AutoFuture
}

// send sends c on w: queued on an autopipeline (queued: wait on f for its answer), or run at
// once by a client of another kind.
func send(ctx context.Context, w scripter, c evalCmd) (cmd *goredis.Cmd, f goredis.AutoFuture, queued bool) {
	cmd = goredis.NewCmd(ctx, c...)
	if c.nkeys() > 0 {
		cmd.SetFirstKeyPos(3) // Redis Cluster routes it by its first key
	}
	if sub, ok := w.(submitter); ok {
		return cmd, sub.Submit(ctx, cmd), true
	}
	_ = w.Process(ctx, cmd)
	return cmd, goredis.AutoFuture{}, false
}

// noScript is cmd, c's answered command, unless Redis did not know the digest (a restart, a
// failover to a replica that never ran it, SCRIPT FLUSH: NOSCRIPT): then c runs again with the
// script's source, as Script.Run does.
func noScript(ctx context.Context, w scripter, sc *goredis.Script, c evalCmd, cmd *goredis.Cmd) *goredis.Cmd {
	if err := cmd.Err(); err == nil || !goredis.HasErrorPrefix(err, "NOSCRIPT") {
		return cmd
	}
	keys := make([]string, c.nkeys())
	for i, k := range c.keys() {
		keys[i], _ = k.(string)
	}
	return sc.Eval(ctx, w, keys, c.args()...)
}
