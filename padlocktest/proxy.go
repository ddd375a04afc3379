package padlocktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// proxies is the toxiproxy instance, used as a library, behind every Proxy.
var (
	proxies   = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxySeq  atomic.Int64
	errNoNode = errors.New("padlocktest: a proxy needs at least one upstream")
)

// Proxy is one client's own path to a server: a TCP proxy on loopback in
// front of each of the server's nodes (toxiproxy, as a library), so that
// faults can be injected between that client and the server alone. A Proxy
// acts on all its links at once.
type Proxy struct {
	links []*toxiproxy.Proxy
	ports []reservedPort // the links' ports, held until Close (port.go)
	sink  *sink          // Silent's: what the links lead to
}

// NewProxy starts a proxy on a free loopback port in front of each
// upstream address, reserved for the proxy's life (port.go), so that
// Restore can always bind it again. Close it when done (Server.Proxy does,
// when its test ends).
func NewProxy(upstreams ...string) (*Proxy, error) {
	if len(upstreams) == 0 {
		return nil, errNoNode
	}
	p := &Proxy{}
	for _, up := range upstreams {
		var l *toxiproxy.Proxy
		port, err := reservePort(func(port int) error {
			l = toxiproxy.NewProxy(proxies, fmt.Sprintf("padlocktest-%d", proxySeq.Add(1)), fmt.Sprintf("127.0.0.1:%d", port), up)
			return l.Start()
		})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("padlocktest: proxy to %s: %w", up, err)
		}
		p.links = append(p.links, l)
		p.ports = append(p.ports, port)
	}
	return p, nil
}

// Addr is where clients connect: the links' addresses, comma-separated in
// the order of the upstreams, as padlock URLs name several hosts.
func (p *Proxy) Addr() string {
	var a []string
	for _, l := range p.links {
		a = append(a, l.Listen)
	}
	return strings.Join(a, ",")
}

// Cut closes every connection and refuses new ones until Restore: the client
// sees errors at once, as after a crash of the path or a firewall reject.
func (p *Proxy) Cut() {
	for _, l := range p.links {
		l.Stop()
	}
}

// Restore accepts connections again after Cut. The port is the link's
// own (reserved: port.go), but a connection the link had accepted
// may still hold it for a moment after Cut closed it (seen as "bind:
// address already in use" in the fault suite): Restore tries again for up
// to restoreWithin.
func (p *Proxy) Restore() error {
	var errs []error
	for _, l := range p.links {
		if err := startAgain(l); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// restoreWithin bounds Restore's retries of a port still held.
const restoreWithin = 10 * time.Second

func startAgain(l *toxiproxy.Proxy) error {
	deadline := time.Now().Add(restoreWithin)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := l.Start()
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
	}
}

// drop adds a toxic that swallows the given streams (upstream: what the
// client sends; downstream: what it receives) and returns the function
// that removes it, and then cuts the wedged connections so that the client
// reconnects through the healed path.
func (p *Proxy) drop(streams ...string) (func() error, error) {
	heal := func() error {
		for _, l := range p.links {
			for _, stream := range streams {
				l.Toxics.RemoveToxic(context.Background(), "drop-"+stream)
			}
		}
		p.Cut()
		return p.Restore()
	}
	for _, l := range p.links {
		for _, stream := range streams {
			spec := `{"name":"drop-` + stream + `","type":"timeout","stream":"` + stream + `","toxicity":1,"attributes":{"timeout":0}}`
			if _, err := l.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
				heal()
				return nil, err
			}
		}
	}
	return heal, nil
}

// Blackhole keeps the connections open but drops everything in both
// directions: the client sees no error, only silence, as in a partition
// that drops packets. The returned function ends it.
func (p *Proxy) Blackhole(ctx context.Context) (func() error, error) {
	return p.drop("upstream", "downstream")
}

// DropAnswers keeps the connections open and lets requests through to the
// server, but drops every answer: the server acts on a request whose
// answer the client never gets. The returned function ends it and cuts the
// connections, so the client reconnects and must find out what happened.
func (p *Proxy) DropAnswers(ctx context.Context) (func() error, error) {
	return p.drop("downstream")
}

// Delay holds everything the client sends for d before passing it on (a
// slow or congested link; the answers are not delayed). The returned
// function ends it and delivers at once whatever it still holds, even if
// the client has given up and closed its connection meanwhile: a request
// the client abandoned still reaches the server, late, as on a real
// network. The connections stay open throughout.
func (p *Proxy) Delay(ctx context.Context, d time.Duration) (func() error, error) {
	heal := func() error {
		var errs []error
		for _, l := range p.links {
			if err := l.Toxics.RemoveToxic(context.Background(), "delay"); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for _, l := range p.links {
		spec := fmt.Sprintf(`{"name":"delay","type":"latency","stream":"upstream","toxicity":1,"attributes":{"latency":%d}}`, d.Milliseconds())
		if _, err := l.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			heal()
			return nil, err
		}
	}
	return heal, nil
}

// Close stops the proxy for good.
func (p *Proxy) Close() {
	p.Cut()
	for _, r := range p.ports {
		r.release()
	}
	p.ports = nil
	if p.sink != nil {
		p.sink.close()
	}
}
