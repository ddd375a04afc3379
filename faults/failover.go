package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/padlocktest"
)

// failover: on Redis behind Sentinel, cut the replica off the replication
// stream (paused, and its link closed by the primary: a paused process
// still receives what the kernel buffers for it), let a client be granted
// the lock on the primary if one can be, kill the primary, let the
// replica go on, and wait for Sentinel to promote it. The holder stays
// inside until another client is granted the lock or two TTLs pass. Then
// the old primary comes back as the new one's replica, in sync, ready for
// the next fault.
func failover(ctx context.Context, c *cell) error {
	sentinel := goredis.NewSentinelClient(&goredis.Options{Addr: c.srv.Sentinels()[0].Addr})
	defer sentinel.Close()
	if n := len(c.srv.Nodes()); n != 2 {
		return fmt.Errorf("%w: the failover scenario wants a primary and one replica, not %d nodes", ErrInvalid, n)
	}
	prim, repl, err := c.sentinelRoles(ctx, sentinel)
	if err != nil {
		return err
	}
	admin := goredis.NewClient(&goredis.Options{Addr: prim.Addr})
	defer admin.Close()
	if err := repl.Pause(); err != nil {
		return err
	}
	if err := admin.ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		repl.Resume()
		return fmt.Errorf("closing the replica's link: %w", err)
	}
	// With wait_replicas no grant completes now: no holder, the fault is
	// on availability alone (recorded against no client). The wait is
	// short: Sentinel promotes no replica whose link has been down for
	// ten times its down-after period.
	w, tok, from, ierr := c.insideWithin(ctx, 3*time.Second)
	victim := 0
	if ierr == nil {
		victim = w.client
	} else {
		from = c.hist.mark()
	}
	c.faultEv("failover", victim, tok, Invoke)
	healed := false
	defer func() {
		// On any way out, the server is whole again for the next cell:
		// nothing paused or held, the old primary back as a replica.
		if !healed {
			repl.Resume()
			c.release()
			c.faultEv("failover", victim, tok, OK)
			if p, _, err := c.sentinelRoles(ctx, sentinel); err == nil && p == repl {
				c.rejoin(ctx, prim, repl) // promoted: the old primary follows
			} else if !prim.Running() {
				sctx, cancel := context.WithTimeout(ctx, c.bound())
				prim.Start(sctx) // not promoted: the primary comes back as it was
				cancel()
			}
		}
	}()
	kerr := prim.Kill()
	rerr := repl.Resume()
	if err := errors.Join(kerr, rerr); err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = waitUntil(bctx, func() bool {
		p, _, err := c.sentinelRoles(bctx, sentinel)
		return err == nil && p == repl
	})
	if err != nil {
		return fmt.Errorf("Sentinel never promoted the replica %s: %w", repl.Addr, err)
	}
	if ierr == nil {
		hctx, cancel := context.WithTimeout(ctx, 2*c.b.TTL)
		c.grantedOther(hctx, from, victim, tok) // either way: the outcome is measured
		cancel()
	}
	c.release()
	c.faultEv("failover", victim, tok, OK)
	healed = true
	if err := c.rejoin(ctx, prim, repl); err != nil {
		return err
	}
	gctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	return c.grantedOther(gctx, from, victim, tok)
}

// sentinelRoles returns the node Sentinel names as primary, and the other.
func (c *cell) sentinelRoles(ctx context.Context, sentinel *goredis.SentinelClient) (primary, replica *padlocktest.Node, err error) {
	addr, err := sentinel.GetMasterAddrByName(ctx, padlocktest.SentinelMaster).Result()
	if err != nil {
		return nil, nil, err
	}
	want := strings.Join(addr, ":")
	for _, n := range c.srv.Nodes() {
		if n.Addr == want {
			primary = n
		} else {
			replica = n
		}
	}
	if primary == nil || replica == nil {
		return nil, nil, fmt.Errorf("Sentinel names %s as primary, not one of %s", want, c.srv.Addrs())
	}
	return primary, replica, nil
}

// rejoin starts the old primary again, as an operator would, as a replica
// of the new one (empty: nothing persists), and waits until it is in sync.
func (c *cell) rejoin(ctx context.Context, old, primary *padlocktest.Node) error {
	sctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	if !old.Running() {
		if err := old.Start(sctx); err != nil {
			return err
		}
	}
	cli := goredis.NewClient(&goredis.Options{Addr: old.Addr})
	defer cli.Close()
	host, port, _ := strings.Cut(primary.Addr, ":")
	bctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var info string
	var told time.Time
	if err := waitUntil(bctx, func() bool {
		if time.Since(told) > 5*time.Second { // again, should anything have changed it
			if err := cli.Do(bctx, "REPLICAOF", host, port).Err(); err != nil {
				info = "REPLICAOF: " + err.Error()
				return false
			}
			told = time.Now()
		}
		var err error
		info, err = cli.Info(bctx, "replication").Result()
		return err == nil && infoField(info, "master_link_status") == "up" && infoField(info, "master_port") == port
	}); err != nil {
		return fmt.Errorf("the old primary %s never synchronised with %s: %w (INFO replication: %q)", old.Addr, primary.Addr, err,
			strings.Join(strings.Fields(info), " "))
	}
	return nil
}

// waitUntil polls ok until it holds or ctx ends.
func waitUntil(ctx context.Context, ok func() bool) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// infoField is a field of a Redis INFO answer ("" if absent).
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
