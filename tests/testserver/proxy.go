package testserver

import (
	"context"
	"strings"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// proxies is the toxiproxy instance, used as a library, behind every Proxy.
var proxies = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())

// Proxy is a TCP proxy on loopback in front of one server, for one client,
// so that faults can be injected between that client and the server alone.
type Proxy struct {
	p *toxiproxy.Proxy
}

// NewProxy starts a proxy to upstream on a free loopback port.
func NewProxy(name, upstream string) (*Proxy, error) {
	p := toxiproxy.NewProxy(proxies, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, err
	}
	return &Proxy{p: p}, nil
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.p.Listen }

// Cut closes every connection and refuses new ones until Restore: the client
// sees errors at once, as after a crash of the path or a firewall reject.
func (p *Proxy) Cut() { p.p.Stop() }

// Restore accepts connections again after Cut.
func (p *Proxy) Restore() error { return p.p.Start() }

// Blackhole keeps the connections open but drops everything in both
// directions: the client sees no error, only silence, as in a partition
// that drops packets. The returned function ends it.
func (p *Proxy) Blackhole(ctx context.Context) (func() error, error) {
	for _, stream := range []string{"upstream", "downstream"} {
		spec := `{"name":"blackhole-` + stream + `","type":"timeout","stream":"` + stream + `","toxicity":1,"attributes":{"timeout":0}}`
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			return nil, err
		}
	}
	return func() error {
		// The dropped connections stay wedged; cut them so the client
		// reconnects through the healed path.
		p.p.Toxics.RemoveToxic(context.Background(), "blackhole-upstream")
		p.p.Toxics.RemoveToxic(context.Background(), "blackhole-downstream")
		p.p.Stop()
		return p.p.Start()
	}, nil
}

// DropAnswers keeps the connections open and lets requests through to the
// server, but drops every answer: the server acts on a request whose
// answer the client never gets. The returned function ends it and cuts the
// connections, so the client reconnects and must find out what happened.
func (p *Proxy) DropAnswers(ctx context.Context) (func() error, error) {
	spec := `{"name":"drop-answers","type":"timeout","stream":"downstream","toxicity":1,"attributes":{"timeout":0}}`
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
		return nil, err
	}
	return func() error {
		p.p.Toxics.RemoveToxic(context.Background(), "drop-answers")
		p.p.Stop()
		return p.p.Start()
	}, nil
}

// Close stops the proxy for good.
func (p *Proxy) Close() { p.p.Stop() }
