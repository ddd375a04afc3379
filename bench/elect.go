package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// electName is the election E1 runs on.
const electName = "k0"

// electPhase runs E1's failover or observe step for d, at least once.
// open opens a client (closed by the turn) that counts its round trips
// on rt; each failover opens its own pair, since it cuts one.
func electPhase(ctx context.Context, im Impl, load Load, open func(ctx context.Context, rt *Counter) (Client, error), d time.Duration) (*phase, error) {
	p := &phase{window: d, server: -1}
	start := time.Now()
	if load.Step == StepObserve {
		return p, observe(ctx, im, open, d, start, p)
	}
	for first := true; first || time.Since(start) < d; first = false {
		if err := failover(ctx, im, open, start, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// electors opens n clients, each on a Counter of its own, and returns
// them with their counters and elections.
func electors(ctx context.Context, open func(ctx context.Context, rt *Counter) (Client, error), n int) ([]Client, []*Counter, []electClient, error) {
	var (
		cs  []Client
		rts []*Counter
		es  []electClient
	)
	for range n {
		rt := &Counter{}
		c, err := open(ctx, rt)
		if err != nil {
			return nil, nil, nil, err
		}
		e, ok := unwrap(c).(electClient)
		if !ok {
			return nil, nil, nil, fmt.Errorf("%w: the client has no election", errNA)
		}
		cs, rts, es = append(cs, c), append(rts, rt), append(es, e)
	}
	return cs, rts, es, nil
}

// failover elects one candidate, starts another's campaign, cuts the
// leader's connections (it stops renewing, and resigns nothing) and
// times the other's election from the cut: one sample.
func failover(ctx context.Context, im Impl, open func(ctx context.Context, rt *Counter) (Client, error), start time.Time, p *phase) error {
	cs, rts, es, err := electors(ctx, open, 2)
	if err != nil {
		return err
	}
	// Past ElectTTL, the successor waits for the server to expire the
	// leader's lease or session: the grace bounds that.
	cctx, cancel := context.WithTimeout(ctx, minGrace+ElectTTL)
	defer cancel()
	leader, err := es[0].Campaign(cctx, electName, "leader")
	if err != nil {
		return fmt.Errorf("%s: campaign: %w", im.Name, err)
	}
	type result struct {
		t   Term
		err error
	}
	next := make(chan result, 1)
	go func() {
		t, err := es[1].Campaign(cctx, electName, "successor")
		next <- result{t, err}
	}()
	cut := time.Since(start)
	rts[0].Cut()
	if c, ok := unwrap(cs[0]).(cutter); ok {
		c.Cut()
	}
	var r result
	select {
	case r = <-next:
	case <-cctx.Done():
		r = <-next // the campaign ends with its context
	}
	got := time.Since(start)
	if r.err != nil {
		if cctx.Err() != nil {
			return fmt.Errorf("%s: no successor elected within %v of the leader's cut: %w", im.Name, minGrace+ElectTTL, errStuck)
		}
		return fmt.Errorf("%s: the successor's campaign: %w", im.Name, r.err)
	}
	if im.Tokens && r.t.Token <= leader.Token {
		return fmt.Errorf("%w: %s: the successor's term has token %d, not above its predecessor's %d", ErrViolation, im.Name, r.t.Token, leader.Token)
	}
	p.samples = append(p.samples, sample{asked: cut, got: got, freed: got, relEnd: got})
	if err := r.t.Release(cctx); err != nil {
		return fmt.Errorf("%s: resign: %w", im.Name, err)
	}
	// The cut leader's client may fail to close (its connections are
	// gone): what it left on the servers is what counts, and the turn
	// counts it.
	abandon(cs[0])
	return cs[1].Close()
}

// observe elects a leader and has it proclaim value after value for d;
// an observer on another client waits for each. A sample is from the
// Proclaim returning to the observer's receipt (0 when the receipt came
// first, counted in raced).
func observe(ctx context.Context, im Impl, open func(ctx context.Context, rt *Counter) (Client, error), d time.Duration, start time.Time, p *phase) error {
	_, _, es, err := electors(ctx, open, 2)
	if err != nil {
		return err
	}
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	values, err := es[1].Observe(octx, electName)
	if err != nil {
		return err
	}
	leader, err := es[0].Campaign(ctx, electName, "v0")
	if err != nil {
		return fmt.Errorf("%s: campaign: %w", im.Name, err)
	}
	if leader.Proclaim == nil {
		leader.Release(ctx)
		return fmt.Errorf("%w: the client cannot proclaim", errNA)
	}
	for i := 1; i == 1 || time.Since(start) < d; i++ {
		v := fmt.Sprintf("v%d", i)
		if err := leader.Proclaim(ctx, v); err != nil {
			return fmt.Errorf("%s: proclaim: %w", im.Name, err)
		}
		returned := time.Since(start)
		at, err := await(ctx, values, v, minGrace)
		if err != nil {
			return fmt.Errorf("%s: observe %q: %w", im.Name, v, err)
		}
		got := at.Sub(start)
		if got < returned {
			p.raced++
			got = returned
		}
		p.samples = append(p.samples, sample{client: 1, asked: returned, got: got, freed: got, relEnd: got})
	}
	return leader.Release(ctx)
}

// errUnseen is a value an observer never received.
var errUnseen = errors.New("the observer did not receive the value")

// await reads values until v, for at most grace, and returns when v was
// received.
func await(ctx context.Context, values <-chan Observed, v string, grace time.Duration) (time.Time, error) {
	t := time.NewTimer(grace)
	defer t.Stop()
	for {
		select {
		case x, ok := <-values:
			if !ok {
				return time.Time{}, fmt.Errorf("%w: the observation ended", errUnseen)
			}
			if x.Value == v {
				return x.At, nil
			}
		case <-t.C:
			return time.Time{}, fmt.Errorf("%w within %v", errUnseen, grace)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// Observed is a leader's value as an observer received it.
type Observed struct {
	Value string
	At    time.Time
}

// observed forwards the values of in (which closes when ctx ends) to a
// channel, each stamped with when it arrived: the consumer may come for
// it later.
func observed[T any](ctx context.Context, in <-chan T, value func(T) string) <-chan Observed {
	out := make(chan Observed, 64)
	go func() {
		defer close(out)
		for x := range in {
			select {
			case out <- Observed{value(x), time.Now()}:
			case <-ctx.Done():
				for range in { // until it closes
				}
				return
			}
		}
	}()
	return out
}
