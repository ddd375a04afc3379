package padlocktest

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/padlock-go/padlock"
)

// Proxies are the proxies a test harness puts in front of its Lockers, by
// Locker, so that a fault on one Locker (Cut, Blackhole) takes the servers
// away from that Locker alone while the others carry on. The zero value is
// ready to use; it is safe for concurrent use.
type Proxies struct {
	mu  sync.Mutex
	by  map[*padlock.Locker][]*Proxy
	all []*Proxy
}

// ProxyEach starts a proxy in front of each of addrs, in their order. If
// one fails to start, it closes the others.
func ProxyEach(addrs ...string) ([]*Proxy, error) {
	var ps []*Proxy
	for _, a := range addrs {
		p, err := NewProxy(a)
		if err != nil {
			closeAll(ps)
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// Open opens a Locker on url(addrs), where addrs are ps's addresses joined
// by commas, and keeps ps as that Locker's proxies. If Open fails, it
// closes ps.
func (x *Proxies) Open(ctx context.Context, url func(addrs string) string, ps []*Proxy, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.Addr())
	}
	l, err := padlock.Open(ctx, url(strings.Join(addrs, ",")), opts...)
	if err != nil {
		closeAll(ps)
		return nil, err
	}
	x.Keep(l, ps...)
	return l, nil
}

// OpenSilent opens a Locker on url(addrs), where addrs are those of n
// silent endpoints (Silent), and keeps them as that Locker's proxies: a
// harness's conformance.SilentOpener.
func (x *Proxies) OpenSilent(ctx context.Context, n int, url func(addrs string) string, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	p, err := Silent(n)
	if err != nil {
		return nil, err
	}
	return x.Open(ctx, url, []*Proxy{p}, opts...)
}

// Keep records ps as l's proxies, to be closed by Close. With a nil l
// they are only closed.
func (x *Proxies) Keep(l *padlock.Locker, ps ...*Proxy) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if l != nil {
		if x.by == nil {
			x.by = map[*padlock.Locker][]*Proxy{}
		}
		x.by[l] = append(x.by[l], ps...)
	}
	x.all = append(x.all, ps...)
}

// Of returns l's proxies.
func (x *Proxies) Of(l *padlock.Locker) []*Proxy {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.by[l]
}

// Cut cuts every one of l's proxies (Proxy.Cut) and returns what restores
// them.
func (x *Proxies) Cut(l *padlock.Locker) func() error {
	ps := x.Of(l)
	for _, p := range ps {
		p.Cut()
	}
	return func() error {
		var errs []error
		for _, p := range ps {
			errs = append(errs, p.Restore())
		}
		return errors.Join(errs...)
	}
}

// Blackhole blackholes every one of l's proxies (Proxy.Blackhole) and
// returns what ends it.
func (x *Proxies) Blackhole(ctx context.Context, l *padlock.Locker) (func() error, error) {
	var heals []func() error
	heal := func() error {
		var errs []error
		for _, h := range heals {
			errs = append(errs, h())
		}
		return errors.Join(errs...)
	}
	for _, p := range x.Of(l) {
		h, err := p.Blackhole(ctx)
		if err != nil {
			heal()
			return nil, err
		}
		heals = append(heals, h)
	}
	return heal, nil
}

// Close closes every proxy it keeps.
func (x *Proxies) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	closeAll(x.all)
	x.all, x.by = nil, nil
}

func closeAll(ps []*Proxy) {
	for _, p := range ps {
		p.Close()
	}
}
